//! The redistribution engine: move, for every pair of ranks, one strided
//! block of a source buffer into a strided block of a destination buffer.
//!
//! Every distributed mechanism that moves blocks between ranks is one of
//! these: a `dfft` reshape (sub-boxes of 3D arrays between two layouts), an
//! `sht` theta or `l` transposition (slices of coefficient or grid arrays
//! between two distributions). A [`Redistribution`] is the plan, built once
//! (collectively) from the per-peer blocks and executed many times by any
//! [`Protocol`]; [`Protocol::Auto`] measures the candidates on the real plan
//! at build time and every rank keeps the same winner. The protocol never
//! changes a bit of the result: every element lands where its block says.

use crate::communicator::{
    as_bytes, as_bytes_mut, copy_strided, CommExt, Communicator, Elem, ReduceOp, Strided,
};
use crate::error::{CommError, Result};
use crate::scope::{scope_in, ScopeStore};
use std::fmt;
use std::str::FromStr;
use std::time::Instant;

/// The tag a [`Redistribution`] uses unless [`Redistribution::set_tag`]
/// chose another.
pub const REDIST_TAG: u32 = 0x5EA;

/// How a [`Redistribution`] moves its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The blocks packed into slots of the largest block size over all
    /// ranks and moved by one `alltoall` (A2AP).
    Alltoall,
    /// The blocks packed one after another and moved by one `alltoallv`
    /// with exact counts (A2AV).
    Alltoallv,
    /// One strided `alltoallw`: the blocks are read and written in place
    /// through their layouts (MPI derived datatypes), no user packing
    /// (A2AW). On in-process ranks each receiver copies its blocks straight
    /// out of the senders' buffers: one copy per element.
    Alltoallw,
    /// Every receive posted into its own region of a buffer; each
    /// destination packed, then sent with a blocking send; each message
    /// unpacked as it arrives.
    P2p,
    /// As [`P2p`](Self::P2p), but the sends do not block, so packing the
    /// next destination overlaps the messages in flight.
    P2pPipelined,
    /// Measure the five at build time on the real plan and keep the fastest
    /// (the slowest rank's time decides, so every rank keeps the same one).
    Auto,
}

impl Protocol {
    /// The five concrete protocols, in the order `Auto` measures them.
    pub const ALL: [Protocol; 5] = [
        Protocol::Alltoall,
        Protocol::Alltoallv,
        Protocol::Alltoallw,
        Protocol::P2p,
        Protocol::P2pPipelined,
    ];

    /// The name `FromStr` reads: `alltoall`, `alltoallv`, `alltoallw`,
    /// `p2p`, `p2p_plined` or `auto`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Alltoall => "alltoall",
            Protocol::Alltoallv => "alltoallv",
            Protocol::Alltoallw => "alltoallw",
            Protocol::P2p => "p2p",
            Protocol::P2pPipelined => "p2p_plined",
            Protocol::Auto => "auto",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Protocol {
    type Err = CommError;

    /// Reads a protocol name, any case; the names of the papers the
    /// mechanisms come from are accepted too (`a2ap`, `a2av`, `a2aw`,
    /// `pipelined`).
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "alltoall" | "a2a" | "a2ap" => Ok(Protocol::Alltoall),
            "alltoallv" | "a2av" => Ok(Protocol::Alltoallv),
            "alltoallw" | "a2aw" => Ok(Protocol::Alltoallw),
            "p2p" => Ok(Protocol::P2p),
            "p2p_plined" | "p2p-pipelined" | "pipelined" => Ok(Protocol::P2pPipelined),
            "auto" => Ok(Protocol::Auto),
            _ => Err(CommError::invalid(format!(
                "unknown redistribution protocol {s:?}; valid: alltoall, alltoallv, alltoallw, \
                 p2p, p2p_plined, auto"
            ))),
        }
    }
}

