//! The decomposition-independent hash of a distributed field.
//!
//! Every cell contributes `mix(mix(global linear index) ^ bits(value))`
//! (`mix` is the splitmix64 finaliser, the linear index row-major with the
//! last axis fastest) and the contributions are added with wrapping
//! arithmetic. Addition commutes, so the hash depends only on the value at
//! each global index: it is what hashing the gathered field would give for
//! comparing runs, without gathering it, the same for any rank count and
//! process grid, and different (with overwhelming probability) when any
//! bit of any cell differs. The bit-exactness suites compare these hashes
//! across rank counts, so the formula is fixed.

use comm::{CommError, Communicator, IndexBox, ReduceOp};

/// Why a hash could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HashError {
    /// The values do not fill the owned box.
    #[error("field hash: the owned box {owned:?} holds {expected} cells, got {got} values")]
    Length {
        /// The owned box.
        owned: IndexBox,
        /// Cells of the box.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// The owned box reaches outside the global shape.
    #[error("field hash: the owned box {owned:?} is not inside the global shape {shape:?}")]
    OutsideShape {
        /// The owned box.
        owned: IndexBox,
        /// The global shape.
        shape: [usize; 3],
    },
    /// The reduction failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

/// The splitmix64 finaliser: a bijective 64-bit mixing function.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// One cell's contribution.
#[inline]
fn cell(index: u64, value: f64) -> u64 {
    mix(mix(index) ^ value.to_bits())
}

/// This rank's part of the hash: the wrapping sum over the cells of
/// `owned` (a box of the global `shape`) with `values` in row-major order
/// over the box, last axis fastest. [`field_hash`] adds the parts of all
/// ranks.
pub fn local_field_hash(
    shape: [usize; 3],
    owned: &IndexBox,
    values: &[f64],
) -> Result<u64, HashError> {
    if (0..3).any(|d| owned.lo[d] > owned.hi[d] || owned.hi[d] > shape[d]) {
        return Err(HashError::OutsideShape {
            owned: *owned,
            shape,
        });
    }
    let s = owned.shape();
    let expected = s.iter().product::<usize>();
    if values.len() != expected {
        return Err(HashError::Length {
            owned: *owned,
            expected,
            got: values.len(),
        });
    }
    let mut h = 0u64;
    if expected == 0 {
        return Ok(h);
    }
    let rows = values.chunks_exact(s[2]);
    for (r, row) in rows.enumerate() {
        let (i, j) = (owned.lo[0] + r / s[1], owned.lo[1] + r % s[1]);
        let first = ((i * shape[1] + j) * shape[2] + owned.lo[2]) as u64;
        for (k, v) in row.iter().enumerate() {
            h = h.wrapping_add(cell(first + k as u64, *v));
        }
    }
    Ok(h)
}

/// Adds the ranks' parts of a hash (collective): the two 32-bit halves are
/// summed separately so no partial sum of the `i64` reduction overflows.
pub fn combine(comm: &dyn Communicator, local: u64) -> Result<u64, HashError> {
    let mut parts = [(local & 0xFFFF_FFFF) as i64, (local >> 32) as i64];
    comm.allreduce_i64(&mut parts, ReduceOp::Sum)?;
    Ok((parts[0] as u64).wrapping_add((parts[1] as u64) << 32))
}

/// The hash of a global field of `shape` of which this rank owns the box
/// `owned` with `values` (row-major over the box, last axis fastest), the
/// same on every rank (collective).
///
/// ```
/// use comm::IndexBox;
///
/// let shape = [4, 3, 5];
/// let value = |i: usize, j: usize, k: usize| (i * 100 + j * 10 + k) as f64;
/// let whole: Vec<f64> = (0..4)
///     .flat_map(|i| (0..3).flat_map(move |j| (0..5).map(move |k| value(i, j, k))))
///     .collect();
/// let one = comm::local::run(1, |c| appkit::field_hash(c, shape, &IndexBox::from_shape(shape), &whole))
///     .unwrap()[0];
/// // Two ranks split axis 0 at 1.
/// let two = comm::local::run(2, |c| {
///     let b = if c.rank() == 0 {
///         IndexBox { lo: [0, 0, 0], hi: [1, 3, 5] }
///     } else {
///         IndexBox { lo: [1, 0, 0], hi: [4, 3, 5] }
///     };
///     let mine: Vec<f64> = (b.lo[0]..b.hi[0])
///         .flat_map(|i| (0..3).flat_map(move |j| (0..5).map(move |k| value(i, j, k))))
///         .collect();
///     appkit::field_hash(c, shape, &b, &mine)
/// })
/// .unwrap();
/// assert!(two.iter().all(|&h| h == one));
/// ```
pub fn field_hash(
    comm: &dyn Communicator,
    shape: [usize; 3],
    owned: &IndexBox,
    values: &[f64],
) -> Result<u64, HashError> {
    // Every rank takes part in the reduction even when its own input is
    // wrong, so the others do not wait for it; the error is reported after.
    let local = local_field_hash(shape, owned, values);
    let total = combine(comm, *local.as_ref().unwrap_or(&0))?;
    local.map(|_| total)
}

/// A hash as the 16 hex digits reports carry next to the number (JSON
/// readers that hold numbers as doubles lose its low bits).
pub fn hex(hash: u64) -> String {
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use comm::BlockDecomposition;

    fn value(g: [usize; 3], i: usize, j: usize, k: usize) -> f64 {
        ((i * g[1] + j) * g[2] + k) as f64 * 0.37 - 1.0
    }

    /// The formula written out over the whole field, as a single rank sees it.
    fn reference(g: [usize; 3]) -> u64 {
        let mut h = 0u64;
        for i in 0..g[0] {
            for j in 0..g[1] {
                for k in 0..g[2] {
                    let q = ((i * g[1] + j) * g[2] + k) as u64;
                    h = h.wrapping_add(mix(mix(q) ^ value(g, i, j, k).to_bits()));
                }
            }
        }
        h
    }

    fn distributed(g: [usize; 3], ranks: usize) -> Vec<u64> {
        comm::local::run(ranks, |c| {
            let grid =
                comm::ProcessGrid::for_shape(g, c.size(), [true; 3]).map_err(|e| e.to_string())?;
            let dec = BlockDecomposition::new(g, grid).map_err(|e| e.to_string())?;
            let b = dec.box_of(c.rank());
            let mut v = vec![];
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    for k in b.lo[2]..b.hi[2] {
                        v.push(value(g, i, j, k));
                    }
                }
            }
            field_hash(c, g, &b, &v).map_err(|e| e.to_string())
        })
        .unwrap()
    }

    #[test]
    fn the_formula_and_every_decomposition_agree() {
        let g = [7, 6, 5];
        let want = reference(g);
        for ranks in [1, 2, 3, 4, 6, 8] {
            assert!(
                distributed(g, ranks).iter().all(|&h| h == want),
                "{ranks} ranks"
            );
        }
        // Pinned: the apps' reports and the bit-exactness suites record
        // hashes of this formula, so it must never change.
        assert_eq!(mix(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(hex(want), format!("{want:016x}"));
    }

    #[test]
    fn one_flipped_bit_changes_the_hash() {
        let g = [3, 4, 5];
        let b = IndexBox::from_shape(g);
        let mut v: Vec<f64> = (0..60).map(|x| x as f64).collect();
        let h0 = local_field_hash(g, &b, &v).unwrap();
        v[37] = f64::from_bits(v[37].to_bits() ^ 1);
        assert_ne!(local_field_hash(g, &b, &v).unwrap(), h0);
        // Swapping two values moves them to other indices: another hash.
        let mut w: Vec<f64> = (0..60).map(|x| x as f64).collect();
        w.swap(3, 4);
        assert_ne!(local_field_hash(g, &b, &w).unwrap(), h0);
    }

    #[test]
    fn wrong_inputs_are_errors_on_every_rank() {
        let g = [4, 4, 4];
        let e = local_field_hash(g, &IndexBox::from_shape(g), &[0.0; 10]).unwrap_err();
        assert!(
            e.to_string().contains("holds 64 cells, got 10 values"),
            "{e}"
        );
        let e = local_field_hash(g, &IndexBox::from_shape([5, 4, 4]), &[0.0; 80]).unwrap_err();
        assert!(matches!(e, HashError::OutsideShape { .. }), "{e}");
        // Rank 1 passes too few values; rank 0 still completes.
        let r = comm::local::run(2, |c| {
            let b = IndexBox {
                lo: [2 * c.rank(), 0, 0],
                hi: [2 * c.rank() + 2, 4, 4],
            };
            let n = if c.rank() == 1 { 3 } else { 32 };
            Ok::<_, String>(field_hash(c, g, &b, &vec![1.0; n]).is_ok())
        })
        .unwrap();
        assert_eq!(r, vec![true, false]);
    }
}
