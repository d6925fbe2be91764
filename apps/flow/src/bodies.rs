//! The bodies of a configuration and the geometry arrays the solver reads,
//! from `ibm`: cut-cell volume fractions and apertures, and the ghost-cell
//! classification and wall fractions of each velocity component.

use anyhow::{bail, Context, Result};
use comm::IndexBox;
use ibm::{
    Body, CutCells, GhostPoints, Lattice, LatticeKind, Link, Location, MacGrid, Packing, PointKind,
    Side,
};

use crate::config::{Bodies, Config, MAX_N};
use crate::geometry::{Geometry, Method};

/// The fewest cells per sphere diameter either method accepts: below it a
/// sphere has fewer than 4 cells across, its cut-cell apertures and
/// ghost-cell wall crossings no longer resolve a curved surface, and the
/// measured drag error exceeds 10 %.
pub const MIN_CELLS_PER_DIAMETER: f64 = 4.0;

/// A body with the number of its spheres in the box and their radius.
pub type Spheres = (Box<dyn Body>, usize, f64);

/// The body of `cfg`, the number of spheres in the box and their radius
/// (the smallest radius of a packing file).
pub fn body(cfg: &Config) -> Result<Option<Spheres>> {
    let lengths = [cfg.length; 3];
    let lattice = |kind| -> Result<Spheres> {
        let l = Lattice::for_solid_fraction(kind, lengths, [1; 3], cfg.solid_fraction)?;
        let (count, r) = (l.count(), l.radius());
        Ok((Box::new(l), count, r))
    };
    let b = match cfg.bodies {
        Bodies::None => return Ok(None),
        Bodies::Sc => lattice(LatticeKind::Sc)?,
        Bodies::Bcc => lattice(LatticeKind::Bcc)?,
        Bodies::Fcc => lattice(LatticeKind::Fcc)?,
        Bodies::Random => {
            // Before any sphere is placed: a fine packing takes long.
            check_resolution(cfg, cfg.radius * cfg.length)?;
            let p = Packing::random(
                lengths,
                cfg.radius * cfg.length,
                cfg.solid_fraction,
                cfg.seed,
            )?;
            let n = p.len();
            (Box::new(p) as Box<dyn Body>, n, cfg.radius * cfg.length)
        }
        Bodies::File => {
            let path = cfg
                .packing
                .as_ref()
                .context("bodies = \"file\" needs a packing file")?;
            let p = Packing::read(path, lengths)?;
            if p.is_empty() {
                bail!(
                    "packing file {} holds no sphere (one sphere `x y z r` per line); for a box without bodies use bodies = \"none\"",
                    path.display()
                );
            }
            let r = p
                .spheres()
                .iter()
                .map(|s| s.radius)
                .fold(f64::INFINITY, f64::min);
            let n = p.len();
            (Box::new(p) as Box<dyn Body>, n, r)
        }
    };
    check_resolution(cfg, b.2)?;
    Ok(Some(b))
}

/// Checks that a sphere of `radius` spans at least
/// [`MIN_CELLS_PER_DIAMETER`] cells per diameter at the resolution of
/// `cfg`; the error names the radius, `n` and the smallest `n` that
/// resolves it.
pub fn check_resolution(cfg: &Config, radius: f64) -> Result<()> {
    let cells = 2.0 * radius / cfg.h();
    if cells < MIN_CELLS_PER_DIAMETER {
        let need = (MIN_CELLS_PER_DIAMETER * cfg.length / (2.0 * radius)).ceil();
        let first = (need as usize..=MAX_N).find(|&m| crate::config::fits_multigrid(m));
        let beyond = match first {
            Some(m) if m as f64 == need => String::new(),
            Some(m) => format!("; the smallest such n the multigrid takes: {m}"),
            None => format!(", above the largest n = {MAX_N}: choose a larger radius"),
        };
        bail!(
            "a sphere of radius {radius:.4} spans {cells:.2} cells per diameter at n = {}: the {:?} method needs at least {MIN_CELLS_PER_DIAMETER} (n >= {need}{beyond})",
            cfg.n,
            cfg.method,
        );
    }
    Ok(())
}

