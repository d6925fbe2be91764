//! Reshape plans: move a distributed array from one layout to another.
//!
//! At plan time the box intersections give, for every pair of ranks, the
//! block that travels between them. A message holds its block in the
//! receiver's memory order, so unpacking writes contiguous rows; the block a
//! rank keeps for itself is copied directly and never touches the
//! communicator. Buffers are allocated once, at plan time.

use crate::layout::Layout;
use crate::FftError;
use comm::{CommExt, Communicator, Elem, IndexBox, ReduceOp};
use std::time::Instant;

/// Tag of reshape messages.
const TAG: u32 = 0x5EA;

/// How a reshape moves its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// One `alltoall` with every block padded to the largest message.
    Alltoall,
    /// One `alltoallv` with exact counts.
    Alltoallv,
    /// All receives posted; one blocking send per destination after packing
    /// it; each message unpacked as it arrives.
    P2p,
    /// All receives posted; each destination packed into its own buffer
    /// region and sent without blocking, so packing the next message
    /// overlaps the ones in flight; each message unpacked as it arrives.
    P2pPipelined,
    /// Time the four protocols on the real plan at build time and keep the
    /// fastest (the same choice on every rank).
    Auto,
}

impl Protocol {
    /// The four concrete protocols.
    pub const ALL: [Protocol; 4] = [
        Protocol::Alltoall,
        Protocol::Alltoallv,
        Protocol::P2p,
        Protocol::P2pPipelined,
    ];
}

impl std::str::FromStr for Protocol {
    type Err = FftError;
    fn from_str(s: &str) -> Result<Self, FftError> {
        match s.to_ascii_lowercase().as_str() {
            "alltoall" | "a2a" => Ok(Protocol::Alltoall),
            "alltoallv" | "a2av" => Ok(Protocol::Alltoallv),
            "p2p" => Ok(Protocol::P2p),
            "p2p_plined" | "p2p-pipelined" | "pipelined" => Ok(Protocol::P2pPipelined),
            "auto" => Ok(Protocol::Auto),
            _ => Err(FftError::Invalid(format!(
                "unknown reshape protocol {s:?}; valid: alltoall, alltoallv, p2p, p2p_plined, auto"
            ))),
        }
    }
}

/// Copies the points of `region` (global indices) from `src` (a block
/// `sbox` with strides `ss`) to `dst` (a block `dbox` with strides `ds`),
/// iterating with `order[2]` fastest.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_region<T: Copy>(
    src: &[T],
    sbox: &IndexBox,
    ss: [usize; 3],
    dst: &mut [T],
    dbox: &IndexBox,
    ds: [usize; 3],
    region: &IndexBox,
    order: [usize; 3],
) {
    if region.is_empty() {
        return;
    }
    let [o0, o1, o2] = order;
    let n2 = region.hi[o2] - region.lo[o2];
    let so = |p: [usize; 3]| (0..3).map(|d| (p[d] - sbox.lo[d]) * ss[d]).sum::<usize>();
    let dof = |p: [usize; 3]| (0..3).map(|d| (p[d] - dbox.lo[d]) * ds[d]).sum::<usize>();
    let mut p = region.lo;
    for a in region.lo[o0]..region.hi[o0] {
        p[o0] = a;
        for b in region.lo[o1]..region.hi[o1] {
            p[o1] = b;
            p[o2] = region.lo[o2];
            let (s0, d0) = (so(p), dof(p));
            if ss[o2] == 1 && ds[o2] == 1 {
                dst[d0..d0 + n2].copy_from_slice(&src[s0..s0 + n2]);
            } else {
                let (sa, da) = (ss[o2], ds[o2]);
                for c in 0..n2 {
                    dst[d0 + c * da] = src[s0 + c * sa];
                }
            }
        }
    }
}

/// Contiguous strides of a box stored in `order`.
pub(crate) fn packed_strides(b: &IndexBox, order: [usize; 3]) -> [usize; 3] {
    let s = b.shape();
    let mut st = [0; 3];
    st[order[2]] = 1;
    st[order[1]] = s[order[2]];
    st[order[0]] = s[order[2]] * s[order[1]];
    st
}

