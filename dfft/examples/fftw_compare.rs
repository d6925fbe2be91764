//! One-core local 3D transforms of `dfft` against FFTW in the same run.
//!
//! For each size `N` and kind (c2c, r2c), an `N^3` grid held by one
//! in-process rank: FFTW 3 (`fftw_plan_dft_3d`, `fftw_plan_dft_r2c_3d` /
//! `fftw_plan_dft_c2r_3d`, `FFTW_MEASURE`, out of place, one thread) and
//! `Fft3d` (bricks on one rank, unnormalised like FFTW, out of place), each
//! direction timed in interleaved rounds after a warm-up; the best and the
//! median repeat are printed with the ratio ours / FFTW. Our spectrum is
//! checked against FFTW's (relative max difference) before timing; the run
//! fails when it exceeds 1e-10.
//!
//! FFTW is linked from the system (`libfftw3-dev` on Debian), so the
//! example needs the `fftw` feature, which nothing else turns on:
//!
//! `cargo run --release -p parnum-dfft --features fftw --example fftw_compare --
//! [--sizes 64,128,256] [--kinds c2c,r2c] [--rounds 3] [--min-time 0.3]
//! [--json PATH] [--overwrite]`
//!
//! `--overwrite` times our backward transforms free to overwrite their
//! input (`Fft3d::backward_overwriting`, `backward_c2r_overwriting`), each
//! repeat on a fresh copy of the spectrum outside the timed call, as
//! FFTW's multi-dimensional complex-to-real transforms always are (they
//! cannot keep their input).
//!
//! `cargo xtask bench fft` runs it, adds scipy's pocketfft and draws the plot.

use dfft::{Fft3d, FftError, Layout, Normalization, Options};
use num_complex::Complex64;
use std::ffi::{c_int, c_uint, c_void};
use std::time::Instant;

/// The part of FFTW 3's C interface the benchmark uses; `fftw_complex` is
/// `double[2]`, laid out as `Complex64`.
mod ffi {
    use super::*;

    pub const FORWARD: c_int = -1;
    pub const BACKWARD: c_int = 1;
    pub const MEASURE: c_uint = 0;

    #[link(name = "fftw3")]
    extern "C" {
        pub fn fftw_plan_dft_3d(
            n0: c_int,
            n1: c_int,
            n2: c_int,
            input: *mut Complex64,
            output: *mut Complex64,
            sign: c_int,
            flags: c_uint,
        ) -> *mut c_void;
        pub fn fftw_plan_dft_r2c_3d(
            n0: c_int,
            n1: c_int,
            n2: c_int,
            input: *mut f64,
            output: *mut Complex64,
            flags: c_uint,
        ) -> *mut c_void;
        pub fn fftw_plan_dft_c2r_3d(
            n0: c_int,
            n1: c_int,
            n2: c_int,
            input: *mut Complex64,
            output: *mut f64,
            flags: c_uint,
        ) -> *mut c_void;
        pub fn fftw_execute(plan: *const c_void);
        pub fn fftw_destroy_plan(plan: *mut c_void);
        /// `const char fftw_version[]`, NUL-terminated.
        pub static fftw_version: [std::ffi::c_char; 0];
    }
}

/// An FFTW plan, destroyed on drop.
struct Plan(*mut c_void);

impl Plan {
    fn new(p: *mut c_void) -> Self {
        assert!(!p.is_null(), "FFTW returned no plan");
        Plan(p)
    }

    fn execute(&self) {
        // SAFETY: the plan is valid and the arrays it was made for outlive it
        // (they are declared before the plan in the same scope).
        unsafe { ffi::fftw_execute(self.0) }
    }
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: created by an FFTW planner, destroyed once.
        unsafe { ffi::fftw_destroy_plan(self.0) }
    }
}

/// The CPU's model name as Linux reports it.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string())
}

fn version() -> String {
    // SAFETY: FFTW exports its version as a NUL-terminated static array.
    unsafe {
        std::ffi::CStr::from_ptr(std::ptr::addr_of!(ffi::fftw_version).cast())
            .to_string_lossy()
            .into_owned()
    }
}

/// Timings of one direction: every repeat of every round, in seconds.
#[derive(Default)]
struct Times(Vec<Vec<f64>>);

