//! The redistribution engine against an independent reference: every
//! element's global index, computed from the two decompositions alone.

use comm::{
    local, BlockDecomposition, CommError, Communicator, IndexBox, ProcessGrid, Protocol,
    Redistribution, Strided,
};

/// Strides of a box stored with `order[2]` fastest.
fn strides(shape: [usize; 3], order: [usize; 3]) -> [usize; 3] {
    let mut st = [0; 3];
    st[order[2]] = 1;
    st[order[1]] = shape[order[2]];
    st[order[0]] = shape[order[2]] * shape[order[1]];
    st
}

/// The block `region` (global indices) of a local box `owned` stored in
/// `order`, travelling in `travel` order, repeated over `batch` fields of
/// `owned.len()` elements each.
fn block(
    owned: &IndexBox,
    order: [usize; 3],
    region: &IndexBox,
    travel: [usize; 3],
    batch: usize,
) -> Strided {
    let st = strides(owned.shape(), order);
    if region.is_empty() {
        return Strided::contiguous(0, 0);
    }
    let offset: usize = (0..3).map(|d| (region.lo[d] - owned.lo[d]) * st[d]).sum();
    let sh = region.shape();
    Strided::nested(offset, travel.map(|d| sh[d]), travel.map(|d| st[d]))
        .repeated(batch, owned.len())
        .unwrap()
}

/// The value of global cell `p` of field `f`.
fn value(global: [usize; 3], f: usize, p: [usize; 3]) -> f64 {
    (((f * global[0] + p[0]) * global[1] + p[1]) * global[2] + p[2]) as f64
}

/// Moves a global array between two block decompositions with different
/// memory orders (`batch` fields at once) and checks every element of the
/// destination against its global index.
fn check_move(
    c: &dyn Communicator,
    global: [usize; 3],
    protocol: Protocol,
    batch: usize,
) -> Result<Protocol, CommError> {
    let p = c.size();
    let me = c.rank();
    let a = BlockDecomposition::new(global, ProcessGrid::for_shape(global, p, [false; 3])?)?;
    // The destination: the same number of ranks in a different grid (all
    // along the last axis when the shapes allow it, else transposed).
    let dims_b = {
        let d = a.grid().dims();
        if d == [1, 1, p] {
            [p, 1, 1]
        } else {
            [d[2], d[1], d[0]]
        }
    };
    let dims_b = if (0..3).all(|i| dims_b[i] <= global[i]) {
        dims_b
    } else {
        a.grid().dims()
    };
    let b = BlockDecomposition::new(global, ProcessGrid::new(dims_b, [false; 3])?)?;
    let (order_a, order_b) = ([0, 1, 2], [2, 0, 1]);
    let (mine_a, mine_b) = (a.box_of(me), b.box_of(me));
    // Blocks travel in the destination's memory order.
    let send: Vec<Strided> = (0..p)
        .map(|q| {
            block(
                &mine_a,
                order_a,
                &mine_a.intersect(&b.box_of(q)),
                order_b,
                batch,
            )
        })
        .collect();
    let recv: Vec<Strided> = (0..p)
        .map(|q| {
            block(
                &mine_b,
                order_b,
                &a.box_of(q).intersect(&mine_b),
                order_b,
                batch,
            )
        })
        .collect();
    let mut plan = Redistribution::<f64>::new(c, send, recv, protocol)?;
    // The source: every field's values by global index, stored in order_a.
    let st_a = strides(mine_a.shape(), order_a);
    let mut src = vec![0.0; batch * mine_a.len()];
    for f in 0..batch {
        for_each(&mine_a, |p| {
            let i: usize = (0..3).map(|d| (p[d] - mine_a.lo[d]) * st_a[d]).sum();
            src[f * mine_a.len() + i] = value(global, f, p);
        });
    }
    let mut dst = vec![f64::NAN; batch * mine_b.len()];
    // Twice: a plan is executed many times.
    for _ in 0..2 {
        dst.fill(f64::NAN);
        plan.execute(c, &src, &mut dst)?;
    }
    let st_b = strides(mine_b.shape(), order_b);
    let np = p;
    for f in 0..batch {
        for_each(&mine_b, |p| {
            let i: usize = (0..3).map(|d| (p[d] - mine_b.lo[d]) * st_b[d]).sum();
            assert_eq!(
                dst[f * mine_b.len() + i].to_bits(),
                value(global, f, p).to_bits(),
                "rank {me} of {np}, field {f}, cell {p:?}, {protocol}"
            );
        });
    }
    Ok(plan.protocol())
}

