//! The run configuration: TOML file, command-line overrides, validation.
//!
//! Units are MagIC's: the shell gap `d = ro - ri = 1`, the viscous time
//! `d^2 / nu`, the temperature difference between the walls, and the field
//! in `sqrt(rho mu eta Omega)`. The Rayleigh number is MagIC's
//! `Ra = alpha g0 dT d^3 / (nu kappa)`; the benchmark paper's `Ra = 100` at
//! `E = 1e-3` is `Ra = 1e5` here.

use anyhow::{bail, Result};
pub use appkit::config::ByName;
use appkit::validate;
use comm::Protocol;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The initial state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Initial {
    /// The benchmark's: the conduction profile plus the `l = m = 4`
    /// perturbation, fluid at rest, and (with a field) case 1's field.
    Benchmark,
    /// The conduction profile alone, fluid at rest, no field.
    Conduction,
}

/// The `[output]` section, the same in every application (see
/// [`appkit::app`] for the meaning of each key): `dynamo.csv` and
/// `energies.png` (diagnostics), `dynamo_NNNNNNNN.chk` (checkpoints), and the
/// VTK snapshots of the 3D fields and the equatorial slice.
pub use appkit::app::Output;

/// Keys renamed since earlier versions, old name first: a configuration
/// file that uses the old name still works, with a warning (the protocol
/// options are named `protocol` in every crate and app, with a prefix where
/// there are two).
pub const RENAMED: &[(&str, &str)] = &[
    ("theta_algorithm", "theta_protocol"),
    ("l_algorithm", "l_protocol"),
];

/// What dynamo writes: every kind of output.
const WRITES: appkit::app::Writes = appkit::app::Writes::ALL;

/// Everything a run needs. Every key is optional in the TOML file; unknown
/// keys are errors. The defaults are the benchmark's case 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Ekman number.
    pub ekman: f64,
    /// Rayleigh number (MagIC's definition, see the module documentation).
    pub rayleigh: f64,
    /// Prandtl number.
    pub prandtl: f64,
    /// Magnetic Prandtl number; absent: convection without a field.
    pub magnetic_prandtl: Option<f64>,
    /// `ri / ro`, in `(0, 1)`.
    pub radius_ratio: f64,
    /// Radial Chebyshev-Gauss-Lobatto points.
    pub nr: usize,
    /// Gauss latitudes.
    pub ntheta: usize,
    /// Longitudes (default `2 ntheta`).
    pub nphi: Option<usize>,
    /// Truncation degree (default `ceil(2 ntheta / 3)`, the 3/2 rule, at
    /// most `ntheta - 1`).
    pub lmax: Option<usize>,
    /// Azimuthal symmetry: only orders that are multiples of `minc` are
    /// evolved (the benchmark's pattern has `m = 4`: 1, 2 or 4).
    pub minc: usize,
    /// IMEX scheme by name (`cnab2`, `sbdf1`, `sbdf2`, `sbdf3`, `ars222`,
    /// `ars343`, `bpr353`).
    pub scheme: ByName<imex::Scheme>,
    /// Step size: the first one of an adaptive run (a restart continues
    /// from the checkpoint's), every one of a fixed-step run (a restart
    /// too).
    pub dt: f64,
    /// Upper bound of the adaptive step size (refused with `adaptive =
    /// false`, which takes `dt` every step).
    pub dtmax: f64,
    /// Adapt the step to the CFL limit (otherwise a `dt` above the limit stops the run).
    pub adaptive: bool,
    /// Courant factor.
    pub courant: f64,
    /// Alfven factor of the CFL limit (runs with a magnetic field only).
    pub alfven: f64,
    /// Steps to run (after the checkpoint when restarting).
    pub steps: usize,
    /// Stop at this time instead, when given (whichever comes first).
    pub end_time: Option<f64>,
    /// Initial state.
    pub initial: Initial,
    /// Ranks along the latitudes (1: the 1d distribution; the radial
    /// ranks are the rest).
    pub pi_theta: usize,
    /// Scalar components per transposition call.
    pub queue: usize,
    /// Protocol of the theta transposition (`a2av`, `a2aw`, `a2ap`, `p2p`,
    /// `pipelined`, `auto`); only `auto` with `pi_theta = 1`, which has no
    /// theta transposition.
    pub theta_protocol: ByName<Protocol>,
    /// Protocol of the l transposition.
    pub l_protocol: ByName<Protocol>,
    /// Diagnostics (energies, mid-depth values, drift) every this many steps.
    pub diag_every: usize,
    /// Output files.
    pub output: Output,
}