/// A planned redistribution of elements of type `T`: for every peer `q`,
/// the block `send[q]` of the source buffer goes to `q`, and the block that
/// `q` sends lands in `recv[q]` of the destination buffer, element for
/// element in the blocks' travel order. The block a rank keeps for itself
/// (`send[me]` to `recv[me]`) is copied directly.
///
/// Buffers are allocated at build time; [`execute`](Self::execute) itself
/// allocates nothing beyond what the communicator's backend needs per
/// message.
///
/// ```
/// use comm::{local, Communicator, Protocol, Redistribution, Strided};
///
/// // A 4 x 4 matrix distributed by rows over 2 ranks becomes distributed by
/// // columns: each rank sends its 2 x 2 block for the other's columns,
/// // which lands transposed.
/// let out = local::run(2, |c| {
///     let (r, n, b) = (c.rank(), 4, 2);
///     let rows: Vec<f64> = (0..b * n).map(|i| (r * b * n + i) as f64).collect();
///     // To rank q: my rows' entries in q's columns, column by column.
///     let send = (0..2).map(|q| Strided::nested(q * b, [1, b, b], [0, 1, n])).collect();
///     // From rank q: q's rows of my columns, stored column-major (n per column).
///     let recv = (0..2).map(|q| Strided::nested(q * b, [1, b, b], [0, n, 1])).collect();
///     let mut plan = Redistribution::new(c, send, recv, Protocol::Auto)?;
///     let mut cols = vec![0.0; b * n];
///     plan.execute(c, &rows, &mut cols)?;
///     Ok::<_, comm::CommError>(cols)
/// })
/// .unwrap();
/// // Rank 0 holds columns 0 and 1 of the matrix 0..16, column by column.
/// assert_eq!(out[0], [0., 4., 8., 12., 1., 5., 9., 13.]);
/// ```
#[derive(Debug)]
pub struct Redistribution<T: Elem> {
    rank: usize,
    send: Vec<Strided>,
    recv: Vec<Strided>,
    src_len: usize,
    dst_len: usize,
    /// Packed block sizes and offsets (elements; the own block is 0).
    send_counts: Vec<usize>,
    send_displs: Vec<usize>,
    recv_counts: Vec<usize>,
    recv_displs: Vec<usize>,
    /// The largest block (other than a rank's own) over all ranks.
    pad: usize,
    /// The peers a message comes from, in rank order (the order of their
    /// regions in the receive buffer and of the receives).
    from: Vec<usize>,
    protocol: Protocol,
    timings: Vec<(Protocol, f64)>,
    tag: u32,
    /// Byte counts and displacements of the all-to-all protocols (send
    /// counts, send displacements, receive counts, receive displacements),
    /// so an execution converts nothing.
    bytes: [Vec<usize>; 4],
    send_buf: Vec<T>,
    recv_buf: Vec<T>,
    store: ScopeStore,
}

fn prefix(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |a, &x| {
            let o = *a;
            *a += x;
            Some(o)
        })
        .collect()
}

