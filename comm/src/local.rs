//! The in-process backend: N ranks as threads of one process.
//!
//! This is real message passing, not shared arrays: every rank has a mailbox;
//! a send copies its bytes into an envelope `(context, source, tag, bytes)`
//! in the destination's mailbox (eager protocol, so sends complete at once);
//! a receive matches the oldest envelope with its context, source and tag
//! (MPI's non-overtaking order). Collectives are built from the same
//! messages in a separate context, so they never match user messages.
//! The strided all-to-all is the exception that moves no data in messages:
//! like the single-copy transports of MPI libraries inside one node, each
//! rank sends every peer a small window (where its send buffer and the
//! peer's block lie), and each receiver copies its blocks straight out of
//! the senders' buffers into its own, one copy per element; a sender
//! returns only when every peer has answered that it finished reading (see
//! `Exposed`).
//! Reductions combine contributions in rank order, so their bits depend only
//! on the rank count, and every rank gets the same bits.
//!
//! **Failure.** [`run`] catches a panic or an `Err` returned by any rank and
//! marks the world as failed; from then on every receive (or collective)
//! that would have to wait for a message not yet there returns
//! [`CommError::PeerFailed`] naming the first failed rank. Sends still
//! complete and messages that did arrive are still received, so a rank that
//! can complete a collective with them does (a validation error agreed by a
//! collective reaches every rank as that error, not as `PeerFailed`). A
//! receive that waits longer than the deadlock limit (default 300 s,
//! `COMM_TIMEOUT_SECS` in the environment or [`Options::timeout`]; 0 turns
//! it off) returns [`CommError::Timeout`]. Nothing waits forever.

use crate::communicator::{
    validate_peer, validate_tag, validate_v, CommExt, Communicator, ReduceOp, Request, RequestImpl,
    Strided,
};
use crate::error::{CommError, Result};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most message buffers the world keeps for reuse.
const POOL_LIMIT: usize = 4096;

/// Context bit reserved for the collectives' internal messages.
const COLLECTIVE: u64 = 1 << 63;
/// Internal tags of the collectives.
const TAG_GATHER: u32 = 1;
const TAG_BCAST: u32 = 2;
const TAG_A2A: u32 = 3;
const TAG_ALLGATHER: u32 = 4;
/// An `alltoallw` window: where the sender's buffer and block lie.
const TAG_WINDOW: u32 = 5;
/// The answer to a window: the receiver has finished reading through it.
const TAG_DONE: u32 = 6;

struct Envelope {
    ctx: u64,
    src: usize,
    tag: u32,
    data: Vec<u8>,
}

#[derive(Default)]
struct Queue {
    msgs: VecDeque<Envelope>,
    /// The most messages one `reserve_messages` of this rank announced
    /// (kept as capacity).
    reserved: usize,
    /// Size classes of the pool buffers set aside for this rank's messages.
    set_aside: Vec<usize>,
    /// Bumped on every arrival and on failure, so `wait_any` can sleep
    /// without missing a wake-up.
    generation: u64,
}

#[derive(Default)]
struct Mailbox {
    queue: Mutex<Queue>,
    arrived: Condvar,
}

struct World {
    mailboxes: Vec<Mailbox>,
    /// Per world rank: its body has returned (or panicked), so it sends
    /// nothing more.
    done: Vec<AtomicBool>,
    failed: AtomicBool,
    failure: Mutex<Option<(usize, String)>>,
    timeout: Option<Duration>,
    pool: Mutex<Vec<Vec<u8>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking rank never holds these locks across user code, so a
    // poisoned lock still guards consistent data.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl World {
    fn check(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            let (rank, reason) = lock(&self.failure)
                .clone()
                .unwrap_or((usize::MAX, String::new()));
            return Err(CommError::PeerFailed { rank, reason });
        }
        Ok(())
    }

    /// True when a receive from world rank `src` that finds no message can
    /// never complete because a rank failed: `src` has stopped (it failed,
    /// or returned, perhaps after a receive of its own failed). While `src`
    /// runs, its message may still come, so the receive waits for it.
    fn gone(&self, src: usize) -> bool {
        self.failed.load(Ordering::Acquire) && self.done[src].load(Ordering::Acquire)
    }

    /// Records that world rank `rank` stopped and wakes every waiting
    /// receive, so it can see whether its source is gone.
    fn finished(&self, rank: usize) {
        self.done[rank].store(true, Ordering::Release);
        for mb in &self.mailboxes {
            let mut q = lock(&mb.queue);
            q.generation += 1;
            mb.arrived.notify_all();
        }
    }

    fn fail(&self, rank: usize, reason: String) {
        {
            let mut f = lock(&self.failure);
            if f.is_none() {
                *f = Some((rank, reason));
            }
        }
        self.failed.store(true, Ordering::Release);
        for mb in &self.mailboxes {
            let mut q = lock(&mb.queue);
            q.generation += 1;
            mb.arrived.notify_all();
        }
    }

    /// A message buffer holding `data`: a recycled one with room for it
    /// when the pool has one (the newest such), so a program that repeats
    /// its messages allocates none once warm.
    fn buffer(&self, data: &[u8]) -> Vec<u8> {
        let mut v = self.empty_buffer(data.len());
        v.extend_from_slice(data);
        v
    }

    /// An empty message buffer with room for `len` bytes, recycled if the
    /// pool has one.
    fn empty_buffer(&self, len: usize) -> Vec<u8> {
        let mut v = {
            let mut p = lock(&self.pool);
            // The most recently recycled buffer that fits well (room for
            // `len`, less than twice that: warm in cache, and small
            // messages do not take the buffers large ones need); else the
            // smallest with room.
            let fit = p
                .iter()
                .rposition(|b| b.capacity() >= len && b.capacity() / 2 < len.max(1))
                .or_else(|| {
                    p.iter()
                        .enumerate()
                        .rev()
                        .filter(|(_, b)| b.capacity() >= len)
                        .min_by_key(|(_, b)| b.capacity())
                        .map(|(i, _)| i)
                });
            match fit {
                Some(i) => p.swap_remove(i),
                None => p.pop().unwrap_or_default(),
            }
        };
        v.clear();
        v.reserve(len);
        v
    }

    fn recycle(&self, v: Vec<u8>) {
        let mut p = lock(&self.pool);
        if p.len() < POOL_LIMIT {
            p.push(v);
        }
    }

    /// Delivers an envelope. Sends complete even after a peer failed (they
    /// only deposit bytes): a rank in the middle of a collective finishes
    /// its part, so the others can finish theirs with what arrived.
    fn post(&self, world_dest: usize, env: Envelope) -> Result<()> {
        let mb = &self.mailboxes[world_dest];
        let mut q = lock(&mb.queue);
        q.msgs.push_back(env);
        q.generation += 1;
        mb.arrived.notify_all();
        Ok(())
    }

    /// Removes the oldest matching envelope, if any.
    fn take(q: &mut Queue, ctx: u64, src: usize, tag: u32) -> Option<Envelope> {
        let i = q
            .msgs
            .iter()
            .position(|e| e.ctx == ctx && e.src == src && e.tag == tag)?;
        q.msgs.remove(i)
    }

    /// Takes back the `alltoallw` window of call `seq` that `src` (rank in
    /// context `ctx`) left in world rank `dest`'s mailbox, if `dest` has not
    /// taken it yet.
    fn withdraw(&self, dest: usize, ctx: u64, src: usize, seq: u64) -> bool {
        let e = {
            let mut q = lock(&self.mailboxes[dest].queue);
            let i = q.msgs.iter().position(|e| {
                e.ctx == ctx
                    && e.src == src
                    && e.tag == TAG_WINDOW
                    && Window::seq_of(&e.data) == Some(seq)
            });
            i.and_then(|i| q.msgs.remove(i))
        };
        match e {
            Some(e) => {
                self.recycle(e.data);
                true
            }
            None => false,
        }
    }

    /// Blocks until a matching envelope from `src` (rank in the context;
    /// `src_world` in the world) arrives.
    fn wait_take(
        &self,
        me: usize,
        ctx: u64,
        src: usize,
        src_world: usize,
        tag: u32,
    ) -> Result<Envelope> {
        let mb = &self.mailboxes[me];
        let start = Instant::now();
        let mut q = lock(&mb.queue);
        loop {
            // A message that has arrived is taken even when a peer has
            // failed since, and one that may still come is waited for: only
            // a receive whose source has stopped fails. So every rank that
            // can finish a step with its peers' messages does, and reports
            // the same error as the others after it.
            if let Some(e) = Self::take(&mut q, ctx, src, tag) {
                return Ok(e);
            }
            if self.gone(src_world) {
                self.check()?;
            }
            q = self.sleep(mb, q, start, me, || {
                format!("a message from rank {src} with tag {tag}")
            })?;
        }
    }

    fn sleep<'m>(
        &self,
        mb: &'m Mailbox,
        q: MutexGuard<'m, Queue>,
        start: Instant,
        me: usize,
        what: impl Fn() -> String,
    ) -> Result<MutexGuard<'m, Queue>> {
        match self.timeout {
            None => Ok(mb.arrived.wait(q).unwrap_or_else(|p| p.into_inner())),
            Some(limit) => {
                let left = limit.saturating_sub(start.elapsed());
                if left.is_zero() {
                    return Err(CommError::Timeout {
                        rank: me,
                        what: what(),
                        seconds: limit.as_secs(),
                    });
                }
                Ok(mb
                    .arrived
                    .wait_timeout(q, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0)
            }
        }
    }
}

