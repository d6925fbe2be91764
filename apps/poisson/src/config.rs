//! The run configuration: TOML file, command-line overrides, validation.

use anyhow::{bail, Result};
pub use appkit::config::{ByName, PerAxis};
use appkit::validate;
use multigrid::{Boundary, CommAvoiding, Hierarchy};
use serde::{Deserialize, Serialize};

/// `Config::from_file` and `Config::from_toml`.
pub use appkit::config::TomlFile;

/// The boundary conditions of the box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Bc {
    /// Inhomogeneous Dirichlet on every face.
    Dirichlet,
    /// Periodic on every axis (singular: the solution has zero mean).
    Periodic,
    /// Inhomogeneous Neumann on every face (singular: the solution has
    /// zero mean).
    Neumann,
    /// x periodic, y Dirichlet on both faces, z Neumann on the low face and
    /// Dirichlet on the high face.
    Mixed,
}

impl Bc {
    /// The condition of every face, `[axis][low, high]`.
    pub fn faces(self) -> [[Boundary; 2]; 3] {
        use Boundary::{Dirichlet, Neumann, Periodic};
        match self {
            Bc::Dirichlet => [[Dirichlet; 2]; 3],
            Bc::Periodic => [[Periodic; 2]; 3],
            Bc::Neumann => [[Neumann; 2]; 3],
            Bc::Mixed => [
                [Periodic, Periodic],
                [Dirichlet, Dirichlet],
                [Neumann, Dirichlet],
            ],
        }
    }
}

/// The solver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Solver {
    /// Conjugate gradients preconditioned by one symmetric V-cycle.
    Pcg,
    /// V-cycles alone.
    Mg,
}

/// Where communication-avoiding smoothing may engage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Ca {
    /// On every level whose blocks allow it.
    On,
    /// Nowhere.
    Off,
    /// On the finest level only.
    Fine,
    /// On the coarser levels only.
    Coarse,
}

impl Ca {
    /// The solver option.
    pub fn get(self) -> CommAvoiding {
        match self {
            Ca::On => CommAvoiding::ALL,
            Ca::Off => CommAvoiding::OFF,
            Ca::Fine => CommAvoiding {
                fine: true,
                coarse: false,
            },
            Ca::Coarse => CommAvoiding {
                fine: false,
                coarse: true,
            },
        }
    }
}

/// Everything a run needs. Every key is optional in the TOML file; unknown
/// keys are errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Global cells per axis.
    pub n: PerAxis<usize>,
    /// Boundary conditions.
    pub bc: Bc,
    /// Solver.
    pub solver: Solver,
    /// Relative residual `||f - A u|| / ||f||` to reach.
    pub tol: f64,
    /// Iteration limit (CG iterations or V-cycles).
    pub max_iter: usize,
    /// Levels, finest and bottom included; when absent, the deepest
    /// hierarchy whose bottom level keeps at least 8 cells
    /// ([`default_levels`]). With one level the dense bottom solve takes
    /// the whole grid, and the V-cycle's keys (`pre`, `post`, `omega`,
    /// `overlap`, `ca`, `agglomerate_below`) are refused away from their
    /// defaults.
    pub levels: Option<usize>,
    /// Red-black sweeps before the coarse correction.
    pub pre: usize,
    /// Black-red sweeps after the coarse correction.
    pub post: usize,
    /// Relaxation factor of the sweeps.
    pub omega: f64,
    /// Overlap the halo exchanges of the sweeps with interior smoothing.
    pub overlap: bool,
    /// Communication-avoiding smoothing.
    pub ca: Ca,
    /// Coarse levels with fewer owned cells per rank than this are gathered
    /// onto fewer ranks (0: only where a block would be odd).
    pub agglomerate_below: usize,
    /// Largest bottom level (global cells) for the dense solve.
    pub max_bottom_cells: usize,
    /// Solves from zero; the median solve time is reported.
    pub repeat: usize,
    /// When positive, also measure the asymptotic residual factor per
    /// V-cycle by power iteration over this many cycles
    /// (`Hierarchy::vcycle_factor`; at least 4).
    pub factor_cycles: usize,
    /// Process grid; when absent, [`choose_grid`] picks one.
    pub grid: Option<[usize; 3]>,
    /// Where the solve runs: `cpu`, or `cuda` (an NVIDIA GPU; the build
    /// needs the `cuda` feature). On a GPU the levels that every rank
    /// holds live on the device and the coarser ones on the host
    /// (`multigrid::device`); the solver is `pcg`.
    pub backend: ByName<gpu::Backend>,
    /// GPU ordinal for every rank (default: the rank's index on its machine
    /// modulo the device count). Only with a GPU backend.
    pub device: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        let o = multigrid::MgOptions::default();
        Config {
            n: PerAxis::All(128),
            bc: Bc::Dirichlet,
            solver: Solver::Pcg,
            tol: 1e-10,
            max_iter: o.max_iter,
            levels: None,
            pre: o.pre_sweeps,
            post: o.post_sweeps,
            omega: o.omega,
            overlap: o.overlap,
            ca: Ca::On,
            agglomerate_below: o.agglomerate_below,
            max_bottom_cells: o.max_bottom_cells,
            repeat: 1,
            factor_cycles: 0,
            grid: None,
            backend: "cpu".parse().expect("cpu is a backend"),
            device: None,
        }
    }
}

