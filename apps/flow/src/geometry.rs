//! The geometry the solver reads, as global arrays (every rank holds the
//! whole grid's, computed from global indices only, so they are the same
//! bits on every rank and the multigrid coefficient functions can read any
//! index): cell fluid fractions, face apertures, and per velocity component
//! which points are fluid and the wall corrections of the ghost-cell
//! treatment.
//!
//! Points of velocity component `d` sit on the lower faces along `d` of the
//! cells: point `p` is at `(p + 1/2 - e_d / 2) h`.

/// How the immersed boundaries enter the discretisation.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Cut cells: the continuity equation and the pressure operator weight
    /// every face by its open area fraction (aperture); the body force by
    /// the fluid fraction of the velocity's control volume.
    CutCell,
    /// Ghost cells: a face is open when both cell centres are in the fluid
    /// (staircase continuity and pressure operator).
    GhostCell,
}

/// The global geometry arrays (row-major, last axis fastest).
#[derive(Debug, Clone)]
pub struct Geometry {
    /// Cells per axis.
    pub n: [usize; 3],
    /// Cell size.
    pub h: f64,
    /// Fluid fraction of each cell.
    pub theta: Vec<f64>,
    /// Aperture of the lower face along `d` of each cell.
    pub aperture: [Vec<f64>; 3],
    /// Whether velocity point `p` of component `d` is a fluid unknown.
    pub fluid: [Vec<bool>; 3],
    /// `sum 1 / t` over the wall crossings of the grid lines from a fluid
    /// velocity point to its six neighbours (`t` the fraction of the
    /// spacing at which the wall lies): the ghost-cell correction adds
    /// `nu sum 1/t / h^2` to the diagonal and closes those couplings.
    pub wall: [Vec<f64>; 3],
    /// Fluid fraction of the control volume of velocity point `p` of
    /// component `d` (the weight of the body force).
    pub weight: [Vec<f64>; 3],
    /// The solid fraction of the bodies (exact where known, else the
    /// cell-fraction sum).
    pub solid_fraction: f64,
}

impl Geometry {
    /// Index of global cell `p`.
    #[inline]
    pub fn idx(&self, p: [usize; 3]) -> usize {
        (p[0] * self.n[1] + p[1]) * self.n[2] + p[2]
    }

    /// The global cell of index `i` (the inverse of [`idx`](Self::idx)).
    #[inline]
    pub fn point(&self, i: usize) -> [usize; 3] {
        [
            i / (self.n[1] * self.n[2]),
            (i / self.n[2]) % self.n[1],
            i % self.n[2],
        ]
    }

    /// `p + s e_d` with periodic wrap.
    #[inline]
    pub fn shift(&self, p: [usize; 3], d: usize, s: i64) -> [usize; 3] {
        let mut q = p;
        q[d] = (p[d] as i64 + s).rem_euclid(self.n[d] as i64) as usize;
        q
    }

    /// The geometry of an empty box: all fluid.
    pub fn open(n: [usize; 3], h: f64) -> Self {
        let m = n[0] * n[1] * n[2];
        Geometry {
            n,
            h,
            theta: vec![1.0; m],
            aperture: std::array::from_fn(|_| vec![1.0; m]),
            fluid: std::array::from_fn(|_| vec![true; m]),
            wall: std::array::from_fn(|_| vec![0.0; m]),
            weight: std::array::from_fn(|_| vec![1.0; m]),
            solid_fraction: 0.0,
        }
    }

    /// Fluid cells (positive fraction).
    pub fn fluid_cells(&self) -> usize {
        self.theta.iter().filter(|&&t| t > 0.0).count()
    }
}
