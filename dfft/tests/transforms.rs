//! Distributed transforms against a direct DFT and against the single-rank
//! transform, bit for bit.

use comm::{local, IndexBox};
use dfft::{
    Fft3d, FftError, Kind, Layout, Normalization, Options, Output, Protocol, Reshape, Selection,
};
use num_complex::Complex64;

/// A deterministic value for global point `p` and field `f`.
fn value(p: [usize; 3], f: usize) -> Complex64 {
    let h = |x: u64| {
        let mut x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 29;
        (x % 2001) as f64 / 1000.0 - 1.0
    };
    let k = ((p[0] * 131 + p[1]) * 137 + p[2]) as u64 * 7 + f as u64;
    Complex64::new(h(k), h(k ^ 0xABCDEF))
}

/// Fills the local block of `layout` on `rank` with `value`.
fn local_input(layout: &Layout, rank: usize, batch: usize, re_only: bool) -> Vec<Complex64> {
    let b = layout.box_of(rank);
    let st = layout.strides(rank);
    let n = layout.local_len(rank);
    let mut out = vec![Complex64::default(); n * batch];
    for f in 0..batch {
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                for k in b.lo[2]..b.hi[2] {
                    let o = (i - b.lo[0]) * st[0] + (j - b.lo[1]) * st[1] + (k - b.lo[2]) * st[2];
                    let mut v = value([i, j, k], f);
                    if re_only {
                        v.im = 0.0;
                    }
                    out[f * n + o] = v;
                }
            }
        }
    }
    out
}

/// Scatters every rank's block into a global row-major array per field.
fn assemble(layout: &Layout, parts: &[Vec<Complex64>], batch: usize) -> Vec<Vec<Complex64>> {
    let g = layout.global();
    let mut out = vec![vec![Complex64::new(f64::NAN, f64::NAN); layout.global_len()]; batch];
    for (r, data) in parts.iter().enumerate() {
        let b: IndexBox = layout.box_of(r);
        let st = layout.strides(r);
        let n = layout.local_len(r);
        for (f, field) in out.iter_mut().enumerate() {
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    for k in b.lo[2]..b.hi[2] {
                        let o =
                            (i - b.lo[0]) * st[0] + (j - b.lo[1]) * st[1] + (k - b.lo[2]) * st[2];
                        field[(i * g[1] + j) * g[2] + k] = data[f * n + o];
                    }
                }
            }
        }
    }
    out
}

/// A layout family: the input layout for a given rank count.
type LayoutFamily = Box<dyn Fn(usize) -> Layout + Sync>;

fn bits(v: &[Complex64]) -> Vec<(u64, u64)> {
    v.iter().map(|c| (c.re.to_bits(), c.im.to_bits())).collect()
}