/// The deepest hierarchy for `shape` whose bottom level still has at least
/// 8 cells (a bottom of 1 to 7 cells adds levels that do almost no work);
/// at least 1.
pub fn default_levels(shape: [usize; 3]) -> usize {
    let mut l = Hierarchy::max_levels(shape);
    while l > 1 && shape.iter().map(|&x| x >> (l - 1)).product::<usize>() < 8 {
        l -= 1;
    }
    l
}

/// Whether every block of `shape` split by `dims` is even (and at least 2).
pub fn even_blocks(shape: [usize; 3], dims: [usize; 3]) -> bool {
    (0..3).all(|d| {
        (0..dims[d]).all(|i| {
            let len = comm::grid::block_range(shape[d], dims[d], i).1;
            len >= 2 && len.is_multiple_of(2)
        })
    })
}

/// The process grid of `ranks` ranks for `shape`: the one of
/// [`comm::ProcessGrid::for_shape`] (smallest halo surface) when its blocks
/// are even or the hierarchy has one level, else the even-block grid with
/// the smallest cut surface (ties: fewest ranks on the last axis). When no
/// grid gives even blocks, the `for_shape` grid is returned and building
/// the hierarchy reports the odd block.
pub fn choose_grid(
    shape: [usize; 3],
    ranks: usize,
    periodic: [bool; 3],
    levels: usize,
) -> Result<comm::ProcessGrid> {
    let g = comm::ProcessGrid::for_shape(shape, ranks, periodic)?;
    if levels == 1 || even_blocks(shape, g.dims()) {
        return Ok(g);
    }
    let cells: usize = shape.iter().product();
    let mut best: Option<((usize, usize), [usize; 3])> = None;
    for a in 1..=ranks {
        if !ranks.is_multiple_of(a) {
            continue;
        }
        for b in 1..=ranks / a {
            if !(ranks / a).is_multiple_of(b) {
                continue;
            }
            let dims = [a, b, ranks / a / b];
            if !even_blocks(shape, dims) {
                continue;
            }
            let cuts = |d: usize| {
                if periodic[d] && dims[d] > 1 {
                    dims[d]
                } else {
                    dims[d] - 1
                }
            };
            let surface: usize = (0..3).map(|d| cuts(d) * (cells / shape[d])).sum();
            let key = (surface, dims[2]);
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, dims));
            }
        }
    }
    match best {
        Some((_, dims)) => Ok(comm::ProcessGrid::new(dims, periodic)?),
        None => Ok(g),
    }
}

impl Config {
    /// Global cells per axis.
    pub fn shape(&self) -> [usize; 3] {
        self.n.get()
    }

    /// Box lengths: the cells are cubes of side `1 / max(n)`, so the longest
    /// axis has length 1.
    pub fn lengths(&self) -> [f64; 3] {
        let n = self.shape();
        let m = *n.iter().max().unwrap_or(&1) as f64;
        n.map(|x| x as f64 / m)
    }

    /// The number of levels: `levels` or [`default_levels`].
    pub fn levels(&self) -> usize {
        self.levels.unwrap_or_else(|| default_levels(self.shape()))
    }

    /// The solver options.
    pub fn options(&self) -> multigrid::MgOptions {
        multigrid::MgOptions {
            pre_sweeps: self.pre,
            post_sweeps: self.post,
            omega: self.omega,
            tol: self.tol,
            max_iter: self.max_iter,
            max_bottom_cells: self.max_bottom_cells,
            overlap: self.overlap,
            comm_avoiding: self.ca.get(),
            agglomerate_below: self.agglomerate_below,
        }
    }

