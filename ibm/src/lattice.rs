//! Cubic arrays of equal spheres.

use crate::body::{check_finite, Body};
use crate::grid::check_lengths;
use crate::{IbmError, Result};
use std::f64::consts::PI;

/// The Bravais lattice of a sphere array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LatticeKind {
    /// Simple cubic: one sphere per lattice cell, at its corner.
    Sc,
    /// Body-centred cubic: the corner and the cell centre.
    Bcc,
    /// Face-centred cubic: the corner and the three face centres.
    Fcc,
}

impl LatticeKind {
    /// Sphere positions in one lattice cell, in units of the cell.
    pub fn basis(self) -> &'static [[f64; 3]] {
        match self {
            LatticeKind::Sc => &[[0.0; 3]],
            LatticeKind::Bcc => &[[0.0; 3], [0.5; 3]],
            LatticeKind::Fcc => &[[0.0; 3], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]],
        }
    }

    /// The solid fraction at which neighbouring spheres touch in a cubic
    /// cell: pi/6 (SC), pi sqrt(3)/8 (BCC), pi sqrt(2)/6 (FCC).
    pub fn touching_fraction(self) -> f64 {
        match self {
            LatticeKind::Sc => PI / 6.0,
            LatticeKind::Bcc => PI * 3f64.sqrt() / 8.0,
            LatticeKind::Fcc => PI * 2f64.sqrt() / 6.0,
        }
    }
}

/// Equal spheres on a lattice filling the periodic box: `cells[d]` lattice
/// cells along axis `d`, each `a_d = L_d / cells[d]` long (a cubic lattice
/// when the `a_d` are equal, else its rectangular stretch). The distance is
/// exact: per sub-lattice of the basis the nearest centre is found by
/// rounding.
#[derive(Debug, Clone, PartialEq)]
pub struct Lattice {
    kind: LatticeKind,
    cells: [usize; 3],
    radius: f64,
    lengths: [f64; 3],
    a: [f64; 3],
}

impl Lattice {
    /// The lattice with spheres of `radius`, which must lie in `(0, rmax]`
    /// where `2 rmax` is the nearest-neighbour distance (touching spheres
    /// are allowed, overlapping ones are not).
    pub fn new(
        kind: LatticeKind,
        lengths: [f64; 3],
        cells: [usize; 3],
        radius: f64,
    ) -> Result<Self> {
        check_lengths(lengths)?;
        for (axis, &value) in cells.iter().enumerate() {
            if value == 0 {
                return Err(IbmError::LatticeCells { axis, value });
            }
        }
        check_finite("lattice radius", &[radius])?;
        let a = [0, 1, 2].map(|d| lengths[d] / cells[d] as f64);
        let max = 0.5 * nearest_neighbour(kind, a);
        if !(radius > 0.0 && radius <= max * (1.0 + 1e-12)) {
            return Err(IbmError::Radius {
                value: radius,
                max,
                inclusive: true,
            });
        }
        Ok(Lattice {
            kind,
            cells,
            radius,
            lengths,
            a,
        })
    }

    /// The lattice whose spheres fill the solid fraction `c` of the box; an
    /// error when `c` is not in `(0, c_max]`, `c_max` the touching limit
    /// (for cubic cells pi/6, pi sqrt(3)/8, pi sqrt(2)/6).
    pub fn for_solid_fraction(
        kind: LatticeKind,
        lengths: [f64; 3],
        cells: [usize; 3],
        c: f64,
    ) -> Result<Self> {
        check_lengths(lengths)?;
        for (axis, &value) in cells.iter().enumerate() {
            if value == 0 {
                return Err(IbmError::LatticeCells { axis, value });
            }
        }
        let a = [0, 1, 2].map(|d| lengths[d] / cells[d] as f64);
        let vcell = a[0] * a[1] * a[2];
        let nb = kind.basis().len() as f64;
        let rmax = 0.5 * nearest_neighbour(kind, a);
        let cmax = nb * 4.0 / 3.0 * PI * rmax.powi(3) / vcell;
        if !(c > 0.0 && c <= cmax * (1.0 + 1e-12)) {
            return Err(IbmError::SolidFraction {
                value: c,
                range: format!("(0, {cmax}] (touching limit of {kind:?})"),
            });
        }
        let r = (c * vcell / (nb * 4.0 / 3.0 * PI)).cbrt().min(rmax);
        Lattice::new(kind, lengths, cells, r)
    }