impl<T: Elem + Default> Redistribution<T> {
    /// Plans the redistribution (collective over `comm`). `send[q]` and
    /// `recv[q]` are the blocks to and from rank `q`, in elements of the
    /// source and destination buffers. With [`Protocol::Auto`] every
    /// concrete protocol is timed here on the real plan.
    ///
    /// # Errors
    /// On every rank, when any rank's request is inconsistent: a list whose
    /// length is not the rank count, or a block whose length differs from
    /// the one its peer sends ([`CommError::Invalid`] naming the ranks and
    /// the lengths).
    pub fn new(
        comm: &dyn Communicator,
        send: Vec<Strided>,
        recv: Vec<Strided>,
        protocol: Protocol,
    ) -> Result<Self> {
        let (p, me) = (comm.size(), comm.rank());
        // Validate locally, then agree, so every rank returns an error.
        let mut problem = None;
        if send.len() != p || recv.len() != p {
            problem = Some(format!(
                "rank {me} gave {} send and {} receive blocks for {p} ranks",
                send.len(),
                recv.len()
            ));
        }
        let lens: Vec<u64> = (0..p)
            .map(|q| send.get(q).map_or(0, |b| b.len() as u64))
            .collect();
        let mut theirs = vec![0u64; p];
        comm.alltoall(&lens, &mut theirs, 1)?;
        if problem.is_none() {
            problem = (0..p).find_map(|q| {
                let want = recv[q].len() as u64;
                (theirs[q] != want).then(|| {
                    format!(
                        "rank {q} sends {} elements to rank {me}, which expects {want} from it",
                        theirs[q]
                    )
                })
            });
        }
        let bad = comm.allreduce_scalar(f64::from(u8::from(problem.is_some())), ReduceOp::Max)?;
        if bad > 0.0 {
            return Err(CommError::invalid(problem.map_or_else(
                || "redistribution: another rank's blocks are inconsistent".to_string(),
                |m| format!("redistribution: {m}"),
            )));
        }
        let count = |b: &Strided, q: usize| if q == me { 0 } else { b.len() };
        let send_counts: Vec<usize> = send.iter().enumerate().map(|(q, b)| count(b, q)).collect();
        let recv_counts: Vec<usize> = recv.iter().enumerate().map(|(q, b)| count(b, q)).collect();
        let local_max = send_counts
            .iter()
            .chain(&recv_counts)
            .copied()
            .max()
            .unwrap_or(0);
        let pad = comm.allreduce_scalar(local_max as f64, ReduceOp::Max)? as usize;
        let from = (0..p).filter(|&q| recv_counts[q] > 0).collect::<Vec<_>>();
        // Two rounds of messages per peer can be in flight: a rank finishes
        // an execution only with every peer's message of it, so a peer is
        // at most one execution ahead.
        // No message is longer than `pad`, the largest block over all ranks.
        let peers = send_counts.iter().filter(|&&c| c > 0).count();
        comm.reserve_messages(2 * peers, pad * std::mem::size_of::<T>());
        let mut plan = Redistribution {
            rank: me,
            src_len: send.iter().map(Strided::extent).max().unwrap_or(0),
            dst_len: recv.iter().map(Strided::extent).max().unwrap_or(0),
            send_displs: prefix(&send_counts),
            recv_displs: prefix(&recv_counts),
            send_counts,
            recv_counts,
            send,
            recv,
            pad,
            store: ScopeStore::with_capacity(from.len(), p),
            from,
            protocol,
            timings: Vec::new(),
            tag: REDIST_TAG,
            bytes: Default::default(),
            send_buf: Vec::new(),
            recv_buf: Vec::new(),
        };
        if protocol == Protocol::Auto {
            plan.tune(comm)?;
        } else {
            plan.set_protocol(protocol)?;
        }
        Ok(plan)
    }

    /// Switches to `protocol`, a concrete one (local: every rank must switch
    /// alike before the next execution). For measuring protocols against
    /// each other on one plan.
    ///
    /// # Errors
    /// [`CommError::Invalid`] for [`Protocol::Auto`], which is resolved when
    /// a plan is built.
    pub fn set_protocol(&mut self, protocol: Protocol) -> Result<()> {
        if protocol == Protocol::Auto {
            return Err(CommError::invalid(
                "set_protocol needs a concrete protocol; Auto is resolved when the plan is built",
            ));
        }
        self.protocol = protocol;
        let p = self.send.len();
        let (ns, nr) = match protocol {
            Protocol::Alltoall => (self.pad * p, self.pad * p),
            Protocol::Alltoallw => (0, 0),
            _ => (self.send_counts.iter().sum(), self.recv_counts.iter().sum()),
        };
        self.send_buf.clear();
        self.send_buf.resize(ns, T::default());
        self.send_buf.shrink_to_fit();
        self.recv_buf.clear();
        self.recv_buf.resize(nr, T::default());
        self.recv_buf.shrink_to_fit();
        let es = std::mem::size_of::<T>();
        let me = self.rank;
        self.bytes = match protocol {
            Protocol::Alltoall => {
                // Slots of `pad` elements; the own slot stays empty (the own
                // block is copied directly).
                let counts = |c: &[usize]| {
                    (0..p)
                        .map(|q| {
                            if q == me || c[q] == 0 {
                                0
                            } else {
                                self.pad * es
                            }
                        })
                        .collect::<Vec<_>>()
                };
                let displs = (0..p).map(|q| q * self.pad * es).collect::<Vec<_>>();
                [
                    counts(&self.send_counts),
                    displs.clone(),
                    counts(&self.recv_counts),
                    displs,
                ]
            }
            Protocol::Alltoallv => {
                let b = |v: &[usize]| v.iter().map(|x| x * es).collect::<Vec<_>>();
                [
                    b(&self.send_counts),
                    b(&self.send_displs),
                    b(&self.recv_counts),
                    b(&self.recv_displs),
                ]
            }
            _ => Default::default(),
        };
        Ok(())
    }

