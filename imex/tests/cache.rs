//! The LU factor cache: a change of dt refactors exactly once per degree (twice or three times
//! for SBDF2/SBDF3, whose implicit weight depends on the step ratio), no change refactors
//! nothing; the stage API rejects misuse.

mod common;

use approx::assert_abs_diff_eq;
use common::Lcg;
use imex::{
    DegreeOperator, ImexError, Matrix, ModeBlock, ModeLayout, Scheme, StepProgress, Stepper,
};

const NR: usize = 9;
const LMAX: usize = 3;

fn stepper(scheme: &str) -> (Stepper, ModeBlock) {
    let layout = ModeLayout::full(NR, LMAX).unwrap();
    let mut rng = Lcg(5);
    let ops = (0..=LMAX)
        .map(|l| {
            let lin = Matrix::from_fn(NR, NR, |i, j| {
                0.1 * rng.next() - if i == j { 1.0 + l as f64 } else { 0.0 }
            });
            DegreeOperator::new(l, Matrix::identity(NR), lin)
                .with_boundary_row(0, (0..NR).map(|j| if j == 0 { 1.0 } else { 0.0 }).collect())
        })
        .collect();
    let mut u = ModeBlock::zeros(&layout);
    u.fill(1.0);
    (
        Stepper::new(Scheme::from_name(scheme).unwrap(), layout, ops).unwrap(),
        u,
    )
}

fn counts(s: &Stepper) -> Vec<usize> {
    s.factorization_counts()
        .into_iter()
        .map(|(_, c)| c)
        .collect()
}

fn steps(s: &mut Stepper, u: &mut ModeBlock, dt: f64, n: usize) {
    for _ in 0..n {
        s.step(dt, u, |_, u, out| {
            out.as_mut_slice()
                .iter_mut()
                .zip(u.as_slice())
                .for_each(|(o, &v)| *o = -0.1 * v * v);
        })
        .unwrap();
    }
}

#[test]
fn a_change_of_dt_refactors_exactly_once_per_degree() {
    // (scheme, factorisations after start-up, extra factorisations for one change of dt)
    for (scheme, start, change) in [
        ("cnab2", 1, 1),
        ("sbdf1", 1, 1),
        ("sbdf2", 2, 2),
        ("sbdf3", 2, 3),
        ("ars222", 1, 1),
        ("ars343", 1, 1),
        ("bpr353", 1, 1),
    ] {
        let (mut s, mut u) = stepper(scheme);
        assert_eq!(
            counts(&s),
            vec![0; LMAX + 1],
            "{scheme}: nothing before the first step"
        );
        steps(&mut s, &mut u, 0.01, 6);
        assert_eq!(counts(&s), vec![start; LMAX + 1], "{scheme}: start-up");
        steps(&mut s, &mut u, 0.01, 6);
        assert_eq!(
            counts(&s),
            vec![start; LMAX + 1],
            "{scheme}: same dt, no refactor"
        );
        steps(&mut s, &mut u, 0.02, 6);
        assert_eq!(
            counts(&s),
            vec![start + change; LMAX + 1],
            "{scheme}: one change of dt"
        );
        steps(&mut s, &mut u, 0.02, 6);
        assert_eq!(
            counts(&s),
            vec![start + change; LMAX + 1],
            "{scheme}: steady again"
        );
        let assembly = if scheme == "ars343" { 1 } else { 0 };
        for l in 0..=LMAX {
            assert_eq!(
                s.assembly_factorizations(l),
                Some(assembly),
                "{scheme} l={l}"
            );
        }
        let (c, _) = s.factors(2).unwrap();
        let b0 = match scheme {
            "cnab2" => 0.5,
            "sbdf1" => 1.0,
            "sbdf2" => 2.0 / 3.0,
            "sbdf3" => 6.0 / 11.0,
            "bpr353" => 0.5,
            _ => s.scheme().tableau().unwrap().gamma(),
        };
        assert_eq!(c, 0.02 * b0, "{scheme}: cached coefficient dt * b0");
    }
}

#[test]
fn restart_keeps_the_factors() {
    let (mut s, mut u) = stepper("cnab2");
    steps(&mut s, &mut u, 0.01, 3);
    s.restart(0.0).unwrap();
    assert!(s.starting());
    steps(&mut s, &mut u, 0.01, 3);
    // CNAB2's start-up step has the same implicit weight 1/2: still one factorisation.
    assert_eq!(counts(&s), vec![1; LMAX + 1]);
    assert_eq!(s.time(), 0.03);
}

#[test]
fn stage_api_drives_a_step_and_rejects_misuse() {
    let (mut s, mut u) = stepper("ars343");
    let mut n = ModeBlock::zeros(s.layout());
    assert_eq!(s.advance(&mut u, &n), Err(ImexError::NoStepInProgress));
    let t0 = s.begin_step(0.1).unwrap();
    assert_eq!(t0, 0.0);
    assert!(matches!(
        s.begin_step(0.1),
        Err(ImexError::StepInProgress { stage: 0 })
    ));
    let mut evaluations = vec![t0];
    loop {
        n.fill(0.0);
        match s.advance(&mut u, &n).unwrap() {
            StepProgress::NeedExplicit { time } => evaluations.push(time),
            StepProgress::Done { time } => {
                // t0 + dt is one rounding of 0.1: 4 eps * 0.1 (2 ulps of
                // 0.1) bounds it with room for another. Measured 0; was
                // 1e-15 (no derivation), tightened to the derived bound.
                assert_abs_diff_eq!(time, 0.1, epsilon = 4.0 * f64::EPSILON * 0.1);
                break;
            }
        }
    }
    // ARS343 evaluates N at c = (0, gamma, (1 + gamma)/2, 1).
    let c = s.scheme().tableau().unwrap().c().to_vec();
    assert_eq!(evaluations.len(), 4);
    for (t, c) in evaluations.iter().zip(&c) {
        // t0 + c dt: a product and a sum of values <= 0.1, at most 2 ulps
        // of 0.1; 4 eps * 0.1 is that bound. Measured 0; was 1e-15 (no
        // derivation), tightened to the derived bound.
        assert_abs_diff_eq!(*t, 0.1 * c, epsilon = 4.0 * f64::EPSILON * 0.1);
    }
    assert!(!s.step_in_progress());
    assert_eq!(s.steps(), 1);
}

#[test]
fn explicit_evaluations_per_step() {
    for (scheme, evals) in [
        ("cnab2", 1),
        ("sbdf2", 1),
        ("ars222", 2),
        ("ars343", 4),
        ("bpr353", 3),
    ] {
        let (mut s, mut u) = stepper(scheme);
        let mut count = 0;
        s.step(0.01, &mut u, |_, _, _| count += 1).unwrap();
        assert_eq!(count, evals, "{scheme}");
    }
    // SBDF3: two BPR353 start-up steps (3 evaluations each), then one per step.
    let (mut s, mut u) = stepper("sbdf3");
    let mut count = 0;
    for _ in 0..4 {
        s.step(0.01, &mut u, |_, _, _| count += 1).unwrap();
    }
    assert_eq!(count, 3 + 3 + 1 + 1);
}