/// The geometry arrays of `cfg` (the whole grid; see [`Geometry`]), the
/// number of spheres and their radius.
pub fn build(cfg: &Config) -> Result<(Geometry, usize, f64)> {
    let n = [cfg.n; 3];
    let h = cfg.h();
    let Some((body, spheres, radius)) = body(cfg)? else {
        return Ok((Geometry::open(n, h), 0, 0.0));
    };
    let body = body.as_ref();
    let grid = MacGrid::new(n, [cfg.length; 3])?;
    let whole = IndexBox::from_shape(n);
    let cut = CutCells::new(body, &grid, whole, 0)?;
    let mut g = Geometry::open(n, h);
    g.theta = cut.volume_fractions().to_vec();
    // The staircase of the ghost-cell method: a face is open when both
    // cell centres are in the fluid.
    let centre_fluid: Vec<bool> = match cfg.method {
        Method::CutCell => Vec::new(),
        Method::GhostCell => (0..g.theta.len())
            .map(|i| {
                let p = g.point(i).map(|x| x as i64);
                body.distance(grid.point(Location::Centre, p)) > 0.0
            })
            .collect(),
    };
    for d in 0..3 {
        g.aperture[d] = match cfg.method {
            Method::CutCell => cut
                .apertures(d)
                .context("apertures of the whole grid")?
                .to_vec(),
            Method::GhostCell => (0..g.theta.len())
                .map(|i| {
                    let q = g.idx(g.shift(g.point(i), d, -1));
                    if centre_fluid[i] && centre_fluid[q] {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect(),
        };
    }
    for d in 0..3 {
        let gp = GhostPoints::new(body, &grid, Location::Face(d), whole, 0)?;
        let m = g.theta.len();
        let mut fluid = vec![false; m];
        for (i, f) in fluid.iter_mut().enumerate() {
            let p = g.point(i).map(|x| x as i64);
            *f = gp.kind(p) == Some(PointKind::Fluid) && g.aperture[d][i] > 0.0;
        }
        let mut wall = vec![0.0; m];
        let mut weight = vec![0.0; m];
        for i in 0..m {
            if !fluid[i] {
                continue;
            }
            let pu = g.point(i);
            let p = pu.map(|x| x as i64);
            for axis in 0..3 {
                for side in [Side::Lower, Side::Upper] {
                    let q = g.idx(g.shift(pu, axis, side.sign()));
                    if fluid[q] {
                        continue;
                    }
                    // A wall crossing on the grid line, or (a neighbour in
                    // the fluid but closed off by the staircase) the wall
                    // at the neighbour.
                    wall[i] += match gp.link(p, axis, side) {
                        Some(Link::Wall { t }) => 1.0 / t,
                        _ => 1.0,
                    };
                }
            }
            weight[i] = match cfg.method {
                Method::CutCell => 0.5 * (g.theta[i] + g.theta[g.idx(g.shift(pu, d, -1))]),
                Method::GhostCell => 1.0,
            };
        }
        // A face whose velocity is not an unknown carries no flux: its
        // aperture in the continuity equation and the pressure operator is
        // 0, so the projection makes the discrete divergence vanish.
        for (a, &f) in g.aperture[d].iter_mut().zip(&fluid) {
            if !f {
                *a = 0.0;
            }
        }
        g.fluid[d] = fluid;
        g.wall[d] = wall;
        g.weight[d] = weight;
    }
    g.solid_fraction = body
        .solid_fraction_exact()
        .unwrap_or_else(|| 1.0 - g.theta.iter().sum::<f64>() / g.theta.len() as f64);
    Ok((g, spheres, radius))
}
