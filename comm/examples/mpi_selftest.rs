//! Self-test of the MPI backend; run it under `mpirun` with any rank count:
//!
//! ```text
//! cargo build -p parnum-comm --features mpi --example mpi_selftest
//! mpirun -np 4 target/debug/examples/mpi_selftest
//! ```
//!
//! Every rank runs every check; a check passes when it passes on all ranks.
//! Rank 0 prints `mpi selftest: N passed, M failed`; any failure makes every
//! rank exit non-zero (through `comm::mpi::abort`).
//!
//! `mpi_selftest abort` (or `panic`) instead checks the failure path of
//! [`comm::mpi::run`]: rank 1 (or 0 alone) returns an error (or panics)
//! while the others wait for a message it never sends; the job must end
//! with `rank 1 failed: ...` and a non-zero status rather than hang.
//!
//! `mpi_selftest overflow` (2+ ranks) shows whether the MPI library writes
//! a longer message past the receive buffer (Open MPI 4.1 does; see the
//! `comm::mpi` documentation).
//!
//! `mpi_selftest big` checks messages, alltoallv blocks, reductions and
//! broadcasts beyond `i32::MAX` bytes or elements (about 6 GB per rank).

use comm::mpi::MpiComm;
use comm::{CommError, CommExt, Communicator, ProcessGrid, ReduceOp, Strided};
use num_complex::Complex64;
use std::panic::{catch_unwind, AssertUnwindSafe};

type TestResult = Result<(), String>;
type Test<'a> = Box<dyn FnMut(&MpiComm) -> TestResult + 'a>;

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> TestResult {
    if cond {
        Ok(())
    } else {
        Err(msg())
    }
}

fn e(err: CommError) -> String {
    err.to_string()
}

/// Ring: each rank sends three tagged messages to the next rank and
/// receives them from the previous one in a different order; two messages
/// with the same tag arrive in send order.
fn ring(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let (next, prev) = ((r + 1) % p, (r + p - 1) % p);
    let (mut a, mut b, mut x) = ([0u64; 3], [0.0f64; 2], [0u8; 5]);
    let (mut m1, mut m2) = ([0i32], [0i32]);
    {
        // Post the receives first, in an order unlike the sends (three
        // element types: three nested scopes).
        let s3 = [r as u8, 1, 2, 3, 4];
        let s2 = [r as f64 + 0.5, -(r as f64)];
        let s1 = [r as u64, 10 + r as u64, 20 + r as u64];
        comm::scope(c, |su| {
            su.irecv(prev, 1, &mut a)?;
            comm::scope(c, |sx| {
                sx.irecv(prev, 3, &mut x)?;
                comm::scope(c, |sf| {
                    sf.irecv(prev, 2, &mut b)?;
                    sx.isend(next, 3, &s3)?;
                    sf.isend(next, 2, &s2)?;
                    su.isend(next, 1, &s1)?;
                    sf.wait_all()
                })?;
                sx.wait_all()
            })?;
            su.wait_all()
        })
        .map_err(e)?;
    }
    let pr = prev as u64;
    ensure(a == [pr, 10 + pr, 20 + pr], || {
        format!("tag 1 payload {a:?}")
    })?;
    ensure(b == [prev as f64 + 0.5, -(prev as f64)], || {
        format!("tag 2 payload {b:?}")
    })?;
    ensure(x == [prev as u8, 1, 2, 3, 4], || {
        format!("tag 3 payload {x:?}")
    })?;
    // Non-overtaking: same source and tag arrive in order.
    comm::scope(c, |s| {
        let r1 = s.irecv(prev, 4, &mut m1)?;
        c.send(next, 4, &[1i32])?;
        c.send(next, 4, &[2i32])?;
        s.wait(r1)
    })
    .map_err(e)?;
    c.recv(prev, 4, &mut m2).map_err(e)?;
    ensure((m1[0], m2[0]) == (1, 2), || {
        format!("same-tag order {m1:?} {m2:?}")
    })?;
    // The largest user tag works.
    let mut t = [0u32];
    comm::scope(c, |s| {
        s.irecv(prev, comm::MAX_USER_TAG, &mut t)?;
        c.send(next, comm::MAX_USER_TAG, &[7u32])
    })
    .map_err(e)?;
    ensure(t[0] == 7, || format!("max tag payload {t:?}"))
}

/// wait_any: receives from every rank (itself included), completed one by one.
fn wait_any(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let mut bufs = vec![[0u32; 4]; p];
    let mut seen = vec![];
    {
        let payloads: Vec<[u32; 4]> = (0..p).map(|d| [r as u32, d as u32, 7, 8]).collect();
        let mut wrong = Vec::new();
        let again = comm::scope(c, |sc| {
            for (s, b) in bufs.iter_mut().enumerate() {
                sc.irecv(s, 11, b)?;
            }
            // Send in reverse order so completions are not simply 0, 1, 2...
            for d in (0..p).rev() {
                sc.isend(d, 11, &payloads[d])?;
            }
            while let Some((h, buf)) = sc.wait_any_recv()? {
                let i = h.index();
                if *buf != [i as u32, r as u32, 7, 8] {
                    wrong.push((i, buf.to_vec()));
                }
                seen.push(i);
            }
            sc.wait_all()?;
            Ok::<_, CommError>(sc.wait_any_recv()?.is_none())
        })
        .map_err(e)?;
        ensure(wrong.is_empty(), || {
            format!("wait_any handed back buffers holding {wrong:?}")
        })?;
        ensure(again, || "wait_any on completed requests".into())?;
    }
    seen.sort_unstable();
    ensure(seen == (0..p).collect::<Vec<_>>(), || {
        format!("wait_any indices {seen:?}")
    })?;
    for (s, b) in bufs.iter().enumerate() {
        ensure(*b == [s as u32, r as u32, 7, 8], || {
            format!("payload from {s}: {b:?}")
        })?;
    }
    Ok(())
}

fn prefix(v: &[usize]) -> Vec<usize> {
    v.iter()
        .scan(0, |a, &x| {
            let o = *a;
            *a += x;
            Some(o)
        })
        .collect()
}