/// One rank's handle on a group of in-process ranks.
pub struct LocalComm {
    world: Arc<World>,
    ctx: u64,
    /// World rank of each member.
    members: Arc<Vec<usize>>,
    rank: usize,
    splits: AtomicU64,
    /// `alltoallw` calls made on this communicator (each rank counts its
    /// own; the windows of one call carry it, so calls out of step are an
    /// error instead of a wrong match).
    a2aw_seq: AtomicU64,
}

impl std::fmt::Debug for LocalComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalComm")
            .field("rank", &self.rank)
            .field("size", &self.members.len())
            .field("context", &self.ctx)
            .finish()
    }
}

impl LocalComm {
    fn me(&self) -> usize {
        self.members[self.rank]
    }

    fn send_ctx(&self, ctx: u64, dest: usize, tag: u32, data: &[u8]) -> Result<()> {
        self.send_vec_ctx(ctx, dest, tag, self.world.buffer(data))
    }

    /// Sends a message buffer as it is (from the pool, filled by the
    /// caller).
    fn send_vec_ctx(&self, ctx: u64, dest: usize, tag: u32, data: Vec<u8>) -> Result<()> {
        let env = Envelope {
            ctx,
            src: self.rank,
            tag,
            data,
        };
        self.world.post(self.members[dest], env)
    }

    fn recv_ctx(&self, ctx: u64, src: usize, tag: u32) -> Result<Vec<u8>> {
        Ok(self
            .world
            .wait_take(self.me(), ctx, src, self.members[src], tag)?
            .data)
    }

    fn coll(&self) -> u64 {
        self.ctx | COLLECTIVE
    }

    /// Gathers every rank's bytes on rank 0 (in rank order); others get
    /// `None`. The buffers come from the world's pool: give them back with
    /// [`World::recycle`].
    fn gather_root(&self, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        if self.rank == 0 {
            let mut all = Vec::with_capacity(self.size());
            all.push(self.world.buffer(data));
            for r in 1..self.size() {
                all.push(self.recv_ctx(self.coll(), r, TAG_GATHER)?);
            }
            Ok(Some(all))
        } else {
            self.send_ctx(self.coll(), 0, TAG_GATHER, data)?;
            Ok(None)
        }
    }

    fn bcast_internal(&self, buf: &mut [u8], root: usize) -> Result<()> {
        if self.rank == root {
            for r in (0..self.size()).filter(|&r| r != root) {
                self.send_ctx(self.coll(), r, TAG_BCAST, buf)?;
            }
        } else {
            let v = self.recv_ctx(self.coll(), root, TAG_BCAST)?;
            if v.len() != buf.len() {
                return Err(CommError::MessageTruncated {
                    src: root,
                    tag: TAG_BCAST,
                    expected: buf.len(),
                    got: v.len(),
                });
            }
            buf.copy_from_slice(&v);
            self.world.recycle(v);
        }
        Ok(())
    }

    fn reduce<T: crate::Elem>(&self, data: &mut [T], f: impl Fn(T, T) -> T) -> Result<()> {
        let bytes = crate::as_bytes(data);
        if let Some(all) = self.gather_root(bytes)? {
            let n = data.len();
            for (r, part) in all.iter().enumerate().skip(1) {
                if part.len() != std::mem::size_of_val(data) {
                    return Err(CommError::length(
                        format!("allreduce length on rank {r}"),
                        n,
                        part.len() / std::mem::size_of::<T>().max(1),
                    ));
                }
                for (i, x) in data.iter_mut().enumerate() {
                    // SAFETY: in bounds (checked above); `T: Elem` accepts any bytes.
                    let y: T =
                        unsafe { std::ptr::read_unaligned(part.as_ptr().cast::<T>().add(i)) };
                    *x = f(*x, y);
                }
            }
            all.into_iter().for_each(|v| self.world.recycle(v));
        }
        self.bcast_internal(crate::as_bytes_mut(data), 0)
    }
}