/// A planned move from one layout to another for `batch` fields at once.
#[derive(Debug)]
pub struct Reshape<T: Elem> {
    from: Layout,
    to: Layout,
    rank: usize,
    batch: usize,
    /// Per peer: the block sent to it and the block received from it.
    send_boxes: Vec<IndexBox>,
    recv_boxes: Vec<IndexBox>,
    send_counts: Vec<usize>,
    send_displs: Vec<usize>,
    recv_counts: Vec<usize>,
    recv_displs: Vec<usize>,
    pad: usize,
    protocol: Protocol,
    timings: Vec<(Protocol, f64)>,
    send_buf: Vec<T>,
    recv_buf: Vec<T>,
    messages: usize,
}

impl<T: Elem + Default> Reshape<T> {
    /// Plans the move of `batch` fields from `from` to `to` (collective).
    /// `Protocol::Auto` times the four protocols here and keeps the fastest.
    pub fn new(
        comm: &dyn Communicator,
        from: &Layout,
        to: &Layout,
        batch: usize,
        protocol: Protocol,
    ) -> Result<Self, FftError> {
        if from.global() != to.global() {
            return Err(FftError::Invalid(format!(
                "cannot reshape between layouts of different global shapes {:?} and {:?}",
                from.global(),
                to.global()
            )));
        }
        for l in [from, to] {
            if l.ranks() != comm.size() {
                return Err(FftError::Invalid(format!(
                    "layout grid {:?} holds {} ranks but the communicator has {}",
                    l.dims(),
                    l.ranks(),
                    comm.size()
                )));
            }
        }
        if batch == 0 {
            return Err(FftError::Invalid("batch must be at least 1, got 0".into()));
        }
        let p = comm.size();
        let rank = comm.rank();
        let mine_from = from.box_of(rank);
        let mine_to = to.box_of(rank);
        let send_boxes: Vec<IndexBox> =
            (0..p).map(|q| mine_from.intersect(&to.box_of(q))).collect();
        let recv_boxes: Vec<IndexBox> =
            (0..p).map(|q| from.box_of(q).intersect(&mine_to)).collect();
        let count = |b: &IndexBox, q: usize| if q == rank { 0 } else { b.len() * batch };
        let send_counts: Vec<usize> = send_boxes
            .iter()
            .enumerate()
            .map(|(q, b)| count(b, q))
            .collect();
        let recv_counts: Vec<usize> = recv_boxes
            .iter()
            .enumerate()
            .map(|(q, b)| count(b, q))
            .collect();
        let displs = |c: &[usize]| {
            c.iter()
                .scan(0, |a, &x| {
                    let o = *a;
                    *a += x;
                    Some(o)
                })
                .collect::<Vec<_>>()
        };
        let local_max = send_counts
            .iter()
            .chain(&recv_counts)
            .copied()
            .max()
            .unwrap_or(0);
        let pad = comm.allreduce_scalar(local_max as f64, ReduceOp::Max)? as usize;
        let messages = send_counts.iter().filter(|&&c| c > 0).count();
        let mut plan = Reshape {
            from: from.clone(),
            to: to.clone(),
            rank,
            batch,
            send_displs: displs(&send_counts),
            recv_displs: displs(&recv_counts),
            send_counts,
            recv_counts,
            send_boxes,
            recv_boxes,
            pad,
            protocol,
            timings: vec![],
            send_buf: vec![],
            recv_buf: vec![],
            messages,
        };
        if protocol == Protocol::Auto {
            plan.tune(comm)?;
        } else {
            plan.set_protocol(protocol);
        }
        Ok(plan)
    }

    fn set_protocol(&mut self, protocol: Protocol) {
        self.protocol = protocol;
        let p = self.send_counts.len();
        let (ns, nr) = match protocol {
            Protocol::Alltoall => (self.pad * p, self.pad * p),
            _ => (self.send_counts.iter().sum(), self.recv_counts.iter().sum()),
        };
        self.send_buf.resize(ns, T::default());
        self.send_buf.truncate(ns);
        self.recv_buf.resize(nr, T::default());
        self.recv_buf.truncate(nr);
    }

