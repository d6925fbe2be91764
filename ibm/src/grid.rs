//! The MAC grid, its point locations and the index region of one block.

use crate::{IbmError, Result};
use comm::IndexBox;

/// Where the points of one staggered component sit in their cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// Cell centres `(p + 1/2) h` (pressure, scalars).
    Centre,
    /// Centres of the lower faces along the axis: `(p + 1/2 - 1/2 e_d) h`
    /// (velocity component `d`).
    Face(usize),
}

impl Location {
    /// The half-cell offsets of the point of cell `p`: the point is
    /// `(p + offset) h`.
    pub fn offset(self) -> [f64; 3] {
        match self {
            Location::Centre => [0.5; 3],
            Location::Face(d) => {
                let mut o = [0.5; 3];
                if d < 3 {
                    o[d] = 0.0;
                }
                o
            }
        }
    }

    pub(crate) fn check(self) -> Result<()> {
        match self {
            Location::Face(d) if d >= 3 => Err(IbmError::Axis { value: d }),
            _ => Ok(()),
        }
    }
}

/// The most cells per axis of a [`MacGrid`] or a [`Region`]'s grid (2^40).
pub const MAX_EXTENT: usize = 1 << 40;

/// The most ghost layers of a [`Region`] (2^20).
pub const MAX_GHOST: usize = 1 << 20;

/// A periodic box `[0, L)` divided into `n` cells per axis, spacing
/// `h = L / n`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MacGrid {
    shape: [usize; 3],
    lengths: [f64; 3],
    h: [f64; 3],
}

impl MacGrid {
    /// A grid of `shape` cells on a box of `lengths`; every extent must be
    /// in `1..=`[`MAX_EXTENT`] and every length finite and positive.
    pub fn new(shape: [usize; 3], lengths: [f64; 3]) -> Result<Self> {
        check_lengths(lengths)?;
        check_shape(shape)?;
        let h = [0, 1, 2].map(|d| lengths[d] / shape[d] as f64);
        Ok(MacGrid { shape, lengths, h })
    }

    /// Cells per axis.
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// Box lengths.
    pub fn lengths(&self) -> [f64; 3] {
        self.lengths
    }

    /// Spacing per axis, `L / n`.
    pub fn spacing(&self) -> [f64; 3] {
        self.h
    }

    /// The global index `p` wrapped into `0..n` per axis.
    #[inline]
    pub fn wrap(&self, p: [i64; 3]) -> [usize; 3] {
        [0, 1, 2].map(|d| p[d].rem_euclid(self.shape[d] as i64) as usize)
    }

    /// The coordinates of the point of cell `p` (wrapped first) of a
    /// component at `location`: `(p + 1/2) h` for centres, with `p_d h`
    /// along `d` for faces of axis `d`. The same bits for every `p` that
    /// wraps to the same cell.
    #[inline]
    pub fn point(&self, location: Location, p: [i64; 3]) -> [f64; 3] {
        let q = self.wrap(p);
        let o = location.offset();
        [0, 1, 2].map(|d| (q[d] as f64 + o[d]) * self.h[d])
    }
}

fn check_shape(shape: [usize; 3]) -> Result<()> {
    for (axis, &value) in shape.iter().enumerate() {
        if value == 0 || value > MAX_EXTENT {
            return Err(IbmError::Shape { axis, value });
        }
    }
    Ok(())
}

pub(crate) fn check_lengths(lengths: [f64; 3]) -> Result<()> {
    for (axis, &value) in lengths.iter().enumerate() {
        if !(value.is_finite() && value > 0.0) {
            return Err(IbmError::Length { axis, value });
        }
    }
    Ok(())
}

/// One rank's block of cells with `ghost` layers around it: the index set
/// `lo - ghost .. hi + ghost` per axis (global indices, wrapped
/// periodically when read).
///
/// **Layout** of every per-point array of this crate: row-major over the
/// region with the **last axis fastest**, the layout of a `halo` field
/// component with uniform ghost width: global index `p` is at
/// `((p0 - lo0 + g) e1 + (p1 - lo1 + g)) e2 + (p2 - lo2 + g)` with
/// `e = hi - lo + 2 g`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Region {
    block: IndexBox,
    ghost: usize,
    shape: [usize; 3],
}

impl Region {
    /// The most points a region may hold: the most `f64` values one
    /// allocation can hold (`isize::MAX` bytes), so every per-point array
    /// of the region can exist and every linear index fits `usize`.
    pub const MAX_POINTS: usize = isize::MAX as usize / std::mem::size_of::<f64>();

