//! Distributed layouts as values: a global shape split over a process grid,
//! with the memory order of every rank's local block.

use crate::FftError;
use comm::grid::block_range;
use comm::IndexBox;

/// How a layout splits the global box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayoutKind {
    /// No axis is whole on every rank (a 3D process grid).
    Brick,
    /// Exactly one axis is whole (a 2D process grid).
    Pencil,
    /// Two axes are whole (a 1D process grid), or all three (one rank).
    Slab,
}

/// A global shape block-decomposed over a Cartesian process grid, with the
/// memory order of each rank's local array.
///
/// Rank `r` has grid coordinates in row-major order with the last grid axis
/// fastest (as [`comm::ProcessGrid`]) and owns the product of the per-axis
/// blocks at those coordinates (block sizes differ by at most one). Its
/// local array stores the box with `order[2]` the contiguous axis and
/// `order[0]` the slowest: local point `l` (box-relative, in axis terms) is
/// at `(l[o0] * s[o1] + l[o1]) * s[o2] + l[o2]` with `s` the box shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    global: [usize; 3],
    dims: [usize; 3],
    order: [usize; 3],
}

fn balanced_pair(p: usize, a: usize, b: usize) -> Option<(usize, usize)> {
    // Factor p = x * y with x <= a, y <= b, as square as possible.
    (1..=p)
        .filter(|x| p.is_multiple_of(*x))
        .map(|x| (x, p / x))
        .filter(|&(x, y)| x <= a && y <= b)
        .min_by_key(|&(x, y)| (x.max(y), x))
}

impl Layout {
    /// A layout on an explicit process grid with an explicit memory order.
    pub fn new(global: [usize; 3], dims: [usize; 3], order: [usize; 3]) -> Result<Self, FftError> {
        if let Some(d) = (0..3).find(|&d| global[d] == 0) {
            return Err(FftError::Invalid(format!(
                "global shape {global:?} has extent 0 on axis {d}"
            )));
        }
        let mut seen = [false; 3];
        for &a in &order {
            if a > 2 || seen[a] {
                return Err(FftError::Invalid(format!(
                    "memory order {order:?} is not a permutation of [0, 1, 2]"
                )));
            }
            seen[a] = true;
        }
        for d in 0..3 {
            if dims[d] == 0 || dims[d] > global[d] {
                return Err(FftError::GridTooLarge {
                    axis: d,
                    ranks: dims[d],
                    extent: global[d],
                });
            }
        }
        Ok(Layout {
            global,
            dims,
            order,
        })
    }

    /// Bricks on the 3D grid with the smallest surface for `nranks`, natural
    /// memory order (axis 2 contiguous).
    pub fn bricks(global: [usize; 3], nranks: usize) -> Result<Self, FftError> {
        let g = comm::ProcessGrid::for_shape(global, nranks, [false; 3])
            .map_err(|e| FftError::Invalid(e.to_string()))?;
        Layout::new(global, g.dims(), [0, 1, 2])
    }

    /// Pencils with `whole` complete and contiguous on every rank, the other
    /// two axes split as evenly as the extents allow.
    pub fn pencils(global: [usize; 3], nranks: usize, whole: usize) -> Result<Self, FftError> {
        check_axis(whole)?;
        let (a, b) = others(whole);
        let (x, y) = balanced_pair(nranks, global[a], global[b]).ok_or_else(|| {
            FftError::Invalid(format!(
                "{nranks} ranks do not split into x * y with x <= {} (axis {a}) and y <= {} \
                 (axis {b}) for pencils along axis {whole} of {global:?}: choose a rank count \
                 that factors so, or another whole axis",
                global[a], global[b]
            ))
        })?;
        let mut dims = [1; 3];
        dims[a] = x;
        dims[b] = y;
        Layout::new(global, dims, [a, b, whole])
    }

    /// Slabs split along `split` only; the two other axes are whole, the
    /// larger-numbered of them contiguous.
    pub fn slabs(global: [usize; 3], nranks: usize, split: usize) -> Result<Self, FftError> {
        check_axis(split)?;
        let (a, b) = others(split);
        let mut dims = [1; 3];
        dims[split] = nranks;
        Layout::new(global, dims, [split, a, b])
    }

    /// The same decomposition with another memory order.
    pub fn with_order(&self, order: [usize; 3]) -> Result<Self, FftError> {
        Layout::new(self.global, self.dims, order)
    }

    /// The same process grid over another global shape (used for the
    /// complex shape after a real-to-complex transform).
    pub fn with_global(&self, global: [usize; 3]) -> Result<Self, FftError> {
        Layout::new(global, self.dims, self.order)
    }

    /// Global shape.
    pub fn global(&self) -> [usize; 3] {
        self.global
    }

    /// Number of global points.
    pub fn global_len(&self) -> usize {
        self.global.iter().product()
    }

    /// Process grid dimensions.
    pub fn dims(&self) -> [usize; 3] {
        self.dims
    }

    /// Memory order (`order[2]` contiguous).
    pub fn order(&self) -> [usize; 3] {
        self.order
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.dims.iter().product()
    }

