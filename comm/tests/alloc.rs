//! Executing a planned redistribution, and a scope of point-to-point
//! transfers, allocates nothing once warm (in-process backend): every
//! buffer, request slot and message envelope is reused. Counted by a global
//! allocator that tallies the allocations of each thread (each in-process
//! rank is a thread).

use comm::{
    local, scope_in, BlockDecomposition, CommError, Communicator, ProcessGrid, Protocol,
    Redistribution, ScopeStore, Strided,
};

#[global_allocator]
static GLOBAL: testkit::Counting = testkit::Counting;

/// A transpose-like redistribution of an `n^3` array between a slab and a
/// pencil decomposition.
fn plan(c: &dyn Communicator, protocol: Protocol) -> Result<Redistribution<f64>, CommError> {
    let (p, me, n) = (c.size(), c.rank(), 12);
    let a = BlockDecomposition::new([n; 3], ProcessGrid::new([p, 1, 1], [false; 3])?)?;
    let b = BlockDecomposition::new([n; 3], ProcessGrid::new([1, 1, p], [false; 3])?)?;
    let block = |owned: &comm::IndexBox, region: &comm::IndexBox| {
        let sh = owned.shape();
        let st = [sh[1] * sh[2], sh[2], 1];
        let off: usize = (0..3).map(|d| (region.lo[d] - owned.lo[d]) * st[d]).sum();
        if region.is_empty() {
            Strided::contiguous(0, 0)
        } else {
            Strided::nested(off, region.shape(), st)
        }
    };
    let (ma, mb) = (a.box_of(me), b.box_of(me));
    let send = (0..p)
        .map(|q| block(&ma, &ma.intersect(&b.box_of(q))))
        .collect();
    let recv = (0..p)
        .map(|q| block(&mb, &a.box_of(q).intersect(&mb)))
        .collect();
    Redistribution::new(c, send, recv, protocol)
}

#[test]
fn warm_executions_and_scopes_allocate_nothing() {
    for ranks in [1, 2, 3, 4] {
        let counts = local::run(ranks, |c| {
            let mut out = Vec::new();
            for protocol in Protocol::ALL {
                let mut r = plan(c, protocol)?;
                let src = vec![1.0; r.src_len()];
                let mut dst = vec![0.0; r.dst_len()];
                // Warm-up: message pools and mailbox queues reach their size.
                for _ in 0..3 {
                    r.execute(c, &src, &mut dst)?;
                }
                let (n, res) =
                    testkit::allocations(|| (0..5).try_for_each(|_| r.execute(c, &src, &mut dst)));
                res?;
                out.push((protocol, n));
            }
            // A ring of non-blocking transfers in a scope with kept storage.
            let (me, p) = (c.rank(), c.size());
            let mut store = ScopeStore::with_capacity(1, 1);
            let (mine, mut got) = ([me as f64; 64], [0.0; 64]);
            let ring = |store: &mut ScopeStore, got: &mut [f64; 64]| {
                scope_in(c, store, |s| {
                    s.irecv((me + p - 1) % p, 3, got)?;
                    s.isend((me + 1) % p, 3, &mine)?;
                    Ok::<_, CommError>(())
                })
            };
            for _ in 0..3 {
                ring(&mut store, &mut got)?;
            }
            let (n, res) =
                testkit::allocations(|| (0..5).try_for_each(|_| ring(&mut store, &mut got)));
            res?;
            out.push((Protocol::Auto, n));
            Ok::<_, CommError>(out)
        })
        .unwrap();
        for (rank, per) in counts.iter().enumerate() {
            for &(what, n) in per {
                let what = if what == Protocol::Auto {
                    "a scope".to_string()
                } else {
                    format!("protocol {what}")
                };
                assert_eq!(
                    n, 0,
                    "{ranks} ranks, rank {rank}: {what} allocated {n} times"
                );
            }
        }
    }
}