fn median_of(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

impl Times {
    fn all(&self) -> Vec<f64> {
        self.0.concat()
    }
    fn best(&self) -> f64 {
        self.all().into_iter().fold(f64::INFINITY, f64::min)
    }
    fn median(&self) -> f64 {
        median_of(&self.all())
    }
    fn reps(&self) -> usize {
        self.0.iter().map(Vec::len).sum()
    }
    /// Each round's median repeat.
    fn rounds(&self) -> Vec<f64> {
        self.0.iter().map(|r| median_of(r)).collect()
    }
}

/// Runs `f` until it has taken `min_time` seconds and at least 3 times;
/// each repeat goes into a new round of `t`.
fn time(t: &mut Times, min_time: f64, mut f: impl FnMut()) {
    let start = Instant::now();
    let mut round = vec![];
    while round.len() < 3 || start.elapsed().as_secs_f64() < min_time {
        let s = Instant::now();
        f();
        round.push(s.elapsed().as_secs_f64());
    }
    t.0.push(round);
}

struct Config {
    sizes: Vec<usize>,
    kinds: Vec<String>,
    rounds: usize,
    min_time: f64,
    json: Option<String>,
    overwrite: bool,
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "fftw_compare: {msg}\nusage: fftw_compare [--sizes 64,128,256] [--kinds c2c,r2c] \
         [--rounds 3] [--min-time 0.3] [--json PATH] [--overwrite]"
    );
    std::process::exit(2)
}

fn parse() -> Config {
    let mut c = Config {
        sizes: vec![64, 128, 256],
        kinds: vec!["c2c".into(), "r2c".into()],
        rounds: 3,
        min_time: 0.3,
        json: None,
        overwrite: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let k = args[i].as_str();
        if k == "--overwrite" {
            c.overwrite = true;
            i += 1;
            continue;
        }
        if k == "--help" || k == "-h" {
            usage("one-core local 3D transforms against FFTW");
        }
        let Some(v) = args.get(i + 1).cloned() else {
            usage(&format!("{k} needs a value"));
        };
        match k {
            "--sizes" => {
                c.sizes = v
                    .split(',')
                    .map(|s| match s.parse::<usize>() {
                        Ok(n) if n >= 1 => n,
                        _ => usage(&format!("size '{s}' is not a whole number of at least 1")),
                    })
                    .collect()
            }
            "--kinds" => {
                c.kinds = v.split(',').map(str::to_string).collect();
                if let Some(b) = c.kinds.iter().find(|k| *k != "c2c" && *k != "r2c") {
                    usage(&format!("kind '{b}' is neither c2c nor r2c"));
                }
            }
            "--rounds" => {
                c.rounds = match v.parse() {
                    Ok(r) if r >= 1 => r,
                    _ => usage(&format!(
                        "--rounds '{v}' is not a whole number of at least 1"
                    )),
                }
            }
            "--min-time" => {
                c.min_time = match v.parse::<f64>() {
                    Ok(t) if t.is_finite() && t >= 0.0 => t,
                    _ => usage(&format!("--min-time '{v}' is not a number of seconds >= 0")),
                }
            }
            "--json" => c.json = Some(v),
            other => usage(&format!("unknown argument '{other}'")),
        }
        i += 2;
    }
    c
}

fn rel_diff(a: &[Complex64], b: &[Complex64]) -> f64 {
    let scale = b.iter().map(|v| v.norm()).fold(0.0, f64::max).max(1e-300);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
        / scale
}

/// Repeats of `f` on a fresh copy of `from` in `w` each (the copy not
/// timed), for transforms that overwrite their input.
fn time_fresh<T: Copy>(
    t: &mut Times,
    min_time: f64,
    (w, from): (&mut [T], &[T]),
    mut f: impl FnMut(&mut [T]),
) {
    let start = Instant::now();
    let mut round = vec![];
    while round.len() < 3 || start.elapsed().as_secs_f64() < min_time {
        w.copy_from_slice(from);
        let s = Instant::now();
        f(w);
        round.push(s.elapsed().as_secs_f64());
    }
    t.0.push(round);
}

