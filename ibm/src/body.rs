//! The signed-distance body trait and the plane-wall slab.

use crate::grid::check_lengths;
use crate::{IbmError, Result};

/// A solid in the periodic box, given by its signed distance: **negative
/// inside the solid, positive in the fluid**, measured to the nearest
/// periodic image (so `distance(x + k L) == distance(x)` up to rounding).
/// Implementations must be pure functions of `x`: the geometry of a block
/// then has the same bits on every decomposition.
pub trait Body: Send + Sync {
    /// Signed distance from `x` (any real coordinates) to the surface.
    fn distance(&self, x: [f64; 3]) -> f64;

    /// The box `[L0, L1, L2]` the body is periodic on.
    fn lengths(&self) -> [f64; 3];

    /// The exact solid volume fraction of the box, where known.
    fn solid_fraction_exact(&self) -> Option<f64> {
        None
    }
}

/// `dx` reduced to the nearest periodic image, in `[-L/2, L/2]`.
#[inline]
pub(crate) fn min_image(dx: f64, l: f64) -> f64 {
    dx - l * (dx / l).round()
}

pub(crate) fn check_finite(what: &'static str, v: &[f64]) -> Result<()> {
    for &value in v {
        if !value.is_finite() {
            return Err(IbmError::NotFinite { what, value });
        }
    }
    Ok(())
}

/// A solid layer `|x_axis - centre| < half_width` (periodic along `axis`),
/// fluid elsewhere: two plane walls at `centre +- half_width`, with the
/// fluid gap of width `L_axis - 2 half_width` between them through the
/// periodic boundary. The distance is exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slab {
    axis: usize,
    centre: f64,
    half_width: f64,
    lengths: [f64; 3],
}

impl Slab {
    /// The slab normal to `axis` centred at `centre` (any finite value),
    /// `half_width` in `(0, L_axis / 2)`.
    pub fn new(axis: usize, centre: f64, half_width: f64, lengths: [f64; 3]) -> Result<Self> {
        check_lengths(lengths)?;
        if axis >= 3 {
            return Err(IbmError::Axis { value: axis });
        }
        check_finite("slab centre", &[centre])?;
        let max = 0.5 * lengths[axis];
        if !(half_width > 0.0 && half_width < max) {
            return Err(IbmError::HalfWidth {
                value: half_width,
                max,
            });
        }
        Ok(Slab {
            axis,
            centre,
            half_width,
            lengths,
        })
    }

    /// The wall positions `centre - half_width`, `centre + half_width`.
    pub fn walls(&self) -> [f64; 2] {
        [self.centre - self.half_width, self.centre + self.half_width]
    }
}

impl Body for Slab {
    fn distance(&self, x: [f64; 3]) -> f64 {
        let l = self.lengths[self.axis];
        min_image(x[self.axis] - self.centre, l).abs() - self.half_width
    }

    fn lengths(&self) -> [f64; 3] {
        self.lengths
    }

    fn solid_fraction_exact(&self) -> Option<f64> {
        Some(2.0 * self.half_width / self.lengths[self.axis])
    }
}
