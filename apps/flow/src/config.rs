//! The run configuration: TOML file, command-line overrides, validation.
//!
//! Units: the box length `L` (default 1), the density 1, the kinematic
//! viscosity `nu`; the body force `f` is an acceleration applied to the
//! fluid only.

use anyhow::{bail, Result};
use appkit::config::ByName;
use appkit::validate;
use comm::{BlockDecomposition, ProcessGrid};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use crate::geometry::Method;

/// The most cells per axis: each rank builds the geometry of its block,
/// whose ghost-point classification holds at most
/// [`ibm::GhostPoints::MAX_POINTS`] points (`u32::MAX / 6`, at least
/// 894^3), and a run on one rank has the whole grid as its block (the
/// configuration is checked before the rank count is known). The geometry
/// arrays take 83 bytes per cell of a block and its ghost layer.
pub const MAX_N: usize = 894;

/// Whether the multigrid hierarchy of `n^3` cells ends on a bottom level
/// its dense solve takes: it halves `n` while it is even and at least 8
/// ([`crate::solver::levels`]); the bottom extent `b` must have `b^3` at
/// most `max_bottom_cells` (1728 by default: `b <= 12`).
fn bottom(n: usize) -> (usize, bool) {
    let levels = crate::solver::levels([n; 3]);
    let b = n >> (levels - 1);
    let max = crate::mg_options(&Config::default()).max_bottom_cells;
    (b, b.checked_pow(3).is_some_and(|c| c <= max))
}

/// Whether `n` is even and its multigrid bottom level fits ([`bottom`]).
pub(crate) fn fits_multigrid(n: usize) -> bool {
    n.is_multiple_of(2) && bottom(n).1
}

/// Why `n^3` cells do not split over `ranks` ranks the way the multigrid
/// needs, in words: the first rank whose block is odd (or below 2) along
/// some axis, or the reason the cells cannot be split at all; `None` when
/// they do.
fn layout_problem(n: usize, ranks: usize) -> Option<String> {
    let grid = match ProcessGrid::for_shape([n; 3], ranks, [true; 3]) {
        Ok(g) => g,
        Err(e) => return Some(e.to_string()),
    };
    let dec = match BlockDecomposition::new([n; 3], grid) {
        Ok(d) => d,
        Err(e) => return Some(e.to_string()),
    };
    (0..ranks).find_map(|r| {
        let s = dec.box_of(r).shape();
        (0..3).find(|&d| s[d] < 2 || s[d] % 2 != 0).map(|d| {
            format!(
                "the process grid {:?} gives rank {r} {} cells along axis {d}, and the multigrid needs an even number of cells (at least 2) per rank along every axis",
                grid.dims(),
                s[d]
            )
        })
    })
}

/// The valid `n` nearest to `n` (at most one below and one above, within
/// `8..=MAX_N`) for which `ok` holds, in words.
fn nearest(n: usize, ok: impl Fn(usize) -> bool) -> String {
    let below = (8..n.min(MAX_N + 1)).rev().find(|&m| ok(m));
    let above = (n + 1..=MAX_N).find(|&m| ok(m));
    match (below, above) {
        (Some(a), Some(b)) => format!("nearest valid: n = {a} or {b}"),
        (Some(a), None) | (None, Some(a)) => format!("nearest valid: n = {a}"),
        (None, None) => "no n up to MAX_N fits".to_string(),
    }
}

/// The bodies in the box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Bodies {
    /// No bodies (Taylor-Green).
    None,
    /// A simple cubic array: one sphere per box.
    Sc,
    /// A body-centred cubic array: two spheres per box.
    Bcc,
    /// A face-centred cubic array: four spheres per box.
    Fcc,
    /// A random packing generated from `seed` at `solid_fraction`.
    Random,
    /// A packing read from `packing` (one sphere `x y z r` per line).
    File,
}

/// The initial velocity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Initial {
    /// At rest.
    Rest,
    /// The Taylor-Green mode `u = A sin(kx) cos(ky)`, `v = -A cos(kx)
    /// sin(ky)`, `k = 2 pi / L` (only without bodies).
    TaylorGreen,
}

/// The `[output]` section, the same in every application (see
/// [`appkit::app`] for the meaning of each key): `flow.csv` (diagnostics),
/// `flow_NNNNNN.chk` (checkpoints) and the VTK snapshots of the velocity and
/// the pressure.
pub use appkit::app::Output;
/// `Config::from_file` and `Config::from_toml`.
pub use appkit::config::TomlFile;