/// A receive in flight. It owns a handle on the world, not a borrow of the
/// communicator, so it may outlive the call that started it (as every
/// [`Request`] may); the bytes are copied in on the thread that tests or
/// waits for it.
pub(crate) struct RecvReq {
    world: Arc<World>,
    /// World rank of the receiver.
    me: usize,
    /// World rank of the sender.
    src_world: usize,
    ctx: u64,
    src: usize,
    tag: u32,
    buf: *mut u8,
    len: usize,
}

// SAFETY: `buf` is only written through `&mut self` (one thread at a time);
// the contract of `irecv_raw` keeps the bytes valid and untouched by anyone
// else until this request completes, from whichever thread completes it.
unsafe impl Send for RecvReq {}

impl RecvReq {
    fn deliver(&mut self, e: Envelope) -> Result<()> {
        if e.data.len() != self.len {
            return Err(CommError::MessageTruncated {
                src: self.src,
                tag: self.tag,
                expected: self.len,
                got: e.data.len(),
            });
        }
        // SAFETY: `irecv_raw`'s contract: `buf` is valid for `len` bytes and
        // nobody else touches them until this request completes (now).
        unsafe { std::ptr::copy_nonoverlapping(e.data.as_ptr(), self.buf, self.len) };
        self.world.recycle(e.data);
        Ok(())
    }
}

impl RequestImpl for RecvReq {
    fn test(&mut self) -> Result<bool> {
        let w = &self.world;
        let e = {
            let mut q = lock(&w.mailboxes[self.me].queue);
            World::take(&mut q, self.ctx, self.src, self.tag)
        };
        match e {
            Some(e) => self.deliver(e).map(|_| true),
            None if w.gone(self.src_world) => w.check().map(|()| false),
            None => Ok(false),
        }
    }

    fn wait(&mut self) -> Result<()> {
        let e = self
            .world
            .wait_take(self.me, self.ctx, self.src, self.src_world, self.tag)?;
        self.deliver(e)
    }

    /// Nothing moves into the buffer unless this rank tests or waits, so an
    /// abandoned receive simply stops; its message, if it comes, stays in
    /// the mailbox.
    fn abandon(&mut self) {}
}

/// What one `alltoallw` call publishes to a peer: the call's number on the
/// communicator, the sender's whole send buffer (address and length in
/// bytes), the element size and the sender's block for that peer.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Window {
    seq: u64,
    addr: usize,
    len: usize,
    elem: usize,
    layout: Strided,
}

impl Window {
    const BYTES: usize = 13 * 8;

    fn encode(&self) -> [u8; Self::BYTES] {
        let l = &self.layout;
        let words = [
            self.seq,
            self.addr as u64,
            self.len as u64,
            self.elem as u64,
            l.offset as u64,
            l.counts[0] as u64,
            l.counts[1] as u64,
            l.counts[2] as u64,
            l.counts[3] as u64,
            l.strides[0] as u64,
            l.strides[1] as u64,
            l.strides[2] as u64,
            l.strides[3] as u64,
        ];
        let mut out = [0u8; Self::BYTES];
        for (o, w) in out.chunks_exact_mut(8).zip(words) {
            o.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// The call number alone (the first word), for matching.
    fn seq_of(bytes: &[u8]) -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?))
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != Self::BYTES {
            return None;
        }
        let w = |i: usize| {
            let b: [u8; 8] = bytes[8 * i..8 * i + 8].try_into().expect("8 bytes");
            u64::from_le_bytes(b) as usize
        };
        Some(Window {
            seq: w(0) as u64,
            addr: w(1),
            len: w(2),
            elem: w(3),
            layout: Strided {
                offset: w(4),
                counts: [w(5), w(6), w(7), w(8)],
                strides: [w(9), w(10), w(11), w(12)],
            },
        })
    }
}

/// This rank's send buffer, published to its peers for one `alltoallw`.
///
/// The peers read the buffer through the raw address of their window, so it
/// must stay borrowed, and unwritten, until no peer can read it any more.
/// That is what this guard waits for, when released and also when dropped
/// during unwinding: for every peer, either its answer (a peer that takes a
/// window always answers it, after its copy or instead of one, also when
/// unwinding; see [`Answer`]), or the window taken back from the peer's
/// mailbox before the peer took it (tried only after a failure anywhere or
/// past the deadlock limit: a peer that has taken the window is in the call
/// and answers soon). The call's `&[u8]` borrow outlives this guard, so the
/// caller cannot free or change the bytes before the guard lets go.
struct Exposed<'a> {
    comm: &'a LocalComm,
    seq: u64,
    /// Windows sent, to the peers `rank + 1, rank + 2, ...` (mod size).
    sent: usize,
    /// Of those, the ones answered or withdrawn, in the same order.
    settled: usize,
    released: bool,
}

impl<'a> Exposed<'a> {
    fn publish(
        comm: &'a LocalComm,
        seq: u64,
        send: &[u8],
        layouts: &[Strided],
        elem: usize,
    ) -> Result<Self> {
        let p = comm.size();
        let mut ex = Exposed {
            comm,
            seq,
            sent: 0,
            settled: 0,
            released: false,
        };
        for k in 1..p {
            let r = (comm.rank + k) % p;
            let w = Window {
                seq,
                addr: send.as_ptr() as usize,
                len: send.len(),
                elem,
                layout: layouts[r],
            };
            // Counted before it is sent: whatever happens next waits for
            // this peer.
            ex.sent += 1;
            comm.send_ctx(comm.coll(), r, TAG_WINDOW, &w.encode())?;
        }
        Ok(ex)
    }

    /// Waits until no peer can read the buffer; the error of the call, if
    /// a rank failed or the deadlock limit passed.
    fn release(mut self) -> Result<()> {
        let r = self.wait();
        self.released = true;
        r
    }

    /// Settles the peers one after another (in the order of the windows);
    /// answers from the others wait in the mailbox meanwhile.
    fn wait(&mut self) -> Result<()> {
        let comm = self.comm;
        let world = &comm.world;
        let mb = &world.mailboxes[comm.me()];
        let (ctx, p, seq) = (comm.coll(), comm.size(), self.seq);
        let start = Instant::now();
        let mut outcome = Ok(());
        while self.settled < self.sent {
            let r = (comm.rank + 1 + self.settled) % p;
            let mut q = lock(&mb.queue);
            let answer = loop {
                if let Some(e) = World::take(&mut q, ctx, r, TAG_DONE) {
                    break Some(e);
                }
                let failed = world.failed.load(Ordering::Acquire);
                let timed_out = world.timeout.is_some_and(|t| start.elapsed() >= t);
                // (Never two mailbox locks at once: `withdraw` takes the
                // peer's.)
                if (failed || timed_out) && {
                    drop(q);
                    let taken = world.withdraw(comm.members[r], ctx, comm.rank, seq);
                    q = lock(&mb.queue);
                    taken
                } {
                    // Taken back unread: the peer never saw it.
                    if outcome.is_ok() {
                        outcome = world.check().and(Err(CommError::Timeout {
                            rank: comm.rank,
                            what: format!(
                                "rank {r} to take part in alltoallw call {seq} (this rank's \
                                 blocks for it were withdrawn unread)"
                            ),
                            seconds: world.timeout.map_or(0, |t| t.as_secs()),
                        }));
                    }
                    break None;
                }
                // Not failed, or the peer has the window (it is in the call
                // and answers): sleep until something arrives. The nap
                // bounds the wait for the deadlock limit.
                q = mb
                    .arrived
                    .wait_timeout(q, Duration::from_millis(100))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            };
            drop(q);
            if let Some(e) = answer {
                debug_assert_eq!(Window::seq_of(&e.data), Some(seq));
                world.recycle(e.data);
            }
            self.settled += 1;
        }
        outcome
    }
}