/// Collectives in which a rank sends and receives nothing: empty byte
/// buffers, whose dangling address `0x1` is Open MPI's `MPI_IN_PLACE`.
/// Rank 0 contributes nothing and receives nothing, the others exchange
/// one byte each; then every count is zero.
fn empty_buffers(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let active = |x: usize| x != 0 || p == 1;
    let sc: Vec<usize> = (0..p)
        .map(|d| usize::from(active(r) && active(d) && d != r))
        .collect();
    let send: Vec<u8> = (0..sc.iter().sum::<usize>())
        .map(|i| (r * 10 + i) as u8)
        .collect();
    let sd = prefix(&sc);
    let rc: Vec<usize> = (0..p)
        .map(|s| usize::from(active(r) && active(s) && s != r))
        .collect();
    let rd = prefix(&rc);
    let mut recv = vec![0u8; rc.iter().sum::<usize>()];
    c.alltoallv(&send, &sc, &sd, &mut recv, &rc, &rd)
        .map_err(e)?;
    for (s, &n) in rc.iter().enumerate() {
        if n == 1 {
            // Rank s sends its values in destination order; this rank's is
            // at s's running count of the active ranks before this one.
            let before = (0..r).filter(|&d| active(d) && d != s).count();
            let want = (s * 10 + before) as u8;
            ensure(recv[rd[s]] == want, || {
                format!("byte from rank {s}: {} (expected {want})", recv[rd[s]])
            })?;
        }
    }
    // All counts zero on every rank.
    let zero = vec![0usize; p];
    let mut none: Vec<u8> = Vec::new();
    c.alltoallv(&[] as &[u8], &zero, &zero, &mut none, &zero, &zero)
        .map_err(e)?;
    let (gathered, counts) = c.allgather_varying(&[] as &[u8]).map_err(e)?;
    ensure(gathered.is_empty() && counts == zero, || {
        format!("gathered {gathered:?} with counts {counts:?} from empty blocks")
    })
}

/// alltoallv: rank r sends (r + d + 1) complex values to rank d.
fn alltoallv(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let sc: Vec<usize> = (0..p).map(|d| r + d + 1).collect();
    let sd = prefix(&sc);
    let send: Vec<Complex64> = (0..p)
        .flat_map(|d| (0..r + d + 1).map(move |i| Complex64::new(r as f64, (d * 100 + i) as f64)))
        .collect();
    let rc: Vec<usize> = (0..p).map(|s| s + r + 1).collect();
    // Gaps between the blocks, in reverse rank order.
    let mut rd = vec![0; p];
    let mut off = 3;
    for s in (0..p).rev() {
        rd[s] = off;
        off += rc[s] + 2;
    }
    let mut recv = vec![Complex64::new(-1.0, -1.0); off];
    c.alltoallv(&send, &sc, &sd, &mut recv, &rc, &rd)
        .map_err(e)?;
    for s in 0..p {
        for i in 0..rc[s] {
            let want = Complex64::new(s as f64, (r * 100 + i) as f64);
            ensure(recv[rd[s] + i] == want, || {
                format!("block from {s}[{i}] = {}", recv[rd[s] + i])
            })?;
        }
    }
    ensure(
        recv[..3].iter().all(|&z| z == Complex64::new(-1.0, -1.0)),
        || "gap overwritten".into(),
    )?;
    // alltoall with equal blocks.
    let send: Vec<i64> = (0..p * 2).map(|k| (r * 1000 + k) as i64).collect();
    let mut recv = vec![0i64; p * 2];
    c.alltoall(&send, &mut recv, 2).map_err(e)?;
    for s in 0..p {
        for j in 0..2 {
            ensure(recv[s * 2 + j] == (s * 1000 + r * 2 + j) as i64, || {
                format!("alltoall {recv:?}")
            })?;
        }
    }
    Ok(())
}

/// The 2D transpose of local.rs's `strided_alltoallw_transposes_without_packing`.
fn alltoallw_transpose(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let b = 2usize;
    let n = p * b;
    let local: Vec<f64> = (0..b * n)
        .map(|k| ((r * b + k / n) * n + k % n) as f64)
        .collect();
    let send: Vec<Strided> = (0..p)
        .map(|d| Strided::nested(d * b, [1, b, b], [0, 1, n]))
        .collect();
    let recv: Vec<Strided> = (0..p).map(|s| Strided::vector(s * b, b, b, n)).collect();
    let mut out = vec![0.0; b * n];
    c.alltoallw(&local, &send, &mut out, &recv).map_err(e)?;
    for i in 0..b {
        for j in 0..n {
            ensure(out[i * n + j] == (j * n + r * b + i) as f64, || {
                format!("out[{i}][{j}] = {}", out[i * n + j])
            })?;
        }
    }
    Ok(())
}