/// Runs a forward transform on `ranks` ranks; returns the assembled
/// spectrum and the round-trip error.
fn run(
    global: [usize; 3],
    ranks: usize,
    input: impl Fn(usize) -> Layout + Sync,
    kind: Kind,
    options: Options,
) -> (Vec<Vec<Complex64>>, f64, usize) {
    let out = local::run(ranks, |c| {
        let layout = input(c.size());
        let x = local_input(&layout, c.rank(), options.batch, false);
        let (y, err, out, reshapes) = match kind {
            Kind::C2C => {
                let mut plan = Fft3d::c2c(c, &layout, options)?;
                let mut y = vec![Complex64::default(); plan.output_len()];
                let mut scratch = vec![Complex64::default(); plan.scratch_len()];
                plan.forward(c, &x, &mut y, &mut scratch)?;
                let mut z = vec![Complex64::default(); plan.input_len()];
                plan.backward(c, &y, &mut z, &mut scratch)?;
                // Free to overwrite its input, the same bits.
                let mut w = y.clone();
                let mut z2 = vec![Complex64::default(); plan.input_len()];
                plan.backward_overwriting(c, &mut w, &mut z2, &mut scratch)?;
                if bits(&z2) != bits(&z) {
                    return Err(FftError::Invalid("backward_overwriting: other bits".into()));
                }
                let s = match options.normalization {
                    Normalization::None => layout.global_len() as f64,
                    _ => 1.0,
                };
                let err = x
                    .iter()
                    .zip(&z)
                    .map(|(a, b)| (a * s - b).norm())
                    .fold(0.0, f64::max);
                (y, err, plan.output_layout().clone(), plan.reshapes())
            }
            Kind::R2C { halved } => {
                let mut plan = Fft3d::r2c(c, &layout, halved, options)?;
                let mut y = vec![Complex64::default(); plan.output_len()];
                let mut scratch = vec![Complex64::default(); plan.scratch_len()];
                let xr: Vec<f64> = x.iter().map(|v| v.re).collect();
                plan.forward(c, &xr, &mut y, &mut scratch)?;
                let mut z = vec![0.0; plan.input_len()];
                plan.backward(c, &y, &mut z, &mut scratch)?;
                let mut w = y.clone();
                let mut z2 = vec![0.0f64; plan.input_len()];
                plan.backward_overwriting(c, &mut w, &mut z2, &mut scratch)?;
                let same = z.iter().zip(&z2).all(|(a, b)| a.to_bits() == b.to_bits());
                if !same {
                    return Err(FftError::Invalid("backward_overwriting: other bits".into()));
                }
                let err = xr
                    .iter()
                    .zip(&z)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                (y, err, plan.output_layout().clone(), plan.reshapes())
            }
        };
        Ok::<_, FftError>((y, err, out, reshapes))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let layout = out[0].2.clone();
    // The spectrum's shape: the input's, with the halved axis at n / 2 + 1.
    let mut want = global;
    if let Kind::R2C { halved } = kind {
        want[halved] = global[halved] / 2 + 1;
    }
    assert_eq!(
        layout.global(),
        want,
        "output shape of {kind:?} on {global:?}"
    );
    let parts: Vec<Vec<Complex64>> = out.iter().map(|o| o.0.clone()).collect();
    let err = out.iter().map(|o| o.1).fold(0.0, f64::max);
    (assemble(&layout, &parts, options.batch), err, out[0].3)
}

#[test]
fn matches_a_direct_dft() {
    let g = [5, 4, 3];
    let (y, err, _) = run(
        g,
        1,
        |p| Layout::bricks(g, p).unwrap(),
        Kind::C2C,
        Options::default(),
    );
    // Values in [-1, 1], n = 60: a forward + backward FFT errs by about
    // log2(n) eps per value (measured 5.6e-16); 1e-14 leaves an 18x margin.
    assert!(err < 1e-14, "round trip {err}");
    let n = g.iter().product::<usize>() as f64;
    let mut worst = 0.0f64;
    for k0 in 0..g[0] {
        for k1 in 0..g[1] {
            for k2 in 0..g[2] {
                let mut s = Complex64::default();
                for i in 0..g[0] {
                    for j in 0..g[1] {
                        for k in 0..g[2] {
                            let ph = -2.0
                                * std::f64::consts::PI
                                * ((k0 * i) as f64 / g[0] as f64
                                    + (k1 * j) as f64 / g[1] as f64
                                    + (k2 * k) as f64 / g[2] as f64);
                            s += value([i, j, k], 0) * Complex64::new(ph.cos(), ph.sin());
                        }
                    }
                }
                worst = worst.max((s - y[0][(k0 * g[1] + k1) * g[2] + k2]).norm());
            }
        }
    }
    // Each direct sum adds n terms of size <= 1 with a twiddle rounded to
    // about eps: the sum's own error is below ~ n eps, the FFT's far
    // smaller. Measured 1.6e-14; 8 n eps = 1.1e-13 (6.6x margin).
    let bound = 8.0 * n * f64::EPSILON;
    assert!(worst < bound, "direct DFT differs by {worst} > {bound}");
}

#[test]
fn c2c_is_bit_identical_for_every_rank_count_layout_and_protocol() {
    let g = [30, 17, 12];
    let reference = run(
        g,
        1,
        |p| Layout::bricks(g, p).unwrap(),
        Kind::C2C,
        Options::default(),
    )
    .0;
    let families: Vec<(&str, LayoutFamily)> = vec![
        ("bricks", Box::new(move |p| Layout::bricks(g, p).unwrap())),
        (
            "x-pencils",
            Box::new(move |p| Layout::pencils(g, p, 0).unwrap()),
        ),
        (
            "z-pencils",
            Box::new(move |p| Layout::pencils(g, p, 2).unwrap()),
        ),
        (
            "y-slabs",
            Box::new(move |p| Layout::slabs(g, p, 1).unwrap()),
        ),
        (
            "x-slabs, odd order",
            Box::new(move |p| {
                Layout::slabs(g, p, 0)
                    .unwrap()
                    .with_order([2, 0, 1])
                    .unwrap()
            }),
        ),
    ];
    for ranks in [1, 2, 3, 4, 6] {
        for (name, f) in &families {
            for protocol in Protocol::ALL {
                for output in [Output::Input, Output::Transposed] {
                    let opts = Options {
                        protocol,
                        output,
                        ..Options::default()
                    };
                    let (y, err, _) = run(g, ranks, f, Kind::C2C, opts);
                    assert!(
                        err < 1e-12,
                        "{name} {ranks} ranks {protocol:?}: round trip {err}"
                    );
                    assert!(bits(&y[0]) == bits(&reference[0]), "{name}, {ranks} ranks, {protocol:?}, {output:?}: spectrum differs from 1 rank");
                }
            }
        }
    }
}

#[test]
fn r2c_is_bit_identical_and_round_trips_for_each_halved_axis() {
    let g = [14, 9, 11];
    for halved in 0..3 {
        let kind = Kind::R2C { halved };
        let reference = run(
            g,
            1,
            |p| Layout::bricks(g, p).unwrap(),
            kind,
            Options::default(),
        )
        .0;
        for ranks in [2, 3, 4] {
            for (input, protocol) in [
                (0usize, Protocol::Alltoallv),
                (1, Protocol::P2pPipelined),
                (2, Protocol::Alltoall),
            ] {
                let (y, err, _) = run(
                    g,
                    ranks,
                    |p| Layout::pencils(g, p, input).unwrap(),
                    kind,
                    Options {
                        protocol,
                        ..Options::default()
                    },
                );
                assert!(
                    err < 1e-12,
                    "halved {halved}, {ranks} ranks: round trip {err}"
                );
                assert!(
                    bits(&y[0]) == bits(&reference[0]),
                    "halved {halved}, {ranks} ranks, input pencils along {input}"
                );
            }
        }
    }
}

#[test]
fn batched_fields_equal_separate_transforms() {
    let g = [12, 10, 8];
    let opts = Options {
        batch: 3,
        normalization: Normalization::Symmetric,
        ..Options::default()
    };
    let (y, err, _) = run(g, 4, |p| Layout::bricks(g, p).unwrap(), Kind::C2C, opts);
    // Round trip of values in [-1, 1], n = 960: measured 1.1e-15, a few
    // eps times log2(n); 1e-14 leaves a 9x margin.
    assert!(err < 1e-14, "round trip {err}");
    let single = run(
        g,
        1,
        |p| Layout::bricks(g, p).unwrap(),
        Kind::C2C,
        Options { batch: 3, ..opts },
    )
    .0;
    for f in 0..3 {
        assert!(bits(&y[f]) == bits(&single[f]), "field {f}");
    }
    assert!(bits(&y[0]) != bits(&y[1]));
}

#[test]
fn minimum_reshape_selection_counts() {
    // Reshapes of a forward + backward pair, as in the table of the crate
    // docs: (pencil pipeline, min-reshape into the input layout, min-reshape
    // with transposed output).
    let g = [64, 64, 64];
    let counts = local::run(8, |c| {
        let mut out = vec![];
        for l in [
            Layout::bricks(g, 8)?,
            Layout::pencils(g, 8, 2)?,
            Layout::pencils(g, 8, 0)?,
            Layout::slabs(g, 8, 0)?,
        ] {
            let n = |selection, output| -> Result<usize, FftError> {
                Ok(2 * Fft3d::c2c(
                    c,
                    &l,
                    Options {
                        selection,
                        output,
                        ..Options::default()
                    },
                )?
                .reshapes())
            };
            out.push((
                n(Selection::Pencils, Output::Input)?,
                n(Selection::MinReshape, Output::Input)?,
                n(Selection::MinReshape, Output::Transposed)?,
            ));
        }
        Ok::<_, FftError>(out)
    })
    .unwrap();
    assert_eq!(counts[0], vec![(8, 6, 4), (6, 4, 2), (6, 4, 4), (4, 4, 2)]);
}

#[test]
fn auto_picks_a_protocol_and_reports_its_timings() {
    local::run(3, |c| {
        let a = Layout::pencils([20, 18, 16], 3, 2)?;
        let b = Layout::pencils([20, 18, 16], 3, 0)?;
        let r = Reshape::<Complex64>::new(c, &a, &b, 1, Protocol::Auto)?;
        assert_eq!(r.timings().len(), Protocol::ALL.len());
        assert!(Protocol::ALL.contains(&r.protocol()));
        // Every rank chose the same protocol.
        let code = Protocol::ALL
            .iter()
            .position(|&p| p == r.protocol())
            .unwrap() as i64;
        comm::CommExt::check_agree(c, "protocol", &[code])?;
        Ok::<_, FftError>(())
    })
    .unwrap();
}

#[test]
fn bad_requests_are_errors() {
    let e = Layout::pencils([4, 3, 100], 16, 2).unwrap_err().to_string();
    assert!(e.contains("16 ranks"), "{e}");
    // 5 ranks fit neither axis of 4 points (nor their product, 16, as the
    // error once said): the message names both extents.
    let e = Layout::pencils([4, 4, 64], 5, 2).unwrap_err().to_string();
    assert!(
        e.contains("5 ranks") && e.contains("x <= 4 (axis 0) and y <= 4 (axis 1)"),
        "{e}"
    );
    local::run(2, |c| {
        let a = Layout::slabs([8, 8, 8], 2, 0)?;
        let b = Layout::slabs([8, 8, 9], 2, 0)?;
        let e = Reshape::<f64>::new(c, &a, &b, 1, Protocol::P2p).unwrap_err();
        assert!(e.to_string().contains("different global shapes"));
        let mut plan = Fft3d::c2c(c, &a, Options::default())?;
        let x = vec![Complex64::default(); plan.input_len() + 1];
        let mut y = vec![Complex64::default(); plan.output_len()];
        let mut s = vec![Complex64::default(); plan.scratch_len()];
        let e = plan.forward(c, &x, &mut y, &mut s).unwrap_err();
        assert!(
            matches!(
                e,
                FftError::LengthMismatch {
                    what: "forward input",
                    ..
                }
            ),
            "{e}"
        );
        let e = plan.forward(c, &x[1..], &mut y, &mut s[1..]).unwrap_err();
        assert!(
            matches!(
                e,
                FftError::LengthMismatch {
                    what: "scratch",
                    ..
                }
            ),
            "{e}"
        );
        assert!("p2p_plined".parse::<Protocol>().is_ok());
        assert!("p3p"
            .parse::<Protocol>()
            .unwrap_err()
            .to_string()
            .contains("valid"));
        Ok::<_, FftError>(())
    })
    .unwrap();
}