    fn tune(&mut self, comm: &dyn Communicator) -> Result<()> {
        let src = vec![T::default(); self.src_len];
        let mut dst = vec![T::default(); self.dst_len];
        let mut best = (f64::INFINITY, Protocol::Alltoallv);
        for proto in Protocol::ALL {
            self.set_protocol(proto)?;
            self.execute(comm, &src, &mut dst)?;
            let mut times = [0.0; 3];
            for t in &mut times {
                comm.barrier()?;
                let t0 = Instant::now();
                self.execute(comm, &src, &mut dst)?;
                *t = t0.elapsed().as_secs_f64();
            }
            times.sort_by(f64::total_cmp);
            // The slowest rank decides; every rank sees the same numbers.
            let t = comm.allreduce_scalar(times[1], ReduceOp::Max)?;
            self.timings.push((proto, t));
            if t < best.0 {
                best = (t, proto);
            }
        }
        self.set_protocol(best.1)
    }
}

impl<T: Elem> Redistribution<T> {
    /// The protocol in use (the winner when built with `Auto`).
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The median time of each protocol measured by `Auto` (the slowest
    /// rank's), in the order measured; empty otherwise.
    pub fn timings(&self) -> &[(Protocol, f64)] {
        &self.timings
    }

    /// Messages this rank sends per execution.
    pub fn messages(&self) -> usize {
        self.send_counts.iter().filter(|&&c| c > 0).count()
    }

    /// Elements this rank sends to other ranks per execution.
    pub fn elements_sent(&self) -> usize {
        self.send_counts.iter().sum()
    }

    /// The smallest source buffer the blocks fit in.
    pub fn src_len(&self) -> usize {
        self.src_len
    }

    /// The smallest destination buffer the blocks fit in.
    pub fn dst_len(&self) -> usize {
        self.dst_len
    }

    /// The block sent to each rank.
    pub fn send_blocks(&self) -> &[Strided] {
        &self.send
    }

    /// The block received from each rank.
    pub fn recv_blocks(&self) -> &[Strided] {
        &self.recv
    }

    /// Uses `tag` for the messages of the point-to-point protocols (default
    /// [`REDIST_TAG`]). Every rank must use the same tag.
    ///
    /// # Errors
    /// [`CommError::InvalidTag`] above [`MAX_USER_TAG`](crate::MAX_USER_TAG).
    pub fn set_tag(&mut self, tag: u32) -> Result<()> {
        crate::validate_tag(tag)?;
        self.tag = tag;
        Ok(())
    }

    /// Moves the blocks of `src` into `dst` (collective over the `comm` the
    /// plan was built on). Elements of `dst` outside the receive blocks are
    /// left as they are.
    ///
    /// # Errors
    /// A buffer shorter than the blocks need ([`CommError::LengthMismatch`]),
    /// or a failure of the communicator.
    pub fn execute(&mut self, comm: &dyn Communicator, src: &[T], dst: &mut [T]) -> Result<()> {
        if src.len() < self.src_len {
            return Err(CommError::length(
                "redistribution source buffer (at least)",
                self.src_len,
                src.len(),
            ));
        }
        if dst.len() < self.dst_len {
            return Err(CommError::length(
                "redistribution destination buffer (at least)",
                self.dst_len,
                dst.len(),
            ));
        }
        if comm.rank() != self.rank || comm.size() != self.send.len() {
            return Err(CommError::invalid(format!(
                "redistribution planned for rank {} of {} run on rank {} of {}",
                self.rank,
                self.send.len(),
                comm.rank(),
                comm.size()
            )));
        }
        let me = self.rank;
        match self.protocol {
            Protocol::Alltoallw => comm.alltoallw(src, &self.send, dst, &self.recv),
            Protocol::Alltoall | Protocol::Alltoallv => {
                let padded = self.protocol == Protocol::Alltoall;
                let at = |displs: &[usize], q: usize| if padded { q * self.pad } else { displs[q] };
                for (q, b) in self.send.iter().enumerate() {
                    if self.send_counts[q] > 0 {
                        let s = at(&self.send_displs, q);
                        b.gather(src, &mut self.send_buf[s..s + b.len()]);
                    }
                }
                copy_strided(src, &self.send[me], dst, &self.recv[me]);
                let [sc, sd, rc, rd] = &self.bytes;
                comm.alltoallv_bytes(
                    as_bytes(&self.send_buf),
                    sc,
                    sd,
                    as_bytes_mut(&mut self.recv_buf),
                    rc,
                    rd,
                )?;
                for (q, b) in self.recv.iter().enumerate() {
                    if self.recv_counts[q] > 0 {
                        let s = at(&self.recv_displs, q);
                        b.scatter(&self.recv_buf[s..s + b.len()], dst);
                    }
                }
                Ok(())
            }
            Protocol::P2p | Protocol::P2pPipelined => self.p2p(comm, src, dst),
            Protocol::Auto => unreachable!("Auto is resolved when the plan is built"),
        }
    }

    fn p2p(&mut self, comm: &dyn Communicator, src: &[T], dst: &mut [T]) -> Result<()> {
        let me = self.rank;
        let p = self.send.len();
        let pipelined = self.protocol == Protocol::P2pPipelined;
        let Redistribution {
            send,
            recv,
            send_counts,
            recv_counts,
            from,
            tag,
            send_buf,
            recv_buf,
            store,
            ..
        } = self;
        let tag = *tag;
        scope_in(comm, store, |s| {
            // Every receive into its own region; the regions lie in rank
            // order, as the peers of `from`.
            let mut rest: &mut [T] = recv_buf;
            for &q in from.iter() {
                let (region, tail) = std::mem::take(&mut rest).split_at_mut(recv_counts[q]);
                rest = tail;
                s.irecv(q, tag, region)?;
            }
            // Sends in rotated order (me+1, ..., p-1, 0, ..., me-1), which
            // spreads the load: the pack buffer (regions in rank order) is
            // split after this rank's place and each half carved upwards.
            let split = send_counts[..=me].iter().sum::<usize>();
            let (low, high) = send_buf.split_at_mut(split);
            for (half, peers) in [(high, me + 1..p), (low, 0..me)] {
                let mut rest = half;
                for q in peers {
                    let n = send_counts[q];
                    if n == 0 {
                        continue;
                    }
                    let (region, tail) = std::mem::take(&mut rest).split_at_mut(n);
                    rest = tail;
                    send[q].gather(src, region);
                    if pipelined {
                        s.isend(q, tag, region)?;
                    } else {
                        comm.send(q, tag, region)?;
                    }
                }
            }
            copy_strided(src, &send[me], dst, &recv[me]);
            while let Some((r, buf)) = s.wait_any_recv()? {
                recv[from[r.index()]].scatter(buf, dst);
            }
            Ok(())
        })
    }
}
