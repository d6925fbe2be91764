//! Strided block copies against an element-by-element reference: packing
//! (`Strided::gather`, `gather_bytes`), unpacking (`scatter`,
//! `scatter_bytes`) and the block-to-block copy of `alltoallw` (a rank's own
//! block, and the blocks between ranks), on sub-boxes of 3D arrays stored in
//! any memory order and travelling in any other. Blocks up to 40 elements a
//! side cross the copy's square tiles (16 a side) at every offset, and
//! odd element sizes take the run-by-run path.

use comm::{local, CommError, CommExt, Strided};
use proptest::prelude::*;

/// The six orders of three axes, slowest first.
const ORDERS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

/// Element offsets of a block in travel order, one by one (the reference).
fn offsets(l: &Strided) -> Vec<usize> {
    let mut v = Vec::with_capacity(l.len());
    for h in 0..l.counts[0] {
        for i in 0..l.counts[1] {
            for j in 0..l.counts[2] {
                for k in 0..l.counts[3] {
                    v.push(
                        l.offset
                            + h * l.strides[0]
                            + i * l.strides[1]
                            + j * l.strides[2]
                            + k * l.strides[3],
                    );
                }
            }
        }
    }
    v
}

/// The sub-box `lo..lo + size` of an array of shape `shape` stored in
/// memory order `mem` (slowest first), travelling in order `travel`,
/// repeated over `batch` fields.
fn block(
    shape: [usize; 3],
    mem: [usize; 3],
    lo: [usize; 3],
    size: [usize; 3],
    travel: [usize; 3],
    batch: usize,
) -> Strided {
    let mut st = [0; 3];
    let mut s = 1;
    for &d in mem.iter().rev() {
        st[d] = s;
        s *= shape[d];
    }
    let offset = (0..3).map(|d| lo[d] * st[d]).sum();
    Strided::nested(offset, travel.map(|d| size[d]), travel.map(|d| st[d]))
        .repeated(batch, s)
        .unwrap()
}

fn case() -> impl Strategy<Value = (Strided, Strided, usize, usize)> {
    (
        prop::array::uniform3(1usize..41),
        prop::array::uniform3(0usize..5),
        0usize..6,
        0usize..6,
        0usize..6,
        1usize..3,
    )
        .prop_flat_map(|(size, pad, m_from, m_to, t, batch)| {
            let shape = [0, 1, 2].map(|d| size[d] + pad[d]);
            let lo = [0, 1, 2].map(|d| 0..=pad[d]);
            (lo, Just((size, shape, m_from, m_to, t, batch)))
        })
        .prop_map(|(lo, (size, shape, m_from, m_to, t, batch))| {
            let travel = ORDERS[t];
            let from = block(shape, ORDERS[m_from], lo, size, travel, batch);
            // The destination: the same block in a box of its own size.
            let to = block(size, ORDERS[m_to], [0; 3], size, travel, batch);
            let n_from = shape.iter().product::<usize>() * batch;
            let n_to = size.iter().product::<usize>() * batch;
            (from, to, n_from, n_to)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn packing_and_unpacking_match_the_reference((from, _to, n, _m) in case()) {
        let src: Vec<u64> = (0..n as u64).map(|x| x * 7 + 1).collect();
        let offs = offsets(&from);
        let want: Vec<u64> = offs.iter().map(|&o| src[o]).collect();
        let mut packed = vec![0u64; from.len()];
        from.gather(&src, &mut packed);
        prop_assert_eq!(&packed, &want);
        let mut back = vec![0u64; n];
        from.scatter(&packed, &mut back);
        for (k, &o) in offs.iter().enumerate() {
            prop_assert_eq!(back[o], want[k]);
        }
        // Untouched elements stay as they were.
        let touched: std::collections::HashSet<usize> = offs.into_iter().collect();
        prop_assert!((0..n).filter(|o| !touched.contains(o)).all(|o| back[o] == 0));
    }

    #[test]
    fn byte_copies_match_the_reference_for_every_element_size(
        (from, to, n, m) in case(),
        elem in prop::sample::select(vec![1usize, 2, 3, 4, 8, 12, 16, 24, 32]),
    ) {
        let src: Vec<u8> = (0..n * elem).map(|x| (x % 251) as u8).collect();
        let mut want = vec![0u8; m * elem];
        for (a, b) in offsets(&from).into_iter().zip(offsets(&to)) {
            want[b * elem..(b + 1) * elem].copy_from_slice(&src[a * elem..(a + 1) * elem]);
        }
        let mut packed = vec![0u8; from.len() * elem];
        from.gather_bytes(&src, elem, &mut packed);
        let mut got = vec![0u8; m * elem];
        to.scatter_bytes(&packed, elem, &mut got);
        prop_assert_eq!(&got, &want);
        // A rank's own block in `alltoallw`: one copy, block to block.
        let (src, want) = (&src, &want);
        let out = local::run(1, |c| {
            let mut got = vec![0u8; m * elem];
            c.alltoallw_bytes(src, &[from], &mut got, &[to], elem)?;
            Ok::<_, CommError>(got)
        })
        .unwrap();
        prop_assert_eq!(&out[0], want);
    }

    /// Between ranks: rank `r` holds the array in its memory order and sends
    /// the block to every rank, which stores it in its own; every rank gets
    /// every block, element for element.
    #[test]
    fn alltoallw_between_ranks_matches_the_reference((from, to, n, m) in case(), p in 2usize..4) {
        let out = local::run(p, |c| {
            let r = c.rank() as u64;
            let src: Vec<u64> = (0..n as u64).map(|x| x * 5 + r * 1_000_000).collect();
            let recv: Vec<Strided> = (0..p)
                .map(|q| Strided { offset: to.offset + q * m, ..to })
                .collect();
            let mut got = vec![0u64; m * p];
            c.alltoallw(&src, &vec![from; p], &mut got, &recv)?;
            Ok::<_, CommError>(got)
        })
        .unwrap();
        let (fo, tt) = (offsets(&from), offsets(&to));
        for got in &out {
            for q in 0..p {
                for (a, b) in fo.iter().zip(&tt) {
                    prop_assert_eq!(got[q * m + b], *a as u64 * 5 + q as u64 * 1_000_000);
                }
            }
        }
    }
}
