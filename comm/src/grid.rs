//! Cartesian process grids and block decompositions of a global index box.
//!
//! Ranks are numbered row-major over the grid with the **last** axis fastest,
//! the convention of `MPI_Cart_create` with `reorder = false`, so a grid built
//! here and an MPI Cartesian communicator agree on coordinates.

use crate::error::{CommError, Result};
use crate::Communicator;

/// A half-open box of global indices, `lo[d] <= i[d] < hi[d]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IndexBox {
    /// First index per axis.
    pub lo: [usize; 3],
    /// One past the last index per axis.
    pub hi: [usize; 3],
}

impl IndexBox {
    /// The box `0..shape`.
    pub fn from_shape(shape: [usize; 3]) -> Self {
        IndexBox {
            lo: [0; 3],
            hi: shape,
        }
    }

    /// Extent along each axis.
    pub fn shape(&self) -> [usize; 3] {
        [0, 1, 2].map(|d| self.hi[d].saturating_sub(self.lo[d]))
    }

    /// Number of indices in the box.
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    /// True when the box holds no index.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when `p` lies in the box.
    pub fn contains(&self, p: [usize; 3]) -> bool {
        (0..3).all(|d| self.lo[d] <= p[d] && p[d] < self.hi[d])
    }

    /// The common part of two boxes (possibly empty).
    pub fn intersect(&self, o: &IndexBox) -> IndexBox {
        let lo = [0, 1, 2].map(|d| self.lo[d].max(o.lo[d]));
        let hi = [0, 1, 2].map(|d| self.hi[d].min(o.hi[d]).max(lo[d]));
        IndexBox { lo, hi }
    }
}

/// Splits `n` items into `parts` blocks whose sizes differ by at most one
/// (the first `n % parts` blocks get the extra item); returns block `i` as
/// `(start, len)`.
pub fn block_range(n: usize, parts: usize, i: usize) -> (usize, usize) {
    let base = n / parts;
    let extra = n % parts;
    let start = i * base + i.min(extra);
    (start, base + usize::from(i < extra))
}

/// A Cartesian grid of ranks, periodic or not per axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessGrid {
    dims: [usize; 3],
    periodic: [bool; 3],
}

impl ProcessGrid {
    /// A grid with explicit dimensions.
    pub fn new(dims: [usize; 3], periodic: [bool; 3]) -> Result<Self> {
        if dims.contains(&0) {
            return Err(CommError::invalid(format!(
                "process grid {dims:?} has a zero dimension; every dimension must be at least 1"
            )));
        }
        Ok(ProcessGrid { dims, periodic })
    }

    /// The grid of `nranks` ranks for a global `shape` with the smallest
    /// communication surface (sum over ranks of the faces shared with a
    /// neighbour), among the factorisations that leave no rank empty. Ties go
    /// to the grid with the fewest ranks along the last axis (the contiguous
    /// one in row-major storage: its faces are the costliest to pack and
    /// splitting it shortens every row), then to the most balanced grid,
    /// then to the one that splits the slower (earlier) axes.
    pub fn for_shape(shape: [usize; 3], nranks: usize, periodic: [bool; 3]) -> Result<Self> {
        if nranks == 0 {
            return Err(CommError::invalid(
                "the rank count must be at least 1, got 0",
            ));
        }
        if let Some(d) = (0..3).find(|&d| shape[d] == 0) {
            return Err(CommError::invalid(format!(
                "global shape {shape:?} has extent 0 on axis {d}; every extent must be at least 1"
            )));
        }
        let mut best: Option<(u128, [usize; 3])> = None;
        for a in divisors(nranks) {
            for b in divisors(nranks / a) {
                let dims = [a, b, nranks / a / b];
                if (0..3).any(|d| dims[d] > shape[d]) {
                    continue;
                }
                let cost = surface(shape, dims, periodic);
                // Ties: fewest ranks along the last (contiguous) axis, whose
                // faces are the costliest to pack (one value per row) and
                // whose split cuts every row short; then the most balanced
                // grid; then the one that splits the slower axes.
                let balance = |d: [usize; 3]| d.iter().map(|x| x * x).sum::<usize>();
                let key = |d: [usize; 3]| (d[2], balance(d), std::cmp::Reverse(d));
                let better = match best {
                    None => true,
                    Some((c, bd)) => (cost, key(dims)) < (c, key(bd)),
                };
                if better {
                    best = Some((cost, dims));
                }
            }
        }
        match best {
            Some((_, dims)) => Ok(ProcessGrid { dims, periodic }),
            None => Err(CommError::invalid(format!(
                "{nranks} ranks cannot split the global shape {shape:?} without leaving a rank empty \
                 (at most {} ranks fit)",
                shape.iter().product::<usize>()
            ))),
        }
    }

