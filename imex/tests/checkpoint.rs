//! Checkpoint and restart: a stepper rebuilt from an exported state (scalar part plus the
//! history of every mode, imported per mode into steppers that hold other sets of modes)
//! continues bit for bit like the uninterrupted run, during start-up too; bad checkpoints are
//! rejected with errors naming the values.

mod common;

use std::collections::HashMap;
use std::num::NonZeroUsize;

use common::shell_grid;
use imex::{
    DegreeOperator, DegreeThreads, FaerLu, ImexError, Matrix, ModeBlock, ModeLayout, Scheme,
    Stepper, StepperMeta, StepperOptions,
};
use num_complex::Complex64;

const NR: usize = 13;
const LMAX: usize = 5;
/// Steps of every run.
const STEPS: usize = 10;

/// Variable steps, so that the step-size history matters.
fn dt(step: usize) -> f64 {
    match step {
        0..4 => 1e-3,
        4..7 => 1.5e-3,
        _ => 1.2e-3,
    }
}

fn operators(ls: &[usize]) -> Vec<DegreeOperator> {
    let (ri, ro) = (0.35, 1.35);
    let (r, d1, d2) = shell_grid(NR - 1, ri, ro);
    ls.iter()
        .map(|&l| {
            let ll = (l * (l + 1)) as f64;
            let lin = Matrix::from_fn(NR, NR, |i, j| {
                d2[(i, j)] + 2.0 / r[i] * d1[(i, j)] - if i == j { ll / (r[i] * r[i]) } else { 0.0 }
            });
            let e0 = (0..NR).map(|j| if j == 0 { 1.0 } else { 0.0 }).collect();
            // A dense mass matrix, so that A u differs from u.
            let mass = Matrix::from_fn(NR, NR, |i, j| {
                (if i == j { 1.0 } else { 0.0 }) + 0.01 * ((i + 2 * j + l) as f64).sin()
            });
            DegreeOperator::new(l, mass, lin)
                .with_boundary_row(0, e0)
                .with_boundary_row(NR - 1, (0..NR).map(|j| d1[(NR - 1, j)]).collect())
        })
        .collect()
}

fn stepper(scheme: &str, layout: &ModeLayout, options: StepperOptions) -> Stepper {
    let ls: Vec<usize> = layout.degrees().map(|(l, _)| l).collect();
    Stepper::with_backend(
        Scheme::from_name(scheme).unwrap(),
        layout.clone(),
        operators(&ls),
        FaerLu,
        options,
    )
    .unwrap()
}

/// The application's boundary values (not part of the exported state).
fn set_boundary_values(s: &mut Stepper) {
    let layout = s.layout().clone();
    for (l, ms) in layout.degrees() {
        for &m in ms {
            let v = Complex64::new(0.1 * m as f64, -0.2 + 0.01 * l as f64);
            s.set_boundary_value(l, m, 0, v).unwrap();
        }
    }
}

fn initial(layout: &ModeLayout) -> ModeBlock {
    let mut u = ModeBlock::zeros(layout);
    for (l, ms) in layout.degrees() {
        for &m in ms {
            let v: Vec<Complex64> = (0..NR)
                .map(|i| {
                    let x = (i + 3 * m + 5 * l) as f64;
                    Complex64::new((0.3 * x).sin(), (0.7 * x).cos())
                })
                .collect();
            u.set_mode(l, m, &v).unwrap();
        }
    }
    u
}