/// 3D strided layouts (all three directions, offsets, non-unit innermost
/// strides, empty blocks) checked against `Strided::gather_bytes` /
/// `scatter_bytes`, the reference semantics.
fn alltoallw_3d(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    const ES: usize = 12; // an odd element size: 3 x u32
    const N: usize = 200; // elements per buffer
    let elem =
        |src: usize, k: usize| -> [u32; 3] { [src as u32, k as u32, (src * 7919 + k) as u32] };
    let data = |src: usize| -> Vec<u32> { (0..N).flat_map(|k| elem(src, k)).collect() };
    // The layout `src` uses to send to `dst`; the receiver uses one with the
    // same counts (element order), different strides and offsets.
    let send_layout = |src: usize, dst: usize| -> Strided {
        let q = (src + 2 * dst) % 4;
        match q {
            0 => Strided::nested(3, [2, 3, 4], [40, 9, 2]),
            1 => Strided::contiguous(src + dst, 5),
            2 => Strided::nested(1, [3, 0, 2], [10, 1, 1]),
            _ => Strided::nested(7, [2, 2, 3], [50, 3, 13]),
        }
    };
    let recv_layout = |src: usize, dst: usize| -> Strided {
        let s = send_layout(src, dst);
        let [_, c0, c1, c2] = s.counts;
        // Block of its own, row-major with padding, placed by source rank.
        Strided::nested(
            1 + (src * 37) % 60,
            [c0, c1, c2],
            [c1 * c2 * 2 + 1, c2 + 1, 1],
        )
    };
    let send_l: Vec<Strided> = (0..p).map(|d| send_layout(r, d)).collect();
    let recv_l: Vec<Strided> = (0..p).map(|s| recv_layout(s, r)).collect();
    // Disjoint receive regions: shift each source's block past the previous.
    let mut recv_l = recv_l;
    let mut base = 0;
    for l in recv_l.iter_mut() {
        l.offset = base + l.offset % 5;
        base = l.extent().max(base) + 1;
    }
    let total = base + 3;
    let send_buf = data(r);
    let mut recv_buf = vec![u32::MAX; total * 3];
    c.alltoallw_bytes(
        comm::as_bytes(&send_buf),
        &send_l,
        comm::as_bytes_mut(&mut recv_buf),
        &recv_l,
        ES,
    )
    .map_err(e)?;
    // Reference: gather from each source's data, scatter into my buffer.
    let mut want = vec![u32::MAX; total * 3];
    for (s, rl) in recv_l.iter().enumerate() {
        let sl = send_layout(s, r);
        let src = data(s);
        let mut packed = vec![0u8; sl.len() * ES];
        sl.gather_bytes(comm::as_bytes(&src), ES, &mut packed);
        rl.scatter_bytes(&packed, ES, comm::as_bytes_mut(&mut want));
    }
    ensure(recv_buf == want, || {
        let i = recv_buf
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        format!(
            "first difference at u32 {i}: got {} want {}",
            recv_buf[i], want[i]
        )
    })
}

/// split: two colours, reversed keys, opt-out with `None`.
fn split(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let sub = c
        .split(Some((r % 2) as u32), 1000 - r)
        .map_err(e)?
        .ok_or("member got None")?;
    let members: Vec<usize> = (0..p).filter(|q| q % 2 == r % 2).collect();
    ensure(sub.size() == members.len(), || {
        format!("sub size {}", sub.size())
    })?;
    // Keys descend with rank: reversed order.
    let pos = members.iter().position(|&q| q == r).unwrap();
    ensure(sub.rank() == members.len() - 1 - pos, || {
        format!("sub rank {}", sub.rank())
    })?;
    let total = sub.allreduce_scalar(r as f64, ReduceOp::Sum).map_err(e)?;
    ensure(total == members.iter().sum::<usize>() as f64, || {
        format!("sub sum {total}")
    })?;
    // Messages on parent and child do not mix (same tag, same peers).
    let (sr, sp) = (sub.rank(), sub.size());
    let mut rx = [0u64];
    let mut px = [0u64];
    comm::scope(&*sub, |sa| {
        let a = sa.irecv((sr + sp - 1) % sp, 1, &mut rx)?;
        comm::scope(c, |sb| {
            let b = sb.irecv((r + p - 1) % p, 1, &mut px)?;
            c.send((r + 1) % p, 1, &[99u64])?;
            sub.send((sr + 1) % sp, 1, &[r as u64])?;
            sa.wait(a)?;
            sb.wait(b)
        })
    })
    .map_err(e)?;
    ensure(px[0] == 99 && rx[0] % 2 == (r % 2) as u64, || {
        format!("parent {px:?} child {rx:?}")
    })?;
    let none = c.split(if r == 0 { None } else { Some(5) }, 0).map_err(e)?;
    ensure(none.is_none() == (r == 0), || "opt-out".into())?;
    if let Some(s) = none {
        ensure(s.size() == p - 1 && s.rank() == r - 1, || {
            format!("rest {}/{}", s.rank(), s.size())
        })?;
        s.barrier().map_err(e)?;
    }
    // Nested split of a split communicator.
    let sub2 = sub.split(Some(0), 0).map_err(e)?.ok_or("nested split")?;
    ensure(sub2.size() == sub.size(), || "nested size".into())?;
    Ok(())
}

/// allreduce f64 / i64 with every operator; same bits on every rank.
fn allreduce(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let mut v = [r as f64, -(r as f64), 1.0];
    c.allreduce_f64(&mut v, ReduceOp::Sum).map_err(e)?;
    let s = (p * (p - 1) / 2) as f64;
    ensure(v == [s, -s, p as f64], || format!("sum {v:?}"))?;
    ensure(
        c.allreduce_scalar(r as f64, ReduceOp::Max).map_err(e)? == (p - 1) as f64,
        || "max".into(),
    )?;
    ensure(
        c.allreduce_scalar(r as f64 + 0.25, ReduceOp::Min)
            .map_err(e)?
            == 0.25,
        || "min".into(),
    )?;
    let mut m = [r as i64 - 7, i64::MAX - r as i64, 3];
    c.allreduce_i64(&mut m, ReduceOp::Min).map_err(e)?;
    ensure(m == [-7, i64::MAX - (p as i64 - 1), 3], || {
        format!("i64 min {m:?}")
    })?;
    let mut m = [r as i64, -(r as i64)];
    c.allreduce_i64(&mut m, ReduceOp::Max).map_err(e)?;
    ensure(m == [p as i64 - 1, 0], || format!("i64 max {m:?}"))?;
    let mut m = [1i64 << 40, r as i64];
    c.allreduce_i64(&mut m, ReduceOp::Sum).map_err(e)?;
    ensure(m == [(p as i64) << 40, (p * (p - 1) / 2) as i64], || {
        format!("i64 sum {m:?}")
    })?;
    // Rounding-sensitive sums: every rank must get the same bits.
    let mut x: Vec<f64> = (0..1000)
        .map(|k| ((k * 7 + r * 13) as f64).sin() * 10f64.powi((k % 30) as i32 - 15))
        .collect();
    c.allreduce_f64(&mut x, ReduceOp::Sum).map_err(e)?;
    let bits: Vec<u64> = x.iter().map(|v| v.to_bits()).collect();
    let mut all = vec![0u64; bits.len() * p];
    c.allgather(&bits, &mut all).map_err(e)?;
    for q in 1..p {
        ensure(
            all[q * bits.len()..(q + 1) * bits.len()] == all[..bits.len()],
            || format!("rank {q} got other sum bits"),
        )?;
    }
    // Empty reductions are fine.
    c.allreduce_f64(&mut [], ReduceOp::Sum).map_err(e)?;
    Ok(())
}