    /// Ranks along each axis.
    pub fn dims(&self) -> [usize; 3] {
        self.dims
    }

    /// Periodicity per axis.
    pub fn periodic(&self) -> [bool; 3] {
        self.periodic
    }

    /// Total number of ranks.
    pub fn size(&self) -> usize {
        self.dims.iter().product()
    }

    /// Grid coordinates of `rank` (last axis fastest).
    pub fn coords(&self, rank: usize) -> [usize; 3] {
        let [_, d1, d2] = self.dims;
        [rank / (d1 * d2), (rank / d2) % d1, rank % d2]
    }

    /// Rank at grid coordinates `c`.
    pub fn rank_of(&self, c: [usize; 3]) -> usize {
        (c[0] * self.dims[1] + c[1]) * self.dims[2] + c[2]
    }

    /// The rank at offset `off` (each component in -1..=1 or wider) from
    /// `rank`, wrapping on periodic axes; `None` past a non-periodic edge.
    pub fn neighbor(&self, rank: usize, off: [isize; 3]) -> Option<usize> {
        let c = self.coords(rank);
        let mut n = [0usize; 3];
        for d in 0..3 {
            let p = self.dims[d] as isize;
            let x = c[d] as isize + off[d];
            if self.periodic[d] {
                n[d] = x.rem_euclid(p) as usize;
            } else if (0..p).contains(&x) {
                n[d] = x as usize;
            } else {
                return None;
            }
        }
        Some(self.rank_of(n))
    }

    /// Checks that the grid matches a communicator's size.
    pub fn check_comm(&self, comm: &(impl Communicator + ?Sized)) -> Result<()> {
        if self.size() != comm.size() {
            return Err(CommError::invalid(format!(
                "process grid {:?} holds {} ranks but the communicator has {}",
                self.dims,
                self.size(),
                comm.size()
            )));
        }
        Ok(())
    }

    /// Collective: the sub-communicator of the ranks that share this rank's
    /// coordinates on every axis where `keep[d]` is false (so `keep =
    /// [false, false, true]` gives the row along axis 2). Ranks in it are
    /// ordered by their coordinates along the kept axes.
    pub fn sub_comm(
        &self,
        comm: &dyn Communicator,
        keep: [bool; 3],
    ) -> Result<Box<dyn Communicator>> {
        self.check_comm(comm)?;
        let c = self.coords(comm.rank());
        let mut color = 0usize;
        let mut key = 0usize;
        for d in 0..3 {
            if keep[d] {
                key = key * self.dims[d] + c[d];
            } else {
                color = color * self.dims[d] + c[d];
            }
        }
        let color =
            u32::try_from(color).map_err(|_| CommError::invalid("process grid too large"))?;
        comm.split(Some(color), key)?
            .ok_or_else(|| CommError::invalid("split returned no communicator for a member"))
    }
}

fn divisors(n: usize) -> Vec<usize> {
    (1..=n).filter(|d| n % d == 0).collect()
}

/// Total halo surface (cells on faces shared between distinct ranks).
fn surface(shape: [usize; 3], dims: [usize; 3], periodic: [bool; 3]) -> u128 {
    let mut s = 0u128;
    for d in 0..3 {
        let cuts = if periodic[d] { dims[d] } else { dims[d] - 1 };
        if dims[d] == 1 {
            continue;
        }
        let face: u128 = (0..3)
            .filter(|&e| e != d)
            .map(|e| shape[e] as u128)
            .product();
        s += cuts as u128 * face;
    }
    s
}

/// The block decomposition of a global box over a process grid: rank `r`
/// owns the product of the per-axis blocks at its grid coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDecomposition {
    global: [usize; 3],
    grid: ProcessGrid,
}

impl BlockDecomposition {
    /// Splits `global` over `grid`; an axis with more ranks than cells would
    /// leave a rank empty and is an error.
    pub fn new(global: [usize; 3], grid: ProcessGrid) -> Result<Self> {
        for d in 0..3 {
            if grid.dims[d] > global[d] {
                return Err(CommError::invalid(format!(
                    "axis {d} has {} cells but the process grid {:?} puts {} ranks on it; \
                     each rank needs at least one cell (use at most {} ranks on that axis)",
                    global[d], grid.dims, grid.dims[d], global[d]
                )));
            }
        }
        Ok(BlockDecomposition { global, grid })
    }

    /// The global shape.
    pub fn global(&self) -> [usize; 3] {
        self.global
    }

    /// The process grid.
    pub fn grid(&self) -> &ProcessGrid {
        &self.grid
    }