/// A nonlinear, time-dependent explicit term of each mode's own values (so that a stepper
/// holding only some modes computes the same terms for them).
fn explicit(t: f64, u: &ModeBlock, out: &mut ModeBlock) {
    let layout = u.layout().clone();
    for (l, ms) in layout.degrees() {
        for &m in ms {
            let v = u.mode_complex(l, m).unwrap();
            let n: Vec<Complex64> = v
                .iter()
                .enumerate()
                .map(|(i, z)| {
                    -0.5 * z * z.norm()
                        + 0.3 * z * z
                        + Complex64::new(t.cos(), (i + m) as f64 * 0.01)
                })
                .collect();
            out.set_mode(l, m, &n).unwrap();
        }
    }
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// What an application writes: the stepper's scalar state, every mode's history and state.
#[derive(Clone)]
struct Checkpoint {
    meta: StepperMeta,
    history: HashMap<(usize, usize), Vec<f64>>,
    state: HashMap<(usize, usize), (Vec<f64>, Vec<f64>)>,
}

fn checkpoint(s: &Stepper, u: &ModeBlock) -> Checkpoint {
    let mut history = HashMap::new();
    let mut state = HashMap::new();
    for (l, ms) in s.layout().degrees() {
        for &m in ms {
            let mut h = Vec::new();
            s.export_mode(l, m, &mut h).unwrap();
            assert_eq!(h.len(), s.mode_history_len());
            history.insert((l, m), h);
            let (re, im) = u.mode(l, m).unwrap();
            state.insert((l, m), (re.to_vec(), im.to_vec()));
        }
    }
    Checkpoint {
        meta: s.export_meta().unwrap(),
        history,
        state,
    }
}

/// Imports a checkpoint into `s` (modes in reverse storage order) and returns the state block.
fn restore(s: &mut Stepper, c: &Checkpoint) -> ModeBlock {
    s.import_meta(&c.meta).unwrap();
    let layout = s.layout().clone();
    let modes: Vec<(usize, usize)> = layout
        .degrees()
        .flat_map(|(l, ms)| ms.iter().map(move |&m| (l, m)))
        .collect();
    let mut u = ModeBlock::zeros(&layout);
    for &(l, m) in modes.iter().rev() {
        s.import_mode(l, m, &c.history[&(l, m)]).unwrap();
        let (re, im) = &c.state[&(l, m)];
        let (ur, ui) = u.mode_mut(l, m).unwrap();
        ur.copy_from_slice(re);
        ui.copy_from_slice(im);
    }
    set_boundary_values(s);
    // The re-export is the checkpoint, bit for bit.
    assert_eq!(s.export_meta().unwrap(), c.meta);
    for &(l, m) in &modes {
        let mut h = Vec::new();
        s.export_mode(l, m, &mut h).unwrap();
        assert_eq!(
            bits(&h),
            bits(&c.history[&(l, m)]),
            "re-export of ({l}, {m})"
        );
    }
    u
}

fn continue_run(s: &mut Stepper, u: &mut ModeBlock, from: usize) {
    for k in from..STEPS {
        s.step(dt(k), u, explicit).unwrap();
    }
}

fn modes_equal(reference: &ModeBlock, got: &ModeBlock) -> Result<(), String> {
    for (l, ms) in got.layout().degrees() {
        for &m in ms {
            let (ar, ai) = reference.mode(l, m).unwrap();
            let (br, bi) = got.mode(l, m).unwrap();
            if bits(ar) != bits(br) || bits(ai) != bits(bi) {
                return Err(format!("mode (l = {l}, m = {m}) differs"));
            }
        }
    }
    Ok(())
}

/// Two "ranks" that hold the modes of `0..=LMAX` between them, split differently from the
/// reference's storage and in another degree order.
fn parts() -> [ModeLayout; 2] {
    [
        ModeLayout::new(
            NR,
            [
                (5, vec![1, 3, 4]),
                (2, vec![0, 1, 2]),
                (0, vec![0]),
                (4, vec![0, 1, 2, 3, 4]),
            ],
        )
        .unwrap(),
        ModeLayout::new(
            NR,
            [(3, vec![0, 1, 2, 3]), (5, vec![0, 2, 5]), (1, vec![0, 1])],
        )
        .unwrap(),
    ]
}

#[test]
fn restart_from_a_checkpoint_continues_bit_for_bit() {
    let full = ModeLayout::full(NR, LMAX).unwrap();
    for &scheme in Scheme::NAMES {
        // The uninterrupted run, with a checkpoint after every step.
        let mut reference = stepper(scheme, &full, StepperOptions::default());
        set_boundary_values(&mut reference);
        let mut u = initial(&full);
        let mut checkpoints = vec![checkpoint(&reference, &u)];
        for k in 0..STEPS {
            reference.step(dt(k), &mut u, explicit).unwrap();
            checkpoints.push(checkpoint(&reference, &u));
            assert_eq!(
                reference.history_entries(),
                reference_entries(scheme, reference.export_meta().unwrap().filled),
                "{scheme}"
            );
            if scheme == "sbdf3" && k == 0 {
                // Mid start-up: one BPR353 step taken, one to go.
                assert!(reference.starting());
                assert_eq!(reference.history_entries(), [1, 1, 0]);
            }
        }
        let depth = Scheme::from_name(scheme)
            .unwrap()
            .multistep()
            .map_or(0, |ms| ms.steps());
        let last = checkpoints.last().unwrap();
        assert_eq!(last.meta.filled, depth, "{scheme}");
        assert_eq!(last.meta.dt_history, [dt(STEPS - 1), dt(STEPS - 2)]);

        for (k, c) in checkpoints.iter().enumerate().take(STEPS) {
            let [a, b] = parts();
            // Rank a: a fresh stepper on one thread.
            let mut sa = stepper(scheme, &a, StepperOptions::default());
            // Rank b: on two threads, and used before (other factors, history and time).
            let threads = StepperOptions {
                threads: DegreeThreads::OwnPool(NonZeroUsize::new(2).unwrap()),
                start_time: 7.0,
                ..Default::default()
            };
            let mut sb = stepper(scheme, &b, threads);
            let mut junk = initial(&b);
            for _ in 0..3 {
                sb.step(2.5e-3, &mut junk, explicit).unwrap();
            }
            for s in [&mut sa, &mut sb] {
                let mut v = restore(s, c);
                continue_run(s, &mut v, k);
                assert_eq!(s.steps(), STEPS as u64);
                assert_eq!(s.time().to_bits(), reference.time().to_bits());
                modes_equal(&u, &v).unwrap_or_else(|e| panic!("{scheme}, restart after {k}: {e}"));
            }

            // Controls: every exported history entry and the step-size history are read by
            // a later step (a perturbed value changes the result).
            let entries = reference_entries(scheme, c.meta.filled);
            let mut offset = 0;
            for (kind, &count) in entries.iter().enumerate() {
                for e in 0..count {
                    let mut wrong = c.clone();
                    for h in wrong.history.values_mut() {
                        for v in &mut h[offset..offset + 2 * NR] {
                            *v *= 1.0 + 1.0 / 1024.0;
                        }
                    }
                    offset += 2 * NR;
                    let mut s = stepper(scheme, &a, StepperOptions::default());
                    let mut v = restore(&mut s, &wrong);
                    continue_run(&mut s, &mut v, k);
                    assert!(
                        modes_equal(&u, &v).is_err(),
                        "{scheme}, {k}: history kind {kind} entry {e} not read?"
                    );
                }
            }
            if entries.iter().sum::<usize>() > 0 {
                let mut s = stepper(scheme, &a, StepperOptions::default());
                let mut wrong = c.clone();
                wrong.meta.dt_history[0] *= 1.25;
                let mut v = restore(&mut s, &wrong);
                continue_run(&mut s, &mut v, k);
                assert!(
                    modes_equal(&u, &v).is_err(),
                    "{scheme}, {k}: dt history not read?"
                );
            }
        }
    }
}

/// The documented number of exported entries per kind.
fn reference_entries(scheme: &str, filled: usize) -> [usize; 3] {
    let f = |k: usize| filled.min(k - 1);
    match scheme {
        "sbdf1" => [f(1), f(1), 0],
        "sbdf2" => [f(2), f(2), 0],
        "sbdf3" => [f(3), f(3), 0],
        "cnab2" => [0, f(2), 0],
        _ => [0; 3],
    }
}

#[test]
fn history_entries_per_scheme() {
    let layout = ModeLayout::full(NR, 2).unwrap();
    for (scheme, full) in [
        ("cnab2", [0, 1, 0]),
        ("sbdf1", [0, 0, 0]),
        ("sbdf2", [1, 1, 0]),
        ("sbdf3", [2, 2, 0]),
        ("ars222", [0, 0, 0]),
        ("ars343", [0, 0, 0]),
        ("bpr353", [0, 0, 0]),
    ] {
        let mut s = stepper(scheme, &layout, StepperOptions::default());
        let mut u = initial(&layout);
        assert_eq!(s.history_entries(), [0; 3], "{scheme}");
        for k in 0..4 {
            s.step(dt(k), &mut u, explicit).unwrap();
        }
        assert_eq!(s.history_entries(), full, "{scheme}");
        assert_eq!(
            s.mode_history_len(),
            2 * NR * full.iter().sum::<usize>(),
            "{scheme}"
        );
        let mut out = vec![1.0];
        s.export_mode(2, 1, &mut out).unwrap();
        assert_eq!(out.len(), 1 + s.mode_history_len(), "appends");
        let meta = s.export_meta().unwrap();
        assert_eq!(meta.scheme, s.scheme().name());
        assert_eq!(meta.steps, 4);
        let depth = s.scheme().multistep().map_or(0, |ms| ms.steps());
        assert_eq!(meta.filled, depth, "{scheme}");
    }
}

/// An SBDF3 stepper on the full layout after 4 steps, with its checkpoint.
fn sbdf3_after_four() -> (Stepper, Checkpoint) {
    let layout = ModeLayout::full(NR, 2).unwrap();
    let mut s = stepper("sbdf3", &layout, StepperOptions::default());
    let mut u = initial(&layout);
    for k in 0..4 {
        s.step(dt(k), &mut u, explicit).unwrap();
    }
    let c = checkpoint(&s, &u);
    (s, c)
}

#[test]
fn a_checkpoint_of_another_scheme_or_depth_is_rejected() {
    let (s, c) = sbdf3_after_four();
    let layout = s.layout().clone();
    for other in ["sbdf2", "cnab2", "bpr353"] {
        let mut t = stepper(other, &layout, StepperOptions::default());
        let e = t.import_meta(&c.meta).unwrap_err();
        let expected = t.scheme().name().to_string();
        assert_eq!(
            e,
            ImexError::SchemeMismatch {
                expected: expected.clone(),
                got: "SBDF3".into()
            }
        );
        let msg = e.to_string();
        assert!(msg.contains("SBDF3") && msg.contains(&expected), "{msg}");
    }

    let mut t = stepper("sbdf3", &layout, StepperOptions::default());
    let mut meta = c.meta.clone();
    meta.filled = 4;
    assert_eq!(
        t.import_meta(&meta),
        Err(ImexError::HistoryDepth {
            scheme: "SBDF3".into(),
            max: 3,
            got: 4
        })
    );
    meta.filled = 2;
    meta.steps = 1;
    assert_eq!(
        t.import_meta(&meta),
        Err(ImexError::HistoryDepth {
            scheme: "SBDF3".into(),
            max: 1,
            got: 2
        })
    );
    let mut d = stepper("ars222", &layout, StepperOptions::default());
    let mut meta = d.export_meta().unwrap();
    meta.steps = 5;
    meta.dt_history = [1e-3, 1e-3];
    meta.filled = 1;
    assert_eq!(
        d.import_meta(&meta),
        Err(ImexError::HistoryDepth {
            scheme: "ARS222".into(),
            max: 0,
            got: 1
        })
    );
    // A DIRK checkpoint is the scalar part alone.
    meta.filled = 0;
    d.import_meta(&meta).unwrap();
    assert_eq!(d.mode_history_len(), 0);
    d.import_mode(1, 1, &[]).unwrap();
    assert_eq!(d.time(), 0.0);
    assert_eq!(d.steps(), 5);

    // History data of a stepper with fewer entries: wrong length.
    let short = {
        let mut s2 = stepper("sbdf3", &layout, StepperOptions::default());
        let mut u = initial(&layout);
        s2.step(1e-3, &mut u, explicit).unwrap();
        checkpoint(&s2, &u)
    };
    assert_eq!(short.meta.filled, 1);
    let mut t = stepper("sbdf3", &layout, StepperOptions::default());
    t.import_meta(&c.meta).unwrap();
    assert_eq!(
        t.import_mode(2, 1, &short.history[&(2, 1)]),
        Err(ImexError::HistoryLength {
            l: 2,
            m: 1,
            entries: 4,
            expected: 4 * 2 * NR,
            got: 2 * 2 * NR,
        })
    );
    let mut long = c.history[&(2, 1)].clone();
    long.push(0.0);
    assert!(matches!(
        t.import_mode(2, 1, &long),
        Err(ImexError::HistoryLength { got, .. }) if got == 4 * 2 * NR + 1
    ));
}

#[test]
fn non_finite_or_invalid_values_are_rejected() {
    let (s, c) = sbdf3_after_four();
    let layout = s.layout().clone();
    let mut t = stepper("sbdf3", &layout, StepperOptions::default());

    let mut meta = c.meta.clone();
    meta.time = f64::NAN;
    assert!(matches!(
        t.import_meta(&meta),
        Err(ImexError::InvalidTime { got }) if got.is_nan()
    ));
    for (index, bad) in [(0, 0.0), (0, -1e-3), (1, f64::INFINITY), (1, f64::NAN)] {
        let mut meta = c.meta.clone();
        meta.dt_history[index] = bad;
        match t.import_meta(&meta) {
            Err(ImexError::InvalidStepHistory {
                index: i,
                got,
                taken: 2,
            }) if i == index && got.to_bits() == bad.to_bits() => {}
            other => panic!("dt_history[{index}] = {bad}: {other:?}"),
        }
    }
    // Nothing was changed by the rejected imports.
    assert_eq!(t.steps(), 0);
    assert_eq!(t.history_entries(), [0; 3]);

    t.import_meta(&c.meta).unwrap();
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut data = c.history[&(1, 0)].clone();
        data[7] = bad;
        match t.import_mode(1, 0, &data) {
            Err(ImexError::NonFiniteHistory {
                l: 1,
                m: 0,
                index: 7,
                value,
            }) if value.to_bits() == bad.to_bits() => {}
            other => panic!("{bad}: {other:?}"),
        }
    }
    // The rejected mode is still awaited.
    for (l, ms) in layout.degrees() {
        for &m in ms {
            if (l, m) != (1, 0) {
                t.import_mode(l, m, &c.history[&(l, m)]).unwrap();
            }
        }
    }
    assert_eq!(
        t.export_meta(),
        Err(ImexError::IncompleteImport { l: 1, m: 0 })
    );
    t.import_mode(1, 0, &c.history[&(1, 0)]).unwrap();
    assert_eq!(t.export_meta().unwrap(), c.meta);
}