/// One size and kind: the repeats of forward ours, forward FFTW, backward
/// ours, backward FFTW.
fn case(
    n: usize,
    kind: &str,
    rounds: usize,
    min_time: f64,
    overwrite: bool,
) -> Result<[Times; 4], FftError> {
    let ni = n as c_int;
    let total = n * n * n;
    let m = n / 2 + 1;
    let opts = Options {
        normalization: Normalization::None,
        ..Options::default()
    };
    let rows = comm::local::run(1, |c| {
        let layout = Layout::bricks([n; 3], 1)?;
        let mut t: [Times; 4] = Default::default();
        let diff;
        if kind == "c2c" {
            let mut fin = vec![Complex64::default(); total];
            let mut fout = vec![Complex64::default(); total];
            let mut fback = vec![Complex64::default(); total];
            // SAFETY: the arrays hold n^3 elements and outlive the plans.
            let (pf, pb) = unsafe {
                (
                    Plan::new(ffi::fftw_plan_dft_3d(
                        ni,
                        ni,
                        ni,
                        fin.as_mut_ptr(),
                        fout.as_mut_ptr(),
                        ffi::FORWARD,
                        ffi::MEASURE,
                    )),
                    Plan::new(ffi::fftw_plan_dft_3d(
                        ni,
                        ni,
                        ni,
                        fout.as_mut_ptr(),
                        fback.as_mut_ptr(),
                        ffi::BACKWARD,
                        ffi::MEASURE,
                    )),
                )
            };
            let mut p = Fft3d::c2c(c, &layout, opts)?;
            let x: Vec<Complex64> = (0..total)
                .map(|i| {
                    Complex64::new(
                        ((i * 7919) % 1009) as f64 / 1009.0 - 0.5,
                        ((i * 104_729) % 997) as f64 / 997.0 - 0.5,
                    )
                })
                .collect();
            let mut y = vec![Complex64::default(); p.output_len()];
            let mut z = vec![Complex64::default(); p.input_len()];
            let mut s = vec![Complex64::default(); p.scratch_len()];
            fin.copy_from_slice(&x);
            pf.execute();
            p.forward(c, &x, &mut y, &mut s)?;
            diff = rel_diff(&y, &fout);
            for _ in 0..rounds {
                time(&mut t[1], min_time, || pf.execute());
                time(&mut t[0], min_time, || {
                    p.forward(c, &x, &mut y, &mut s).expect("forward")
                });
                time(&mut t[3], min_time, || pb.execute());
                if overwrite {
                    let mut w = y.clone();
                    time_fresh(&mut t[2], min_time, (&mut w, &y), |w| {
                        p.backward_overwriting(c, w, &mut z, &mut s)
                            .expect("backward")
                    });
                } else {
                    time(&mut t[2], min_time, || {
                        p.backward(c, &y, &mut z, &mut s).expect("backward")
                    });
                }
            }
        } else {
            let mut fin = vec![0.0f64; total];
            let mut fout = vec![Complex64::default(); n * n * m];
            let mut fspec = vec![Complex64::default(); n * n * m];
            let mut fback = vec![0.0f64; total];
            // SAFETY: the arrays hold n^3 reals and n^2 (n/2+1) complex
            // values and outlive the plans.
            let (pf, pb) = unsafe {
                (
                    Plan::new(ffi::fftw_plan_dft_r2c_3d(
                        ni,
                        ni,
                        ni,
                        fin.as_mut_ptr(),
                        fout.as_mut_ptr(),
                        ffi::MEASURE,
                    )),
                    Plan::new(ffi::fftw_plan_dft_c2r_3d(
                        ni,
                        ni,
                        ni,
                        fspec.as_mut_ptr(),
                        fback.as_mut_ptr(),
                        ffi::MEASURE,
                    )),
                )
            };
            let mut p = Fft3d::r2c(c, &layout, 2, opts)?;
            let x: Vec<f64> = (0..total)
                .map(|i| ((i * 7919) % 1009) as f64 / 1009.0 - 0.5)
                .collect();
            let mut y = vec![Complex64::default(); p.output_len()];
            let mut z = vec![0.0; p.input_len()];
            let mut s = vec![Complex64::default(); p.scratch_len()];
            fin.copy_from_slice(&x);
            pf.execute();
            p.forward(c, &x, &mut y, &mut s)?;
            diff = rel_diff(&y, &fout);
            for _ in 0..rounds {
                time(&mut t[1], min_time, || pf.execute());
                time(&mut t[0], min_time, || {
                    p.forward(c, &x, &mut y, &mut s).expect("forward")
                });
                // FFTW's c2r overwrites its input (`fspec`, which its plan
                // holds): each repeat gets a fresh copy, outside the timed
                // call.
                time_fresh(&mut t[3], min_time, (&mut fspec, &fout), |_| pb.execute());
                if overwrite {
                    let mut w = y.clone();
                    time_fresh(&mut t[2], min_time, (&mut w, &y), |w| {
                        p.backward_overwriting(c, w, &mut z, &mut s)
                            .expect("backward")
                    });
                } else {
                    time(&mut t[2], min_time, || {
                        p.backward(c, &y, &mut z, &mut s).expect("backward")
                    });
                }
            }
        }
        Ok::<_, FftError>((t, diff))
    })
    .map_err(|e| FftError::Invalid(e.to_string()))?;
    let (t, diff) = rows.into_iter().next().expect("one rank");
    eprintln!("{kind} {n}^3: relative max difference of the spectra ours vs FFTW {diff:.2e}");
    if diff.is_nan() || diff > 1e-10 {
        return Err(FftError::Invalid(format!(
            "{kind} {n}^3: our spectrum differs from FFTW's by {diff:.2e} (relative)"
        )));
    }
    Ok(t)
}