    /// The box owned by `rank`.
    pub fn box_of(&self, rank: usize) -> IndexBox {
        let c = self.grid.coords(rank);
        let mut lo = [0; 3];
        let mut hi = [0; 3];
        for d in 0..3 {
            let (s, n) = block_range(self.global[d], self.grid.dims[d], c[d]);
            lo[d] = s;
            hi[d] = s + n;
        }
        IndexBox { lo, hi }
    }

    /// The rank owning global index `p`.
    pub fn owner(&self, p: [usize; 3]) -> usize {
        let mut c = [0; 3];
        for d in 0..3 {
            let (n, k) = (self.global[d], self.grid.dims[d]);
            let base = n / k;
            let extra = n % k;
            let split = extra * (base + 1);
            c[d] = if p[d] < split {
                p[d] / (base + 1)
            } else {
                extra + (p[d] - split) / base
            };
        }
        self.grid.rank_of(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_and_differ_by_at_most_one() {
        for n in 1..40 {
            for p in 1..=n {
                let mut next = 0;
                let sizes: Vec<usize> = (0..p)
                    .map(|i| {
                        let (s, l) = block_range(n, p, i);
                        assert_eq!(s, next);
                        next += l;
                        l
                    })
                    .collect();
                assert_eq!(next, n);
                let (mn, mx) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(mx - mn <= 1 && *mn >= 1);
            }
        }
    }

    #[test]
    fn owner_inverts_box_of() {
        let g = ProcessGrid::new([3, 2, 4], [true; 3]).unwrap();
        let dec = BlockDecomposition::new([10, 7, 9], g).unwrap();
        let mut seen = 0;
        for r in 0..g.size() {
            let b = dec.box_of(r);
            seen += b.len();
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    for k in b.lo[2]..b.hi[2] {
                        assert_eq!(dec.owner([i, j, k]), r);
                    }
                }
            }
        }
        assert_eq!(seen, 10 * 7 * 9);
    }

    #[test]
    fn coords_and_neighbors() {
        let g = ProcessGrid::new([2, 3, 4], [true, false, true]).unwrap();
        for r in 0..24 {
            assert_eq!(g.rank_of(g.coords(r)), r);
        }
        assert_eq!(g.coords(23), [1, 2, 3]);
        assert_eq!(
            g.neighbor(g.rank_of([0, 0, 0]), [0, 0, -1]),
            Some(g.rank_of([0, 0, 3]))
        );
        assert_eq!(g.neighbor(g.rank_of([0, 0, 0]), [0, -1, 0]), None);
        assert_eq!(
            g.neighbor(g.rank_of([1, 2, 3]), [1, 0, 1]),
            Some(g.rank_of([0, 2, 0]))
        );
    }

    #[test]
    fn grid_choice_minimises_surface() {
        // Equal surfaces: the last (contiguous) axis stays whole.
        assert_eq!(
            ProcessGrid::for_shape([64, 64, 64], 8, [true; 3])
                .unwrap()
                .dims(),
            [4, 2, 1]
        );
        // Without periodicity [2, 2, 2] has the smaller surface.
        assert_eq!(
            ProcessGrid::for_shape([64, 64, 64], 8, [false; 3])
                .unwrap()
                .dims(),
            [2, 2, 2]
        );
        assert_eq!(
            ProcessGrid::for_shape([64, 64, 64], 1, [true; 3])
                .unwrap()
                .dims(),
            [1, 1, 1]
        );
        // A thin slab is split along its long axes.
        let d = ProcessGrid::for_shape([256, 256, 4], 4, [true; 3])
            .unwrap()
            .dims();
        assert_eq!(d[2], 1);
        // Brute force check of optimality on odd shapes.
        for (shape, p) in [([30, 17, 12], 6), ([5, 100, 7], 12), ([9, 9, 9], 3)] {
            let g = ProcessGrid::for_shape(shape, p, [true; 3]).unwrap();
            let c = surface(shape, g.dims(), [true; 3]);
            for a in 1..=p {
                for b in 1..=p {
                    if p % (a * b) == 0 {
                        let dims = [a, b, p / a / b];
                        if (0..3).all(|x| dims[x] <= shape[x]) {
                            assert!(c <= surface(shape, dims, [true; 3]));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn errors_name_the_values() {
        let e = ProcessGrid::for_shape([2, 2, 1], 5, [true; 3])
            .unwrap_err()
            .to_string();
        assert!(e.contains("5 ranks") && e.contains("[2, 2, 1]"), "{e}");
        let g = ProcessGrid::new([1, 1, 4], [true; 3]).unwrap();
        let e = BlockDecomposition::new([8, 8, 3], g)
            .unwrap_err()
            .to_string();
        assert!(e.contains("axis 2") && e.contains("3 cells"), "{e}");
        assert!(ProcessGrid::new([1, 0, 1], [true; 3]).is_err());
    }
}
