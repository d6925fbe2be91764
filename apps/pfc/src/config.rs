//! The run configuration: TOML file, command-line overrides, validation.
//!
//! Lengths are in the dimensionless units of the Swift-Hohenberg free
//! energy, where the first shell of reciprocal vectors has `|q| = 1`. The
//! BCC crystal then has the cubic lattice constant `a = 2 pi sqrt(2)`
//! (its first shell is the twelve `(1,1,0)`-type vectors `2 pi / a (±1, ±1, 0)`,
//! of length `2 pi sqrt(2) / a = 1`). The box holds `periods[d]` cubic cells
//! per axis with `points_per_period` grid points each.

use anyhow::{bail, Result};
pub use appkit::config::{ByName, PerAxis};
use appkit::validate;
use serde::{Deserialize, Serialize};

/// The BCC cubic lattice constant for a first reciprocal shell of length 1.
pub const LATTICE: f64 = 2.0 * std::f64::consts::PI * std::f64::consts::SQRT_2;

/// The initial condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Initial {
    /// A spherical BCC crystal seed (one-mode approximation) in a liquid.
    Seed,
    /// The mean density plus uniform noise, keyed by the global index.
    Noise,
}

/// How the reshapes of the device FFTs travel between ranks (the `cuda`
/// backend). All give the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum GpuExchange {
    /// Device to device where every rank is on this machine (in-process
    /// ranks, or MPI processes between which the driver allows CUDA IPC),
    /// through host buffers otherwise.
    Auto,
    /// Packed on the device, copied through host buffers, `alltoallv`.
    Staged,
    /// NCCL sends and receives between device buffers: one GPU per rank
    /// (an error otherwise), on any number of machines.
    Nccl,
}

/// The `[output]` section, the same in every application (see
/// [`appkit::app`] for the meaning of each key): `pfc.csv` (diagnostics),
/// `pfc_NNNNNN.chk` (checkpoints) and `pfc_NNNNNN.pvti` with one `.vti` per
/// rank (snapshots; with `vtk_every > 0` a fresh run's initial state too).
pub use appkit::app::Output;
/// `Config::from_file` and `Config::from_toml`.
pub use appkit::config::TomlFile;

/// What pfc writes (the `[output]` keys it reads).
const WRITES: appkit::app::Writes = appkit::app::Writes::ALL;

/// Everything a run needs. Every key is optional in the TOML file; unknown
/// keys are errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Cubic BCC cells (lattice periods) per axis.
    pub periods: PerAxis<usize>,
    /// Grid points per lattice period.
    pub points_per_period: usize,
    /// The undercooling parameter `r` (negative: crystal can form).
    pub r: f64,
    /// Mean density `psi0` (of the liquid around the seed, or of the noise).
    pub mean_density: f64,
    /// Step size.
    pub dt: f64,
    /// Steps to run (after the checkpoint when restarting).
    pub steps: usize,
    /// Initial condition.
    pub initial: Initial,
    /// Seed of the noise generator.
    pub seed: u64,
    /// Half-width of the uniform noise.
    pub noise_amplitude: f64,
    /// Radius of the crystal seed in lattice periods.
    pub seed_radius: f64,
    /// Amplitude `A` of the seed, `psi = psi0 + A sum_j cos(q_j . x)` over
    /// the six `(1,1,0)`-type vectors; when absent, the minimiser of the
    /// one-mode free energy at `r` and `mean_density`.
    pub amplitude: Option<f64>,
    /// Diagnostics every this many steps (and at the end).
    pub diag_every: usize,
    /// Reshape protocol of the distributed FFTs, by `dfft`'s name
    /// (`alltoallv`, `alltoall`, `p2p`, `p2p-pipelined`, `auto`, ...). Every
    /// protocol gives the same bits.
    pub protocol: ByName<dfft::Protocol>,
    /// Where the field is computed: `cpu` or `cuda` (NVIDIA GPUs, any rank
    /// count; a build with the `cuda` feature).
    pub backend: ByName<gpu::Backend>,
    /// GPU ordinal of the `cuda` backend for every rank; when absent, the
    /// r-th rank of a machine takes device r mod the device count. Refused
    /// on the `cpu` backend, as is a `gpu_exchange` other than `auto`.
    pub device: Option<usize>,
    /// How the device FFTs' reshapes travel between ranks (`cuda`
    /// backend; refused on the `cpu` backend away from `auto`).
    pub gpu_exchange: GpuExchange,
    /// Output files.
    pub output: Output,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            periods: PerAxis::All(8),
            points_per_period: 8,
            r: -0.25,
            mean_density: -0.25,
            dt: 0.5,
            steps: 200,
            initial: Initial::Seed,
            seed: 1,
            noise_amplitude: 0.05,
            seed_radius: 2.0,
            amplitude: None,
            diag_every: 1,
            protocol: ByName::from(dfft::Options::default().protocol),
            backend: "cpu".parse().expect("cpu is a backend"),
            device: None,
            gpu_exchange: GpuExchange::Auto,
            output: Output::default(),
        }
    }
}