    fn tune(&mut self, comm: &dyn Communicator) -> Result<(), FftError> {
        let input = vec![T::default(); self.input_len()];
        let mut output = vec![T::default(); self.output_len()];
        let mut best = (f64::INFINITY, Protocol::Alltoallv);
        for proto in Protocol::ALL {
            self.set_protocol(proto);
            self.execute(comm, &input, &mut output)?;
            let mut times = vec![];
            for _ in 0..3 {
                comm.barrier()?;
                let t = Instant::now();
                self.execute(comm, &input, &mut output)?;
                times.push(t.elapsed().as_secs_f64());
            }
            times.sort_by(f64::total_cmp);
            // The slowest rank decides; every rank sees the same numbers.
            let t = comm.allreduce_scalar(times[1], ReduceOp::Max)?;
            self.timings.push((proto, t));
            if t < best.0 {
                best = (t, proto);
            }
        }
        self.set_protocol(best.1);
        Ok(())
    }
}

impl<T: Elem> Reshape<T> {
    /// The protocol in use (the winner when built with `Auto`).
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Median time of each protocol measured by `Auto` (empty otherwise).
    pub fn timings(&self) -> &[(Protocol, f64)] {
        &self.timings
    }

    /// Source layout.
    pub fn from(&self) -> &Layout {
        &self.from
    }

    /// Destination layout.
    pub fn to(&self) -> &Layout {
        &self.to
    }

    /// Messages this rank sends per execution.
    pub fn messages(&self) -> usize {
        self.messages
    }

    /// Elements of the input buffer: `batch` fields of the source block,
    /// one after another.
    pub fn input_len(&self) -> usize {
        self.from.local_len(self.rank) * self.batch
    }

    /// Elements of the output buffer.
    pub fn output_len(&self) -> usize {
        self.to.local_len(self.rank) * self.batch
    }

    /// Packs the block for peer `q` (all fields) into `dst`, in the
    /// destination's memory order.
    fn pack_into(&self, input: &[T], q: usize, dst: &mut [T]) {
        let (fb, fs) = (self.from.box_of(self.rank), self.from.strides(self.rank));
        let b = self.send_boxes[q];
        let ps = packed_strides(&b, self.to.order());
        let (nin, n) = (self.from.local_len(self.rank), b.len());
        for f in 0..self.batch {
            copy_region(
                &input[f * nin..(f + 1) * nin],
                &fb,
                fs,
                &mut dst[f * n..(f + 1) * n],
                &b,
                ps,
                &b,
                self.to.order(),
            );
        }
    }

    fn unpack_from(&self, buf: &[T], q: usize, output: &mut [T]) {
        let (tb, ts) = (self.to.box_of(self.rank), self.to.strides(self.rank));
        let b = self.recv_boxes[q];
        let ps = packed_strides(&b, self.to.order());
        let (nout, n) = (self.to.local_len(self.rank), b.len());
        for f in 0..self.batch {
            copy_region(
                &buf[f * n..(f + 1) * n],
                &b,
                ps,
                &mut output[f * nout..(f + 1) * nout],
                &tb,
                ts,
                &b,
                self.to.order(),
            );
        }
    }

    fn keep(&self, input: &[T], output: &mut [T]) {
        let r = self.rank;
        let b = self.send_boxes[r];
        let (fb, fs) = (self.from.box_of(r), self.from.strides(r));
        let (tb, ts) = (self.to.box_of(r), self.to.strides(r));
        let (nin, nout) = (self.from.local_len(r), self.to.local_len(r));
        for f in 0..self.batch {
            copy_region(
                &input[f * nin..(f + 1) * nin],
                &fb,
                fs,
                &mut output[f * nout..(f + 1) * nout],
                &tb,
                ts,
                &b,
                self.to.order(),
            );
        }
    }

