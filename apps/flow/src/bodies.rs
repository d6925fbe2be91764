//! The bodies of a configuration and the geometry arrays the solver reads,
//! from `ibm`: cut-cell volume fractions and apertures, and the ghost-cell
//! classification and wall fractions of each velocity component.

use anyhow::{bail, Context, Result};
use comm::exact::{allreduce_exact_sums, ExactSum};
use comm::{Communicator, IndexBox};
use ibm::{
    Body, CutCells, GhostPoints, Lattice, LatticeKind, Link, Location, MacGrid, Packing, PointKind,
    Region, Side,
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

/// The bodies of a configuration, built once per process and shared by
/// its ranks (a sphere list or a lattice: no per-cell data): the body, the
/// number of its spheres in the box and their radius.
pub struct Bed {
    /// The body (`None`: an empty box).
    pub body: Option<Box<dyn Body>>,
    /// Spheres in the box.
    pub spheres: usize,
    /// Their radius (the smallest of a packing file).
    pub radius: f64,
}

impl std::fmt::Debug for Bed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bed")
            .field("body", &self.body.is_some())
            .field("spheres", &self.spheres)
            .field("radius", &self.radius)
            .finish()
    }
}

impl Bed {
    /// The bodies of `cfg` ([`body`]).
    pub fn new(cfg: &Config) -> Result<Self> {
        Ok(match body(cfg)? {
            None => Bed {
                body: None,
                spheres: 0,
                radius: 0.0,
            },
            Some((b, spheres, radius)) => Bed {
                body: Some(b),
                spheres,
                radius,
            },
        })
    }
}

/// The geometry of the block `block` of `cfg`'s grid and one ghost layer
/// around it (see [`Geometry`]), from the body (`None`: an empty box).
/// Every value is a pure function of global indices: the blocks of any
/// decomposition hold the bits the whole grid would. The solid fraction is
/// left 0 (the run sets it, collectively).
pub fn build(cfg: &Config, body: Option<&dyn Body>, block: IndexBox) -> Result<Geometry> {
    let n = [cfg.n; 3];
    let h = cfg.h();
    let region = Region::new(block, 1, n)?;
    let Some(body) = body else {
        return Ok(Geometry::open(n, h, region));
    };
    let grid = MacGrid::new(n, [cfg.length; 3])?;
    let m = region.len();
    let e = region.extent();
    let s = [e[1] * e[2], e[2], 1];
    // The cut cells' arrays copied out and the cut cells dropped before
    // the per-component arrays are made: the build holds little more than
    // the geometry it returns.
    let (theta, cut_apertures) = {
        let cut = CutCells::new(body, &grid, block, 1)?;
        let theta = cut.volume_fractions().to_vec();
        let ap: [Vec<f64>; 3] = match cfg.method {
            Method::CutCell => {
                let mut ap: [Vec<f64>; 3] = Default::default();
                for (d, a) in ap.iter_mut().enumerate() {
                    *a = cut.apertures(d).context("apertures of the block")?.to_vec();
                }
                ap
            }
            Method::GhostCell => Default::default(),
        };
        (theta, ap)
    };
    // The staircase of the ghost-cell method: a face is open when both
    // cell centres are in the fluid (centres over two ghost layers, so
    // the faces of the first ghost layer have both).
    let wide = Region::new(block, 2, n)?;
    let centre_fluid: Vec<bool> = match cfg.method {
        Method::CutCell => Vec::new(),
        Method::GhostCell => (0..wide.len())
            .map(|i| {
                let p = grid.wrap(wide.global(i)).map(|x| x as i64);
                body.distance(grid.point(Location::Centre, p)) > 0.0
            })
            .collect(),
    };
    let centre = |p: [i64; 3]| centre_fluid[wide.index(p).expect("inside two ghost layers")];
    let mut aperture = cut_apertures;
    for (d, ap) in aperture.iter_mut().enumerate() {
        *ap = match cfg.method {
            Method::CutCell => std::mem::take(ap),
            Method::GhostCell => (0..m)
                .map(|i| {
                    let p = region.global(i);
                    let mut q = p;
                    q[d] -= 1;
                    if centre(p) && centre(q) {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect(),
        };
    }
    drop(centre_fluid);
    // A cut-cell face open by at most `min_aperture` is closed: its
    // velocity point is no unknown (below) and its aperture 0.
    let min_open = match cfg.method {
        Method::CutCell => cfg.min_aperture,
        Method::GhostCell => 0.0,
    };
    let mut fluids: [Vec<bool>; 3] = Default::default();
    let mut walls: [Vec<f64>; 3] = Default::default();
    let mut weights: [Vec<f64>; 3] = Default::default();
    for d in 0..3 {
        let gp = GhostPoints::new(body, &grid, Location::Face(d), block, 1)?;
        let mut fluid = vec![false; m];
        for (i, f) in fluid.iter_mut().enumerate() {
            *f = gp.kind(region.global(i)) == Some(PointKind::Fluid) && aperture[d][i] > min_open;
        }
        let mut wall = vec![0.0; m];
        let mut weight = vec![0.0; m];
        for i in region.owned() {
            if !fluid[i] {
                continue;
            }
            let p = region.global(i);
            for axis in 0..3 {
                for side in [Side::Lower, Side::Upper] {
                    let q = if side == Side::Lower {
                        i - s[axis]
                    } else {
                        i + s[axis]
                    };
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
                Method::CutCell => 0.5 * (theta[i] + theta[i - s[d]]),
                Method::GhostCell => 1.0,
            };
        }
        // A face whose velocity is not an unknown carries no flux: its
        // aperture in the continuity equation and the pressure operator is
        // 0, so the projection makes the discrete divergence vanish.
        for (a, &f) in aperture[d].iter_mut().zip(&fluid) {
            if !f {
                *a = 0.0;
            }
        }
        fluids[d] = fluid;
        walls[d] = wall;
        weights[d] = weight;
    }
    Ok(Geometry::from_parts(
        n, h, region, theta, aperture, fluids, walls, weights,
    ))
}

/// The solid fraction of the bodies in the box (collective): exact where
/// the body knows it, else one minus the mean cell fluid fraction (an
/// exact sum over the ranks' blocks, so the same bits on any rank count).
pub fn solid_fraction(
    comm: &dyn Communicator,
    body: Option<&dyn Body>,
    g: &Geometry,
) -> Result<f64> {
    if let Some(f) = body.and_then(|b| b.solid_fraction_exact()) {
        return Ok(f);
    }
    if body.is_none() {
        return Ok(0.0);
    }
    let mut acc = ExactSum::new();
    for i in g.region().owned() {
        acc.add(g.theta[i]);
    }
    let sum = allreduce_exact_sums(comm, &[acc])?[0];
    let cells = (g.n[0] * g.n[1] * g.n[2]) as f64;
    Ok(1.0 - sum / cells)
}