fn broadcast(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    for root in [0, p - 1, p / 2] {
        let mut b = [r as u32; 3];
        c.broadcast(&mut b, root).map_err(e)?;
        ensure(b == [root as u32; 3], || format!("from {root}: {b:?}"))?;
    }
    let mut big: Vec<u8> = (0..100_000)
        .map(|i| if r == 0 { (i % 251) as u8 } else { 0 })
        .collect();
    c.broadcast(&mut big, 0).map_err(e)?;
    ensure(
        big.iter().enumerate().all(|(i, &v)| v == (i % 251) as u8),
        || "big broadcast".into(),
    )?;
    let err = c.broadcast(&mut [0u8], p).unwrap_err();
    ensure(matches!(err, CommError::InvalidRank { .. }), || {
        format!("bad root: {err}")
    })
}

fn allgather(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let mine: Vec<u64> = (0..r as u64).collect();
    let (all, counts) = c.allgather_varying(&mine).map_err(e)?;
    ensure(counts == (0..p).collect::<Vec<_>>(), || {
        format!("counts {counts:?}")
    })?;
    ensure(
        all == (0..p as u64).flat_map(|k| 0..k).collect::<Vec<_>>(),
        || format!("all {all:?}"),
    )?;
    let mut eq = vec![0i32; 2 * p];
    c.allgather(&[r as i32, -(r as i32)], &mut eq).map_err(e)?;
    ensure(
        eq == (0..p as i32).flat_map(|q| [q, -q]).collect::<Vec<_>>(),
        || format!("{eq:?}"),
    )?;
    c.check_agree("a constant", &[42, 7]).map_err(e)?;
    let differ = c.check_agree("the rank", &[r as i64]);
    ensure(differ.is_err() == (p > 1), || "check_agree".into())
}

/// The global data of the exact-sum check: the same 10 000 values for any
/// rank count, with magnitudes from 1e-300 to 1e300 and exact cancellation of the largest.
fn exact_data() -> Vec<f64> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    (0..10_000)
        .map(|k| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let m = (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            if k % 97 == 0 {
                // Huge values that cancel exactly.
                1e300 * if k % 2 == 0 { 1.0 } else { -1.0 }
            } else if k % 89 == 0 {
                m * 1e-300
            } else {
                m * 10f64.powi(((s % 40) as i32) - 20)
            }
        })
        .collect()
}

fn exact(c: &MpiComm, bits_out: &mut u64) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let data = exact_data();
    let (lo, n) = comm::grid::block_range(data.len(), p, r);
    let sum = comm::exact::allreduce_exact_sum(c, &data[lo..lo + n]).map_err(e)?;
    let want = comm::exact::exact_sum(&data);
    *bits_out = sum.to_bits();
    ensure(sum.to_bits() == want.to_bits(), || {
        format!(
            "exact sum {sum:e} ({:#018x}) but the serial exact sum is {want:e} ({:#018x})",
            sum.to_bits(),
            want.to_bits()
        )
    })?;
    // A different distribution (round-robin) gives the same bits.
    let mine: Vec<f64> = data.iter().skip(r).step_by(p).copied().collect();
    let sum2 = comm::exact::allreduce_exact_sum(c, &mine).map_err(e)?;
    ensure(sum2.to_bits() == want.to_bits(), || {
        "round-robin distribution differs".into()
    })
}