fn name<T: std::str::FromStr>(s: &str) -> ByName<T>
where
    T::Err: std::fmt::Display,
{
    s.parse()
        .unwrap_or_else(|e| panic!("built-in name {s}: {e}"))
}

impl Default for Config {
    fn default() -> Self {
        Config {
            ekman: 1e-3,
            rayleigh: 1e5,
            prandtl: 1.0,
            magnetic_prandtl: None,
            radius_ratio: 0.35,
            nr: 33,
            ntheta: 96,
            nphi: None,
            lmax: None,
            minc: 1,
            scheme: name("cnab2"),
            dt: 1e-4,
            dtmax: 1e-4,
            adaptive: true,
            courant: 2.5,
            alfven: 1.0,
            steps: 1000,
            end_time: None,
            initial: Initial::Benchmark,
            pi_theta: 1,
            queue: 1,
            theta_protocol: name("auto"),
            l_protocol: name("auto"),
            diag_every: 100,
            output: Output::default(),
        }
    }
}

impl Config {
    /// Reads a TOML file (unknown keys are errors).
    /// The keys' old names ([`RENAMED`]) are read as the new ones.
    pub fn from_file(path: &Path) -> Result<Self> {
        Ok(appkit::config::read_toml_renamed(path, RENAMED)?.0)
    }

    /// Parses TOML text.
    pub fn from_toml(text: &str) -> Result<Self> {
        Ok(appkit::config::parse_toml(text)?)
    }

    /// The number of longitudes.
    pub fn nphi(&self) -> usize {
        self.nphi.unwrap_or(2 * self.ntheta)
    }

    /// The truncation degree.
    pub fn lmax(&self) -> usize {
        self.lmax.unwrap_or_else(|| self.dealiased_lmax())
    }

    /// The largest dealiased degree that the Gauss grid allows:
    /// `ceil(2 ntheta / 3)` (the 3/2 rule), at most `ntheta - 1`.
    fn dealiased_lmax(&self) -> usize {
        (2 * self.ntheta)
            .div_ceil(3)
            .min(self.ntheta.saturating_sub(1))
    }

