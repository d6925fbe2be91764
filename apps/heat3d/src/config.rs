//! The run configuration: TOML file, command-line overrides, validation.

use anyhow::{bail, Result};
pub use appkit::config::{ByName, PerAxis};
use appkit::validate;
use serde::{Deserialize, Serialize};

/// The keys of the `[stencil]` section under their old top-level names,
/// which a configuration file may still use (with a deprecation note).
pub const RENAMED: &[(&str, &str)] = &[
    ("cpu_stencil", "stencil.cpu"),
    ("gpu_stencil", "stencil.gpu"),
    ("gpu_chunk", "stencil.gpu_chunk"),
    ("gpu_block", "stencil.gpu_block"),
    ("gpu_periodic", "stencil.gpu_periodic"),
    ("steps_per_pass", "stencil.steps_per_pass"),
    ("tile_rows", "stencil.tile_rows"),
];

/// The CPU kernel of the finite-difference sweeps (all give the same bits).
pub use stencil::CpuKernel as CpuStencil;
/// How the GPU stencil reads the neighbours along the two fast axes (all
/// give the same bits).
pub use stencil::GpuKernel as GpuStencil;
/// How one self-periodic rank's GPU stencil reads across its faces in
/// blocking mode (all give the same bits).
pub use stencil::PeriodicReads as GpuPeriodic;
pub use stencil::StencilOptions;

/// Blocking (exchange, then stencil) or overlapped (post, interior, finish, shell).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Exchange, stencil, update.
    Blocking,
    /// Post, interior stencil, finish, shell stencil, update.
    Overlap,
}

/// The time integrator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Integrator {
    /// Forward Euler, fused into the stencil sweep (one pass per step).
    Euler,
    /// Classical fourth-order Runge-Kutta (four exchanges per step).
    Rk4,
}

/// The spatial operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Operator {
    /// Central finite differences of the configured order, halo exchange.
    Fd,
    /// The spectral Laplacian through distributed FFTs (r2c in, c2r out).
    Spectral,
}

/// The time step of the spectral operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SpectralStep {
    /// Integrating factor: each mode times exp(-D k^2 dt), exact in time.
    Exact,
    /// Implicit Euler: each mode divided by 1 + D k^2 dt.
    Implicit,
}

/// How device-resident halos travel between ranks. All give the same
/// bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum GpuExchange {
    /// `direct` when every rank is on this machine (in-process ranks, or
    /// MPI processes between which the driver allows CUDA IPC), `staged`
    /// otherwise.
    Auto,
    /// Device to device: each rank unpacks from the buffer its neighbour
    /// packed, without the bytes leaving the GPUs (ranks of one machine
    /// only; an error otherwise).
    Direct,
    /// Packed on the device, copied through host buffers and sent by the
    /// communicator.
    Staged,
    /// NCCL sends and receives between device buffers: one GPU per rank
    /// (an error otherwise), on any number of machines; a rank's own
    /// periodic faces are copied on its GPU.
    Nccl,
}

/// The initial condition, each with an analytic solution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Initial {
    /// A periodic Gaussian (sum of images) centred in the box.
    Gaussian,
    /// A product of sines with the wavenumbers in `modes`.
    Sines,
}

/// The `[output]` section, the same in every application (see
/// [`appkit::app`] for the meaning of each key): `diagnostics.csv` (step,
/// time, mean, errors) and the final field as VTK image data (one `.vti`
/// piece per rank and the `.pvti` header); heat3d writes no snapshots during
/// a run and no checkpoints, and refuses those keys.
pub use appkit::app::Output;
/// `Config::from_toml` (and the trait's `from_file`, which does not read
/// the old key names; [`Config::from_file`] does).
pub use appkit::config::TomlFile;

/// What heat3d writes (the `[output]` keys it reads).
const WRITES: appkit::app::Writes = appkit::app::Writes {
    vtk_series: false,
    checkpoints: false,
    diagnostics: true,
};