    /// Moves `input` (this rank's block in the source layout, `batch` fields)
    /// into `output` (its block in the destination layout).
    pub fn execute(
        &mut self,
        comm: &dyn Communicator,
        input: &[T],
        output: &mut [T],
    ) -> Result<(), FftError> {
        if input.len() != self.input_len() {
            return Err(FftError::Buffer {
                what: "reshape input",
                expected: self.input_len(),
                got: input.len(),
            });
        }
        if output.len() != self.output_len() {
            return Err(FftError::Buffer {
                what: "reshape output",
                expected: self.output_len(),
                got: output.len(),
            });
        }
        let p = self.send_counts.len();
        let me = self.rank;
        // Destinations in a rotated order spread the load.
        let peers: Vec<usize> = (1..p).map(|k| (me + k) % p).collect();
        match self.protocol {
            Protocol::Alltoall | Protocol::Alltoallv => {
                let padded = self.protocol == Protocol::Alltoall;
                let mut send_buf = std::mem::take(&mut self.send_buf);
                for &q in &peers {
                    let n = self.send_counts[q];
                    if n > 0 {
                        let at = if padded {
                            q * self.pad
                        } else {
                            self.send_displs[q]
                        };
                        self.pack_into(input, q, &mut send_buf[at..at + n]);
                    }
                }
                self.send_buf = send_buf;
                self.keep(input, output);
                if padded {
                    comm.alltoall(&self.send_buf, &mut self.recv_buf, self.pad)?;
                } else {
                    comm.alltoallv(
                        &self.send_buf,
                        &self.send_counts,
                        &self.send_displs,
                        &mut self.recv_buf,
                        &self.recv_counts,
                        &self.recv_displs,
                    )?;
                }
                for &q in &peers {
                    if self.recv_counts[q] > 0 {
                        let at = if padded {
                            q * self.pad
                        } else {
                            self.recv_displs[q]
                        };
                        let n = self.recv_counts[q];
                        // Split borrows: the receive buffer is read while the
                        // plan's layouts are read too.
                        let buf = std::mem::take(&mut self.recv_buf);
                        self.unpack_from(&buf[at..at + n], q, output);
                        self.recv_buf = buf;
                    }
                }
            }
            Protocol::P2p | Protocol::P2pPipelined => {
                let mut send_buf = std::mem::take(&mut self.send_buf);
                let mut recv_buf = std::mem::take(&mut self.recv_buf);
                let result = self.p2p(comm, input, output, &peers, &mut send_buf, &mut recv_buf);
                self.send_buf = send_buf;
                self.recv_buf = recv_buf;
                result?;
            }
            Protocol::Auto => unreachable!("Auto is resolved at plan time"),
        }
        Ok(())
    }

    fn p2p(
        &self,
        comm: &dyn Communicator,
        input: &[T],
        output: &mut [T],
        peers: &[usize],
        send_buf: &mut [T],
        recv_buf: &mut [T],
    ) -> Result<(), FftError> {
        let recv_regions = regions(recv_buf, &self.recv_displs, &self.recv_counts);
        let send_regions = regions(send_buf, &self.send_displs, &self.send_counts);
        let pipelined = self.protocol == Protocol::P2pPipelined;
        comm::scope(comm, |s| {
            // Post every receive into its own region of the receive buffer.
            let mut from = Vec::with_capacity(peers.len());
            let mut recv_regions = recv_regions;
            for &q in peers {
                if let Some(region) = recv_regions[q].take() {
                    s.irecv(q, TAG, region)?;
                    from.push(q);
                }
            }
            let mut send_regions = send_regions;
            for &q in peers {
                let Some(region) = send_regions[q].take() else {
                    continue;
                };
                self.pack_into(input, q, region);
                if pipelined {
                    // Non-blocking: the next destination is packed while
                    // this message is in flight.
                    s.isend(q, TAG, region)?;
                } else {
                    comm.send(q, TAG, region)?;
                }
            }
            self.keep(input, output);
            while let Some((r, buf)) = s.wait_any_recv()? {
                self.unpack_from(buf, from[r.index()], output);
            }
            Ok::<_, FftError>(())
        })
    }
}

/// The non-empty blocks `buf[displs[q]..displs[q] + counts[q]]` as separate
/// mutable slices, indexed by rank (`None` for empty blocks). The blocks
/// must be disjoint and lie in ascending order, as the prefix sums of the
/// counts that the plan uses as displacements do.
fn regions<'b, T>(
    mut buf: &'b mut [T],
    displs: &[usize],
    counts: &[usize],
) -> Vec<Option<&'b mut [T]>> {
    let mut out = Vec::with_capacity(counts.len());
    let mut at = 0;
    for (&d, &n) in displs.iter().zip(counts) {
        if n == 0 {
            out.push(None);
            continue;
        }
        debug_assert!(d >= at, "blocks overlap or are out of order");
        let (_, rest) = std::mem::take(&mut buf).split_at_mut(d - at);
        let (block, rest) = rest.split_at_mut(n);
        out.push(Some(block));
        buf = rest;
        at = d + n;
    }
    out
}