    /// Checks every value that can be checked without knowing the rank count.
    pub fn validate(&self) -> Result<()> {
        validate::positive_finite("ekman", self.ekman)?;
        validate::non_negative("rayleigh", self.rayleigh)?;
        validate::finite("rayleigh", self.rayleigh)?;
        validate::positive_finite("prandtl", self.prandtl)?;
        if let Some(pm) = self.magnetic_prandtl {
            validate::positive_finite("magnetic_prandtl", pm)?;
        }
        if !(self.radius_ratio > 0.0 && self.radius_ratio < 1.0) {
            bail!(
                "radius_ratio = {} is out of range: 0 < ri/ro < 1",
                self.radius_ratio
            );
        }
        validate::at_least("nr", self.nr, 5)?;
        validate::at_least("ntheta", self.ntheta, 2)?;
        let (lmax, nphi) = (self.lmax(), self.nphi());
        if lmax >= self.ntheta {
            bail!(
                "lmax = {lmax} does not fit ntheta = {}: a Gauss grid of ntheta latitudes allows lmax <= {} (and dealiasing wants lmax <= {})",
                self.ntheta,
                self.ntheta - 1,
                self.dealiased_lmax()
            );
        }
        if lmax < 1 {
            bail!("lmax = {lmax} is out of range: at least 1");
        }
        if nphi % 2 != 0 || nphi < 2 * (lmax + 1) {
            bail!(
                "nphi = {nphi} is out of range: an even number >= 2 (lmax + 1) = {}",
                2 * (lmax + 1)
            );
        }
        validate::at_least("minc", self.minc, 1)?;
        if self.minc > lmax {
            bail!(
                "minc = {} is out of range: 1 <= minc <= lmax = {lmax}",
                self.minc
            );
        }
        if self.initial == Initial::Benchmark && lmax < 4 {
            bail!(
                "lmax = {lmax} is too small for the benchmark's initial pattern of degree and order l = m = 4: need lmax >= 4 (ntheta >= 6 with the default lmax), or initial = \"conduction\""
            );
        }
        if self.initial == Initial::Benchmark && 4 % self.minc != 0 {
            bail!(
                "minc = {} does not divide the order m = 4 of the benchmark's initial pattern: use minc = 1, 2 or 4",
                self.minc
            );
        }
        validate::positive_finite("dt", self.dt)?;
        validate::positive_finite("dtmax", self.dtmax)?;
        // `dtmax` bounds the adaptive steps; a fixed-step run takes `dt`.
        if self.adaptive && self.dt > self.dtmax {
            bail!(
                "dt = {} is above dtmax = {}: need dt <= dtmax",
                self.dt,
                self.dtmax
            );
        }
        validate::positive_finite("courant", self.courant)?;
        validate::non_negative("alfven", self.alfven)?;
        validate::finite("alfven", self.alfven)?;
        if let Some(t) = self.end_time {
            validate::positive_finite("end_time", t)?;
        }
        validate::at_least("pi_theta", self.pi_theta, 1)?;
        validate::at_least("queue", self.queue, 1)?;
        validate::at_least("diag_every", self.diag_every, 1)?;
        self.check_unused()
    }

    /// An error naming each key set away from its default that this run
    /// would not read, and what it applies to (a value silently dropped
    /// would let a user believe they had run what they asked for).
    fn check_unused(&self) -> Result<()> {
        let d = Config::default();
        let mut unused = vec![];
        if self.pi_theta == 1 && self.theta_protocol.value() != d.theta_protocol.value() {
            unused.push(format!(
                "theta_protocol = {} applies to the 2d distribution, pi_theta > 1 (this run: pi_theta = 1, no theta transposition)",
                self.theta_protocol
            ));
        }
        if self.magnetic_prandtl.is_none() && self.alfven != d.alfven {
            unused.push(format!(
                "alfven = {} applies to runs with a magnetic field (this run: no magnetic_prandtl)",
                self.alfven
            ));
        }
        if !self.adaptive && self.dtmax != d.dtmax {
            unused.push(format!(
                "dtmax = {} applies to adaptive steps (this run: adaptive = false, dt = {} every step)",
                self.dtmax, self.dt
            ));
        }
        unused.extend(self.output.unused("dynamo", WRITES));
        Ok(validate::unused(unused)?)
    }