    /// The region of `block` (non-empty, inside `0..shape`) with `ghost`
    /// layers. Errors: a `shape` extent outside `1..=`[`MAX_EXTENT`]
    /// ([`IbmError::Shape`]), a block empty or outside the grid
    /// ([`IbmError::Block`]), `ghost` above [`MAX_GHOST`]
    /// ([`IbmError::Ghost`]), more than [`Region::MAX_POINTS`] points
    /// ([`IbmError::TooLarge`]).
    pub fn new(block: IndexBox, ghost: usize, shape: [usize; 3]) -> Result<Self> {
        check_shape(shape)?;
        if (0..3).any(|d| block.lo[d] >= block.hi[d] || block.hi[d] > shape[d]) {
            return Err(IbmError::Block {
                lo: block.lo,
                hi: block.hi,
                shape,
            });
        }
        if ghost > MAX_GHOST {
            return Err(IbmError::Ghost {
                value: ghost,
                max: MAX_GHOST,
            });
        }
        // Block extents are at most MAX_EXTENT, so the sums cannot overflow.
        let extent = [0, 1, 2].map(|d| block.hi[d] - block.lo[d] + 2 * ghost);
        let points = extent
            .iter()
            .try_fold(1usize, |acc, &e| acc.checked_mul(e))
            .filter(|&p| p <= Region::MAX_POINTS);
        if points.is_none() {
            return Err(IbmError::TooLarge {
                extent,
                max: Region::MAX_POINTS,
                reason: "the most f64 values one allocation can hold",
            });
        }
        Ok(Region {
            block,
            ghost,
            shape,
        })
    }

    /// The owned block.
    pub fn block(&self) -> IndexBox {
        self.block
    }

    /// Ghost layers on each side.
    pub fn ghost(&self) -> usize {
        self.ghost
    }

    /// Extent per axis, block plus two ghost widths.
    pub fn extent(&self) -> [usize; 3] {
        [0, 1, 2].map(|d| self.block.hi[d] - self.block.lo[d] + 2 * self.ghost)
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.extent().iter().product()
    }

    /// Never true: a region holds at least its non-empty block.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The global index of the first point (may be negative).
    pub fn first(&self) -> [i64; 3] {
        [0, 1, 2].map(|d| self.block.lo[d] as i64 - self.ghost as i64)
    }

    /// The linear index of global index `p` (wrapped periodically), or
    /// `None` when no point of the region wraps to it. Where ghost layers
    /// wrap onto cells that the region holds twice, the first is returned
    /// (both hold the same values).
    #[inline]
    pub fn index(&self, p: [i64; 3]) -> Option<usize> {
        let e = self.extent();
        let f = self.first();
        let mut k = [0usize; 3];
        for d in 0..3 {
            let n = self.shape[d] as i64;
            let r = (p[d] - f[d]).rem_euclid(n) as usize;
            if r >= e[d] {
                return None;
            }
            k[d] = r;
        }
        Some((k[0] * e[1] + k[1]) * e[2] + k[2])
    }

    /// The global (unwrapped) index of linear index `i`.
    #[inline]
    pub fn global(&self, i: usize) -> [i64; 3] {
        let e = self.extent();
        let f = self.first();
        let k = [i / (e[1] * e[2]), (i / e[2]) % e[1], i % e[2]];
        [0, 1, 2].map(|d| f[d] + k[d] as i64)
    }

    /// Linear indices of the owned block in row-major order.
    pub fn owned(&self) -> impl Iterator<Item = usize> + '_ {
        let b = self.block;
        let g = self.ghost;
        let e = self.extent();
        (b.lo[0]..b.hi[0]).flat_map(move |i| {
            (b.lo[1]..b.hi[1]).flat_map(move |j| {
                (b.lo[2]..b.hi[2]).map(move |k| {
                    ((i - b.lo[0] + g) * e[1] + (j - b.lo[1] + g)) * e[2] + (k - b.lo[2] + g)
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_limits_are_named() {
        let shape = [MAX_EXTENT; 3];
        // 2^120 points: more than any array can hold.
        let e = Region::new(IndexBox::from_shape(shape), 0, shape).unwrap_err();
        assert_eq!(
            e,
            IbmError::TooLarge {
                extent: shape,
                max: Region::MAX_POINTS,
                reason: "the most f64 values one allocation can hold",
            }
        );
        assert!(
            e.to_string().contains(&Region::MAX_POINTS.to_string()),
            "{e}"
        );
        // 2^60 points: a usize, but their f64 array (2^63 bytes) exceeds
        // one allocation.
        let e = Region::new(IndexBox::from_shape([1 << 20; 3]), 0, shape);
        assert!(matches!(e, Err(IbmError::TooLarge { .. })), "{e:?}");
        // Within the limit the point count is exact.
        let r = Region::new(
            IndexBox::from_shape([1 << 20, 1 << 20, (1 << 20) - 1]),
            0,
            shape,
        )
        .unwrap();
        assert_eq!(r.len(), (1 << 60) - (1 << 40));
        let e = Region::new(IndexBox::from_shape([8; 3]), MAX_GHOST + 1, [8; 3]).unwrap_err();
        assert_eq!(
            e,
            IbmError::Ghost {
                value: MAX_GHOST + 1,
                max: MAX_GHOST
            }
        );
        assert!(e.to_string().contains("ghost width 1048577"), "{e}");
        let e = Region::new(IndexBox::from_shape([8; 3]), 0, [8, MAX_EXTENT + 1, 8]).unwrap_err();
        assert_eq!(
            e,
            IbmError::Shape {
                axis: 1,
                value: MAX_EXTENT + 1
            }
        );
    }
}