/// A receive buffer of the wrong length: MessageTruncated, both ways.
fn truncation(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let (next, prev) = ((r + 1) % p, (r + p - 1) % p);
    // Longer message than buffer.
    let mut small = [0.0f64; 1];
    let err = comm::scope(c, |s| {
        let rq = s.irecv(prev, 21, &mut small)?;
        c.send(next, 21, &[1.0f64, 2.0])?;
        Ok::<_, CommError>(s.wait(rq).unwrap_err())
    })
    .map_err(e)?;
    ensure(
        matches!(err, CommError::MessageTruncated { src, tag: 21, expected: 8, got: 16 } if src == prev),
        || format!("longer message: {err:?}"),
    )?;
    // Shorter message than buffer.
    let mut big = [0u8; 16];
    let err = comm::scope(c, |s| {
        let rq = s.irecv(prev, 22, &mut big)?;
        c.send(next, 22, &[5u8; 8])?;
        Ok::<_, CommError>(s.wait(rq).unwrap_err())
    })
    .map_err(e)?;
    ensure(
        matches!(
            err,
            CommError::MessageTruncated {
                tag: 22,
                expected: 16,
                got: 8,
                ..
            }
        ),
        || format!("shorter message: {err:?}"),
    )?;
    // Truncation found by test() / wait_any too.
    let mut one = [0u8; 1];
    let (err, done) = comm::scope(c, |s| {
        let rq = s.irecv(prev, 23, &mut one)?;
        c.send(next, 23, &[1u8, 2, 3])?;
        let err = s.wait_any_recv().err();
        Ok::<_, CommError>((err, s.test(rq)?))
    })
    .map_err(e)?;
    ensure(
        matches!(
            err,
            Some(CommError::MessageTruncated {
                expected: 1,
                got: 3,
                ..
            })
        ),
        || format!("wait_any: {err:?}"),
    )?;
    ensure(done, || "failed request is finished".into())?;
    // Messages to itself (the mailbox), any size, longer or shorter than
    // the buffer: neither the buffer nor the bytes around it are touched.
    // To a peer: longer messages only below the eager limit (Open MPI 4.1
    // writes longer large messages past the buffer: see `overflow` mode),
    // shorter ones of any size (only the buffer's start is written).
    let cases = [
        (300_000usize, 100_000usize, true),
        (100_000, 300_000, true),
        (5000, 4999, true),
        (1000, 500, false),
        (100_000, 300_000, false),
        (3, 4096 * 4, false),
    ];
    for (n_msg, n_buf, to_self) in cases {
        let (to, from) = if to_self { (r, r) } else { (next, prev) };
        let mut arena = vec![0xa5u8; n_buf + 2 * 4096];
        let payload = vec![0x11u8; n_msg];
        let err = comm::scope(c, |s| {
            let rq = s.irecv(from, 24, &mut arena[4096..4096 + n_buf])?;
            s.isend(to, 24, &payload)?;
            Ok::<_, CommError>(s.wait(rq).unwrap_err())
        })
        .map_err(e)?;
        let what = format!("{n_msg} bytes into {n_buf} from rank {from}");
        ensure(
            matches!(err, CommError::MessageTruncated { expected, got, .. } if expected == n_buf && got == n_msg),
            || format!("{what}: {err:?}"),
        )?;
        // Outside the buffer nothing may change; inside, MPI may have
        // written the start of the message, the mailbox nothing.
        let outside = arena[..4096].iter().chain(&arena[4096 + n_buf..]);
        let outside = outside.filter(|&&b| b != 0xa5).count();
        let inside = arena[4096..4096 + n_buf]
            .iter()
            .filter(|&&b| b != 0xa5)
            .count();
        ensure(outside == 0 && (from != r || inside == 0), || {
            format!("{what}: {outside} bytes written outside the buffer, {inside} inside")
        })?;
    }
    // Exact-length large message into the middle of an arena.
    let mut arena = vec![0xa5u8; 300_000 + 2];
    let payload: Vec<u8> = (0..300_000).map(|i| (i % 253) as u8).collect();
    comm::scope(c, |s| {
        let rq = s.irecv(prev, 25, &mut arena[1..300_001])?;
        let sq = s.isend(next, 25, &payload)?;
        s.wait(rq)?;
        s.wait(sq)
    })
    .map_err(e)?;
    ensure(
        arena[0] == 0xa5 && arena[300_001] == 0xa5 && arena[1..300_001] == payload[..],
        || "exact large message".into(),
    )?;
    Ok(())
}

/// Progress: a posted receive is matched while its rank is blocked
/// elsewhere (in a blocking send, or a collective), with messages far
/// above the eager limit.
fn progress(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let (next, prev) = ((r + 1) % p, (r + p - 1) % p);
    let n = 1 << 20;
    let out = vec![r as u32; n];
    let mut inp = vec![0u32; n];
    // irecv; blocking send; wait: around the ring.
    comm::scope(c, |s| {
        let rq = s.irecv(prev, 50, &mut inp)?;
        c.send(next, 50, &out)?;
        s.wait(rq)
    })
    .map_err(e)?;
    ensure(inp.iter().all(|&v| v == prev as u32), || {
        "ring of blocking sends".into()
    })?;
    // Even ranks wait for their send before a barrier that odd ranks enter
    // with the matching receive still pending.
    comm::scope(c, |s| {
        let rq = s.irecv(prev, 51, &mut inp)?;
        let sq = s.isend(next, 51, &out)?;
        if r % 2 == 0 {
            s.wait(sq)?;
            c.barrier()?;
        } else {
            c.barrier()?;
            s.wait(sq)?;
        }
        s.wait(rq)
    })
    .map_err(e)?;
    ensure(inp.iter().all(|&v| v == prev as u32), || {
        "send across a barrier".into()
    })
}

/// Receives with the same source and tag take the messages in the order
/// they were posted; a receive left pending completes when its scope ends.
fn same_tag_order(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let (next, prev) = ((r + 1) % p, (r + p - 1) % p);
    let (mut a, mut b, mut d) = ([0i64; 2], [0i64; 2], [0i64; 2]);
    comm::scope(c, |s| {
        let ra = s.irecv(prev, 40, &mut a)?;
        s.irecv(prev, 40, &mut b)?;
        s.irecv(prev, 41, &mut d)?;
        c.send(next, 40, &[1i64, 1])?;
        c.send(next, 41, &[3i64, 3])?;
        c.send(next, 40, &[2i64, 2])?;
        // The other two are completed by the end of the scope.
        s.wait(ra)
    })
    .map_err(e)?;
    ensure(a == [1, 1] && b == [2, 2] && d == [3, 3], || {
        format!("{a:?} {b:?} {d:?}")
    })
}