/// What flow writes (the `[output]` keys it reads).
const WRITES: appkit::app::Writes = appkit::app::Writes::ALL;

/// Everything a run needs. Every key is optional in the TOML file; unknown
/// keys are errors. The defaults are the Zick & Homsy case: a simple cubic
/// array at solid fraction 0.125 in Stokes flow, cut cells, 32^3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Cells per axis (a cubic box; [`Config::validate`] and
    /// [`Config::check_ranks`] give the sizes that fit).
    pub n: usize,
    /// Box length.
    pub length: f64,
    /// Kinematic viscosity.
    pub nu: f64,
    /// Stokes (`false`) or Navier-Stokes (`true`).
    pub navier_stokes: bool,
    /// Step size; absent: `dt_factor h^2 / nu`.
    pub dt: Option<f64>,
    /// The step size in units of the diffusive time of a cell, `h^2 / nu`,
    /// when `dt` is absent.
    pub dt_factor: f64,
    /// Steps to run at most.
    pub steps: usize,
    /// Stop when `max |u^{n+1} - u^n| / max |u|` falls below this (0: never).
    pub steady_tol: f64,
    /// Immersed-boundary method.
    pub method: Method,
    /// Cut cells: a face open by at most this fraction of its area is
    /// closed (its velocity point is no unknown, its aperture 0). Faces
    /// nearly closed by near-touching spheres couple small pockets of
    /// fluid to the rest so weakly that the pressure solve's multigrid
    /// preconditioner cannot resolve them: on the random bed at porosity
    /// 0.5 and 256³ the pressure MG-PCG stalls near a relative residual of
    /// 5e-7 with 0 or 1e-6 here, and converges in 28 iterations with 1e-3.
    pub min_aperture: f64,
    /// The bodies.
    pub bodies: Bodies,
    /// Solid fraction of the sphere array or random packing.
    pub solid_fraction: f64,
    /// Sphere radius of a random packing, in box lengths.
    pub radius: f64,
    /// Seed of a random packing.
    pub seed: u64,
    /// Packing file (`bodies = "file"`).
    pub packing: Option<PathBuf>,
    /// Body force (acceleration) on the fluid.
    pub force: [f64; 3],
    /// Initial velocity.
    pub initial: Initial,
    /// Amplitude of the Taylor-Green mode.
    pub amplitude: f64,
    /// Relative residual of the momentum solves.
    pub momentum_tol: f64,
    /// Relative residual of the pressure solves.
    pub pressure_tol: f64,
    /// The rotational pressure update `p += phi - nu div u*` (otherwise
    /// `p += phi`); the steady state is the same.
    pub rotational: bool,
    /// Overlap halo exchanges with the smoothing.
    pub overlap: bool,
    /// Communication-avoiding smoothing.
    pub comm_avoiding: bool,
    /// The progress bar's message (time, change, iterations) every this
    /// many steps; every step's row goes to `flow.csv` whatever it is.
    pub diag_every: usize,
    /// Where the step runs: `cpu`, or `cuda` (an NVIDIA GPU; the build
    /// needs the `cuda` feature). On a GPU the fields, the geometry the
    /// step reads and the fine multigrid levels live on the device, with
    /// the host's bits (the sweeps run in the plain order there, which
    /// `overlap` and `comm_avoiding` do not change).
    pub backend: ByName<gpu::Backend>,
    /// GPU ordinal for every rank (default: the rank's index on its
    /// machine modulo the device count). Only with a GPU backend.
    pub device: Option<usize>,
    /// Output files.
    pub output: Output,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            n: 32,
            length: 1.0,
            nu: 1.0,
            navier_stokes: false,
            dt: None,
            dt_factor: 30.0,
            steps: 5000,
            steady_tol: 1e-7,
            method: Method::CutCell,
            min_aperture: 1e-3,
            bodies: Bodies::Sc,
            solid_fraction: 0.125,
            radius: 0.1,
            seed: 1,
            packing: None,
            force: [1.0, 0.0, 0.0],
            initial: Initial::Rest,
            amplitude: 1.0,
            momentum_tol: 1e-10,
            pressure_tol: 1e-10,
            rotational: true,
            overlap: true,
            comm_avoiding: true,
            diag_every: 10,
            backend: "cpu".parse().expect("cpu is a backend"),
            device: None,
            output: Output::default(),
        }
    }
}

impl Config {
    /// Cell size.
    pub fn h(&self) -> f64 {
        self.length / self.n as f64
    }

