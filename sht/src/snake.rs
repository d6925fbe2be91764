//! Snake-like assignment of orders `m` and degrees `l` to ranks, and the
//! decomposition of a distributed transform that follows from it.
//!
//! Items with a work estimate are sorted by decreasing work and dealt to
//! ranks `0, 1, ..., P-1, P-1, P-2, ..., 0, 0, 1, ...` (the next item after
//! the last rank goes to that same rank, then the direction reverses). With
//! the orders `m = 0..=mmax`, whose work is the `lmax + 1 - m` degrees they
//! hold, the largest difference between two ranks is at most `P - 1`
//! `(l, m)` tuples; the same holds for the degrees `l`, whose work is the
//! `l + 1` orders they hold (the 1d scheme's `l` transposition).

use comm::grid::block_range;

use crate::dist::DistError;

/// Deals items snake-like over `parts` ranks: sorted by decreasing
/// `weights[i]` (ties: larger index first), the first `parts` items go to
/// ranks `0..parts`, the next `parts` to ranks `parts-1` down to `0`, and so
/// on. Returns the owner of each item.
///
/// # Panics
/// If `parts == 0`.
pub fn snake(weights: &[usize], parts: usize) -> Vec<usize> {
    assert!(parts > 0, "snake: parts must be at least 1");
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| weights[b].cmp(&weights[a]).then(b.cmp(&a)));
    let mut owner = vec![0; weights.len()];
    for (k, &i) in order.iter().enumerate() {
        let (round, pos) = (k / parts, k % parts);
        owner[i] = if round % 2 == 0 { pos } else { parts - 1 - pos };
    }
    owner
}

/// Owner of each order `m = 0..=lmax` over `parts` theta ranks: work
/// `lmax + 1 - m` per order, dealt snake-like (so `m = 0` goes to rank 0).
pub fn snake_orders(lmax: usize, parts: usize) -> Vec<usize> {
    let w: Vec<usize> = (0..=lmax).map(|m| lmax + 1 - m).collect();
    snake(&w, parts)
}

/// Owner of each degree `l = 0..=lmax` over `parts` radial ranks for the
/// `l` transposition of a set of `orders`: the work of `l` is the number of
/// tuples `(l, m)` with `m` in `orders` and `m <= l` (all orders in the 1d
/// scheme, giving `l + 1`; the orders of one theta rank in the 2d scheme).
/// Degrees with no tuple are assigned too but carry nothing.
pub fn snake_degrees(lmax: usize, orders: &[usize], parts: usize) -> Vec<usize> {
    let w: Vec<usize> = (0..=lmax)
        .map(|l| orders.iter().filter(|&&m| m <= l).count())
        .collect();
    snake(&w, parts)
}

/// The decomposition of a distributed transform on a `Pi_r x Pi_theta`
/// grid: radial levels and latitudes in contiguous blocks, orders `m`
/// snake-like over the theta ranks, and per theta rank the degrees `l` of
/// its orders snake-like over the radial ranks. A value: no communication.
///
/// Rank `(ir, it)` holds, in the **level layout**, the coefficients of its
/// radial levels for all tuples `(l, m)` with `m` one of its orders; in the
/// **lm layout**, all `nr` radial points of the tuples whose degree it owns
/// among those. Both list tuples in the same order: grouped by the radial
/// rank owning the degree, then by `m`, then by `l` (so with one radial
/// rank the level layout of each level is the serial m-major layout of the
/// rank's orders).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decomposition {
    lmax: usize,
    ntheta: usize,
    nr: usize,
    pr: usize,
    pt: usize,
    /// Per theta rank: its orders, ascending.
    orders: Vec<Vec<usize>>,
    /// Per theta rank: the owner (radial rank) of each degree.
    degree_owner: Vec<Vec<usize>>,
    /// Per theta rank: its tuples in level-layout order, and per radial
    /// rank the start of its group (length `pr + 1`).
    tuples: Vec<Vec<(usize, usize)>>,
    group_start: Vec<Vec<usize>>,
}