/// One rank alone passes mismatching sizes to a collective: with checks
/// on, every rank returns an error and nothing hangs; the same calls with
/// matching sizes then still work. Then the unchecked path.
fn one_sided_mismatch(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    if !c.checks() {
        return Ok(());
    }
    let counts = vec![8usize; p];
    let displs: Vec<usize> = (0..p).map(|q| 8 * q).collect();
    let send = vec![r as u8; 8 * p];
    let mut recv = vec![0u8; 8 * p + 8];
    let bad = p - 1; // the rank that gets it wrong
                     // alltoallv: rank `bad` expects 9 bytes from rank 0.
    let mut rc = counts.clone();
    if r == bad {
        rc[0] = 9;
    }
    let err = c.alltoallv_bytes(&send, &counts, &displs, &mut recv, &rc, &displs);
    let expect_len = r == bad;
    let ok = |err: &Result<(), CommError>| match err {
        Err(CommError::LengthMismatch { .. }) => expect_len || p == 1,
        Err(CommError::Invalid(m)) => !expect_len && m.contains(&format!("rank {bad}")),
        _ => false,
    };
    ensure(ok(&err), || format!("alltoallv: {err:?}"))?;
    // allgatherv: rank `bad` has a different counts array.
    let mut ac = counts.clone();
    if r == bad && p > 1 {
        ac[0] = 4;
    }
    let err = c.allgatherv_bytes(&send[..8], &mut recv, &ac, &displs);
    ensure(p == 1 || ok(&err), || format!("allgatherv: {err:?}"))?;
    // alltoallw: rank `bad` has a receive layout that overruns its buffer.
    let mut rl: Vec<Strided> = (0..p).map(|q| Strided::contiguous(8 * q, 8)).collect();
    let sl = rl.clone();
    if r == bad {
        rl[0] = Strided::contiguous(8 * p + 1, 8);
    }
    let err = c.alltoallw_bytes(&send, &sl, &mut recv[..8 * p], &rl, 1);
    ensure(
        match &err {
            Err(CommError::Invalid(m)) => r == bad || m.contains(&format!("rank {bad}")),
            _ => false,
        },
        || format!("alltoallw: {err:?}"),
    )?;
    // broadcast and allreduce: a different length on rank `bad`.
    if p > 1 {
        let mut b = vec![0u8; if r == bad { 5 } else { 4 }];
        let err = c.broadcast_bytes(&mut b, 0);
        ensure(matches!(err, Err(CommError::LengthMismatch { .. })), || {
            format!("broadcast: {err:?}")
        })?;
        let mut b = vec![0u8; 4];
        let err = c.broadcast_bytes(&mut b, if r == bad { 0 } else { bad });
        ensure(matches!(err, Err(CommError::LengthMismatch { .. })), || {
            format!("broadcast root: {err:?}")
        })?;
        let mut v = vec![1i64; if r == bad { 1 } else { 2 }];
        let err = c.allreduce_i64(&mut v, ReduceOp::Sum);
        ensure(matches!(err, Err(CommError::LengthMismatch { .. })), || {
            format!("allreduce: {err:?}")
        })?;
    }
    // The communicator is still in step.
    let mut recv2 = vec![0u8; 8 * p];
    c.alltoallv_bytes(&send, &counts, &displs, &mut recv2, &counts, &displs)
        .map_err(e)?;
    ensure(
        recv2.iter().enumerate().all(|(i, &v)| v as usize == i / 8),
        || "after the errors".into(),
    )?;
    Ok(())
}

/// The same operations with the size checks off.
fn unchecked(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let grid = ProcessGrid::new([p, 1, 1], [false; 3]).map_err(e)?;
    let mut u = c.cart_create(&grid).map_err(e)?;
    // SAFETY: every rank passes matching sizes below.
    unsafe { u.disable_checks() };
    ensure(!u.checks(), || "checks still on".into())?;
    alltoallv(&u)?;
    alltoallw_transpose(&u)?;
    alltoallw_3d(&u)?;
    allreduce(&u)?;
    broadcast(&u)?;
    let (all, _) = u.allgather_varying(&[r as u64]).map_err(e)?;
    ensure(all == (0..p as u64).collect::<Vec<_>>(), || {
        format!("{all:?}")
    })?;
    u.enable_checks();
    ensure(u.checks(), || "checks off".into())
}

/// A communicator moves to another thread (the trait needs `Send`).
fn threads(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let sub = c.split(Some(0), r).map_err(e)?.ok_or("split")?;
    let total = std::thread::scope(|s| {
        s.spawn(move || {
            let t = sub.allreduce_scalar(r as f64, ReduceOp::Sum);
            drop(sub);
            t
        })
        .join()
    })
    .map_err(|_| "thread panicked".to_string())?
    .map_err(e)?;
    ensure(total == (p * (p - 1) / 2) as f64, || format!("{total}"))
}

/// Argument errors: bad ranks and tags, and (with checks on) collectives
/// whose sizes disagree between ranks.
fn bad_arguments(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let err = c.send(p, 0, &[1u8]).unwrap_err();
    ensure(err == CommError::InvalidRank { rank: p, size: p }, || {
        format!("{err:?}")
    })?;
    let err = c.send(0, comm::MAX_USER_TAG + 1, &[1u8]).unwrap_err();
    ensure(matches!(err, CommError::InvalidTag { .. }), || {
        format!("{err:?}")
    })?;
    let mut b = [0u8];
    ensure(c.recv(p + 3, 0, &mut b).is_err(), || {
        "irecv bad rank".into()
    })?;
    let mut out = vec![0.0; 3];
    ensure(c.alltoall(&[0.0; 2], &mut out, 1).is_err(), || {
        "alltoall sizes".into()
    })?;
    if !c.checks() {
        return Ok(());
    }
    // Every rank expects one byte too many from the rank before it, so
    // every rank sees a disagreement and none enters the exchange.
    let send = vec![1u8; p];
    let mut recv = vec![0u8; p + 1];
    let counts = vec![1usize; p];
    let displs: Vec<usize> = (0..p).collect();
    let mut rc = counts.clone();
    rc[(r + p - 1) % p] = 2;
    let err = c
        .alltoallv_bytes(&send, &counts, &displs, &mut recv, &rc, &displs)
        .unwrap_err();
    ensure(matches!(err, CommError::LengthMismatch { .. }), || {
        format!("alltoallv mismatch: {err:?}")
    })?;
    if p > 1 {
        let mut v = vec![0.0; if r == 0 { 2 } else { 3 }];
        let err = c.allreduce_f64(&mut v, ReduceOp::Sum).unwrap_err();
        ensure(matches!(err, CommError::LengthMismatch { .. }), || {
            format!("allreduce mismatch: {err:?}")
        })?;
    }
    Ok(())
}

