//! The device kernels (`kernels/mg.cu`) run on the host and compared with
//! the host code bit for bit, in every build: `tests/emulate/harness.cpp`
//! includes the kernels' source with the few CUDA names defined for one
//! host thread (every grid-stride iteration in turn; red-black cells of
//! one colour are independent, so the order does not matter), compiled
//! by the system's C++ compiler without contraction into fused
//! multiply-adds (as NVRTC with `--fmad=false`). It checks the kernels'
//! arithmetic and indexing where no GPU is present; the device test
//! (`tests/device.rs`) checks the whole device path on one.

use crate::kernels::Isa;
use crate::level::{self, Stencil};
use comm::exact::ExactSum;
use halo::{FieldLayout, Region};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The harness's `val`.
fn val(i: u64, seed: u64, wide: bool) -> f64 {
    let h = mix(i.wrapping_mul(1_000_003).wrapping_add(seed));
    let v = ((h >> 11) % 2001) as i64 as f64 / 1000.0 - 1.0;
    if wide {
        v * 2f64.powi(((h >> 40) % 1201) as i32 - 600)
    } else {
        v
    }
}

fn arr(n: usize, seed: u64, wide: bool) -> Vec<f64> {
    (0..n as u64).map(|i| val(i, seed, wide)).collect()
}

/// The harness's `walls`: non-zero at the first and last owned cells only.
fn walls(n: usize, seed: u64, g: usize) -> Vec<f64> {
    let mut w = arr(n, seed, false);
    for (i, x) in w.iter_mut().enumerate() {
        if i != g && i != n - g - 1 {
            *x = 0.0;
        }
    }
    w
}

fn lay(o: [usize; 3], g: usize) -> FieldLayout {
    FieldLayout {
        owned: o,
        ghost: [g; 3],
        components: 1,
    }
}

fn var(n: usize) -> Stencil {
    let abs = |s| arr(n, s, false).iter().map(|x| x.abs()).collect::<Vec<_>>();
    // Every 11th cell inactive (diagonal 0); the inverse by the host's
    // expression (level.rs), which the kernels compute.
    let diag: Vec<f64> = arr(n, 6, false)
        .iter()
        .enumerate()
        .map(|(i, x)| if i % 11 == 0 { 0.0 } else { x.abs() + 6.0 })
        .collect();
    let inv_diag = diag
        .iter()
        .map(|&d| if d > 0.0 { 1.0 / d } else { 0.0 })
        .collect();
    Stencil::Var {
        w: [abs(3), abs(4), abs(5)],
        diag,
        inv_diag,
    }
}

const IH: [f64; 3] = [1.5, 2.25, 0.75];

fn constant(l: &FieldLayout) -> Stencil {
    let p = l.padded();
    Stencil::Const {
        ih2: IH,
        wall: [
            walls(p[0], 7, l.ghost[0]),
            walls(p[1], 8, l.ghost[1]),
            walls(p[2], 9, l.ghost[2]),
        ],
    }
}

/// Compiles and runs the harness; its cases by name. `None` (with a note)
/// where no C++ compiler runs.
fn harness() -> Option<HashMap<String, Vec<u64>>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("mg-emulate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("harness");
    // `halo`'s region header, from the text the device path prepends.
    std::fs::write(dir.join("region.cuh"), halo::kernels::REGION_SOURCE).unwrap();
    let built = Command::new("g++")
        .args([
            "-std=c++17",
            "-O1",
            "-ffp-contract=off",
            "-fno-fast-math",
            "-I",
        ])
        .arg(root.join("kernels"))
        .arg("-I")
        .arg(&dir)
        .arg(root.join("tests/emulate/harness.cpp"))
        .arg("-o")
        .arg(&exe)
        .output();
    let built = match built {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: no C++ compiler (g++: {e})");
            return None;
        }
    };
    assert!(
        built.status.success(),
        "the harness does not compile:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "the harness failed");
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.lines()
            .map(|l| {
                let mut it = l.split_whitespace();
                let name = it.next().unwrap().to_string();
                let v = it.map(|h| u64::from_str_radix(h, 16).unwrap()).collect();
                (name, v)
            })
            .collect(),
    )
}