#[test]
fn an_incomplete_import_cannot_step_or_export() {
    let (s, c) = sbdf3_after_four();
    let layout = s.layout().clone();
    let mut t = stepper("sbdf3", &layout, StepperOptions::default());
    t.import_meta(&c.meta).unwrap();
    t.import_mode(0, 0, &c.history[&(0, 0)]).unwrap();
    t.import_mode(1, 1, &c.history[&(1, 1)]).unwrap();
    let missing = ImexError::IncompleteImport { l: 1, m: 0 };
    let mut u = initial(&layout);
    assert_eq!(t.step(1e-3, &mut u, explicit), Err(missing.clone()));
    assert_eq!(t.begin_step(1e-3), Err(missing.clone()));
    assert_eq!(t.export_meta(), Err(missing.clone()));
    let mut out = vec![];
    assert_eq!(t.export_mode(0, 0, &mut out), Err(missing));
    assert!(out.is_empty());
    let msg = t.export_meta().unwrap_err().to_string();
    assert!(msg.contains("l = 1, m = 0"), "{msg}");
    // Importing the same mode twice does not count twice.
    t.import_mode(0, 0, &c.history[&(0, 0)]).unwrap();
    assert!(t.begin_step(1e-3).is_err());
    // A restart abandons the import.
    t.restart(0.5).unwrap();
    t.step(1e-3, &mut u, explicit).unwrap();
}

