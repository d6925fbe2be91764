//! The geometry the solver reads, over one rank's block of cells and one
//! ghost layer around it (an [`ibm::Region`]; every value is a pure
//! function of global indices, so blocks of any decomposition hold the
//! same bits where they overlap, and each rank holds memory in proportion
//! to its block): cell fluid fractions, face apertures, and per velocity
//! component which points are fluid and the wall corrections of the
//! ghost-cell treatment.
//!
//! Points of velocity component `d` sit on the lower faces along `d` of the
//! cells: point `p` is at `(p + 1/2 - e_d / 2) h`.

use comm::IndexBox;
use ibm::Region;

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

/// The geometry of one block and its ghost layer: arrays over
/// [`region`](Self::region), row-major, the last axis fastest (the layout
/// of a `halo` field with ghost width 1).
#[derive(Debug, Clone)]
pub struct Geometry {
    /// Cells per axis of the whole grid.
    pub n: [usize; 3],
    /// Cell size.
    pub h: f64,
    region: Region,
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
    /// Owned points only (0 on the ghost layer).
    pub wall: [Vec<f64>; 3],
    /// Fluid fraction of the control volume of velocity point `p` of
    /// component `d` (the weight of the body force). Owned points only (0
    /// on the ghost layer).
    pub weight: [Vec<f64>; 3],
    /// The solid fraction of the bodies in the whole box (exact where
    /// known, else from the cell fractions: set by the run, collectively).
    pub solid_fraction: f64,
}

impl Geometry {
    /// The block and its ghost layer.
    pub fn region(&self) -> Region {
        self.region
    }

    /// The owned block of cells.
    pub fn block(&self) -> IndexBox {
        self.region.block()
    }

    /// Strides of the arrays per axis.
    #[inline]
    pub fn strides(&self) -> [usize; 3] {
        let e = self.region.extent();
        [e[1] * e[2], e[2], 1]
    }

    /// Index of the owned cell `p` (global index) in the arrays; its
    /// neighbours are `± strides()[d]` away.
    #[inline]
    pub fn idx(&self, p: [usize; 3]) -> usize {
        let (b, s) = (self.region.block(), self.strides());
        (p[0] + 1 - b.lo[0]) * s[0] + (p[1] + 1 - b.lo[1]) * s[1] + (p[2] + 1 - b.lo[2])
    }

    /// The geometry of an empty box: all fluid.
    pub fn open(n: [usize; 3], h: f64, region: Region) -> Self {
        let m = region.len();
        let owned_ones = || {
            let mut v = vec![0.0; m];
            for i in region.owned() {
                v[i] = 1.0;
            }
            v
        };
        Geometry {
            n,
            h,
            region,
            theta: vec![1.0; m],
            aperture: std::array::from_fn(|_| vec![1.0; m]),
            fluid: std::array::from_fn(|_| vec![true; m]),
            wall: std::array::from_fn(|_| vec![0.0; m]),
            weight: std::array::from_fn(|_| owned_ones()),
            solid_fraction: 0.0,
        }
    }

    /// A geometry from its arrays (each over `region`; the solid fraction
    /// 0).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        n: [usize; 3],
        h: f64,
        region: Region,
        theta: Vec<f64>,
        aperture: [Vec<f64>; 3],
        fluid: [Vec<bool>; 3],
        wall: [Vec<f64>; 3],
        weight: [Vec<f64>; 3],
    ) -> Self {
        let m = region.len();
        debug_assert!(std::iter::once(&theta)
            .chain(&aperture)
            .chain(&wall)
            .chain(&weight)
            .all(|a| a.len() == m));
        debug_assert!(fluid.iter().all(|a| a.len() == m));
        Geometry {
            n,
            h,
            region,
            theta,
            aperture,
            fluid,
            wall,
            weight,
            solid_fraction: 0.0,
        }
    }

    /// Fluid cells (positive fraction) of the owned block.
    pub fn fluid_cells(&self) -> usize {
        self.region.owned().filter(|&i| self.theta[i] > 0.0).count()
    }

    /// Bytes the arrays hold.
    pub fn bytes(&self) -> usize {
        let m = self.region.len();
        m * (std::mem::size_of::<f64>() * 10 + 3 * std::mem::size_of::<bool>())
    }

    /// The values of one array at the owned cells, row-major over the
    /// block.
    pub fn owned<T: Copy>(&self, a: &[T]) -> Vec<T> {
        self.region.owned().map(|i| a[i]).collect()
    }
}