/// Everything a run needs. Every key is optional in the TOML file; unknown
/// keys are errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Cells per axis.
    pub n: PerAxis<usize>,
    /// Box side per axis.
    pub length: PerAxis<f64>,
    /// Diffusivity D.
    pub diffusivity: f64,
    /// Spatial operator.
    pub operator: Operator,
    /// Time step of the spectral operator.
    pub spectral_step: SpectralStep,
    /// Reshape protocol of the spectral operator's distributed FFTs, by
    /// `dfft`'s name (`alltoallv`, `alltoall`, `p2p`, `p2p-pipelined`,
    /// `auto`, ...); the finite-difference operator does not reshape and
    /// refuses it away from its default.
    pub protocol: ByName<dfft::Protocol>,
    /// Stencil order (2, 4, ..., 20) of the finite-difference operator.
    pub order: usize,
    /// Number of steps.
    pub steps: usize,
    /// Step size; when absent, `cfl` times the stability limit.
    pub dt: Option<f64>,
    /// Fraction of the stability limit used when `dt` is absent, in (0, 1].
    pub cfl: f64,
    /// Time integrator.
    pub integrator: Integrator,
    /// Blocking or overlapped exchange.
    pub mode: Mode,
    /// Process grid; chosen for the smallest halo surface when absent.
    pub grid: Option<[usize; 3]>,
    /// Initial condition.
    pub initial: Initial,
    /// Wavenumbers of the `sines` initial condition, per axis: 1 <= m <
    /// n/2 for an axis of n cells (higher ones are zero or alias on the
    /// grid).
    pub modes: [usize; 3],
    /// Width of the Gaussian as a fraction of the box side.
    pub sigma: f64,
    /// Amplitude of the initial condition (and of the analytic solution).
    pub amplitude: f64,
    /// Steps excluded from the timing statistics. At least the last step
    /// is timed: with `warmup >= steps` only the last one is (the
    /// report's `timed_steps` says how many were).
    pub warmup: usize,
    /// Diagnostics every this many steps (and at the end).
    pub diag_every: usize,
    /// Where the field is computed: `cpu`, or `cuda` (a build with the
    /// `cuda` feature). The options that apply to one backend only are
    /// refused, by name, on a run that would not use them: `device` and
    /// the `gpu_*` options on `cpu`, `cpu_stencil` and `tile_rows` where no
    /// host finite-difference sweep runs (`cuda`, or the spectral
    /// operator), `tile_rows` also where the host takes no multi-step pass.
    pub backend: ByName<gpu::Backend>,
    /// GPU ordinal for every rank; when absent, the r-th rank of a machine
    /// takes device r mod (number of devices), so ranks spread over their
    /// machine's GPUs and several share one when there are more ranks than
    /// GPUs.
    pub device: Option<usize>,
    /// How device halos travel between ranks.
    pub gpu_exchange: GpuExchange,
    /// The `[stencil]` section: how the finite-difference sweeps run on
    /// the host and on a GPU (`stencil::StencilOptions`; none changes a
    /// bit). `cpu` (the CPU kernel) and `tile_rows` apply where the host
    /// sweeps (`backend = "cpu"`, `operator = "fd"`); `gpu`, `gpu_chunk`,
    /// `gpu_block` and `gpu_periodic` where the GPU sweeps (`backend =
    /// "cuda"`, `operator = "fd"`); each is refused, by name, on a run that
    /// would not use it. `steps_per_pass` (0: the default) is 1 to 4 on the
    /// host and 1 or 2 on a GPU; several need one rank that is its own
    /// periodic neighbour, blocking mode and the Euler finite-difference
    /// step, on a GPU also order 2 and `gpu_periodic` not `copy`. The
    /// default takes 4, else 2, on the host where the pass computes at most
    /// 1.1 times the owned cells (`stencil::policy::auto_steps`), and 2 on a
    /// GPU from 2^24 owned cells (`stencil::device::auto_steps`), where each
    /// measured faster. The keys' old top-level names (`cpu_stencil`,
    /// `gpu_stencil`, `gpu_chunk`, `gpu_block`, `gpu_periodic`,
    /// `steps_per_pass`, `tile_rows`) still work, with a deprecation note
    /// ([`RENAMED`]).
    pub stencil: StencilOptions,
    /// Output files.
    pub output: Output,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            n: PerAxis::All(128),
            length: PerAxis::All(1.0),
            diffusivity: 1.0,
            operator: Operator::Fd,
            spectral_step: SpectralStep::Exact,
            protocol: ByName::from(dfft::Options::default().protocol),
            order: 2,
            steps: 300,
            dt: None,
            cfl: 0.5,
            integrator: Integrator::Euler,
            mode: Mode::Overlap,
            grid: None,
            initial: Initial::Gaussian,
            modes: [1, 1, 1],
            sigma: 0.08,
            amplitude: 1.0,
            warmup: 10,
            diag_every: 20,
            backend: "cpu".parse().expect("cpu is a backend"),
            device: None,
            gpu_exchange: GpuExchange::Auto,
            stencil: StencilOptions::default(),
            output: Output::default(),
        }
    }
}