impl Drop for Exposed<'_> {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.wait();
        }
    }
}

/// Sends the answer to a window when dropped: after the copy through it, or
/// instead of one (an error, or unwinding).
struct Answer<'a> {
    comm: &'a LocalComm,
    to: usize,
    seq: u64,
}

impl Drop for Answer<'_> {
    fn drop(&mut self) {
        // Posting only deposits bytes; it cannot fail.
        let _ = self
            .comm
            .send_ctx(self.comm.coll(), self.to, TAG_DONE, &self.seq.to_le_bytes());
    }
}

impl LocalComm {
    /// Takes rank `r`'s window for call `seq` and copies the block it
    /// describes into `to` of `recv`; the window is answered in every case.
    fn read_window(
        &self,
        r: usize,
        seq: u64,
        elem: usize,
        dest: Option<(&mut [u8], &Strided)>,
    ) -> Result<()> {
        let v = self.recv_ctx(self.coll(), r, TAG_WINDOW)?;
        let decoded = Window::decode(&v);
        let their_seq = Window::seq_of(&v);
        self.world.recycle(v);
        let (Some(w), Some(their_seq)) = (decoded, their_seq) else {
            // Only `Exposed::publish` sends on this tag and context.
            unreachable!("an alltoallw window of the wrong length");
        };
        let _answer = Answer {
            comm: self,
            to: r,
            seq: their_seq,
        };
        // Without a destination (after an error of this call) the window is
        // only answered, so that its sender's call returns.
        let Some((recv, to)) = dest else {
            return Ok(());
        };
        if w.seq != seq {
            return Err(CommError::invalid(format!(
                "alltoallw out of step: rank {r} is in its call {} on this communicator, rank {} \
                 in its call {seq}",
                w.seq, self.rank
            )));
        }
        if w.elem != elem || w.layout.len() != to.len() {
            return Err(CommError::MessageTruncated {
                src: r,
                tag: TAG_A2A,
                expected: to.len() * elem,
                got: w.layout.len() * w.elem,
            });
        }
        // The sender checked its block against its buffer before publishing.
        debug_assert!(w.layout.extent() * elem <= w.len);
        // SAFETY: `w.addr` and `w.len` are the sender's send buffer, a live
        // `&[u8]` of its `alltoallw_bytes` call. Its `Exposed` guard keeps
        // the call (and so the borrow, under which nobody writes the bytes)
        // from ending before this rank's answer arrives, which `_answer`
        // sends only after the copy below, also when unwinding.
        let src = unsafe { std::slice::from_raw_parts(w.addr as *const u8, w.len) };
        crate::communicator::copy_strided_bytes(src, &w.layout, recv, to, elem);
        Ok(())
    }
}

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl Communicator for LocalComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.members.len()
    }

    fn backend(&self) -> &'static str {
        "in-process"
    }

    fn barrier(&self) -> Result<()> {
        if let Some(all) = self.gather_root(&[])? {
            all.into_iter().for_each(|v| self.world.recycle(v));
        }
        self.bcast_internal(&mut [], 0)
    }

    fn split(&self, color: Option<u32>, key: usize) -> Result<Option<Box<dyn Communicator>>> {
        let seq = self.splits.fetch_add(1, Ordering::Relaxed);
        let mine = [color.map_or(-1, i64::from), key as i64];
        let mut all = vec![0i64; 2 * self.size()];
        self.allgather(&mine, &mut all)?;
        let Some(color) = color else { return Ok(None) };
        let mut group: Vec<(i64, usize)> = (0..self.size())
            .filter(|&r| all[2 * r] == i64::from(color))
            .map(|r| (all[2 * r + 1], r))
            .collect();
        group.sort_unstable();
        let rank = group
            .iter()
            .position(|&(_, r)| r == self.rank)
            .expect("member of own colour");
        let members = group.iter().map(|&(_, r)| self.members[r]).collect();
        let ctx = mix(mix(self.ctx ^ mix(seq)) ^ u64::from(color)) & !COLLECTIVE;
        Ok(Some(Box::new(LocalComm {
            world: self.world.clone(),
            ctx,
            members: Arc::new(members),
            rank,
            splits: AtomicU64::new(0),
            a2aw_seq: AtomicU64::new(0),
        })))
    }

    /// Sends are eager: the bytes are copied into the destination's mailbox
    /// now, and the request is complete at once.
    unsafe fn isend_raw(
        &self,
        dest: usize,
        tag: u32,
        data: *const u8,
        len: usize,
    ) -> Result<Request> {
        validate_peer(dest, self.size())?;
        validate_tag(tag)?;
        // SAFETY: the caller guarantees `len` readable bytes at `data`.
        let bytes = unsafe { crate::communicator::raw_slice(data, len) };
        self.send_ctx(self.ctx, dest, tag, bytes)?;
        Ok(Request::completed())
    }

    unsafe fn irecv_raw(&self, src: usize, tag: u32, buf: *mut u8, len: usize) -> Result<Request> {
        validate_peer(src, self.size())?;
        validate_tag(tag)?;
        Ok(Request::local(RecvReq {
            world: self.world.clone(),
            me: self.me(),
            src_world: self.members[src],
            ctx: self.ctx,
            src,
            tag,
            buf,
            len,
        }))
    }

    /// Makes sure the world's pool holds `messages` buffers of the size
    /// class of `bytes` (the next power of two) set aside for this rank,
    /// and this rank's mailbox room for as many envelopes, so those
    /// messages, once they flow, allocate nothing. Plans of one size class
    /// run one after another and share what was set aside (memory grows
    /// with the largest plan of a class, not with their number); plans of
    /// different classes get buffers of their own, so small messages never
    /// take the buffers large ones need.
    fn reserve_messages(&self, messages: usize, bytes: usize) {
        let class = bytes.max(1).next_power_of_two();
        let missing = {
            let mut q = lock(&self.world.mailboxes[self.me()].queue);
            q.reserved = q.reserved.max(messages);
            let more = q.reserved.saturating_sub(q.msgs.len());
            q.msgs.reserve(more);
            let have = q.set_aside.iter().filter(|&&c| c == class).count();
            let missing = messages.saturating_sub(have);
            q.set_aside.extend((0..missing).map(|_| class));
            missing
        };
        let mut p = lock(&self.world.pool);
        let n = missing.min(POOL_LIMIT.saturating_sub(p.len()));
        p.extend((0..n).map(|_| Vec::with_capacity(class)));
    }

    fn wait_any(&self, reqs: &mut [Request]) -> Result<Option<usize>> {
        let mb = &self.world.mailboxes[self.me()];
        let start = Instant::now();
        loop {
            let generation = lock(&mb.queue).generation;
            let mut pending = false;
            for (i, r) in reqs.iter_mut().enumerate() {
                if !r.is_done() {
                    pending = true;
                    if r.test()? {
                        return Ok(Some(i));
                    }
                }
            }
            if !pending {
                return Ok(None);
            }
            let mut q = lock(&mb.queue);
            // Arrivals, failures and stopped ranks bump the generation; the
            // tests above report a receive whose source is gone.
            while q.generation == generation {
                q = self.world.sleep(mb, q, start, self.me(), || {
                    "any of the pending receives".to_string()
                })?;
            }
        }
    }

    fn alltoallv_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut [u8],
        recv_counts: &[usize],
        recv_displs: &[usize],
    ) -> Result<()> {
        let p = self.size();
        validate_v("alltoallv send", send.len(), send_counts, send_displs, p)?;
        validate_v("alltoallv receive", recv.len(), recv_counts, recv_displs, p)?;
        for k in 1..p {
            let r = (self.rank + k) % p;
            self.send_ctx(
                self.coll(),
                r,
                TAG_A2A,
                &send[send_displs[r]..send_displs[r] + send_counts[r]],
            )?;
        }
        let me = self.rank;
        if send_counts[me] != recv_counts[me] {
            return Err(CommError::length(
                format!("alltoallv block kept by rank {me}"),
                recv_counts[me],
                send_counts[me],
            ));
        }
        recv[recv_displs[me]..recv_displs[me] + recv_counts[me]]
            .copy_from_slice(&send[send_displs[me]..send_displs[me] + send_counts[me]]);
        for k in 1..p {
            let r = (self.rank + p - k) % p;
            let v = self.recv_ctx(self.coll(), r, TAG_A2A)?;
            if v.len() != recv_counts[r] {
                return Err(CommError::MessageTruncated {
                    src: r,
                    tag: TAG_A2A,
                    expected: recv_counts[r],
                    got: v.len(),
                });
            }
            recv[recv_displs[r]..recv_displs[r] + recv_counts[r]].copy_from_slice(&v);
            self.world.recycle(v);
        }
        Ok(())
    }

    /// One copy: every rank publishes where its send buffer and its block
    /// for each peer lie (a small message), and each receiver copies its
    /// blocks straight out of the senders' buffers into its own, through
    /// both layouts; see `Window` and `Exposed` for why the memory stays valid.
    fn alltoallw_bytes(
        &self,
        send: &[u8],
        send_layouts: &[Strided],
        recv: &mut [u8],
        recv_layouts: &[Strided],
        elem_size: usize,
    ) -> Result<()> {
        let p = self.size();
        let me = self.rank;
        if send_layouts.len() != p || recv_layouts.len() != p {
            return Err(CommError::length(
                "alltoallw layouts (one per rank)",
                p,
                send_layouts.len().min(recv_layouts.len()),
            ));
        }
        let seq = self.a2aw_seq.fetch_add(1, Ordering::Relaxed);
        // Everything a peer will read is checked before it is published.
        let elems = |b: &[u8]| b.len() / elem_size.max(1);
        // (The message is built only on failure.)
        for (r, l) in send_layouts.iter().enumerate() {
            if l.extent() > elems(send) {
                l.check_fits(elems(send), &format!("alltoallw send layout for rank {r}"))?;
            }
        }
        for (r, l) in recv_layouts.iter().enumerate() {
            if l.extent() > elems(recv) {
                l.check_fits(
                    elems(recv),
                    &format!("alltoallw receive layout for rank {r}"),
                )?;
            }
        }
        if recv_layouts[me].len() != send_layouts[me].len() {
            return Err(CommError::length(
                format!("alltoallw block kept by rank {me} (elements)"),
                recv_layouts[me].len(),
                send_layouts[me].len(),
            ));
        }
        // The own block is copied directly.
        crate::communicator::copy_strided_bytes(
            send,
            &send_layouts[me],
            recv,
            &recv_layouts[me],
            elem_size,
        );
        if p == 1 {
            return Ok(());
        }
        let exposed = Exposed::publish(self, seq, send, send_layouts, elem_size)?;
        let mut read = Ok(());
        for k in 1..p {
            let r = (me + p - k) % p;
            if read.is_ok() {
                read = self.read_window(r, seq, elem_size, Some((&mut *recv, &recv_layouts[r])));
            } else if self.read_window(r, seq, elem_size, None).is_err() {
                // A peer gone as well: the others' calls return on the
                // failure (or the deadlock limit) without this answer.
                break;
            }
            // After a block this rank cannot take (a length only the
            // receiver sees), the other senders' windows are still taken
            // and answered: their calls return at once instead of waiting
            // for the deadlock limit.
        }
        let released = exposed.release();
        read.and(released)
    }

    fn allgatherv_bytes(
        &self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        let p = self.size();
        validate_v("allgatherv receive", recv.len(), counts, displs, p)?;
        let me = self.rank;
        if counts[me] != send.len() {
            return Err(CommError::length(
                format!("allgatherv count for rank {me}"),
                counts[me],
                send.len(),
            ));
        }
        for k in 1..p {
            self.send_ctx(self.coll(), (me + k) % p, TAG_ALLGATHER, send)?;
        }
        recv[displs[me]..displs[me] + counts[me]].copy_from_slice(send);
        for k in 1..p {
            let r = (me + p - k) % p;
            let v = self.recv_ctx(self.coll(), r, TAG_ALLGATHER)?;
            if v.len() != counts[r] {
                return Err(CommError::MessageTruncated {
                    src: r,
                    tag: TAG_ALLGATHER,
                    expected: counts[r],
                    got: v.len(),
                });
            }
            recv[displs[r]..displs[r] + counts[r]].copy_from_slice(&v);
            self.world.recycle(v);
        }
        Ok(())
    }

    fn broadcast_bytes(&self, buf: &mut [u8], root: usize) -> Result<()> {
        validate_peer(root, self.size())?;
        self.bcast_internal(buf, root)
    }

    fn allreduce_f64(&self, data: &mut [f64], op: ReduceOp) -> Result<()> {
        match op {
            ReduceOp::Min => self.reduce(data, f64::min),
            ReduceOp::Max => self.reduce(data, f64::max),
            ReduceOp::Sum => self.reduce(data, |a, b| a + b),
        }
    }

    fn allreduce_i64(&self, data: &mut [i64], op: ReduceOp) -> Result<()> {
        match op {
            ReduceOp::Min => self.reduce(data, i64::min),
            ReduceOp::Max => self.reduce(data, i64::max),
            ReduceOp::Sum => self.reduce(data, i64::wrapping_add),
        }
    }
}