/// cart_create: coordinates, neighbours (MPI_Cart_shift) and use as a
/// communicator.
fn cart(c: &MpiComm) -> TestResult {
    let (r, p) = (c.rank(), c.size());
    let grid = ProcessGrid::for_shape([12, 10, 8], p, [true, false, true]).map_err(e)?;
    let cart = c.cart_create(&grid).map_err(e)?;
    ensure(cart.rank() == r && cart.size() == p, || {
        format!("cart {cart:?}")
    })?;
    for axis in 0..3 {
        let (mut lo, mut hi) = (0, 0);
        // SAFETY: a valid Cartesian communicator and out-pointers.
        let rc =
            unsafe { mpi::ffi::MPI_Cart_shift(cart.as_raw(), axis as i32, 1, &mut lo, &mut hi) };
        ensure(rc == 0, || format!("MPI_Cart_shift: {rc}"))?;
        let conv = |x: i32| (x >= 0).then_some(x as usize);
        let mut off = [0isize; 3];
        off[axis] = 1;
        let up = grid.neighbor(r, off);
        off[axis] = -1;
        let down = grid.neighbor(r, off);
        ensure(conv(hi) == up && conv(lo) == down, || {
            format!("axis {axis}: MPI ({lo}, {hi}) vs grid ({down:?}, {up:?})")
        })?;
    }
    let rows = grid.sub_comm(&cart, [false, false, true]).map_err(e)?;
    ensure(rows.size() == grid.dims()[2], || "row size".into())?;
    let s = cart.allreduce_scalar(1.0, ReduceOp::Sum).map_err(e)?;
    ensure(s == p as f64, || "cart allreduce".into())?;
    let wrong = ProcessGrid::new([p + 1, 1, 1], [false; 3]).map_err(e)?;
    ensure(c.cart_create(&wrong).is_err(), || {
        "wrong grid size accepted".into()
    })
}

fn barrier_and_misc(c: &MpiComm) -> TestResult {
    c.barrier().map_err(e)?;
    ensure(c.backend() == "mpi", || c.backend().into())?;
    ensure(comm::mpi::is_launched_by_mpirun() || c.size() == 1, || {
        "is_launched_by_mpirun".into()
    })?;
    // Zero-length messages.
    let (r, p) = (c.rank(), c.size());
    let mut nothing: [u8; 0] = [];
    comm::scope(c, |s| {
        let rq = s.irecv((r + p - 1) % p, 30, &mut nothing)?;
        c.send((r + 1) % p, 30, &[] as &[u8])?;
        s.wait(rq)
    })
    .map_err(e)
}

fn abort_mode(panic: bool) -> ! {
    let res = comm::mpi::run(|c| {
        let failing = if c.size() > 1 { 1 } else { 0 };
        if c.rank() == failing {
            std::thread::sleep(std::time::Duration::from_millis(200));
            if panic {
                panic!("deliberate panic on rank {failing}");
            }
            return Err(CommError::invalid(format!(
                "deliberate failure on rank {failing}"
            )));
        }
        let mut b = [0u8];
        c.recv(failing, 0, &mut b)?;
        Ok(())
    });
    eprintln!("mpi selftest abort mode: run returned {res:?} instead of aborting");
    std::process::exit(0)
}

/// A rank panics inside a scope while its receive is in flight (the peer
/// never sends): it cannot wait and must not release the buffer MPI may
/// still write, so it ends the job with a message (`mpi_selftest
/// scope-panic`, 2 or more ranks). Exits 0 only if it did not abort.
fn scope_panic_mode() -> ! {
    let res = comm::mpi::run(|c| {
        let p = c.size();
        let mut buf = [0u8; 64];
        if c.rank() == 1 % p {
            comm::scope(c, |s| {
                s.irecv(0, 9, &mut buf)?;
                std::thread::sleep(std::time::Duration::from_millis(200));
                panic!("deliberate panic inside a scope on rank {}", c.rank());
                #[allow(unreachable_code)]
                Ok::<_, CommError>(())
            })
        } else {
            // Waits for a message rank 1 never sends.
            c.recv(1 % p, 10, &mut buf)
        }
    });
    eprintln!("mpi selftest scope-panic mode: run returned {res:?} instead of aborting");
    std::process::exit(0)
}

/// Messages and collectives beyond `i32::MAX` bytes (needs about 5 GB
/// per rank): `mpi_selftest big`, best with 1 or 2 ranks.
fn big_mode() {
    let universe = comm::mpi::init().unwrap_or_else(|err| {
        eprintln!("mpi selftest: {err}");
        std::process::exit(2)
    });
    let c = universe.world();
    let (r, p) = (c.rank(), c.size());
    let marked = |n: usize, seed: u8| {
        let mut v = vec![0x3cu8; n];
        for i in (0..n).step_by(1 << 20).chain([n - 1]) {
            v[i] = (i >> 20) as u8 ^ seed;
        }
        v
    };
    let check = |v: &[u8], seed: u8| {
        let n = v.len();
        (0..n)
            .step_by(1 << 20)
            .chain([n - 1])
            .all(|i| v[i] == (i >> 20) as u8 ^ seed)
            && v[1] == 0x3c
            && v[n - 2] == 0x3c
    };
    let mut failed = 0;
    let mut report = |name: &str, ok: Result<bool, CommError>| {
        let ok = matches!(ok, Ok(true));
        if !ok {
            failed += 1;
        }
        println!("rank {r}: {} {name}", if ok { "ok  " } else { "FAIL" });
    };
    // Point-to-point, an odd length above i32::MAX.
    let n = (1usize << 31) + 7;
    {
        let send = marked(n, r as u8);
        let mut recv = vec![0u8; n];
        let res = (|| {
            comm::scope(&c, |s| {
                let rq = s.irecv((r + p - 1) % p, 1, &mut recv)?;
                c.send((r + 1) % p, 1, &send)?;
                s.wait(rq)
            })?;
            Ok(check(&recv, ((r + p - 1) % p) as u8))
        })();
        report("p2p of 2^31 + 7 bytes", res);
        // Longer by one: truncation reported, nothing written.
        let res = (|| {
            let err = comm::scope(&c, |s| {
                let rq = s.irecv((r + p - 1) % p, 2, &mut recv[..n - 1])?;
                s.isend((r + 1) % p, 2, &send)?;
                Ok::<_, CommError>(s.wait(rq))
            })?;
            Ok(
                matches!(err, Err(CommError::MessageTruncated { got, .. }) if got == n)
                    && check(&recv, ((r + p - 1) % p) as u8),
            )
        })();
        report("truncated p2p of 2^31 + 7 bytes", res);
    }
    // alltoallv with a block above i32::MAX bytes (to itself).
    {
        let blk = (1usize << 31) + 8;
        let mut counts = vec![0usize; p];
        counts[r] = blk;
        let displs = vec![0usize; p];
        let send = marked(blk, 9);
        let mut recv = vec![0u8; blk];
        let res = c
            .alltoallv_bytes(&send, &counts, &displs, &mut recv, &counts, &displs)
            .map(|()| check(&recv, 9));
        report("alltoallv with a 2^31 + 8 byte block", res);
    }
    // allreduce and broadcast in chunks.
    {
        let n = (1usize << 27) + 3;
        let mut v = vec![1.0f64; n];
        v[n - 1] = r as f64;
        let res = c.allreduce_f64(&mut v, ReduceOp::Sum).map(|()| {
            v[0] == p as f64 && v[n - 2] == p as f64 && v[n - 1] == (p * (p - 1) / 2) as f64
        });
        report("allreduce of 2^27 + 3 f64", res);
        drop(v);
        let n = (1usize << 30) + 5;
        let mut b = if r == 0 { marked(n, 5) } else { vec![0u8; n] };
        let res = c.broadcast_bytes(&mut b, 0).map(|()| check(&b, 5));
        report("broadcast of 2^30 + 5 bytes", res);
    }
    drop(c);
    drop(universe);
    std::process::exit(i32::from(failed > 0))
}