    /// Checks the values the solver library does not check itself and says
    /// which one is wrong and what is allowed.
    pub fn validate(&self, ranks: usize) -> Result<()> {
        let n = self.shape();
        validate::positive_per_axis("n", n)?;
        if !(self.tol >= 0.0 && self.tol.is_finite()) {
            bail!("tol must be finite and non-negative, got {}", self.tol);
        }
        validate::at_least("repeat", self.repeat, 1)?;
        if self.factor_cycles > 0 && self.factor_cycles < 4 {
            bail!(
                "factor_cycles must be 0 (off) or at least 4, got {}",
                self.factor_cycles
            );
        }
        if self.levels == Some(0) {
            bail!(
                "levels must be at least 1, got 0 (this shape allows at most {})",
                Hierarchy::max_levels(n)
            );
        }
        validate::ranks_for(ranks, n.iter().product(), self.grid)?;
        self.on_device()?;
        self.check_unused()
    }

    /// Whether the solve runs on a GPU (`backend = "cuda"` in a build with
    /// the `cuda` feature). Errors: a backend this build or this program
    /// lacks (naming the feature or the valid ones), `device` without a
    /// GPU backend, `solver = "mg"` on a GPU.
    pub fn on_device(&self) -> Result<bool> {
        let on = self
            .backend
            .value()
            .on_device_for("poisson", cfg!(feature = "cuda"))?;
        if let (false, Some(d)) = (on, self.device) {
            bail!(
                "device = {d} applies to a GPU backend (this run: backend {})",
                self.backend.name()
            );
        }
        if on && self.solver == Solver::Mg {
            bail!(
                "solver = \"mg\" runs on the cpu backend; backend {} solves with \"pcg\"",
                self.backend.name()
            );
        }
        Ok(on)
    }