fn main() {
    let cfg = parse();
    let ver = version();
    let family = simd::peak::CpuFamily::detect();
    let isa = simd::Isa::detect();
    let cap = match simd::Isa::cap() {
        Some(c) if isa < simd::Isa::hardware() => format!(" ({}={c})", simd::CAP_VAR),
        _ => String::new(),
    };
    println!(
        "CPU: {} ({}); dfft's ISA path: {isa}{cap}",
        cpu_model(),
        family.name
    );
    println!("{ver}, FFTW_MEASURE, out of place, one thread; dfft Fft3d on one rank, unnormalised");
    if cfg.overwrite {
        println!(
            "our backward transforms overwrite their input (a fresh copy each repeat, not timed)"
        );
    }
    println!(
        "{:>4} {:>5} {:>4} | {:>9} {:>9} {:>6} | {:>9} {:>9} {:>6}",
        "kind", "N", "dir", "ours best", "FFTW best", "ratio", "ours med", "FFTW med", "ratio"
    );
    let mut rows = vec![];
    for &n in &cfg.sizes {
        for kind in &cfg.kinds {
            let t =
                case(n, kind, cfg.rounds.max(1), cfg.min_time, cfg.overwrite).unwrap_or_else(|e| {
                    eprintln!("fftw_compare: {e}");
                    std::process::exit(1)
                });
            for (d, dir) in ["forward", "backward"].iter().enumerate() {
                let (o, f) = (&t[2 * d], &t[2 * d + 1]);
                println!(
                    "{:>4} {:>5} {:>4} | {:>9.5} {:>9.5} {:>6.2} | {:>9.5} {:>9.5} {:>6.2}",
                    kind,
                    n,
                    &dir[..3],
                    o.best(),
                    f.best(),
                    o.best() / f.best(),
                    o.median(),
                    f.median(),
                    o.median() / f.median()
                );
                let list = |v: Vec<f64>| {
                    v.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                rows.push(format!(
                    "{{\"kind\":\"{kind}\",\"n\":{n},\"direction\":\"{dir}\",\"ours_best_s\":{},\"ours_median_s\":{},\"fftw_best_s\":{},\"fftw_median_s\":{},\"ours_reps\":{},\"fftw_reps\":{},\"ours_rounds_s\":[{}],\"fftw_rounds_s\":[{}]}}",
                    o.best(),
                    o.median(),
                    f.best(),
                    f.median(),
                    o.reps(),
                    f.reps(),
                    list(o.rounds()),
                    list(f.rounds())
                ));
            }
        }
    }
    if let Some(path) = cfg.json {
        let text = format!(
            "{{\"fftw_version\":\"{ver}\",\"cpu\":\"{}\",\"cpu_family\":\"{}\",\"isa\":\"{isa}{cap}\",\"rows\":[\n{}\n]}}\n",
            cpu_model().replace('"', "'"),
            family.name,
            rows.join(",\n")
        );
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    }
}