/// Demonstrates the Open MPI 4.1 defect the backend documents: a message
/// longer than the receive buffer, above the eager limit, from another
/// rank. Prints how many bytes beyond the buffer were written (0 with a
/// correct MPI library). Needs 2 or more ranks.
fn overflow_mode() -> ! {
    let res = comm::mpi::run(|c| {
        let (r, p) = (c.rank(), c.size());
        if p < 2 {
            return Err("overflow mode needs at least 2 ranks".to_string());
        }
        let (next, prev) = ((r + 1) % p, (r + p - 1) % p);
        let (n_buf, n_msg) = (100_000, 300_000);
        let mut arena = vec![0xa5u8; n_buf + 300_000];
        let payload = vec![0x11u8; n_msg];
        let err = comm::scope(c, |s| {
            let rq = s.irecv(prev, 1, &mut arena[..n_buf])?;
            s.isend(next, 1, &payload)?;
            Ok::<_, CommError>(s.wait(rq))
        })
        .map_err(e)?;
        let beyond = arena[n_buf..].iter().filter(|&&b| b != 0xa5).count();
        Ok((err, beyond))
    });
    match res {
        Ok((err, beyond)) => {
            println!("{n_msg} bytes into a {n_buf}-byte buffer: {err:?}; {beyond} bytes written past the buffer", n_msg = 300_000, n_buf = 100_000);
            std::process::exit(0)
        }
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(2)
        }
    }
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("overflow") => overflow_mode(),
        Some("abort") => abort_mode(false),
        Some("panic") => abort_mode(true),
        Some("scope-panic") => scope_panic_mode(),
        Some("big") => big_mode(),
        _ => {}
    }
    let universe = comm::mpi::init().unwrap_or_else(|err| {
        eprintln!("mpi selftest: {err}");
        std::process::exit(2)
    });
    let world = universe.world();
    let (r, p) = (world.rank(), world.size());
    if r == 0 {
        println!(
            "mpi selftest: {p} rank(s), {universe:?}, checks {}",
            world.checks()
        );
    }
    let mut exact_bits = 0u64;
    let tests: Vec<(&str, Test<'_>)> = vec![
        ("ring send/recv, out-of-order tags", Box::new(ring)),
        ("wait_any", Box::new(wait_any)),
        ("alltoallv varying counts", Box::new(alltoallv)),
        ("collectives with empty buffers", Box::new(empty_buffers)),
        ("alltoallw 2D transpose", Box::new(alltoallw_transpose)),
        ("alltoallw 3D strided layouts", Box::new(alltoallw_3d)),
        ("split", Box::new(split)),
        ("allreduce", Box::new(allreduce)),
        ("broadcast", Box::new(broadcast)),
        ("allgather(_varying)", Box::new(allgather)),
        (
            "exact allreduce",
            Box::new(|c: &MpiComm| exact(c, &mut exact_bits)),
        ),
        ("MessageTruncated", Box::new(truncation)),
        (
            "same-tag receives, dropped requests",
            Box::new(same_tag_order),
        ),
        ("progress of posted receives", Box::new(progress)),
        (
            "one-sided size mismatches (checked)",
            Box::new(one_sided_mismatch),
        ),
        ("unchecked mode", Box::new(unchecked)),
        ("communicator on another thread", Box::new(threads)),
        ("bad arguments", Box::new(bad_arguments)),
        ("cart_create", Box::new(cart)),
        ("barrier, zero-length messages", Box::new(barrier_and_misc)),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, mut t) in tests {
        let out = match catch_unwind(AssertUnwindSafe(|| t(&world))) {
            Ok(o) => o,
            Err(p) => Err(format!(
                "panicked: {:?}",
                p.downcast_ref::<String>()
                    .map(String::as_str)
                    .or(p.downcast_ref::<&str>().copied())
            )),
        };
        if let Err(msg) = &out {
            eprintln!("rank {r}: FAIL {name}: {msg}");
        }
        let mut bad = [i64::from(out.is_err())];
        if let Err(err) = world.allreduce_i64(&mut bad, ReduceOp::Sum) {
            eprintln!("rank {r}: cannot combine results: {err}");
            comm::mpi::abort(3);
        }
        if bad[0] == 0 {
            passed += 1;
            if r == 0 {
                println!("  ok   {name}");
            }
        } else {
            failed += 1;
            if r == 0 {
                println!("  FAIL {name} (on {} rank(s))", bad[0]);
            }
        }
    }
    if r == 0 {
        println!(
            "exact sum bits: {exact_bits:#018x} ({})",
            f64::from_bits(exact_bits)
        );
        println!("mpi selftest: {passed} passed, {failed} failed");
    }
    if failed > 0 {
        world.barrier().ok();
        comm::mpi::abort(1);
    }
    drop(world);
    drop(universe);
}