    /// With one level the grid is solved by the dense bottom solve alone:
    /// an error naming each V-cycle key set away from its default, which
    /// such a run would not read.
    fn check_unused(&self) -> Result<()> {
        let levels = self.levels.unwrap_or_else(|| default_levels(self.shape()));
        if levels != 1 {
            return Ok(());
        }
        let d = Config::default();
        let name = |v: &dyn std::fmt::Debug| format!("{v:?}").to_lowercase();
        let run = format!(
            "this run: {}, the dense bottom solve takes the {:?} grid whole",
            if self.levels.is_some() {
                "levels = 1"
            } else {
                "one level by default"
            },
            self.shape()
        );
        let unused = [
            ("pre", self.pre.to_string(), self.pre != d.pre),
            ("post", self.post.to_string(), self.post != d.post),
            ("omega", self.omega.to_string(), self.omega != d.omega),
            (
                "overlap",
                self.overlap.to_string(),
                self.overlap != d.overlap,
            ),
            ("ca", name(&self.ca), self.ca != d.ca),
            (
                "agglomerate_below",
                self.agglomerate_below.to_string(),
                self.agglomerate_below != d.agglomerate_below,
            ),
        ]
        .into_iter()
        .filter(|(_, _, set)| *set)
        .map(|(k, v, _)| format!("{k} = {v} applies to the V-cycle ({run})"))
        .collect();
        Ok(validate::unused(unused)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_keys_and_defaults() {
        let c = Config::from_toml("n = [16, 32, 32]\nbc = \"mixed\"\nca = \"fine\"\n").unwrap();
        assert_eq!(c.shape(), [16, 32, 32]);
        assert_eq!(c.lengths(), [0.5, 1.0, 1.0]);
        assert_eq!(c.bc, Bc::Mixed);
        assert_eq!(
            c.ca.get(),
            CommAvoiding {
                fine: true,
                coarse: false
            }
        );
        let e = Config::from_toml("n = 16\nsolvr = \"mg\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("solvr") && e.contains("line 2"), "{e}");
        let e = Config::from_toml("bc = \"robin\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("robin"), "{e}");
    }

    #[test]
    fn v_cycle_keys_are_refused_with_one_level() {
        let one = Config {
            n: PerAxis::All(8),
            levels: Some(1),
            ..Config::default()
        };
        let e = Config {
            pre: 3,
            ca: Ca::Off,
            ..one.clone()
        }
        .validate(1)
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("these keys")
                && e.contains("pre = 3 applies to the V-cycle (this run: levels = 1, the dense bottom solve takes the [8, 8, 8] grid whole)")
                && e.contains("ca = off applies to the V-cycle"),
            "{e}"
        );
        one.validate(1).unwrap();
        // Read with two levels.
        Config {
            pre: 3,
            levels: Some(2),
            ..one.clone()
        }
        .validate(1)
        .unwrap();
        // One level by default: a grid of fewer than 16 cells.
        let e = Config {
            n: PerAxis::All(2),
            levels: None,
            omega: 1.0,
            ..Config::default()
        }
        .validate(1)
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("omega = 1 applies") && e.contains("one level by default"),
            "{e}"
        );
    }

    #[test]
    fn backends_are_checked_by_name() {
        let e = |c: Config| c.validate(1).unwrap_err().to_string();
        let cuda = Config {
            backend: "cuda".parse().unwrap(),
            ..Config::default()
        };
        if cfg!(feature = "cuda") {
            cuda.validate(1).unwrap();
            let m = e(Config {
                solver: Solver::Mg,
                ..cuda.clone()
            });
            assert!(m.contains("solver = \"mg\" runs on the cpu backend"), "{m}");
        } else {
            let m = e(cuda);
            assert!(m.contains("cuda") && m.contains("feature"), "{m}");
        }
        let m = e(Config {
            backend: "hip".parse().unwrap(),
            ..Config::default()
        });
        assert!(m.contains("backend hip is not available to poisson"), "{m}");
        let m = e(Config {
            device: Some(1),
            ..Config::default()
        });
        assert!(
            m.contains("device = 1 applies to a GPU backend") && m.contains("backend cpu"),
            "{m}"
        );
    }

    #[test]
    fn example_file_parses() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/poisson.toml");
        let c = Config::from_file(&p).unwrap();
        assert_eq!(c.repeat, 3);
        assert_eq!(c.shape(), [128; 3]);
        c.validate(2).unwrap();
    }

    #[test]
    fn levels_keep_a_bottom_of_at_least_8_cells() {
        // 128 -> 64 -> ... -> 2: 7 levels (bottom 2^3).
        assert_eq!(default_levels([128; 3]), 7);
        // 24 -> 12 -> 6 -> 3: bottom 27 cells.
        assert_eq!(default_levels([24; 3]), 4);
        // 16 x 16 x 4: bottom 8 x 8 x 2 ... 4 x 4 x 1 has 16 cells.
        assert_eq!(default_levels([16, 16, 4]), 3);
        assert_eq!(default_levels([3, 5, 7]), 1);
    }

    #[test]
    fn grid_with_even_blocks_is_chosen() {
        // The smallest-surface grid splits axis 0 into blocks of 9.
        let plain = comm::ProcessGrid::for_shape([18, 16, 16], 2, [false; 3]).unwrap();
        assert_eq!(plain.dims(), [2, 1, 1]);
        let g = choose_grid([18, 16, 16], 2, [false; 3], 3).unwrap();
        assert_eq!(g.dims(), [1, 2, 1]);
        assert!(even_blocks([18, 16, 16], g.dims()));
        // One level needs no even blocks.
        assert_eq!(
            choose_grid([18, 16, 16], 2, [false; 3], 1).unwrap().dims(),
            [2, 1, 1]
        );
        // No even split exists: the plain grid (the hierarchy reports it).
        assert_eq!(
            choose_grid([6, 6, 6], 5, [false; 3], 2)
                .unwrap()
                .dims()
                .iter()
                .product::<usize>(),
            5
        );
    }

    #[test]
    fn invalid_values_are_reported() {
        let bad = |f: &dyn Fn(&mut Config), ranks: usize, want: &str| {
            let mut c = Config::default();
            f(&mut c);
            let e = c.validate(ranks).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        };
        bad(&|c| c.n = PerAxis::Each([8, 0, 8]), 1, "axis 1 is 0");
        bad(&|c| c.tol = -1.0, 1, "tol");
        bad(&|c| c.repeat = 0, 1, "repeat");
        bad(&|c| c.levels = Some(0), 1, "at most 8");
        bad(&|c| c.n = PerAxis::All(1), 2, "at most 1 ranks");
        bad(&|c| c.grid = Some([1, 1, 3]), 2, "holds 3 ranks");
        Config::default().validate(4).unwrap();
    }
}