    /// The step size.
    pub fn dt(&self) -> f64 {
        self.dt
            .unwrap_or(self.dt_factor * self.h() * self.h() / self.nu)
    }

    /// Checks the values that can be checked without the geometry and
    /// without the rank count ([`Config::check_ranks`] checks that): `n`
    /// in `8..=`[`MAX_N`], even, and halved while even and at least 8
    /// down to a multigrid bottom of at most 12 cells per axis (`n` is 4,
    /// 5, 6, 7, 9 or 11 times a power of two); the random packing's
    /// spheres at least [`MIN_CELLS_PER_DIAMETER`] cells across (before
    /// any sphere is placed).
    ///
    /// [`MIN_CELLS_PER_DIAMETER`]: crate::bodies::MIN_CELLS_PER_DIAMETER
    pub fn validate(&self) -> Result<()> {
        validate::at_least("n", self.n, 8)?;
        if self.n > MAX_N {
            bail!(
                "n = {} is out of range: 8 <= n <= {MAX_N} (the geometry of one rank's block, on one rank the whole grid, indexes at most {} points)",
                self.n,
                ibm::GhostPoints::MAX_POINTS
            );
        }
        if !self.n.is_multiple_of(2) {
            bail!(
                "n = {} is odd: the multigrid hierarchy needs an even number of cells per axis ({})",
                self.n,
                nearest(self.n, fits_multigrid)
            );
        }
        let (b, ok) = bottom(self.n);
        if !ok {
            bail!(
                "n = {} halves to a multigrid bottom level of {b}^3 cells, more than the dense bottom solve takes (12^3): n must be 4, 5, 6, 7, 9 or 11 times a power of two ({})",
                self.n,
                nearest(self.n, fits_multigrid)
            );
        }
        validate::positive_finite("length", self.length)?;
        validate::positive_finite("nu", self.nu)?;
        if let Some(dt) = self.dt {
            validate::positive_finite("dt", dt)?;
        }
        validate::positive_finite("dt_factor", self.dt_factor)?;
        validate::non_negative("steady_tol", self.steady_tol)?;
        if !(self.min_aperture >= 0.0 && self.min_aperture < 1.0) {
            bail!(
                "min_aperture = {} is out of range: 0 <= min_aperture < 1",
                self.min_aperture
            );
        }
        for (i, f) in self.force.iter().enumerate() {
            validate::finite(&format!("force[{i}]"), *f)?;
        }
        for (name, v) in [
            ("momentum_tol", self.momentum_tol),
            ("pressure_tol", self.pressure_tol),
        ] {
            if !(v > 0.0 && v < 1.0) {
                bail!("{name} = {v} is out of range: 0 < {name} < 1");
            }
        }
        validate::at_least("diag_every", self.diag_every, 1)?;
        self.on_device()?;
        match self.bodies {
            Bodies::Sc | Bodies::Bcc | Bodies::Fcc | Bodies::Random => {
                if !(self.solid_fraction > 0.0 && self.solid_fraction < 1.0) {
                    bail!(
                        "solid_fraction = {} is out of range: 0 < solid_fraction < 1",
                        self.solid_fraction
                    );
                }
            }
            Bodies::File => {
                if self.packing.is_none() {
                    bail!("bodies = \"file\" needs packing = \"PATH\" (one sphere `x y z r` per line)");
                }
            }
            Bodies::None => {}
        }
        if self.bodies == Bodies::Random {
            validate::positive_finite("radius", self.radius)?;
            crate::bodies::check_resolution(self, self.radius * self.length)?;
        }
        if self.initial == Initial::TaylorGreen && self.bodies != Bodies::None {
            bail!("initial = \"taylor-green\" needs bodies = \"none\"");
        }
        self.check_unused()
    }

