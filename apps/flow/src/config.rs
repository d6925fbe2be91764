//! The run configuration: TOML file, command-line overrides, validation.
//!
//! Units: the box length `L` (default 1), the density 1, the kinematic
//! viscosity `nu`; the body force `f` is an acceleration applied to the
//! fluid only.

use anyhow::{bail, Result};
use appkit::validate;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub use crate::geometry::Method;

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

/// Output files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Output {
    /// Folder for every output file; nothing is written when absent.
    pub dir: Option<PathBuf>,
    /// VTK snapshots every this many steps; 0: only at the end.
    pub vtk_every: usize,
    /// Write VTK snapshots at all.
    pub vtk: bool,
    /// Checkpoint every this many steps; 0: only at the end.
    pub checkpoint_every: usize,
}

impl Default for Output {
    fn default() -> Self {
        Output {
            dir: None,
            vtk_every: 0,
            vtk: true,
            checkpoint_every: 0,
        }
    }
}

/// Everything a run needs. Every key is optional in the TOML file; unknown
/// keys are errors. The defaults are the Zick & Homsy case: a simple cubic
/// array at solid fraction 0.125 in Stokes flow, cut cells, 32^3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Cells per axis (a cubic box).
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
    /// Diagnostics every this many steps.
    pub diag_every: usize,
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
            output: Output::default(),
        }
    }
}

impl Config {
    /// Reads a TOML file (unknown keys are errors).
    pub fn from_file(path: &Path) -> Result<Self> {
        Ok(appkit::config::read_toml(path)?)
    }

    /// Parses TOML text.
    pub fn from_toml(text: &str) -> Result<Self> {
        Ok(appkit::config::parse_toml(text)?)
    }

    /// Cell size.
    pub fn h(&self) -> f64 {
        self.length / self.n as f64
    }

    /// The step size.
    pub fn dt(&self) -> f64 {
        self.dt
            .unwrap_or(self.dt_factor * self.h() * self.h() / self.nu)
    }

    /// Checks the values that can be checked without the geometry.
    pub fn validate(&self) -> Result<()> {
        validate::at_least("n", self.n, 8)?;
        if self.n % 2 != 0 {
            bail!(
                "n = {} is odd: the multigrid hierarchy needs an even number of cells per axis",
                self.n
            );
        }
        validate::positive_finite("length", self.length)?;
        validate::positive_finite("nu", self.nu)?;
        if let Some(dt) = self.dt {
            validate::positive_finite("dt", dt)?;
        }
        validate::positive_finite("dt_factor", self.dt_factor)?;
        validate::non_negative("steady_tol", self.steady_tol)?;
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
        }
        if self.initial == Initial::TaylorGreen && self.bodies != Bodies::None {
            bail!("initial = \"taylor-green\" needs bodies = \"none\"");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