fn check(cases: &HashMap<String, Vec<u64>>, name: &str, host: &[f64]) {
    let dev = cases.get(name).unwrap_or_else(|| panic!("no case {name}"));
    assert_eq!(dev.len(), host.len(), "{name}: lengths");
    for (i, (d, h)) in dev.iter().zip(host).enumerate() {
        assert_eq!(
            *d,
            h.to_bits(),
            "{name}: value {i} is {:e} from the kernel, {h:e} from the host",
            f64::from_bits(*d)
        );
    }
}

#[test]
fn kernels_on_the_host_give_the_host_bits() {
    let Some(cases) = harness() else { return };
    let simd = Isa::Portable;
    // Smoothing: 6 x 5 x 7, ghost width 2 (the operator and the residual
    // below, with their dot products).
    let l = lay([6, 5, 7], 2);
    let n = l.padded_len();
    let own = l.owned_region();
    for (name, st) in [("var", var(n)), ("const", constant(&l))] {
        let mut u = arr(n, 1, false);
        let f = arr(n, 2, false);
        for pass in 0..3 {
            let omega = if pass == 2 { 1.0 } else { 1.15 };
            level::smooth(simd, &st, &l, 3, &mut u, &f, &own, pass % 2, omega);
        }
        check(&cases, &format!("smooth_{name}"), &u);
    }
    // The one-pass sweep against the host's two colour passes (first over
    // `grown`, second over the owned box): every cell of R (owned grown by
    // 1) as the host's, every other cell untouched.
    let grown = Region {
        lo: [own.lo[0] - 1, own.lo[1], own.lo[2] - 1],
        hi: [own.hi[0] + 1, own.hi[1] + 1, own.hi[2] + 1],
    };
    let r = Region {
        lo: own.lo.map(|x| x - 1),
        hi: own.hi.map(|x| x + 1),
    };
    let s = l.strides();
    for (name, st, first) in [("var", var(n), 0), ("const", constant(&l), 1)] {
        let mut u = arr(n, 1, false);
        let f = arr(n, 2, false);
        level::smooth(simd, &st, &l, 3, &mut u, &f, &grown, first, 1.15);
        level::smooth(simd, &st, &l, 3, &mut u, &f, &own, 1 - first, 1.15);
        let mut want = arr(n, 99, false);
        for x in 0..n {
            let q = [x / s[0], (x / s[1]) % l.padded()[1], x % s[1]];
            if (0..3).all(|d| q[d] >= r.lo[d] && q[d] < r.hi[d]) {
                want[x] = u[x];
            }
        }
        check(&cases, &format!("sweep_{name}"), &want);
    }
    // Restriction, prolongation, reflection.
    let (lf, lc) = (lay([6, 4, 8], 2), lay([3, 2, 4], 1));
    for (name, st) in [("var", var(lf.padded_len())), ("const", constant(&lf))] {
        let u = arr(lf.padded_len(), 11, false);
        let f = arr(lf.padded_len(), 12, false);
        let mut cf = vec![0.0; lc.padded_len()];
        let mut scratch = vec![0.0; 8 * lc.owned[2]];
        level::residual_restrict(simd, &st, &lf, &u, &f, &lc, &mut cf, &mut scratch);
        check(&cases, &format!("restrict_{name}"), &cf);
    }
    let mut cu = arr(lc.padded_len(), 13, false);
    let mut fu = arr(lf.padded_len(), 14, false);
    level::prolong_add(simd, &lc, &cu, &lf, [0; 3], &mut fu);
    check(&cases, "prolong", &fu);
    let (p, s) = (lc.padded(), lc.strides());
    for (d, ghost, inner, sign) in [(1, 0, 1, -1.0), (2, p[2] - 1, p[2] - 2, 1.0)] {
        let (a, b) = ((d + 1) % 3, (d + 2) % 3);
        for ia in 0..p[a] {
            for ib in 0..p[b] {
                let base = ia * s[a] + ib * s[b];
                cu[base + ghost * s[d]] = sign * cu[base + inner * s[d]];
            }
        }
    }
    check(&cases, "reflect", &cu);
    // Vector operations over the owned box.
    let (alpha, beta) = (0.37, -1.25);
    let in_own = |x: usize| {
        let s = l.strides();
        let q = [x / s[0], (x / s[1]) % l.padded()[1], x % s[1]];
        (0..3).all(|d| q[d] >= own.lo[d] && q[d] < own.hi[d])
    };
    for mode in 0..4 {
        let (mut x, mut p) = (arr(n, 21, false), arr(n, 22, false));
        let z = arr(n, 23, false);
        for i in (0..n).filter(|&i| in_own(i)) {
            match mode {
                0 => x[i] += alpha * p[i],
                1 => p[i] = z[i] + beta * p[i],
                2 => {
                    x[i] += alpha * p[i];
                    p[i] = z[i] + beta * p[i];
                }
                _ => x[i] -= alpha,
            }
        }
        check(&cases, &format!("axpy{mode}_x"), &x);
        check(&cases, &format!("axpy{mode}_p"), &p);
    }
    // Exact sums: the kernel's limbs decode to the host's accumulator.
    for mode in 0..4 {
        let (mut a, b) = (arr(n, 31, true), arr(n, 32, true));
        if mode == 3 {
            let s = l.strides();
            let x = 2 * s[0] + 3 * s[1] + 4;
            a[x] = f64::NAN;
            a[x + 1] = f64::NEG_INFINITY;
            a[x + 2] = -0.0;
        }
        let mut acc = ExactSum::new();
        for i in (0..n).filter(|&i| in_own(i)) {
            acc.add(match mode {
                0 => a[i] * b[i],
                2 => a[i].abs(),
                _ => a[i],
            });
        }
        let words: Vec<i64> = cases[&format!("exact{mode}")]
            .iter()
            .map(|&w| w as i64)
            .collect();
        let dev = ExactSum::decode(&words);
        assert!(
            dev == acc,
            "exact sum, mode {mode}: {} against the host's {}",
            dev.to_f64(),
            acc.to_f64()
        );
    }
    // The fused passes: their fields as the host's, their sums as the
    // host's accumulators over the same values.
    let sum_of = |name: &str, range: std::ops::Range<usize>| {
        let words: Vec<i64> = cases[name][range].iter().map(|&w| w as i64).collect();
        ExactSum::decode(&words)
    };
    let owned_sum = |v: &dyn Fn(usize) -> f64| {
        let mut acc = ExactSum::new();
        for i in (0..n).filter(|&i| in_own(i)) {
            acc.add(v(i));
        }
        acc
    };
    let w = ExactSum::WORDS;
    let (a, b, c) = (arr(n, 41, true), arr(n, 42, true), arr(n, 43, true));
    assert!(
        sum_of("sum2", 0..w) == owned_sum(&|i| a[i] * b[i]),
        "sum2: a b"
    );
    assert!(
        sum_of("sum2", w..2 * w) == owned_sum(&|i| a[i] * c[i]),
        "sum2: a c"
    );
    for (name, st) in [("var", var(n)), ("const", constant(&l))] {
        let (u, f) = (arr(n, 51, false), arr(n, 52, false));
        for with_f in [1, 0] {
            let mut out = vec![0.0; n];
            if with_f == 1 {
                level::residual(simd, &st, &l, &u, &f, &mut out, &own);
            } else {
                level::apply(simd, &st, &l, &u, &mut out, &own, |_, _| {});
            }
            let case = format!("resdot_{name}_{with_f}");
            check(&cases, &case, &out);
            let want = owned_sum(&|i| {
                if with_f == 1 {
                    out[i] * out[i]
                } else {
                    u[i] * out[i]
                }
            });
            assert!(
                sum_of(&format!("{case}_sum"), 0..w) == want,
                "{case}: the dot"
            );
        }
    }
    let (mut r, o, p) = (arr(n, 61, false), arr(n, 62, false), arr(n, 63, false));
    for i in (0..n).filter(|&i| in_own(i)) {
        r[i] = o[i] - 0.37 * p[i];
    }
    check(&cases, "update", &r);
    assert!(
        sum_of("update_sum", 0..w) == owned_sum(&|i| r[i] * r[i]),
        "update: r r"
    );
}