    /// An error naming each key set away from its default that this run
    /// would not read, and what it applies to: a value the run silently
    /// dropped would let a user believe they had run what they asked for.
    fn check_unused(&self) -> Result<()> {
        let d = Config::default();
        let bodies = format!("bodies = {:?}", name(&self.bodies));
        let mut unused = vec![];
        if let (Some(p), false) = (&self.packing, self.bodies == Bodies::File) {
            unused.push(format!(
                "packing = {:?} applies to bodies = \"file\" (this run: {bodies})",
                p.display().to_string()
            ));
        }
        if self.bodies != Bodies::Random {
            if self.radius != d.radius {
                unused.push(format!(
                    "radius = {} applies to bodies = \"random\" (this run: {bodies}{})",
                    self.radius,
                    if self.bodies == Bodies::None || self.bodies == Bodies::File {
                        ""
                    } else {
                        "; an array's radius follows from solid_fraction"
                    }
                ));
            }
            if self.seed != d.seed {
                unused.push(format!(
                    "seed = {} applies to bodies = \"random\" (this run: {bodies})",
                    self.seed
                ));
            }
        }
        if matches!(self.bodies, Bodies::File | Bodies::None)
            && self.solid_fraction != d.solid_fraction
        {
            unused.push(format!(
                "solid_fraction = {} applies to bodies = \"sc\", \"bcc\", \"fcc\" and \"random\" (this run: {bodies})",
                self.solid_fraction
            ));
        }
        if self.method != Method::CutCell && self.min_aperture != d.min_aperture {
            unused.push(format!(
                "min_aperture = {} applies to method = \"cut-cell\" (this run: method = {:?})",
                self.min_aperture,
                name(&self.method)
            ));
        }
        if self.bodies == Bodies::None && self.method != d.method {
            unused.push(format!(
                "method = {:?} applies to immersed bodies (this run: {bodies})",
                name(&self.method)
            ));
        }
        if self.navier_stokes && self.steady_tol != 0.0 && self.steady_tol != d.steady_tol {
            unused.push(format!(
                "steady_tol = {} applies to Stokes runs (this run: navier_stokes = true, which takes all its steps)",
                self.steady_tol
            ));
        }
        if self.initial != Initial::TaylorGreen && self.amplitude != d.amplitude {
            unused.push(format!(
                "amplitude = {} applies to initial = \"taylor-green\" (this run: initial = {:?})",
                self.amplitude,
                name(&self.initial)
            ));
        }
        unused.extend(self.output.unused("flow", WRITES));
        Ok(validate::unused(unused)?)
    }

    /// Whether the step runs on a GPU (`backend = "cuda"` in a build with
    /// the `cuda` feature). Errors: a backend this build or this program
    /// lacks (naming the feature or the valid ones), `device` without a
    /// GPU backend.
    pub fn on_device(&self) -> Result<bool> {
        let on = self
            .backend
            .value()
            .on_device_for("flow", cfg!(feature = "cuda"))?;
        if let (false, Some(d)) = (on, self.device) {
            bail!(
                "device = {d} applies to a GPU backend (this run: backend {})",
                self.backend.name()
            );
        }
        Ok(on)
    }

    /// Checks that the `n^3` cells split over `ranks` ranks the way the
    /// multigrid needs: on the process grid the solver uses
    /// ([`ProcessGrid::for_shape`]), every rank's block has an even number
    /// of cells, at least 2, along every axis. The error names `n`, the
    /// rank count, the first odd block and the nearest `n` that fits.
    pub fn check_ranks(&self, ranks: usize) -> Result<()> {
        if let Some(why) = layout_problem(self.n, ranks) {
            let fits = |m: usize| fits_multigrid(m) && layout_problem(m, ranks).is_none();
            bail!(
                "n = {} does not split over {ranks} ranks: {why} ({})",
                self.n,
                nearest(self.n, fits)
            );
        }
        Ok(())
    }
}