/// How [`run_with`] starts its ranks.
#[derive(Debug, Clone)]
pub struct Options {
    /// Longest a receive may wait before it is reported as a deadlock
    /// (`None`: forever; failed peers are reported either way).
    pub timeout: Option<Duration>,
    /// Stack size of each rank thread in bytes.
    pub stack_size: usize,
}

impl Default for Options {
    fn default() -> Self {
        let secs = std::env::var("COMM_TIMEOUT_SECS")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(300);
        Options {
            timeout: (secs > 0).then(|| Duration::from_secs(secs)),
            stack_size: 16 << 20,
        }
    }
}

/// Why an in-process run failed: the first rank to fail and its reason,
/// and what every rank returned.
#[derive(Debug, Clone, PartialEq)]
pub struct RunError {
    /// The rank that failed first (the root cause).
    pub rank: usize,
    /// Its panic message or error.
    pub reason: String,
    /// Per rank: `None` if it succeeded, otherwise its error message.
    pub ranks: Vec<Option<String>>,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let others = self
            .ranks
            .iter()
            .enumerate()
            .filter(|(r, e)| *r != self.rank && e.is_some())
            .count();
        write!(f, "rank {} failed: {}", self.rank, self.reason)?;
        if others > 0 {
            write!(f, " ({others} other rank(s) stopped because of it)")?;
        }
        Ok(())
    }
}