impl Decomposition {
    /// The decomposition of `nr` radial levels, `ntheta` latitudes and
    /// degrees and orders up to `lmax` on `pi_r x pi_theta` ranks.
    ///
    /// Errors (each names the value and its valid range): a zero count;
    /// `pi_theta` above the number of latitudes or of orders; `pi_r` above
    /// the number of levels or above the number of degrees that hold tuples
    /// for some theta rank (every rank must own something).
    pub fn new(
        lmax: usize,
        ntheta: usize,
        nr: usize,
        pi_r: usize,
        pi_theta: usize,
    ) -> Result<Self, DistError> {
        let too_many = |what: &'static str, value: usize, max: usize, reason: String| {
            Err(DistError::TooManyRanks {
                what,
                value,
                max,
                reason,
            })
        };
        if nr == 0 {
            return Err(DistError::Invalid(
                "nr = 0 radial levels: need at least 1".into(),
            ));
        }
        if pi_r == 0 || pi_theta == 0 {
            return Err(DistError::Invalid(format!(
                "process grid {pi_r} x {pi_theta} has a zero dimension: both must be at least 1"
            )));
        }
        if pi_theta > ntheta {
            return too_many("pi_theta", pi_theta, ntheta, format!("{ntheta} latitudes"));
        }
        if pi_theta > lmax + 1 {
            return too_many(
                "pi_theta",
                pi_theta,
                lmax + 1,
                format!("{} orders m (lmax = {lmax})", lmax + 1),
            );
        }
        if pi_r > nr {
            return too_many("pi_r", pi_r, nr, format!("{nr} radial levels"));
        }
        let m_owner = snake_orders(lmax, pi_theta);
        let orders: Vec<Vec<usize>> = (0..pi_theta)
            .map(|t| (0..=lmax).filter(|&m| m_owner[m] == t).collect())
            .collect();
        // Degrees with tuples on theta rank t: l from its smallest order up.
        let fewest = orders.iter().map(|o| lmax + 1 - o[0]).min().unwrap_or(0);
        if pi_r > fewest {
            return too_many(
                "pi_r",
                pi_r,
                fewest,
                format!(
                    "{fewest} degrees l holding tuples on every theta rank (lmax = {lmax}, pi_theta = {pi_theta})"
                ),
            );
        }
        let mut degree_owner = Vec::with_capacity(pi_theta);
        let mut tuples = Vec::with_capacity(pi_theta);
        let mut group_start = Vec::with_capacity(pi_theta);
        for o in &orders {
            let own = snake_degrees(lmax, o, pi_r);
            let mut tl = Vec::new();
            let mut gs = vec![0];
            for r in 0..pi_r {
                for &m in o {
                    for l in m..=lmax {
                        if own[l] == r {
                            tl.push((l, m));
                        }
                    }
                }
                gs.push(tl.len());
            }
            degree_owner.push(own);
            tuples.push(tl);
            group_start.push(gs);
        }
        Ok(Self {
            lmax,
            ntheta,
            nr,
            pr: pi_r,
            pt: pi_theta,
            orders,
            degree_owner,
            tuples,
            group_start,
        })
    }

    /// Largest degree and order.
    pub fn lmax(&self) -> usize {
        self.lmax
    }
    /// Number of latitudes.
    pub fn ntheta(&self) -> usize {
        self.ntheta
    }
    /// Number of radial levels.
    pub fn nr(&self) -> usize {
        self.nr
    }
    /// Radial ranks `Pi_r`.
    pub fn pi_r(&self) -> usize {
        self.pr
    }
    /// Theta ranks `Pi_theta`.
    pub fn pi_theta(&self) -> usize {
        self.pt
    }
    /// Radial levels of radial rank `ir`: `(start, count)`, contiguous.
    pub fn levels(&self, ir: usize) -> (usize, usize) {
        block_range(self.nr, self.pr, ir)
    }
    /// Latitudes of theta rank `it`: `(start, count)`, contiguous.
    pub fn latitudes(&self, it: usize) -> (usize, usize) {
        block_range(self.ntheta, self.pt, it)
    }
    /// Orders `m` of theta rank `it`, ascending.
    pub fn orders(&self, it: usize) -> &[usize] {
        &self.orders[it]
    }
    /// The radial rank owning degree `l` among the tuples of theta rank `it`.
    pub fn degree_owner(&self, it: usize, l: usize) -> usize {
        self.degree_owner[it][l]
    }
    /// All tuples of theta rank `it` in level-layout order (grouped by the
    /// radial rank owning the degree, then `m`, then `l`).
    pub fn level_tuples(&self, it: usize) -> &[(usize, usize)] {
        &self.tuples[it]
    }
    /// The tuples of rank `(ir, it)` in the lm layout (its group of
    /// [`level_tuples`](Self::level_tuples), in the same order).
    pub fn lm_tuples(&self, ir: usize, it: usize) -> &[(usize, usize)] {
        let g = &self.group_start[it];
        &self.tuples[it][g[ir]..g[ir + 1]]
    }
    /// Start of radial rank `ir`'s group in the level layout of theta rank `it`.
    pub fn group_start(&self, ir: usize, it: usize) -> usize {
        self.group_start[it][ir]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_deals_back_and_forth() {
        // Weights 6..1 over 3 ranks: 0 1 2 2 1 0.
        assert_eq!(snake(&[6, 5, 4, 3, 2, 1], 3), vec![0, 1, 2, 2, 1, 0]);
        // Ties go to the larger index first.
        assert_eq!(snake(&[1, 1, 1], 2), vec![1, 1, 0]);
        // The seed's example: 21 degrees over 6 ranks, largest l first.
        let w: Vec<usize> = (0..21).map(|l| l + 1).collect();
        let o = snake(&w, 6);
        assert_eq!(o[20], 0);
        assert_eq!(o[15], 5);
        assert_eq!(o[14], 5);
        assert_eq!(o[9], 0);
        assert_eq!(o[8], 0);
    }

    #[test]
    fn one_radial_rank_gives_serial_layout() {
        let d = Decomposition::new(5, 8, 3, 1, 1).unwrap();
        let t = d.level_tuples(0);
        assert_eq!(t.len(), 21);
        let mut k = 0;
        for m in 0..=5 {
            for l in m..=5 {
                assert_eq!(t[k], (l, m));
                k += 1;
            }
        }
    }
}