/// The TOML spelling of an enum value (its serde name).
fn name<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|j| j.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_this_run_would_not_read_are_refused_by_name() {
        let e = |c: Config| c.validate().unwrap_err().to_string();
        let msg = e(Config {
            packing: Some(PathBuf::from("bed.txt")),
            ..Config::default()
        });
        assert!(
            msg.contains(
                "packing = \"bed.txt\" applies to bodies = \"file\" (this run: bodies = \"sc\")"
            ),
            "{msg}"
        );
        let msg = e(Config {
            radius: 0.2,
            seed: 7,
            ..Config::default()
        });
        assert!(
            msg.contains("these keys")
                && msg.contains("radius = 0.2 applies to bodies = \"random\"")
                && msg.contains("follows from solid_fraction")
                && msg.contains("seed = 7 applies to bodies = \"random\""),
            "{msg}"
        );
        let none = Config {
            bodies: Bodies::None,
            ..Config::default()
        };
        let msg = e(Config {
            solid_fraction: 0.3,
            method: Method::GhostCell,
            ..none.clone()
        });
        assert!(
            msg.contains("solid_fraction = 0.3 applies to")
                && msg.contains("method = \"ghost-cell\" applies to immersed bodies"),
            "{msg}"
        );
        let msg = e(Config {
            navier_stokes: true,
            steady_tol: 1e-6,
            ..Config::default()
        });
        assert!(
            msg.contains("steady_tol = 0.000001 applies to Stokes runs"),
            "{msg}"
        );
        let msg = e(Config {
            amplitude: 2.0,
            ..Config::default()
        });
        assert!(
            msg.contains("amplitude = 2 applies to initial = \"taylor-green\""),
            "{msg}"
        );
        let mut no_vtk = Config::default();
        no_vtk.output.vtk = false;
        no_vtk.output.vtk_every = 5;
        assert!(e(no_vtk).contains("output.vtk_every = 5 applies to output.vtk = true"));
        // What the run reads passes, and so do the defaults.
        Config::default().validate().unwrap();
        Config {
            bodies: Bodies::Random,
            radius: 0.2,
            seed: 7,
            ..Config::default()
        }
        .validate()
        .unwrap();
        Config {
            navier_stokes: true,
            steady_tol: 0.0,
            ..Config::default()
        }
        .validate()
        .unwrap();
        Config {
            bodies: Bodies::None,
            initial: Initial::TaylorGreen,
            amplitude: 2.0,
            ..Config::default()
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn unknown_keys_and_methods_are_named() {
        let e = Config::from_toml("nn = 3\n").unwrap_err().to_string();
        assert!(e.contains("nn"), "{e}");
        let e = Config::from_toml("method = \"immersed\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("immersed") && e.contains("cut-cell"), "{e}");
    }

    #[test]
    fn values_are_checked() {
        let c = Config::from_toml("n = 33\n").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("n = 33"));
        let c = Config::from_toml("solid_fraction = 1.5\n").unwrap();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("solid_fraction = 1.5"));
        let c = Config::from_toml("bodies = \"file\"\n").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("packing"));
        Config::default().validate().unwrap();
    }

    #[test]
    fn n_is_checked_against_the_limits_and_the_multigrid() {
        let err = |c: Config| c.validate().unwrap_err().to_string();
        // MAX_N is the largest n whose n^3 points the ghost points index.
        assert!(MAX_N.pow(3) <= ibm::GhostPoints::MAX_POINTS);
        assert!((MAX_N + 1).pow(3) > ibm::GhostPoints::MAX_POINTS);
        for n in [MAX_N + 2, 100_000, 4_194_304] {
            let e = err(Config {
                n,
                ..Config::default()
            });
            assert!(
                e.contains(&format!("n = {n}")) && e.contains("n <= 894"),
                "{e}"
            );
        }
        // 26 halves to a 13^3 bottom level.
        let e = err(Config {
            n: 26,
            ..Config::default()
        });
        assert!(e.contains("n = 26") && e.contains("24 or 28"), "{e}");
        for n in [8, 10, 12, 14, 22, 24, 28, 44, 80, 96, 160, 768] {
            Config {
                n,
                ..Config::default()
            }
            .validate()
            .unwrap();
        }
    }

    #[test]
    fn n_is_checked_against_the_rank_count() {
        let c = Config {
            n: 10,
            ..Config::default()
        };
        c.check_ranks(1).unwrap();
        let e = c.check_ranks(2).unwrap_err().to_string();
        assert!(
            e.contains("n = 10") && e.contains("2 ranks") && e.contains("n = 8 or 12"),
            "{e}"
        );
        let c = Config {
            n: 36,
            ..Config::default()
        };
        let e = c.check_ranks(16).unwrap_err().to_string();
        assert!(e.contains("n = 36") && e.contains("16 ranks"), "{e}");
        for ranks in [1, 2, 4, 8, 16] {
            Config::default().check_ranks(ranks).unwrap();
        }
        let e = Config::default().check_ranks(3).unwrap_err().to_string();
        assert!(e.contains("n = 32") && e.contains("3 ranks"), "{e}");
    }

    #[test]
    fn a_fine_random_packing_is_refused_before_it_is_placed() {
        let c = Config {
            bodies: Bodies::Random,
            radius: 0.01,
            solid_fraction: 0.5,
            ..Config::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("radius 0.0100") && e.contains("n >= 200"), "{e}");
        // The same check runs before the packing when the geometry is
        // built: at radius 0.001 placing the spheres would fail on their
        // count (over 10^8), the resolution is named first.
        let c = Config { radius: 0.001, ..c };
        let e = format!("{:#}", crate::bodies::Bed::new(&c).unwrap_err());
        assert!(
            e.contains("cells per diameter") && e.contains("n >= 2000"),
            "{e}"
        );
    }
}