fn for_each(b: &IndexBox, mut f: impl FnMut([usize; 3])) {
    for i in b.lo[0]..b.hi[0] {
        for j in b.lo[1]..b.hi[1] {
            for k in b.lo[2]..b.hi[2] {
                f([i, j, k]);
            }
        }
    }
}

#[test]
fn every_protocol_moves_every_element_to_its_place() {
    for ranks in [1, 2, 3, 4, 6] {
        for protocol in Protocol::ALL.into_iter().chain([Protocol::Auto]) {
            for batch in [1, 3] {
                let chosen = local::run(ranks, |c| check_move(c, [7, 6, 10], protocol, batch))
                    .unwrap_or_else(|e| panic!("{ranks} ranks, {protocol}: {e}"));
                // Auto picks one concrete protocol, the same on every rank.
                assert!(chosen
                    .iter()
                    .all(|&x| x == chosen[0] && x != Protocol::Auto));
                if protocol != Protocol::Auto {
                    assert_eq!(chosen[0], protocol);
                }
            }
        }
    }
}

#[test]
fn inconsistent_blocks_are_an_error_on_every_rank() {
    let err = local::run(3, |c| {
        let me = c.rank();
        // Everyone sends 2 elements to everyone, but rank 1 expects 3 from
        // rank 2.
        let send = vec![Strided::contiguous(0, 2); 3];
        let recv = (0..3)
            .map(|q| Strided::contiguous(4 * q, if me == 1 && q == 2 { 3 } else { 2 }))
            .collect();
        Redistribution::<f64>::new(c, send, recv, Protocol::P2p).map(|_| ())
    })
    .unwrap_err();
    for e in &err.ranks {
        let e = e.as_ref().expect("every rank fails");
        assert!(e.contains("redistribution"), "{e}");
        assert!(
            !e.contains(" failed: "),
            "each rank reports the error itself: {e}"
        );
    }
    assert!(
        err.ranks[1]
            .as_ref()
            .unwrap()
            .contains("rank 2 sends 2 elements to rank 1, which expects 3 from it"),
        "{:?}",
        err.ranks
    );
    // A wrong number of blocks.
    let err = local::run(2, |c| {
        Redistribution::<f64>::new(c, vec![Strided::contiguous(0, 1)], vec![], Protocol::P2p)
            .map(|_| ())
    })
    .unwrap_err();
    assert!(
        err.reason
            .contains("gave 1 send and 0 receive blocks for 2 ranks"),
        "{}",
        err.reason
    );
}

#[test]
fn short_buffers_and_unknown_names_are_errors() {
    local::run(2, |c| {
        let send = vec![Strided::contiguous(0, 4), Strided::contiguous(4, 4)];
        let recv = send.clone();
        let mut plan = Redistribution::<f64>::new(c, send, recv, Protocol::Alltoallv)?;
        assert_eq!((plan.src_len(), plan.dst_len()), (8, 8));
        let err = plan.execute(c, &[0.0; 7], &mut [0.0; 8]).unwrap_err();
        assert!(err.to_string().contains("source buffer"), "{err}");
        let err = plan.execute(c, &[0.0; 8], &mut [0.0; 5]).unwrap_err();
        assert!(err.to_string().contains("destination buffer"), "{err}");
        Ok::<_, CommError>(())
    })
    .unwrap();
    let err = "bogus".parse::<Protocol>().unwrap_err().to_string();
    assert!(err.contains("bogus") && err.contains("alltoallw"), "{err}");
    for p in Protocol::ALL {
        assert_eq!(p.name().parse::<Protocol>().unwrap(), p);
    }
}