impl Config {
    /// Grid points per axis.
    pub fn shape(&self) -> [usize; 3] {
        self.periods.get().map(|p| p * self.points_per_period)
    }

    /// Box side per axis.
    pub fn length(&self) -> [f64; 3] {
        self.periods.get().map(|p| p as f64 * LATTICE)
    }

    /// Grid spacing (the same on every axis).
    pub fn spacing(&self) -> f64 {
        LATTICE / self.points_per_period as f64
    }

    /// The linear symbol `r + (1 - k^2)^2` at `k2 = |k|^2`.
    pub fn symbol(&self, k2: f64) -> f64 {
        self.r + (1.0 - k2) * (1.0 - k2)
    }

    /// Checks every value and says which one is wrong and what is allowed.
    pub fn validate(&self) -> Result<()> {
        validate::positive_per_axis("periods", self.periods.get())?;
        validate::at_least("points_per_period", self.points_per_period, 2)?;
        for (name, v) in [
            ("r", self.r),
            ("mean_density", self.mean_density),
            ("noise_amplitude", self.noise_amplitude),
            ("seed_radius", self.seed_radius),
        ] {
            validate::finite(name, v)?;
        }
        validate::positive_finite("dt", self.dt)?;
        // The implicit denominator 1 + dt k^2 (r + (1 - k^2)^2) must stay
        // positive on every resolved mode (it can vanish only for r < 0).
        let kmax2 = 3.0 * (std::f64::consts::PI / self.spacing()).powi(2);
        let worst = (0..=20_000)
            .map(|i| {
                let k2 = kmax2 * i as f64 / 20_000.0;
                k2 * self.symbol(k2)
            })
            .fold(0.0f64, f64::min);
        if 1.0 + self.dt * worst <= 0.05 {
            bail!(
                "dt = {} is too large for r = {}: the implicit denominator 1 + dt k^2 (r + (1 - k^2)^2) reaches {:.3}; use dt < {:.4}",
                self.dt,
                self.r,
                1.0 + self.dt * worst,
                0.95 / -worst
            );
        }
        validate::non_negative("seed_radius", self.seed_radius)?;
        validate::non_negative("noise_amplitude", self.noise_amplitude)?;
        if let Some(a) = self.amplitude {
            validate::finite("amplitude", a)?;
        }
        validate::at_least("diag_every", self.diag_every, 1)?;
        self.check_backend()?;
        self.check_unused()
    }

    /// An error naming each key of the other initial condition set away
    /// from its default (the noise's `seed` and `noise_amplitude`, the
    /// crystal seed's `seed_radius` and `amplitude`), which this run would
    /// not read.
    fn check_unused(&self) -> Result<()> {
        let d = Config::default();
        let mut keys = vec![];
        match self.initial {
            Initial::Seed => {
                if self.seed != d.seed {
                    keys.push(format!("seed = {}", self.seed));
                }
                if self.noise_amplitude != d.noise_amplitude {
                    keys.push(format!("noise_amplitude = {}", self.noise_amplitude));
                }
            }
            Initial::Noise => {
                if self.seed_radius != d.seed_radius {
                    keys.push(format!("seed_radius = {}", self.seed_radius));
                }
                if let Some(a) = self.amplitude {
                    keys.push(format!("amplitude = {a}"));
                }
            }
        }
        let (this, other) = match self.initial {
            Initial::Seed => ("seed", "noise"),
            Initial::Noise => ("noise", "seed"),
        };
        let mut unused: Vec<String> = keys
            .into_iter()
            .map(|k| {
                format!("{k} applies to initial = \"{other}\" (this run: initial = \"{this}\")")
            })
            .collect();
        unused.extend(self.output.unused("pfc", WRITES));
        Ok(validate::unused(unused)?)
    }