impl std::error::Error for RunError {}

/// The number of ranks to use when none is given: the available cores.
pub fn default_ranks() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `f` on `n` in-process ranks and returns each rank's result in rank
/// order, or the first failure. See [`Options`] for the defaults.
pub fn run<R, E, F>(n: usize, f: F) -> std::result::Result<Vec<R>, RunError>
where
    R: Send,
    E: std::fmt::Display,
    F: Fn(&dyn Communicator) -> std::result::Result<R, E> + Sync,
{
    run_with(&Options::default(), n, f)
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}

/// [`run`] with explicit options.
pub fn run_with<R, E, F>(opts: &Options, n: usize, f: F) -> std::result::Result<Vec<R>, RunError>
where
    R: Send,
    E: std::fmt::Display,
    F: Fn(&dyn Communicator) -> std::result::Result<R, E> + Sync,
{
    if n == 0 {
        return Err(RunError {
            rank: 0,
            reason: "the rank count must be at least 1, got 0".into(),
            ranks: vec![],
        });
    }
    let world = Arc::new(World {
        mailboxes: (0..n).map(|_| Mailbox::default()).collect(),
        done: (0..n).map(|_| AtomicBool::new(false)).collect(),
        failed: AtomicBool::new(false),
        failure: Mutex::new(None),
        timeout: opts.timeout,
        // Room for every buffer the pool may keep: recycling never grows it.
        pool: Mutex::new(Vec::with_capacity(POOL_LIMIT)),
    });
    let members = Arc::new((0..n).collect::<Vec<_>>());
    let outcomes: Vec<std::result::Result<R, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|r| {
                let comm = LocalComm {
                    world: world.clone(),
                    ctx: 0,
                    members: members.clone(),
                    rank: r,
                    splits: AtomicU64::new(0),
                    a2aw_seq: AtomicU64::new(0),
                };
                let f = &f;
                std::thread::Builder::new()
                    .name(format!("rank-{r}"))
                    .stack_size(opts.stack_size)
                    .spawn_scoped(s, move || {
                        let out = match catch_unwind(AssertUnwindSafe(|| f(&comm))) {
                            Ok(Ok(v)) => Ok(v),
                            Ok(Err(e)) => Err(e.to_string()),
                            Err(p) => Err(panic_message(&*p)),
                        };
                        if let Err(e) = &out {
                            comm.world.fail(r, e.clone());
                        }
                        comm.world.finished(r);
                        out
                    })
                    .expect("spawning a rank thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| Err(panic_message(&*p))))
            .collect()
    });
    let first = lock(&world.failure).clone();
    match first {
        None => Ok(outcomes
            .into_iter()
            .map(|o| o.expect("no failure recorded"))
            .collect()),
        Some((rank, reason)) => Err(RunError {
            rank,
            reason,
            ranks: outcomes.into_iter().map(|o| o.err()).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex64;

    #[test]
    fn matching_by_source_and_tag_in_order() {
        run(3, |c| {
            if c.rank() == 0 {
                // Receive in an order different from the send order.
                let (mut a, mut b, mut x) = ([0u64; 2], [0u64; 2], [0u64; 1]);
                crate::scope(c, |s| {
                    s.irecv(2, 5, &mut a)?;
                    s.irecv(1, 5, &mut b)?;
                    s.irecv(1, 9, &mut x)?;
                    s.wait_all()
                })?;
                assert_eq!((a, b, x), ([20, 21], [10, 11], [19]));
                // Two messages with the same (source, tag) arrive in order.
                let (mut m1, mut m2) = ([0.0f64], [0.0f64]);
                c.recv(1, 3, &mut m1)?;
                c.recv(1, 3, &mut m2)?;
                assert_eq!((m1[0], m2[0]), (1.0, 2.0));
            } else {
                let r = c.rank() as u64;
                if r == 1 {
                    c.send(0, 9, &[19u64])?;
                    c.send(0, 3, &[1.0f64])?;
                    c.send(0, 3, &[2.0f64])?;
                }
                c.send(0, 5, &[10 * r, 10 * r + 1])?;
            }
            Ok::<_, CommError>(())
        })
        .unwrap();
    }

    #[test]
    fn wait_any_returns_completed_requests() {
        run(4, |c| {
            if c.rank() == 0 {
                let mut bufs = [[0u8; 4]; 3];
                let [b1, b2, b3] = &mut bufs;
                let mut seen = vec![];
                crate::scope(c, |s| {
                    let handles = [s.irecv(1, 0, b1)?, s.irecv(2, 0, b2)?, s.irecv(3, 0, b3)?];
                    while let Some((h, buf)) = s.wait_any_recv()? {
                        let i = handles.iter().position(|&x| x == h).unwrap();
                        // The buffer comes back holding the message.
                        assert_eq!(buf, &[i as u8 + 1; 4]);
                        seen.push(i);
                    }
                    // Each buffer is handed back once.
                    assert!(s.wait_recv(handles[0]).is_err());
                    Ok::<_, CommError>(())
                })?;
                seen.sort_unstable();
                assert_eq!(seen, vec![0, 1, 2]);
                assert_eq!(bufs, [[1; 4], [2; 4], [3; 4]]);
            } else {
                c.send(0, 0, &[c.rank() as u8; 4])?;
            }
            Ok::<_, CommError>(())
        })
        .unwrap();
    }

    #[test]
    fn collectives() {
        for p in [1, 2, 3, 5] {
            run(p, |c| {
                let r = c.rank();
                // alltoallv: rank r sends (r + d + 1) complex values to rank d.
                let sc: Vec<usize> = (0..p).map(|d| r + d + 1).collect();
                let sd: Vec<usize> = sc
                    .iter()
                    .scan(0, |a, &x| {
                        let o = *a;
                        *a += x;
                        Some(o)
                    })
                    .collect();
                let send: Vec<Complex64> = (0..p)
                    .flat_map(|d| {
                        (0..r + d + 1).map(move |i| Complex64::new(r as f64, (d * 100 + i) as f64))
                    })
                    .collect();
                let rc: Vec<usize> = (0..p).map(|s| s + r + 1).collect();
                let rd: Vec<usize> = rc
                    .iter()
                    .scan(0, |a, &x| {
                        let o = *a;
                        *a += x;
                        Some(o)
                    })
                    .collect();
                let mut recv = vec![Complex64::default(); rc.iter().sum()];
                c.alltoallv(&send, &sc, &sd, &mut recv, &rc, &rd)?;
                for s in 0..p {
                    for i in 0..rc[s] {
                        assert_eq!(
                            recv[rd[s] + i],
                            Complex64::new(s as f64, (r * 100 + i) as f64)
                        );
                    }
                }
                // allreduce
                let mut v = [r as f64, -(r as f64), 1.0];
                c.allreduce_f64(&mut v, ReduceOp::Sum)?;
                let s = (p * (p - 1) / 2) as f64;
                assert_eq!(v, [s, -s, p as f64]);
                assert_eq!(c.allreduce_scalar(r as f64, ReduceOp::Max)?, (p - 1) as f64);
                let mut m = [r as i64 - 7];
                c.allreduce_i64(&mut m, ReduceOp::Min)?;
                assert_eq!(m[0], -7);
                // broadcast from the last rank
                let mut b = [r as u32; 3];
                c.broadcast(&mut b, p - 1)?;
                assert_eq!(b, [(p - 1) as u32; 3]);
                // allgather_varying
                let mine: Vec<u64> = (0..r as u64).collect();
                let (all, counts) = c.allgather_varying(&mine)?;
                assert_eq!(counts, (0..p).collect::<Vec<_>>());
                assert_eq!(all, (0..p as u64).flat_map(|k| 0..k).collect::<Vec<_>>());
                c.barrier()?;
                Ok::<_, CommError>(())
            })
            .unwrap();
        }
    }

    #[test]
    fn strided_alltoallw_transposes_without_packing() {
        // A 2D transpose: rank r holds rows [r*b, (r+1)*b) of an n x n matrix
        // (row-major) and receives columns [r*b, (r+1)*b) as rows of the transpose.
        let (p, b) = (3usize, 2usize);
        let n = p * b;
        run(p, |c| {
            let r = c.rank();
            let local: Vec<f64> = (0..b * n)
                .map(|k| ((r * b + k / n) * n + k % n) as f64)
                .collect();
            // To rank d: my b rows, columns d*b..(d+1)*b, sent column by column.
            let send: Vec<Strided> = (0..p)
                .map(|d| Strided::nested(d * b, [1, b, b], [0, 1, n]))
                .collect();
            // From rank s: b x b block, lands in my rows at columns s*b.., row j = column j of source.
            let recv: Vec<Strided> = (0..p).map(|s| Strided::vector(s * b, b, b, n)).collect();
            let mut out = vec![0.0; b * n];
            c.alltoallw(&local, &send, &mut out, &recv)?;
            for i in 0..b {
                for j in 0..n {
                    // out row i = column (r*b + i) of the global matrix.
                    assert_eq!(out[i * n + j], (j * n + r * b + i) as f64);
                }
            }
            Ok::<_, CommError>(())
        })
        .unwrap();
    }

    /// The one-copy `alltoallw` never leaves a rank waiting on one that
    /// failed, never returns while a peer may still read its buffer, and
    /// reports calls out of step on both sides.
    #[test]
    fn one_copy_alltoallw_fails_cleanly() {
        let blocks = |p: usize| {
            (0..p)
                .map(|q| Strided::contiguous(q, 1))
                .collect::<Vec<_>>()
        };
        // A rank that fails before the call: the others get its failure.
        let t = Instant::now();
        let err = run(3, |c| {
            if c.rank() == 1 {
                return Err(CommError::invalid("bad input on rank 1"));
            }
            let (send, mut recv) = ([1.0f64; 3], [0.0f64; 3]);
            c.alltoallw(&send, &blocks(3), &mut recv, &blocks(3))
        })
        .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(10));
        assert_eq!(err.rank, 1);
        for r in [0, 2] {
            let e = err.ranks[r].as_ref().expect("every rank fails");
            assert!(e.contains("rank 1 failed"), "{e}");
        }
        // Calls out of step: rank 1's first call fails its own checks (it
        // counts, but publishes nothing), so its second meets rank 0's first.
        let out = run(2, |c| {
            let (send, mut recv) = ([1.0f64; 2], [0.0f64; 2]);
            if c.rank() == 1 {
                // Its own block: 1 element sent to itself, 2 expected.
                let two = vec![Strided::contiguous(0, 1), Strided::contiguous(0, 2)];
                let bad = c.alltoallw(&send, &blocks(2), &mut recv, &two);
                assert!(bad.unwrap_err().to_string().contains("kept by rank 1"));
            }
            Ok::<_, CommError>(c.alltoallw(&send, &blocks(2), &mut recv, &blocks(2)))
        })
        .unwrap();
        for (r, o) in out.iter().enumerate() {
            let e = o.as_ref().expect_err("out of step").to_string();
            assert!(e.contains("out of step"), "rank {r}: {e}");
        }
        // A block only the receiver finds wrong (rank 0 expects 2 elements
        // from rank 2, which sends 1): rank 0 reads rank 2's window first and
        // fails, but still answers rank 1's, so rank 1's call returns at once
        // (not at the deadlock limit) and every rank reaches the barrier.
        let opts = Options {
            timeout: Some(Duration::from_secs(30)),
            ..Options::default()
        };
        let t = Instant::now();
        let out = run_with(&opts, 3, |c| {
            let (send, mut recv) = ([1.0f64; 4], [0.0f64; 4]);
            let mut want = blocks(3);
            if c.rank() == 0 {
                want[2] = Strided::contiguous(2, 2);
            }
            let res = c.alltoallw(&send, &blocks(3), &mut recv, &want);
            c.barrier()?;
            Ok::<_, CommError>(res.map_err(|e| e.to_string()))
        })
        .unwrap();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(
            out[0]
                .as_ref()
                .is_err_and(|e| e.contains("from rank 2") && e.contains("holds 8 bytes")),
            "{:?}",
            out[0]
        );
        assert!(out[1].is_ok(), "{:?}", out[1]);
        // A peer that never comes: past the deadlock limit the blocks are
        // withdrawn unread and the call returns.
        let opts = Options {
            timeout: Some(Duration::from_millis(200)),
            ..Options::default()
        };
        let err = run_with(&opts, 2, |c| {
            if c.rank() == 1 {
                let mut b = [0u8];
                return c.recv(0, 9, &mut b);
            }
            let (send, mut recv) = ([1.0f64; 2], [0.0f64; 2]);
            c.alltoallw(&send, &blocks(2), &mut recv, &blocks(2))
        })
        .unwrap_err();
        let e = err.ranks[0].as_ref().expect("rank 0 fails");
        assert!(e.contains("deadlocked"), "{e}");
    }

    #[test]
    fn split_forms_independent_groups() {
        run(6, |c| {
            let r = c.rank();
            let sub = c.split(Some((r % 2) as u32), 10 - r)?.unwrap();
            assert_eq!(sub.size(), 3);
            // Keys descend with rank, so the order is reversed.
            let expect = [4, 5, 2, 3, 0, 1][r] / 2;
            assert_eq!(sub.rank(), expect);
            let total = sub.allreduce_scalar(r as f64, ReduceOp::Sum)?;
            assert_eq!(total, if r % 2 == 0 { 6.0 } else { 9.0 });
            // User messages on the parent and the child do not mix.
            let peer = (sub.rank() + 1) % 3;
            let mut rx = [0u64];
            crate::scope(&*sub, |s| {
                s.irecv((sub.rank() + 2) % 3, 1, &mut rx)?;
                c.send((r + 1) % 6, 1, &[99u64])?;
                sub.send(peer, 1, &[r as u64])
            })?;
            let mut px = [0u64];
            c.recv((r + 5) % 6, 1, &mut px)?;
            assert_eq!(px[0], 99);
            assert_eq!(rx[0] % 2, (r % 2) as u64);
            let none = c.split(if r == 0 { None } else { Some(0) }, 0)?;
            assert_eq!(none.is_none(), r == 0);
            Ok::<_, CommError>(())
        })
        .unwrap();
    }

    #[test]
    fn grid_rows_and_columns_are_sub_communicators() {
        let g = crate::ProcessGrid::new([2, 3, 2], [true; 3]).unwrap();
        run(12, |c| {
            let me = g.coords(c.rank());
            // The row along axis 1: 3 ranks sharing coordinates 0 and 2, ordered by coordinate 1.
            let row = g.sub_comm(c, [false, true, false])?;
            assert_eq!((row.size(), row.rank()), (3, me[1]));
            let mut coords = vec![0u64; 9];
            row.allgather(&me.map(|x| x as u64), &mut coords)?;
            for (k, w) in coords.chunks(3).enumerate() {
                assert_eq!([w[0], w[1], w[2]], [me[0] as u64, k as u64, me[2] as u64]);
            }
            // The plane of axes 0 and 2: 4 ranks.
            let plane = g.sub_comm(c, [true, false, true])?;
            assert_eq!((plane.size(), plane.rank()), (4, me[0] * 2 + me[2]));
            let s = plane.allreduce_scalar(c.rank() as f64, ReduceOp::Sum)?;
            let want: usize = (0..2)
                .flat_map(|a| (0..2).map(move |b| g.rank_of([a, me[1], b])))
                .sum();
            assert_eq!(s, want as f64);
            Ok::<_, CommError>(())
        })
        .unwrap();
    }

    #[test]
    fn failed_rank_fails_everyone_without_hanging() {
        let t = Instant::now();
        let err = run(4, |c| {
            if c.rank() == 2 {
                std::thread::sleep(Duration::from_millis(20));
                return Err(CommError::invalid("bad input on rank 2"));
            }
            // The others wait for a message rank 2 will never send.
            let mut b = [0u8];
            c.recv(2, 0, &mut b)?;
            Ok(())
        })
        .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(10));
        assert_eq!(err.rank, 2);
        assert!(err.reason.contains("bad input on rank 2"));
        for (r, e) in err.ranks.iter().enumerate() {
            let e = e.as_ref().expect("every rank fails");
            if r != 2 {
                assert!(e.contains("rank 2 failed"), "{e}");
            }
        }
        let err = run(3, |c| {
            if c.rank() == 0 {
                panic!("boom at step 7");
            }
            c.barrier()?;
            Ok::<_, CommError>(())
        })
        .unwrap_err();
        assert_eq!(err.rank, 0);
        assert!(err.to_string().contains("boom at step 7"));
    }

    #[test]
    fn deadlock_times_out_with_a_message() {
        let opts = Options {
            timeout: Some(Duration::from_millis(200)),
            ..Options::default()
        };
        let err = run_with(&opts, 2, |c| {
            let mut b = [0u8];
            c.recv(1 - c.rank(), 3, &mut b)
        })
        .unwrap_err();
        assert!(err.reason.contains("deadlocked"), "{}", err.reason);
    }

    #[test]
    fn bad_arguments_are_errors() {
        run(2, |c| {
            let e = c.send(2, 0, &[1u8]).unwrap_err();
            assert_eq!(e, CommError::InvalidRank { rank: 2, size: 2 });
            assert!(matches!(
                c.send(0, crate::MAX_USER_TAG + 1, &[1u8]),
                Err(CommError::InvalidTag { .. })
            ));
            // Length mismatch between message and buffer.
            if c.rank() == 0 {
                c.send(1, 0, &[1.0f64, 2.0])?;
            } else {
                let mut b = [0.0f64];
                let e = c.recv(0, 0, &mut b).unwrap_err();
                assert!(matches!(
                    e,
                    CommError::MessageTruncated {
                        expected: 8,
                        got: 16,
                        ..
                    }
                ));
            }
            let mut r = vec![0.0; 3];
            assert!(c.alltoall(&[0.0; 2], &mut r, 1).is_err());
            Ok::<_, CommError>(())
        })
        .unwrap();
    }
}