impl Config {
    /// Reads a TOML file (unknown keys are errors); the keys' old names
    /// ([`RENAMED`]) are read as the new ones, and the deprecation notes
    /// returned for the caller to print.
    pub fn from_file_with_notes(path: &std::path::Path) -> Result<(Self, Vec<String>)> {
        Ok(appkit::config::read_toml_renamed(path, RENAMED)?)
    }

    /// Reads a TOML file (unknown keys are errors); the keys' old names
    /// ([`RENAMED`]) are read as the new ones.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        Ok(Self::from_file_with_notes(path)?.0)
    }

    /// Cells per axis.
    pub fn shape(&self) -> [usize; 3] {
        self.n.get()
    }

    /// Grid spacing per axis.
    pub fn spacing(&self) -> [f64; 3] {
        let (l, n) = (self.length.get(), self.shape());
        [0, 1, 2].map(|d| l[d] / n[d] as f64)
    }

    /// The largest stable step size of the chosen order and integrator.
    /// The spectral steps are unconditionally stable; for them this is the
    /// limit of FD-2 with Euler, the scale the default step is taken from.
    pub fn dt_limit(&self) -> Result<f64> {
        if self.operator == Operator::Spectral {
            let h = self.spacing();
            return Ok(2.0 / (h.iter().map(|x| 4.0 / (x * x)).sum::<f64>() * self.diffusivity));
        }
        let sym = stencil::max_symbol(self.order).map_err(anyhow::Error::msg)?;
        let h = self.spacing();
        let lam: f64 = h.iter().map(|x| sym / (x * x)).sum::<f64>() * self.diffusivity;
        // Real-axis stability intervals: Euler [-2, 0], RK4 [-2.785293563, 0].
        let reach = match self.integrator {
            Integrator::Euler => 2.0,
            Integrator::Rk4 => 2.785_293_563_405_282,
        };
        Ok(reach / lam)
    }

    /// The step size: `dt` if given, else `cfl` times the limit.
    pub fn dt(&self) -> Result<f64> {
        let limit = self.dt_limit()?;
        Ok(self.dt.unwrap_or(self.cfl * limit))
    }

    /// Checks every value and says which one is wrong and what is allowed.
    pub fn validate(&self, ranks: usize) -> Result<()> {
        let n = self.shape();
        validate::positive_per_axis("n", n)?;
        validate::positive_finite_per_axis("length", self.length.get())?;
        validate::positive_finite("diffusivity", self.diffusivity)?;
        stencil::coefficients(self.order).map_err(anyhow::Error::msg)?;
        validate::at_least("steps", self.steps, 1)?;
        validate::in_range_open_closed("cfl", self.cfl, 0.0, 1.0)?;
        let limit = self.dt_limit()?;
        if let Some(dt) = self.dt {
            validate::positive_finite("dt", dt)?;
            if dt > limit && self.operator == Operator::Fd {
                bail!(
                    "dt = {dt} exceeds the stability limit {limit:.6e} of order {} with {:?} at spacing {:?} and D = {}; use dt <= {limit:.6e}",
                    self.order,
                    self.integrator,
                    self.spacing(),
                    self.diffusivity
                );
            }
        }
        validate::ranks_for(ranks, n.iter().product(), self.grid)?;
        if self.initial == Initial::Gaussian && !(self.sigma > 0.0 && self.sigma <= 0.2) {
            bail!("sigma must be in (0, 0.2] (a fraction of the box side, small enough for the image sum), got {}", self.sigma);
        }
        if self.initial == Initial::Sines {
            // Axis d holds sin(2 pi m i / n) at i = 0..n: zero everywhere
            // where 2m is a multiple of n, and the mode n - m (sign flipped)
            // for m above n/2, so only 1 <= m < n/2 is the mode it names.
            for (d, (&m, &n)) in self.modes.iter().zip(&n).enumerate() {
                if m == 0 || 2 * m >= n {
                    if n < 3 {
                        bail!(
                            "modes[{d}] = {m}: axis {d} of {n} cells holds no sine mode (the sines initial condition needs at least 3 cells an axis)"
                        );
                    }
                    bail!(
                        "modes[{d}] = {m} is not a wavenumber axis {d} of {n} cells resolves (valid: 1 to {}, below n/2)",
                        (n - 1) / 2
                    );
                }
            }
        }
        validate::finite("amplitude", self.amplitude)?;
        validate::at_least("diag_every", self.diag_every, 1)?;
        if let Err(e) = self.stencil.validate() {
            bail!("stencil.{e}");
        }
        if self.stencil.steps_per_pass > stencil::policy::MAX_HOST_STEPS_PER_PASS {
            bail!(
                "stencil.steps_per_pass = {} is not supported (valid: 1 to {}, or 0 for the default; a GPU passes at most 2)",
                self.stencil.steps_per_pass,
                stencil::policy::MAX_HOST_STEPS_PER_PASS
            );
        }
        self.check_unused()
    }

    /// An error naming each key set away from its default that the run's
    /// operator or initial condition would not read, and what it applies
    /// to. (The keys of one backend are checked when the run starts, where
    /// the backend is resolved.)
    fn check_unused(&self) -> Result<()> {
        let d = Config::default();
        let name = |v: &dyn std::fmt::Debug| format!("{v:?}").to_lowercase();
        let mut unused = vec![];
        match self.operator {
            Operator::Spectral => {
                let fd = "the finite-difference operator (this run: operator spectral)";
                if self.order != d.order {
                    unused.push(format!("order = {} applies to {fd}", self.order));
                }
                if self.integrator != d.integrator {
                    unused.push(format!(
                        "integrator = {} applies to the finite-difference operator (this run: operator spectral, whose step is spectral_step)",
                        name(&self.integrator)
                    ));
                }
                if self.mode != d.mode {
                    unused.push(format!(
                        "mode = {} applies to the halo exchange of {fd}",
                        name(&self.mode)
                    ));
                }
            }
            Operator::Fd => {
                let sp = "the spectral operator (this run: operator fd)";
                if self.spectral_step != d.spectral_step {
                    unused.push(format!(
                        "spectral_step = {} applies to {sp}",
                        name(&self.spectral_step)
                    ));
                }
                if self.protocol.value() != d.protocol.value() {
                    unused.push(format!(
                        "protocol = {} applies to the reshapes of {sp}",
                        self.protocol
                    ));
                }
            }
        }
        match self.initial {
            Initial::Gaussian if self.modes != d.modes => unused.push(format!(
                "modes = {:?} applies to initial = \"sines\" (this run: initial = \"gaussian\")",
                self.modes
            )),
            Initial::Sines if self.sigma != d.sigma => unused.push(format!(
                "sigma = {} applies to initial = \"gaussian\" (this run: initial = \"sines\")",
                self.sigma
            )),
            _ => {}
        }
        unused.extend(self.output.unused("heat3d", WRITES));
        Ok(validate::unused(unused)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_the_operator_or_start_would_not_read_are_refused() {
        let e = |c: Config| c.validate(1).unwrap_err().to_string();
        let spectral = Config {
            operator: Operator::Spectral,
            ..Config::default()
        };
        let msg = e(Config {
            order: 8,
            integrator: Integrator::Rk4,
            mode: Mode::Blocking,
            ..spectral.clone()
        });
        for part in [
            "these keys would have no effect on this run",
            "order = 8 applies to the finite-difference operator (this run: operator spectral)",
            "integrator = rk4 applies to",
            "mode = blocking applies to the halo exchange",
        ] {
            assert!(msg.contains(part), "{part}: {msg}");
        }
        let msg = e(Config {
            spectral_step: SpectralStep::Implicit,
            protocol: "p2p".parse().unwrap(),
            ..Config::default()
        });
        assert!(
            msg.contains("spectral_step = implicit applies to the spectral operator")
                && msg.contains("protocol = p2p applies to the reshapes"),
            "{msg}"
        );
        let msg = e(Config {
            modes: [2, 1, 1],
            ..Config::default()
        });
        assert!(
            msg.contains("modes = [2, 1, 1] applies to initial = \"sines\""),
            "{msg}"
        );
        let msg = e(Config {
            initial: Initial::Sines,
            sigma: 0.1,
            ..Config::default()
        });
        assert!(
            msg.contains("sigma = 0.1 applies to initial = \"gaussian\""),
            "{msg}"
        );
        // Read by these runs: accepted.
        Config {
            spectral_step: SpectralStep::Implicit,
            protocol: "p2p".parse().unwrap(),
            ..spectral
        }
        .validate(1)
        .unwrap();
        Config {
            order: 8,
            integrator: Integrator::Rk4,
            mode: Mode::Blocking,
            initial: Initial::Sines,
            modes: [2, 1, 1],
            ..Config::default()
        }
        .validate(1)
        .unwrap();
    }

    #[test]
    fn the_example_file_lists_the_defaults() {
        let p = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/heat3d.toml"));
        let (c, notes) = Config::from_file_with_notes(p).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(notes, Vec::<String>::new());
        let e = Config::from_toml("[stencil]\ngpu_block = 48\n")
            .unwrap()
            .validate(1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("stencil.gpu_block = 48") && e.contains("32, 64, 128, 256"),
            "{e}"
        );
        let e = Config::from_toml("[stencil]\nsteps_per_pass = 5\n")
            .unwrap()
            .validate(1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("= 5") && e.contains("1 to 4, or 0"), "{e}");
        let e = Config::from_toml("backend = \"opencl\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("opencl") && e.contains("cpu, cuda, hip"), "{e}");
        let e = Config::from_toml("[stencil]\ncpu = \"avx9\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("avx9") && e.contains("avx512"), "{e}");
        assert_eq!(
            Config::from_toml("[stencil]\ncpu = \"scalar\"\n")
                .unwrap()
                .stencil
                .cpu,
            CpuStencil::Portable
        );
    }

    #[test]
    fn the_stencil_keys_old_names_still_work_with_a_note() {
        let dir = std::env::temp_dir().join(format!("heat3d-renamed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("old.toml");
        std::fs::write(
            &p,
            "order = 4\ncpu_stencil = \"scalar\"\ngpu_stencil = \"shuffle\"\ngpu_chunk = 3\n\
             gpu_block = 64\ngpu_periodic = \"copy\"\nsteps_per_pass = 2\ntile_rows = 5\n",
        )
        .unwrap();
        let (c, notes) = Config::from_file_with_notes(&p).unwrap();
        assert_eq!(
            c.stencil,
            StencilOptions {
                cpu: CpuStencil::Portable,
                steps_per_pass: 2,
                tile_rows: 5,
                gpu: GpuStencil::Shuffle,
                gpu_chunk: 3,
                gpu_block: 64,
                gpu_periodic: GpuPeriodic::Copy,
            }
        );
        assert_eq!(c.order, 4);
        assert_eq!(notes.len(), RENAMED.len());
        assert!(notes[0].contains("`cpu_stencil` is deprecated; it is now `stencil.cpu`"));
        // Both names: an error naming both.
        std::fs::write(&p, "gpu_chunk = 3\n[stencil]\ngpu_chunk = 4\n").unwrap();
        let e = format!("{:#}", Config::from_file(&p).unwrap_err());
        assert!(
            e.contains("`gpu_chunk`") && e.contains("`stencil.gpu_chunk`"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn misspelled_keys_are_named_with_their_place() {
        let e = Config::from_toml("n = 32\nordr = 4\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ordr") && e.contains("line 2"), "{e}");
        let e = Config::from_toml("[output]\nvtkk = false\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("vtkk"), "{e}");
        let c = Config::from_toml("n = [8, 16, 32]\norder = 8\nmode = \"blocking\"\n").unwrap();
        assert_eq!(c.shape(), [8, 16, 32]);
        assert_eq!(c.mode, Mode::Blocking);
        let c = Config::from_toml("gpu_exchange = \"nccl\"\n").unwrap();
        assert_eq!(c.gpu_exchange, GpuExchange::Nccl);
        let e = Config::from_toml("gpu_exchange = \"mpi\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            ["direct", "staged", "nccl", "line 1"]
                .iter()
                .all(|w| e.contains(w)),
            "{e}"
        );
    }

    #[test]
    fn protocols_are_parsed_by_dfft() {
        let c = Config::from_toml("protocol = \"p2p\"\n").unwrap();
        assert_eq!(*c.protocol.value(), dfft::Protocol::P2p);
        let e = Config::from_toml("protocol = \"carrier-pigeon\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("carrier-pigeon") && e.contains("alltoallv") && e.contains("line 1"),
            "{e}"
        );
    }

    #[test]
    fn files_are_named_in_errors() {
        let dir = std::env::temp_dir().join(format!("heat3d-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("c.toml");
        std::fs::write(&p, "n = 16\nsteps = 0.5\n").unwrap();
        let e = format!("{:#}", Config::from_file(&p).unwrap_err());
        assert!(
            e.contains("c.toml") && e.contains("steps") && e.contains("line 2"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            Config::from_file(&dir.join("missing.toml")).unwrap_err()
        );
        assert!(e.contains("cannot read configuration file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn invalid_values_are_reported() {
        let bad = |f: &dyn Fn(&mut Config), want: &str| {
            let mut c = Config::default();
            f(&mut c);
            let e = c.validate(4).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        };
        bad(&|c| c.order = 6 + 1, "valid orders");
        bad(&|c| c.n = PerAxis::Each([8, 0, 8]), "axis 1 is 0");
        bad(&|c| c.dt = Some(1.0), "exceeds the stability limit");
        bad(&|c| c.n = PerAxis::All(1), "at most 1 ranks");
        bad(&|c| c.cfl = 1.5, "cfl must be in (0, 1]");
        bad(&|c| c.grid = Some([1, 1, 3]), "holds 3 ranks");
        let sines = |c: &mut Config| c.initial = Initial::Sines;
        bad(
            &|c| {
                sines(c);
                c.modes = [1, 0, 1]
            },
            "modes[1] = 0 is not a wavenumber axis 1 of 128 cells resolves (valid: 1 to 63",
        );
        // sin(pi i) = 0 at every point.
        bad(
            &|c| {
                sines(c);
                c.modes = [64, 1, 1]
            },
            "modes[0] = 64 is not a wavenumber axis 0 of 128 cells resolves (valid: 1 to 63",
        );
        // An odd axis: 3 is the highest mode of 7 cells, 4 aliases to 3.
        bad(
            &|c| {
                sines(c);
                c.n = PerAxis::Each([8, 8, 7]);
                c.modes = [1, 1, 4]
            },
            "modes[2] = 4 is not a wavenumber axis 2 of 7 cells resolves (valid: 1 to 3",
        );
        bad(
            &|c| {
                sines(c);
                c.n = PerAxis::Each([8, 2, 8]);
                c.modes = [1, 1, 1]
            },
            "axis 1 of 2 cells holds no sine mode",
        );
        let ok = |n: [usize; 3], modes: [usize; 3]| Config {
            n: PerAxis::Each(n),
            initial: Initial::Sines,
            modes,
            ..Config::default()
        };
        ok([8, 8, 7], [3, 1, 3]).validate(1).unwrap();
        // The Gaussian does not read the modes: refused as unused, not as
        // out of range.
        let e = Config {
            initial: Initial::Gaussian,
            ..ok([8, 8, 8], [0, 9, 4])
        }
        .validate(1)
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("modes = [0, 9, 4] applies to initial = \"sines\""),
            "{e}"
        );
        let c = Config::default();
        let limit = c.dt_limit().unwrap();
        // FD-2, Euler: dt <= h^2 / (6 D) in 3D.
        assert!((limit - (1.0f64 / 128.0).powi(2) / 6.0).abs() < 1e-15);
    }
}