    /// `backend` must be one this build of pfc runs: `cpu`, or `cuda` with
    /// pfc's own `cuda` feature (the `gpu` crate may have CUDA through
    /// another package of the same build; pfc still has no device code
    /// then).
    fn check_backend(&self) -> Result<()> {
        self.backend
            .value()
            .on_device_for("pfc", cfg!(feature = "cuda"))?;
        Ok(())
    }

    /// The seed amplitude: `amplitude`, or the one-mode minimiser.
    pub fn seed_amplitude(&self) -> f64 {
        self.amplitude
            .unwrap_or_else(|| bcc_amplitude(self.r, self.mean_density))
    }

    /// A hash of what determines the dynamics (shape, box, r, dt), stored in
    /// checkpoints to warn about a restart with different physics.
    pub fn physics_hash(&self) -> u64 {
        let s = self.shape();
        let mut h = 0u64;
        for w in [
            s[0] as u64,
            s[1] as u64,
            s[2] as u64,
            self.points_per_period as u64,
            self.r.to_bits(),
            self.dt.to_bits(),
        ] {
            h = crate::mix(h ^ w);
        }
        h
    }
}

/// The six `(1,1,0)`-type wavevectors (one of each `±` pair) in units of
/// `2 pi / a`.
pub const BCC_SHELL: [[i32; 3]; 6] = [
    [1, 1, 0],
    [1, -1, 0],
    [1, 0, 1],
    [1, 0, -1],
    [0, 1, 1],
    [0, 1, -1],
];

/// The one-mode free energy density of `psi0 + A sum_j cos(q_j . x)` minus
/// that of the uniform liquid, averaged over a cubic cell. On the first
/// shell `(1 - q^2)^2 = 0`, so the linear part contributes `r <phi^2> / 2`.
/// The mean over a 8^3 sample grid is exact (the quartic has frequencies up
/// to 4 per axis).
pub fn one_mode_energy(r: f64, psi0: f64, amp: f64) -> f64 {
    const M: usize = 8;
    let mut sum = 0.0;
    for i in 0..M {
        for j in 0..M {
            for k in 0..M {
                let u = [i, j, k].map(|x| x as f64 / M as f64);
                let phi: f64 = BCC_SHELL
                    .iter()
                    .map(|q| {
                        let a = 2.0
                            * std::f64::consts::PI
                            * (q[0] as f64 * u[0] + q[1] as f64 * u[1] + q[2] as f64 * u[2]);
                        a.cos()
                    })
                    .sum::<f64>()
                    * amp;
                let psi = psi0 + phi;
                sum += 0.5 * r * phi * phi + 0.25 * (psi.powi(4) - psi0.powi(4));
            }
        }
    }
    sum / (M * M * M) as f64
}