#[test]
fn no_export_or_import_during_a_step_or_of_modes_not_held() {
    let (mut s, c) = sbdf3_after_four();
    s.begin_step(1e-3).unwrap();
    let busy = ImexError::StepInProgress { stage: 0 };
    assert_eq!(s.export_meta(), Err(busy.clone()));
    assert_eq!(s.import_meta(&c.meta), Err(busy.clone()));
    let mut out = vec![];
    assert_eq!(s.export_mode(1, 0, &mut out), Err(busy.clone()));
    assert_eq!(s.import_mode(1, 0, &c.history[&(1, 0)]), Err(busy));
    s.cancel_step();

    assert_eq!(
        s.export_mode(3, 0, &mut out),
        Err(ImexError::ModeNotHeld { l: 3, m: 0 })
    );
    let part = ModeLayout::new(NR, [(2, vec![0, 2])]).unwrap();
    let mut p = stepper("sbdf3", &part, StepperOptions::default());
    p.import_meta(&c.meta).unwrap();
    assert_eq!(
        p.import_mode(2, 1, &c.history[&(2, 1)]),
        Err(ImexError::ModeNotHeld { l: 2, m: 1 })
    );
    assert_eq!(
        p.import_mode(1, 0, &c.history[&(1, 0)]),
        Err(ImexError::ModeNotHeld { l: 1, m: 0 })
    );
    assert!(out.is_empty());
}