    /// The lattice kind.
    pub fn kind(&self) -> LatticeKind {
        self.kind
    }

    /// Lattice cells per box axis.
    pub fn cells(&self) -> [usize; 3] {
        self.cells
    }

    /// The sphere radius.
    pub fn radius(&self) -> f64 {
        self.radius
    }

    /// Number of spheres in the box.
    pub fn count(&self) -> usize {
        self.kind.basis().len() * self.cells.iter().product::<usize>()
    }

    /// The solid fraction, `count 4/3 pi r^3 / V`.
    pub fn solid_fraction(&self) -> f64 {
        let v: f64 = self.lengths.iter().product();
        self.count() as f64 * 4.0 / 3.0 * PI * self.radius.powi(3) / v
    }
}

/// Nearest distance between two lattice sites.
fn nearest_neighbour(kind: LatticeKind, a: [f64; 3]) -> f64 {
    let amin = a[0].min(a[1]).min(a[2]);
    match kind {
        LatticeKind::Sc => amin,
        LatticeKind::Bcc => amin.min(0.5 * (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt()),
        LatticeKind::Fcc => {
            let f = |i: usize, j: usize| 0.5 * (a[i] * a[i] + a[j] * a[j]).sqrt();
            amin.min(f(0, 1)).min(f(0, 2)).min(f(1, 2))
        }
    }
}

impl Body for Lattice {
    fn distance(&self, x: [f64; 3]) -> f64 {
        let mut best = f64::INFINITY;
        for o in self.kind.basis() {
            let mut s = 0.0;
            for d in 0..3 {
                let y = x[d] - o[d] * self.a[d];
                let dy = y - self.a[d] * (y / self.a[d]).round();
                s += dy * dy;
            }
            best = best.min(s);
        }
        best.sqrt() - self.radius
    }

    fn lengths(&self) -> [f64; 3] {
        self.lengths
    }

    fn solid_fraction_exact(&self) -> Option<f64> {
        Some(self.solid_fraction())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touching_limits() {
        for kind in [LatticeKind::Sc, LatticeKind::Bcc, LatticeKind::Fcc] {
            let c = kind.touching_fraction();
            let l = Lattice::for_solid_fraction(kind, [2.0; 3], [2; 3], c).unwrap();
            assert!((l.solid_fraction() - c).abs() < 1e-14, "{kind:?}");
            let e = Lattice::for_solid_fraction(kind, [2.0; 3], [2; 3], c * 1.001).unwrap_err();
            assert!(e.to_string().contains("touching limit"), "{e}");
            // Touching spheres: the distance at the contact point is ~0.
            let a = 1.0;
            let contact = match kind {
                LatticeKind::Sc => [0.5 * a, 0.0, 0.0],
                LatticeKind::Bcc => [0.25 * a; 3],
                LatticeKind::Fcc => [0.25 * a, 0.25 * a, 0.0],
            };
            assert!(l.distance(contact).abs() < 1e-12, "{kind:?}");
        }
        assert!(Lattice::for_solid_fraction(LatticeKind::Sc, [1.0; 3], [1; 3], 0.0).is_err());
        assert!(Lattice::new(LatticeKind::Sc, [1.0; 3], [0, 1, 1], 0.1).is_err());
        assert!(Lattice::new(LatticeKind::Fcc, [1.0; 3], [1; 3], 0.36).is_err());
    }

    #[test]
    fn distance_is_periodic_and_exact() {
        let l = Lattice::new(LatticeKind::Bcc, [1.0, 2.0, 1.0], [1, 2, 1], 0.2).unwrap();
        let x = [0.1, 0.3, 0.45];
        let d = l.distance(x);
        let direct = {
            let mut best = f64::INFINITY;
            for i in -2i32..=2 {
                for j in -3i32..=3 {
                    for k in -2i32..=2 {
                        for o in LatticeKind::Bcc.basis() {
                            let c = [i as f64 + o[0], j as f64 + o[1], k as f64 + o[2]];
                            let r = ((x[0] - c[0]).powi(2)
                                + (x[1] - c[1]).powi(2)
                                + (x[2] - c[2]).powi(2))
                            .sqrt();
                            best = best.min(r - 0.2);
                        }
                    }
                }
            }
            best
        };
        assert!((d - direct).abs() < 1e-15);
        assert!((l.distance([x[0] + 3.0, x[1] - 4.0, x[2]]) - d).abs() < 1e-13);
    }
}