/// The amplitude `A` minimising [`one_mode_energy`] (0 where the liquid is
/// stable): a scan of [-1, 1] and a golden-section refinement.
pub fn bcc_amplitude(r: f64, psi0: f64) -> f64 {
    let f = |a: f64| one_mode_energy(r, psi0, a);
    let (mut best, mut fb) = (0.0, 0.0);
    for i in -200..=200 {
        let a = i as f64 / 200.0;
        let v = f(a);
        if v < fb {
            best = a;
            fb = v;
        }
    }
    if best == 0.0 {
        return 0.0;
    }
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let (mut lo, mut hi) = (best - 0.005, best + 0.005);
    for _ in 0..60 {
        let (c, d) = (hi - g * (hi - lo), lo + g * (hi - lo));
        if f(c) < f(d) {
            hi = d;
        } else {
            lo = c;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_the_other_initial_condition_are_refused() {
        let e = Config {
            initial: Initial::Noise,
            seed_radius: 1.0,
            amplitude: Some(0.2),
            ..Config::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("these keys")
                && e.contains(
                    "seed_radius = 1 applies to initial = \"seed\" (this run: initial = \"noise\")"
                )
                && e.contains("amplitude = 0.2 applies to initial = \"seed\""),
            "{e}"
        );
        let e = Config {
            initial: Initial::Seed,
            seed: 9,
            ..Config::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("seed = 9 applies to initial = \"noise\""), "{e}");
        for initial in [Initial::Seed, Initial::Noise] {
            Config {
                initial,
                ..Config::default()
            }
            .validate()
            .unwrap();
        }
    }

    #[test]
    fn unknown_keys_are_named_with_their_line() {
        let e = Config::from_toml("r = -0.3\ndtt = 0.1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("dtt") && e.contains("line 2"), "{e}");
        let e = Config::from_toml("[output]\nvtk_evry = 3\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("vtk_evry"), "{e}");
        let c = Config::from_toml("periods = [2, 3, 4]\npoints_per_period = 6\n").unwrap();
        assert_eq!(c.shape(), [12, 18, 24]);
    }

    #[test]
    fn invalid_values_are_reported() {
        let bad = |f: &dyn Fn(&mut Config), want: &str| {
            let mut c = Config::default();
            f(&mut c);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        };
        bad(&|c| c.periods = PerAxis::Each([4, 0, 4]), "axis 1 is 0");
        bad(&|c| c.points_per_period = 0, "points_per_period");
        bad(&|c| c.dt = 0.0, "dt must be positive");
        bad(&|c| c.dt = -1.0, "dt must be positive");
        bad(&|c| c.dt = 100.0, "too large");
        bad(&|c| c.diag_every = 0, "diag_every");
        bad(&|c| c.r = f64::NAN, "r must be finite");
        Config::default().validate().unwrap();
    }

    #[test]
    fn backends_are_checked() {
        let c = Config::from_toml("backend = \"cuda\"\ndevice = 1\n").unwrap();
        assert_eq!(*c.backend.value(), gpu::Backend::Cuda);
        assert_eq!(c.device, Some(1));
        let checked = c.validate().map_err(|e| e.to_string());
        if cfg!(feature = "cuda") {
            checked.unwrap();
        } else {
            let e = checked.unwrap_err();
            assert!(
                e.contains("backend cuda") && e.contains("--features cuda"),
                "{e}"
            );
        }
        // The reshapes' transports by name; `direct` is the halo's (heat3d)
        // and no reshape transport of pfc.
        for (name, want) in [
            ("auto", GpuExchange::Auto),
            ("staged", GpuExchange::Staged),
            ("nccl", GpuExchange::Nccl),
        ] {
            let text = format!("gpu_exchange = \"{name}\"\n");
            assert_eq!(Config::from_toml(&text).unwrap().gpu_exchange, want);
        }
        for bad in ["mpi", "direct"] {
            let text = format!("gpu_exchange = \"{bad}\"\n");
            let e = Config::from_toml(&text).unwrap_err().to_string();
            assert!(
                e.contains(bad) && e.contains("auto") && e.contains("staged") && e.contains("nccl"),
                "{e}"
            );
        }
        let e = Config::from_toml("backend = \"hip\"\n")
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        // The backends this build of pfc has.
        let valid = if cfg!(feature = "cuda") {
            "valid: cpu, cuda"
        } else {
            "valid: cpu)"
        };
        assert!(
            e.contains("backend hip is not available to pfc") && e.contains(valid),
            "{e}"
        );
        let e = Config::from_toml("backend = \"opencl\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("opencl") && e.contains("line 1"), "{e}");
    }

    #[test]
    fn protocols_are_parsed_by_dfft() {
        let c = Config::from_toml("protocol = \"auto\"\n").unwrap();
        assert_eq!(*c.protocol.value(), dfft::Protocol::Auto);
        let e = Config::from_toml("protocol = \"smoke-signals\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("smoke-signals") && e.contains("alltoallv") && e.contains("line 1"),
            "{e}"
        );
    }

    #[test]
    fn one_mode_amplitude_is_a_minimum() {
        let a = bcc_amplitude(-0.25, -0.25);
        assert!(a.abs() > 0.01, "{a}");
        let f0 = one_mode_energy(-0.25, -0.25, a);
        assert!(f0 < 0.0);
        assert!(f0 <= one_mode_energy(-0.25, -0.25, a * 1.01));
        assert!(f0 <= one_mode_energy(-0.25, -0.25, a * 0.99));
        // Far from the solid (small |r|, large |psi0|) the liquid wins.
        assert_eq!(bcc_amplitude(-0.01, -0.6), 0.0);
    }
}