    /// A hash of everything that defines the equations and the grid (not
    /// the run length or the output): a checkpoint of another physics or
    /// grid is refused.
    pub fn physics_hash(&self) -> u64 {
        let mut h = 0u64;
        let mut add = |x: u64| h = appkit::hash::mix(h ^ x);
        for v in [self.ekman, self.rayleigh, self.prandtl, self.radius_ratio] {
            add(v.to_bits());
        }
        add(self.magnetic_prandtl.map_or(u64::MAX, f64::to_bits));
        for v in [self.nr, self.ntheta, self.nphi(), self.lmax(), self.minc] {
            add(v as u64);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_named() {
        let e = Config::from_toml("ekman = 1e-3\nrayleih = 1e5\n").unwrap_err();
        assert!(e.to_string().contains("rayleih"), "{e}");
    }

    #[test]
    fn defaults_are_the_benchmark_resolution() {
        let c = Config::default();
        assert_eq!((c.nr, c.ntheta, c.nphi(), c.lmax()), (33, 96, 192, 64));
        c.validate().unwrap();
    }

    #[test]
    fn bad_values_name_the_value_and_the_range() {
        let check = |text: &str, want: &[&str]| {
            let c = Config::from_toml(text).unwrap();
            let e = c.validate().unwrap_err().to_string();
            for w in want {
                assert!(e.contains(w), "{text}: {e}");
            }
        };
        check(
            "ntheta = 48\nlmax = 48\n",
            &["lmax = 48", "ntheta = 48", "lmax <= 47"],
        );
        check("minc = 3\n", &["minc = 3", "m = 4"]);
        check("dt = 1e-3\ndtmax = 1e-4\n", &["dt = 0.001", "dtmax"]);
        check(
            "theta_protocol = \"p2p\"\n",
            &[
                "theta_protocol = p2p applies to the 2d distribution",
                "pi_theta = 1",
            ],
        );
        check(
            "alfven = 2.0\n",
            &["alfven = 2 applies to runs with a magnetic field"],
        );
        check(
            "adaptive = false\ndtmax = 1e-3\n",
            &["dtmax = 0.001 applies to adaptive steps"],
        );
        check(
            "[output]\nvtk = false\nvtk_every = 5\n",
            &["output.vtk_every = 5 applies to output.vtk = true (this run: output.vtk = false)"],
        );
        // Read by these runs: accepted.
        for ok in [
            "theta_protocol = \"p2p\"\npi_theta = 2\n",
            "alfven = 2.0\nmagnetic_prandtl = 5.0\n",
            "adaptive = false\ndt = 2e-4\n",
        ] {
            Config::from_toml(ok).unwrap().validate().unwrap();
        }
        check("radius_ratio = 1.2\n", &["radius_ratio = 1.2"]);
        check("nphi = 100\n", &["nphi = 100", "130"]);
        check("ekman = -1\n", &["ekman"]);
        check(
            "ntheta = 8\nlmax = 3\n",
            &["lmax = 3", "l = m = 4", "lmax >= 4"],
        );
        check(
            "ntheta = 2\nlmax = 2\ninitial = \"conduction\"\n",
            &["lmax = 2", "ntheta = 2", "lmax <= 1 (", "lmax <= 1)"],
        );
    }

    #[test]
    fn the_default_lmax_fits_the_grid() {
        for (ntheta, want) in [(2, 1), (3, 2), (4, 3), (5, 4), (6, 4), (48, 32), (96, 64)] {
            let c = Config {
                ntheta,
                initial: Initial::Conduction,
                ..Config::default()
            };
            assert_eq!(c.lmax(), want, "ntheta = {ntheta}");
            assert!(c.lmax() < ntheta);
        }
        let tiny = Config {
            ntheta: 2,
            initial: Initial::Conduction,
            ..Config::default()
        };
        tiny.validate().unwrap();
        let bench = Config {
            ntheta: 4,
            ..Config::default()
        };
        let e = bench.validate().unwrap_err().to_string();
        assert!(e.contains("lmax = 3") && e.contains("lmax >= 4"), "{e}");
    }

    #[test]
    fn scheme_and_protocol_names_are_checked() {
        let e = Config::from_toml("scheme = \"cn\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cnab2"), "{e}");
        let e = Config::from_toml("l_protocol = \"fast\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("fast"), "{e}");
    }

    #[test]
    fn physics_hash_follows_the_physics_only() {
        let a = Config::default();
        let mut b = a.clone();
        b.steps = 7;
        b.queue = 3;
        assert_eq!(a.physics_hash(), b.physics_hash());
        b.minc = 2;
        assert_ne!(a.physics_hash(), b.physics_hash());
    }

    #[test]
    fn the_old_protocol_keys_still_work() {
        let dir = std::env::temp_dir().join(format!("dynamo-renamed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("old.toml");
        std::fs::write(
            &p,
            "pi_theta = 2\ntheta_algorithm = \"p2p\"\nl_algorithm = \"a2aw\"\n",
        )
        .unwrap();
        let c = Config::from_file(&p).unwrap();
        assert_eq!(c.theta_protocol.name(), "p2p");
        assert_eq!(c.l_protocol.name(), "a2aw");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