    /// True when every rank holds the whole extent of `axis`.
    pub fn is_whole(&self, axis: usize) -> bool {
        self.dims[axis] == 1
    }

    /// Brick, pencil or slab.
    pub fn kind(&self) -> LayoutKind {
        match (0..3).filter(|&d| self.dims[d] == 1).count() {
            0 => LayoutKind::Brick,
            1 => LayoutKind::Pencil,
            _ => LayoutKind::Slab,
        }
    }

    /// The box of `rank` (global indices).
    pub fn box_of(&self, rank: usize) -> IndexBox {
        let [_, d1, d2] = self.dims;
        let c = [rank / (d1 * d2), (rank / d2) % d1, rank % d2];
        let mut b = IndexBox::default();
        for d in 0..3 {
            let (s, n) = block_range(self.global[d], self.dims[d], c[d]);
            b.lo[d] = s;
            b.hi[d] = s + n;
        }
        b
    }

    /// Shape of the local block of `rank` (in axis terms).
    pub fn local_shape(&self, rank: usize) -> [usize; 3] {
        self.box_of(rank).shape()
    }

    /// Number of local points of `rank`.
    pub fn local_len(&self, rank: usize) -> usize {
        self.box_of(rank).len()
    }

    /// Calls `f(global index, offset in the local array)` for every point
    /// of `rank`'s box, in global row-major order.
    pub fn for_each_local(&self, rank: usize, mut f: impl FnMut([usize; 3], usize)) {
        let (b, st) = (self.box_of(rank), self.strides(rank));
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                for k in b.lo[2]..b.hi[2] {
                    let o = (i - b.lo[0]) * st[0] + (j - b.lo[1]) * st[1] + (k - b.lo[2]) * st[2];
                    f([i, j, k], o);
                }
            }
        }
    }

    /// Strides (in elements) of the three axes in `rank`'s local array.
    pub fn strides(&self, rank: usize) -> [usize; 3] {
        let s = self.local_shape(rank);
        let [o0, o1, o2] = self.order;
        let mut st = [0; 3];
        st[o2] = 1;
        st[o1] = s[o2];
        st[o0] = s[o2] * s[o1];
        st
    }
}

fn check_axis(a: usize) -> Result<(), FftError> {
    if a > 2 {
        return Err(FftError::Invalid(format!(
            "axis {a} is out of range (valid: 0, 1, 2)"
        )));
    }
    Ok(())
}

/// The two axes other than `a`, in increasing order.
pub(crate) fn others(a: usize) -> (usize, usize) {
    match a {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_tile_the_global_box() {
        let g = [30, 17, 12];
        for l in [
            Layout::bricks(g, 8).unwrap(),
            Layout::pencils(g, 6, 0).unwrap(),
            Layout::pencils(g, 4, 2).unwrap(),
            Layout::slabs(g, 5, 1).unwrap(),
        ] {
            let mut count = vec![0u8; l.global_len()];
            for r in 0..l.ranks() {
                let b = l.box_of(r);
                for i in b.lo[0]..b.hi[0] {
                    for j in b.lo[1]..b.hi[1] {
                        for k in b.lo[2]..b.hi[2] {
                            count[(i * 17 + j) * 12 + k] += 1;
                        }
                    }
                }
            }
            assert!(count.iter().all(|&c| c == 1), "{l:?}");
        }
        assert_eq!(Layout::pencils(g, 6, 0).unwrap().kind(), LayoutKind::Pencil);
        assert_eq!(Layout::slabs(g, 6, 0).unwrap().kind(), LayoutKind::Slab);
        let p = Layout::pencils(g, 6, 1).unwrap();
        assert_eq!(p.order()[2], 1);
        assert_eq!(p.strides(0)[1], 1);
    }

    /// `for_each_local` visits every point of a rank's box once, each at
    /// a distinct offset that the strides give, in any memory order.
    #[test]
    fn local_offsets_cover_the_local_array() {
        let g = [7, 5, 6];
        for l in [
            Layout::bricks(g, 4).unwrap(),
            Layout::pencils(g, 3, 0).unwrap(),
            Layout::new(g, [2, 1, 1], [2, 0, 1]).unwrap(),
        ] {
            for r in 0..l.ranks() {
                let (b, st) = (l.box_of(r), l.strides(r));
                let mut seen = vec![false; l.local_len(r)];
                l.for_each_local(r, |q, o| {
                    assert!(b.contains(q), "{q:?} outside {b:?}");
                    let want: usize = (0..3).map(|d| (q[d] - b.lo[d]) * st[d]).sum();
                    assert_eq!(o, want);
                    assert!(!seen[o], "offset {o} twice");
                    seen[o] = true;
                });
                assert!(seen.iter().all(|&x| x), "{l:?} rank {r}");
            }
        }
    }

    #[test]
    fn grids_larger_than_an_axis_are_errors() {
        let e = Layout::slabs([30, 17, 12], 13, 2).unwrap_err().to_string();
        assert!(
            e.contains("13 ranks") && e.contains("axis 2") && e.contains("12"),
            "{e}"
        );
        assert!(Layout::new([4, 4, 4], [1, 1, 1], [0, 0, 1]).is_err());
    }
}
