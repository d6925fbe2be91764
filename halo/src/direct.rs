//! The exchange of device-resident fields (feature `cuda`):
//! [`DeviceExchanger`], direct between the ranks of one process, or
//! host-staged.
//!
//! **Direct.** Ranks that are threads of one process share the address
//! space and, on one GPU, the device's primary context, so a rank can read
//! the buffer its neighbour packed without the bytes leaving the device.
//! Every directed link (sender, direction) has a device buffer and a
//! `packed` event owned by the sender, and a `consumed` event owned by the
//! receiver; the two sides find each other's halves once, at construction,
//! through a process-wide registry (keyed by a number drawn for the
//! exchanger, so nothing that travels in a message is ever dereferenced).
//! One exchange is then:
//!
//! 1. `post`: wait for the previous exchange's acknowledgements, make
//!    `main` wait for the receivers' `consumed` events (they have finished
//!    reading the buffers), pack every outgoing buffer with kernels on
//!    `main`, record `packed`, send each receiver an 8-byte notice (the
//!    exchange's number) through the communicator, post the receives of the
//!    incoming notices, and queue the periodic self-copies;
//! 2. `finish`: as each notice arrives, make `main` wait for the sender's
//!    `packed` event, unpack straight from the sender's buffer (a kernel
//!    reading the peer's allocation on the same device; across devices a
//!    peer copy into a local buffer first), record `consumed`, and send the
//!    acknowledgement.
//!
//! The host never waits for the device: every wait is a stream waiting for
//! an event. A notice is sent only after its `packed` event is recorded and
//! the acknowledgement only after `consumed` is, so an event is always
//! waited for at the record that belongs to the exchange. The communicator
//! carries only the notices, so a failed peer surfaces as the
//! communicator's error, as with host fields. The buffers and events are
//! reference-counted between the two sides of a link and each side
//! synchronises its `main` stream before it lets go of them, so neither is
//! freed while the other's kernels may still use them.
//!
//! **Host-staged.** Across processes (MPI) the exchange goes through
//! [`Exchanger`]: packed on the device, copied to host buffers, sent by the
//! communicator.
//!
//! Both give the same bits: a ghost cell receives a copy of its owner's
//! value either way.

use crate::device::{dev, DeviceElem, DeviceField};
use crate::exchange::{ExchangeStats, Exchanger, Pending, MAX_CHANNEL};
use crate::field::{FieldLayout, Region};
use crate::topology::{dir_index, Topology};
use crate::HaloError;
use comm::{as_bytes_mut, CommExt, Communicator, Request};
use gpu::cuda::cudarc::driver::{sys, CudaEvent, CudaSlice};
use gpu::cuda::Device;
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How a [`DeviceExchanger`] moves the halo between ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Packed on the device, copied through host buffers and sent by the
    /// communicator: any communicator, any number of processes.
    HostStaged,
    /// Ranks of one process: each unpacks from the buffer its neighbour
    /// packed, on the device; the communicator carries 8-byte notices.
    Direct,
}

impl Transport {
    /// The name used in reports and on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Transport::HostStaged => "staged",
            Transport::Direct => "direct",
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A number that differs between processes (with overwhelming
/// probability): the standard library's per-process random hash keys over
/// the process id and the time of the first call.
fn process_token() -> u64 {
    static TOKEN: OnceLock<u64> = OnceLock::new();
    *TOKEN.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        h.write_u128(now);
        h.finish()
    })
}

/// Registry keys: (exchanger number, sender rank, direction, side).
type Key = (u64, usize, usize, u8);
const SEND_SIDE: u8 = 0;
const RECV_SIDE: u8 = 1;

type Registry = Mutex<HashMap<Key, Arc<dyn Any + Send + Sync>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The sender's half of a link: the packed buffer and its event.
struct SendSide<T: DeviceElem> {
    /// Packed by the sender (under the lock while it queues the kernels),
    /// read by the receiver (under the lock while it queues its reads).
    buf: Mutex<CudaSlice<T>>,
    len: usize,
    packed: CudaEvent,
    ordinal: usize,
}

/// The receiver's half of a link: recorded once the buffer has been read.
struct RecvSide {
    consumed: CudaEvent,
}

struct OutLink<T: DeviceElem> {
    /// The neighbour index in the topology.
    nb: usize,
    rank: usize,
    tag: u32,
    ack_tag: u32,
    own: Arc<SendSide<T>>,
    peer: Arc<RecvSide>,
    /// The exchange whose acknowledgement is still to be received.
    owed: Option<u64>,
}

struct InLink<T: DeviceElem> {
    nb: usize,
    rank: usize,
    tag: u32,
    ack_tag: u32,
    peer: Arc<SendSide<T>>,
    own: Arc<RecvSide>,
    /// A local copy of the peer's buffer when it lives on another device.
    staging: Option<CudaSlice<T>>,
}

/// Acknowledgement tags: above every notice tag (`channel * 27 + direction`
/// with `channel <= MAX_CHANNEL`); the direct path runs only on in-process
/// communicators, whose tags reach 2^24.
fn ack_tag(channel: u16, dir: usize) -> u32 {
    (u32::from(MAX_CHANNEL) + 1 + u32::from(channel)) * 27 + dir as u32
}

struct Direct<T: DeviceElem> {
    device: Arc<Device>,
    topo: Topology,
    components: usize,
    outs: Vec<OutLink<T>>,
    ins: Vec<InLink<T>>,
    /// Incoming notices, one slot per incoming link.
    notices: Vec<u64>,
    /// Receives of notices in flight (in `recv_of` order).
    recvs: Vec<Request>,
    /// The incoming link of each receive.
    recv_of: Vec<usize>,
    /// The number of the next exchange.
    next: u64,
    layouts: Vec<FieldLayout>,
    self_copies: Vec<(Region, Region)>,
    stats: ExchangeStats,
}

impl<T: DeviceElem> Drop for Direct<T> {
    fn drop(&mut self) {
        // Receives of notices go before their buffer (a receive that was
        // never finished waits here, as with host fields); then `main` is
        // drained, so no kernel of this rank still reads a neighbour's
        // buffer or writes its own when the links are released.
        self.recvs.clear();
        let _ = self.device.main().synchronize();
    }
}

enum Inner<T: DeviceElem> {
    Staged(Box<Exchanger<T>>),
    Direct(Box<Direct<T>>),
}

/// The halo exchange of [`DeviceField`]s: direct on the device between the
/// ranks of one process, host-staged otherwise; see the module
/// documentation of [`Transport`] for both. Like [`Exchanger`], it is built
/// for a fixed total number of components, has one exchange in flight at
/// most ([`post`](Self::post) borrows it until the [`DevicePending`] is
/// finished or dropped), and fills periodic self-neighbours by copies on
/// the device.
pub struct DeviceExchanger<T: DeviceElem = f64> {
    inner: Inner<T>,
}

impl<T: DeviceElem> std::fmt::Debug for DeviceExchanger<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceExchanger")
            .field("transport", &self.transport())
            .finish()
    }
}

impl<T: DeviceElem> DeviceExchanger<T> {
    /// An exchanger for device fields on `device` with `components`
    /// components in total, on message channel `channel` (distinct from
    /// any other exchanger in flight on `comm`).
    ///
    /// `want`: `None` takes [`Transport::Direct`] when every rank of `comm`
    /// is in this process and [`Transport::HostStaged`] otherwise;
    /// `Some(Transport::Direct)` is an error when the ranks span processes.
    ///
    /// Collective over `comm`: every rank calls it with the same `want`,
    /// `components` and `channel`.
    pub fn new(
        comm: &dyn Communicator,
        topo: &Topology,
        device: &Arc<Device>,
        components: usize,
        channel: u16,
        want: Option<Transport>,
    ) -> Result<Self, HaloError> {
        if channel > MAX_CHANNEL {
            return Err(HaloError::Invalid(format!(
                "channel {channel} is out of range (valid: 0..={MAX_CHANNEL})"
            )));
        }
        if comm.rank() != topo.rank() {
            return Err(HaloError::Invalid(format!(
                "the topology belongs to rank {}, the communicator says rank {}",
                topo.rank(),
                comm.rank()
            )));
        }
        let mut tokens = vec![0u64; comm.size()];
        comm.allgather(&[process_token()], &mut tokens)?;
        let one_process = tokens.iter().all(|&t| t == tokens[0]);
        let transport = match want {
            Some(Transport::Direct) if !one_process => {
                return Err(HaloError::Invalid(format!(
                    "the direct device exchange needs every rank in one process; the {} ranks \
                     of this {} communicator span {} processes (valid: the host-staged exchange)",
                    comm.size(),
                    comm.backend(),
                    {
                        let mut t = tokens.clone();
                        t.sort_unstable();
                        t.dedup();
                        t.len()
                    }
                )))
            }
            Some(t) => t,
            None if one_process => Transport::Direct,
            None => Transport::HostStaged,
        };
        let inner = match transport {
            Transport::HostStaged => {
                Inner::Staged(Box::new(Exchanger::new(topo, components, channel)?))
            }
            Transport::Direct => Inner::Direct(Box::new(Direct::new(
                comm, topo, device, components, channel,
            )?)),
        };
        Ok(DeviceExchanger { inner })
    }

    /// The transport in use.
    pub fn transport(&self) -> Transport {
        match self.inner {
            Inner::Staged(_) => Transport::HostStaged,
            Inner::Direct(_) => Transport::Direct,
        }
    }

    /// The topology.
    pub fn topology(&self) -> &Topology {
        match &self.inner {
            Inner::Staged(e) => e.topology(),
            Inner::Direct(d) => &d.topo,
        }
    }

    /// Counters since creation (or the last
    /// [`reset_stats`](Self::reset_stats)); the direct transport counts its
    /// notices as messages and the packed values as values sent.
    pub fn stats(&self) -> ExchangeStats {
        match &self.inner {
            Inner::Staged(e) => e.stats(),
            Inner::Direct(d) => d.stats,
        }
    }

    /// Zeroes the counters.
    pub fn reset_stats(&mut self) {
        match &mut self.inner {
            Inner::Staged(e) => e.reset_stats(),
            Inner::Direct(d) => d.stats = ExchangeStats::default(),
        }
    }

    /// Packs the owned boundary cells of `fields`, starts moving them and
    /// queues the periodic self-copies; the ghost cells filled from other
    /// ranks are written by [`DevicePending::finish`], given the same
    /// fields. The values sent are those of the owned cells once the work
    /// queued on the device's `main` stream before `post` is done; work
    /// queued after `post` on `main` (or on `side` after
    /// `Device::side_after_main`) sees the self-copied ghosts.
    ///
    /// # Errors
    /// As [`Exchanger::post`]; a device error as [`HaloError::Device`].
    pub fn post<'a>(
        &'a mut self,
        comm: &'a dyn Communicator,
        fields: &mut [&mut DeviceField<T>],
    ) -> Result<DevicePending<'a, T>, HaloError> {
        Ok(DevicePending {
            inner: Some(match &mut self.inner {
                Inner::Staged(e) => PendingInner::Staged(e.post(comm, fields)?),
                Inner::Direct(d) => {
                    let number = d.post(comm, fields)?;
                    PendingInner::Direct {
                        comm,
                        ex: d,
                        number,
                    }
                }
            }),
        })
    }

    /// A blocking exchange: [`post`](Self::post) then
    /// [`finish`](DevicePending::finish).
    pub fn exchange(
        &mut self,
        comm: &dyn Communicator,
        fields: &mut [&mut DeviceField<T>],
    ) -> Result<(), HaloError> {
        let pending = self.post(comm, fields)?;
        pending.finish(fields)
    }
}

enum PendingInner<'a, T: DeviceElem> {
    Staged(Pending<'a, T>),
    Direct {
        comm: &'a dyn Communicator,
        ex: &'a mut Direct<T>,
        number: u64,
    },
}

/// An exchange in flight, returned by [`DeviceExchanger::post`]. Dropping
/// it without [`finish`](Self::finish) waits for the incoming messages and
/// leaves the ghost cells they would have filled unchanged.
#[must_use = "an exchange in flight must be finished to fill the ghost cells"]
pub struct DevicePending<'a, T: DeviceElem = f64> {
    /// `None` once `finish` has taken it.
    inner: Option<PendingInner<'a, T>>,
}

impl<T: DeviceElem> std::fmt::Debug for DevicePending<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (transport, n) = match &self.inner {
            Some(PendingInner::Staged(_)) => (Some(Transport::HostStaged), None),
            Some(PendingInner::Direct { number, .. }) => (Some(Transport::Direct), Some(*number)),
            None => (None, None),
        };
        f.debug_struct("DevicePending")
            .field("transport", &transport)
            .field("exchange", &n)
            .finish()
    }
}

impl<T: DeviceElem> Drop for DevicePending<'_, T> {
    fn drop(&mut self) {
        if let Some(PendingInner::Direct { comm, ex, .. }) = &mut self.inner {
            // Errors of an exchange nobody finishes do not matter.
            let _ = ex.drain(*comm);
        }
    }
}

impl<T: DeviceElem> DevicePending<'_, T> {
    /// Fills the ghost cells that come from other ranks, queued on the
    /// device's `main` stream; `fields` must be the fields given to `post`.
    pub fn finish(mut self, fields: &mut [&mut DeviceField<T>]) -> Result<(), HaloError> {
        match self.inner.take() {
            Some(PendingInner::Staged(p)) => p.finish(fields),
            Some(PendingInner::Direct { comm, ex, number }) => {
                let r = ex.finish(comm, fields, number);
                // What an error left in flight is received and acknowledged.
                let drained = ex.drain(comm);
                r.and(drained.map(|_| ()))
            }
            None => Ok(()),
        }
    }
}

impl<T: DeviceElem> Direct<T> {
    fn new(
        comm: &dyn Communicator,
        topo: &Topology,
        device: &Arc<Device>,
        components: usize,
        channel: u16,
    ) -> Result<Self, HaloError> {
        let me = topo.rank();
        let nbs = topo.neighbors();
        // A number for this exchanger, the same on every rank.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut number = [NEXT.fetch_add(1, Ordering::Relaxed)];
        comm.broadcast(&mut number, 0)?;
        let number = number[0];
        let ordinal = device.info().ordinal;
        let ctx = device.context();
        let event = || {
            ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(dev)
        };
        // This rank's halves: a send side per outgoing link, a receive side
        // per incoming one; published before anyone looks, removed after
        // everyone has.
        let mut published: Vec<Key> = Vec::new();
        type Halves<T> = (Vec<Arc<SendSide<T>>>, Vec<Arc<RecvSide>>);
        let mut halves = || -> Result<Halves<T>, HaloError> {
            let mut sends = Vec::new();
            let mut recvs = Vec::new();
            for nb in nbs.iter().filter(|nb| nb.rank != me) {
                let len = nb.send.len() * components;
                let buf = device
                    .alloc_zeros::<T>(len.max(1), "halo send buffer")
                    .map_err(dev)?;
                let s = Arc::new(SendSide {
                    buf: Mutex::new(buf),
                    len,
                    packed: event()?,
                    ordinal,
                });
                let r = Arc::new(RecvSide { consumed: event()? });
                let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
                let out_key = (number, me, dir_index(nb.offset), SEND_SIDE);
                // The link from this neighbour toward this rank runs in
                // direction -offset.
                let in_key = (number, nb.rank, dir_index(nb.offset.map(|x| -x)), RECV_SIDE);
                reg.insert(out_key, s.clone());
                reg.insert(in_key, r.clone());
                published.push(out_key);
                published.push(in_key);
                sends.push(s);
                recvs.push(r);
            }
            Ok((sends, recvs))
        };
        let made = halves();
        comm.barrier()?;
        let fetched = made.and_then(|(sends, recvs)| {
            let reg = registry().lock().unwrap_or_else(|e| e.into_inner());
            let mut outs = Vec::new();
            let mut ins = Vec::new();
            let remote = nbs.iter().enumerate().filter(|(_, nb)| nb.rank != me);
            for ((i, nb), (s, r)) in remote.zip(sends.into_iter().zip(recvs)) {
                let d_out = dir_index(nb.offset);
                let d_in = dir_index(nb.offset.map(|x| -x));
                let missing = |what: &str| {
                    HaloError::Invalid(format!(
                        "direct exchange: rank {} published no {what} for rank {me} \
                         (ranks in different processes, or exchangers built with different \
                         arguments)",
                        nb.rank
                    ))
                };
                let peer_recv = reg
                    .get(&(number, me, d_out, RECV_SIDE))
                    .and_then(|a| a.clone().downcast::<RecvSide>().ok())
                    .ok_or_else(|| missing("receive side"))?;
                let peer_send = reg
                    .get(&(number, nb.rank, d_in, SEND_SIDE))
                    .and_then(|a| a.clone().downcast::<SendSide<T>>().ok())
                    .ok_or_else(|| missing("send side"))?;
                let want = nb.recv.len() * components;
                if peer_send.len != want {
                    return Err(HaloError::Disagree {
                        rank: nb.rank,
                        detail: format!(
                            "it sends {} values toward rank {me}, which expects {want}",
                            peer_send.len
                        ),
                    });
                }
                let staging = if peer_send.ordinal == ordinal {
                    None
                } else {
                    Some(
                        device
                            .alloc_zeros::<T>(want.max(1), "halo peer staging")
                            .map_err(dev)?,
                    )
                };
                outs.push(OutLink {
                    nb: i,
                    rank: nb.rank,
                    tag: u32::from(channel) * 27 + d_out as u32,
                    ack_tag: ack_tag(channel, d_out),
                    own: s,
                    peer: peer_recv,
                    owed: None,
                });
                ins.push(InLink {
                    nb: i,
                    rank: nb.rank,
                    tag: u32::from(channel) * 27 + d_in as u32,
                    ack_tag: ack_tag(channel, d_in),
                    peer: peer_send,
                    own: r,
                    staging,
                });
            }
            Ok((outs, ins))
        });
        comm.barrier()?;
        {
            let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
            for k in &published {
                reg.remove(k);
            }
        }
        // Every rank learns whether every rank succeeded, so none waits
        // for a neighbour that gave up.
        let failed = [i64::from(fetched.is_err())];
        let mut any = failed;
        comm.allreduce_i64(&mut any, comm::ReduceOp::Max)?;
        let (outs, ins) = match fetched {
            Ok(v) if any[0] == 0 => v,
            Ok(_) => {
                return Err(HaloError::Invalid(
                    "direct exchange: another rank failed to set up its links".into(),
                ))
            }
            Err(e) => return Err(e),
        };
        let self_copies = nbs
            .iter()
            .filter(|nb| nb.rank == me)
            .map(|nb| {
                let back = nb.offset.map(|x| -x);
                let src = nbs
                    .iter()
                    .find(|m| m.offset == back)
                    .expect("periodic self-neighbours come in opposite pairs");
                (src.send, nb.recv)
            })
            .collect();
        let n_in = ins.len();
        Ok(Direct {
            device: device.clone(),
            topo: topo.clone(),
            components,
            outs,
            ins,
            notices: vec![0; n_in],
            recvs: Vec::with_capacity(n_in),
            recv_of: Vec::with_capacity(n_in),
            next: 0,
            layouts: Vec::new(),
            self_copies,
            stats: ExchangeStats::default(),
        })
    }

    fn check_fields(&self, fields: &[&mut DeviceField<T>]) -> Result<(), HaloError> {
        let total: usize = fields.iter().map(|f| f.layout().components).sum();
        if total != self.components {
            return Err(HaloError::Invalid(format!(
                "the exchanger was built for {} components in total, the fields hold {total}",
                self.components
            )));
        }
        let want = self.topo.layout(1);
        for (i, f) in fields.iter().enumerate() {
            let l = f.layout();
            if l.owned != want.owned || l.ghost != want.ghost {
                return Err(HaloError::Invalid(format!(
                    "field {i} has owned shape {:?} and ghost {:?}, the topology has {:?} and {:?}",
                    l.owned, l.ghost, want.owned, want.ghost
                )));
            }
            if !Arc::ptr_eq(f.device(), &self.device)
                && f.device().info().ordinal != self.device.info().ordinal
            {
                return Err(HaloError::Invalid(format!(
                    "field {i} lives on device {}, the exchanger on device {}",
                    f.device().info().ordinal,
                    self.device.info().ordinal
                )));
            }
        }
        Ok(())
    }

    /// Completes the receives of notices still in flight and acknowledges
    /// them without reading the buffers; true if there were any.
    fn drain(&mut self, comm: &dyn Communicator) -> Result<bool, HaloError> {
        let left = !self.recvs.is_empty();
        let mut first = Ok(());
        while let Some(k) = match comm.wait_any(&mut self.recvs) {
            Ok(k) => k,
            Err(e) => {
                // The remaining requests are dropped (which waits, or
                // returns once the communicator reports the peer failed).
                self.recvs.clear();
                self.recv_of.clear();
                return Err(e.into());
            }
        } {
            let l = &self.ins[self.recv_of[k]];
            let number = self.notices[self.recv_of[k]];
            if let Err(e) = comm.send(l.rank, l.ack_tag, &[number]) {
                if first.is_ok() {
                    first = Err(e.into());
                }
            }
        }
        self.recvs.clear();
        self.recv_of.clear();
        first.map(|()| left)
    }

    fn post(
        &mut self,
        comm: &dyn Communicator,
        fields: &mut [&mut DeviceField<T>],
    ) -> Result<u64, HaloError> {
        let t0 = Instant::now();
        if self.drain(comm)? {
            return Err(HaloError::Invalid(
                "the previous exchange was neither finished nor dropped (its DevicePending was \
                 leaked); its messages have been received and discarded"
                    .into(),
            ));
        }
        self.check_fields(fields)?;
        self.layouts.clear();
        self.layouts.extend(fields.iter().map(|f| f.layout()));
        if comm.rank() != self.topo.rank() {
            return Err(HaloError::Invalid(format!(
                "the topology belongs to rank {}, the communicator says rank {}",
                self.topo.rank(),
                comm.rank()
            )));
        }
        let main = self.device.main().clone();
        // The previous exchange's buffers are free once their receivers
        // have read them: the acknowledgement says `consumed` is recorded.
        for l in &mut self.outs {
            if let Some(owed) = l.owed {
                let mut ack = [0u64];
                comm.recv(l.rank, l.ack_tag, &mut ack)?;
                l.owed = None;
                if ack[0] != owed {
                    return Err(HaloError::Invalid(format!(
                        "direct exchange: rank {} acknowledged exchange {} where {owed} was \
                         sent (two exchangers on one channel?)",
                        l.rank, ack[0]
                    )));
                }
                main.wait(&l.peer.consumed).map_err(dev)?;
            }
        }
        // Pack every outgoing buffer before anything is sent.
        let nbs = self.topo.neighbors();
        for l in &self.outs {
            let region = &nbs[l.nb].send;
            let n = region.len();
            {
                let mut buf = l.own.buf.lock().unwrap_or_else(|e| e.into_inner());
                let mut p = 0;
                for f in fields.iter() {
                    for c in 0..f.layout().components {
                        f.pack_to(c, region, &mut buf.slice_mut(p..p + n))?;
                        p += n;
                    }
                }
            }
            l.own.packed.record(&main).map_err(dev)?;
        }
        let number = self.next;
        self.next += 1;
        // Receives of the notices, then the notices.
        for (k, l) in self.ins.iter().enumerate() {
            let slot = as_bytes_mut(std::slice::from_mut(&mut self.notices[k]));
            // SAFETY: the slot is owned by the exchanger, which owns the
            // request too: the slot is neither freed (the drop completes the
            // requests first) nor touched (only read after the request
            // completed; `post` drains leftover requests first) while the
            // request is in flight.
            match unsafe { comm.irecv_raw(l.rank, l.tag, slot.as_mut_ptr(), slot.len()) } {
                Ok(r) => {
                    self.recvs.push(r);
                    self.recv_of.push(k);
                }
                Err(e) => {
                    // Receives already posted are drained by the caller's
                    // next `post` or the drop.
                    return Err(e.into());
                }
            }
        }
        for l in &mut self.outs {
            comm.send(l.rank, l.tag, &[number])?;
            l.owed = Some(number);
            self.stats.messages += 1;
            self.stats.values_sent += l.own.len as u64;
        }
        if !self.self_copies.is_empty() {
            for f in fields.iter_mut() {
                for c in 0..f.layout().components {
                    crate::HaloData::copy_regions(&mut **f, c, &self.self_copies)?;
                }
            }
            let per: usize = self.self_copies.iter().map(|(s, _)| s.len()).sum();
            self.stats.values_copied += (per * self.components) as u64;
        }
        self.stats.exchanges += 1;
        self.stats.post_time += t0.elapsed();
        Ok(number)
    }

    fn finish(
        &mut self,
        comm: &dyn Communicator,
        fields: &mut [&mut DeviceField<T>],
        number: u64,
    ) -> Result<(), HaloError> {
        if !fields
            .iter()
            .map(|f| f.layout())
            .eq(self.layouts.iter().copied())
        {
            let layouts: Vec<FieldLayout> = fields.iter().map(|f| f.layout()).collect();
            return Err(HaloError::Invalid(format!(
                "finish was given fields with layouts {layouts:?}, but post was given {:?}",
                self.layouts
            )));
        }
        let main = self.device.main().clone();
        let nbs = self.topo.neighbors();
        let mut wait_time = Duration::ZERO;
        let mut unpack_time = Duration::ZERO;
        loop {
            let t = Instant::now();
            let Some(k) = comm.wait_any(&mut self.recvs)? else {
                break;
            };
            wait_time += t.elapsed();
            let t = Instant::now();
            let li = self.recv_of[k];
            // Taken off the list: `drain` must not acknowledge it again.
            self.recvs.swap_remove(k);
            self.recv_of.swap_remove(k);
            let got = self.notices[li];
            let l = &mut self.ins[li];
            let read = (|| {
                if got != number {
                    return Err(HaloError::Invalid(format!(
                        "direct exchange: rank {} sent exchange {got} where {number} was \
                         expected (two exchangers on one channel?)",
                        l.rank
                    )));
                }
                main.wait(&l.peer.packed).map_err(dev)?;
                let region = &nbs[l.nb].recv;
                let n = region.len();
                let buf = l.peer.buf.lock().unwrap_or_else(|e| e.into_inner());
                let mut p = 0;
                match &mut l.staging {
                    None => {
                        for f in fields.iter_mut() {
                            for c in 0..f.layout().components {
                                f.unpack_from(c, region, &buf.slice(p..p + n))?;
                                p += n;
                            }
                        }
                    }
                    Some(st) => {
                        main.memcpy_dtod(&buf.slice(..l.peer.len), &mut st.slice_mut(..l.peer.len))
                            .map_err(dev)?;
                        for f in fields.iter_mut() {
                            for c in 0..f.layout().components {
                                f.unpack_from(c, region, &st.slice(p..p + n))?;
                                p += n;
                            }
                        }
                    }
                }
                l.own.consumed.record(&main).map_err(dev)
            })();
            // Acknowledged even after an error, so the sender does not
            // wait for ever; after an error `consumed` may be older than
            // the kernels queued, which then read a buffer the sender may
            // rewrite: the fields are invalid anyway.
            let acked = comm.send(l.rank, l.ack_tag, &[got]);
            read?;
            acked?;
            unpack_time += t.elapsed();
        }
        self.stats.wait_time += wait_time;
        self.stats.unpack_time += unpack_time;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Exchanger, Field, HaloSpec, Neighborhood, Topology};
    use comm::{local, BlockDecomposition, ProcessGrid};

    fn device() -> Option<Arc<Device>> {
        match Device::open(0) {
            Ok(d) => Some(Arc::new(d)),
            Err(e) => {
                eprintln!("skipped: no CUDA device ({e})");
                None
            }
        }
    }

    /// A host field whose owned cells depend on the round, so a stale ghost
    /// shows.
    fn filled(topo: &Topology, layout: FieldLayout, round: usize) -> Field<f64> {
        let mut host = Field::<f64>::new(layout);
        for c in 0..layout.components {
            host.fill_owned(c, &topo.owned(), |[i, j, k]| {
                (round * 100_000 + c * 1000 + i * 100 + j * 10 + k) as f64 + 0.25
            });
        }
        host
    }

    /// Both transports give exactly the host exchange's ghosts, for 1, 2,
    /// 4 and 8 in-process ranks sharing device 0, faces and the full
    /// neighbourhood, two fields of two and one components, over several
    /// rounds of blocking and overlapped (post, finish) exchanges.
    #[test]
    fn device_exchanges_match_the_host_exchange() {
        let Some(device) = device() else { return };
        for ranks in [1, 2, 4, 8] {
            for nbh in [Neighborhood::Faces, Neighborhood::Full] {
                for want in [Transport::Direct, Transport::HostStaged] {
                    let device = device.clone();
                    local::run(ranks, move |comm| {
                        let g = [12, 10, 9];
                        let grid = ProcessGrid::for_shape(g, comm.size(), [true; 3])?;
                        let dec = BlockDecomposition::new(g, grid)?;
                        let topo = Topology::new(comm, &dec, HaloSpec::uniform(2, nbh))?;
                        let mut l2 = topo.layout(2);
                        l2.components = 2;
                        let l1 = topo.layout(1);
                        let mut hx = Exchanger::new(&topo, 3, 0)?;
                        let mut dx = DeviceExchanger::new(comm, &topo, &device, 3, 1, Some(want))?;
                        assert_eq!(dx.transport(), want);
                        let mut a = DeviceField::new(&device, l2, "a").map_err(dev)?;
                        let mut b = DeviceField::new(&device, l1, "b").map_err(dev)?;
                        for round in 0..4 {
                            let (mut ha, mut hb) =
                                (filled(&topo, l2, round), filled(&topo, l1, round + 7));
                            a.upload(&ha).map_err(dev)?;
                            b.upload(&hb).map_err(dev)?;
                            hx.exchange(
                                comm,
                                &mut [&mut ha as &mut dyn crate::HaloData<f64>, &mut hb],
                            )?;
                            if round % 2 == 0 {
                                dx.exchange(comm, &mut [&mut a, &mut b])?;
                            } else {
                                let p = dx.post(comm, &mut [&mut a, &mut b])?;
                                p.finish(&mut [&mut a, &mut b])?;
                            }
                            let (mut ba, mut bb) = (Field::new(l2), Field::new(l1));
                            a.download(&mut ba).map_err(dev)?;
                            b.download(&mut bb).map_err(dev)?;
                            assert_eq!(ba.as_slice(), ha.as_slice(), "{want} round {round}");
                            assert_eq!(bb.as_slice(), hb.as_slice(), "{want} round {round}");
                        }
                        let s = dx.stats();
                        assert_eq!(s.exchanges, 4);
                        Ok::<_, HaloError>(())
                    })
                    .unwrap();
                }
            }
        }
    }

    /// In one process `None` picks the direct transport; a dropped pending
    /// exchange leaves the next one correct, a leaked one is reported by
    /// the next `post`, which then works.
    #[test]
    fn dropped_and_leaked_exchanges_recover() {
        let Some(device) = device() else { return };
        local::run(2, move |comm| {
            let g = [8, 8, 8];
            let grid = ProcessGrid::for_shape(g, comm.size(), [true; 3])?;
            let dec = BlockDecomposition::new(g, grid)?;
            let topo = Topology::new(comm, &dec, HaloSpec::uniform(1, Neighborhood::Faces))?;
            let l = topo.layout(1);
            let mut dx = DeviceExchanger::new(comm, &topo, &device, 1, 0, None)?;
            assert_eq!(dx.transport(), Transport::Direct);
            let mut u = DeviceField::new(&device, l, "u").map_err(dev)?;
            u.upload(&filled(&topo, l, 1)).map_err(dev)?;
            drop(dx.post(comm, &mut [&mut u])?);
            std::mem::forget(dx.post(comm, &mut [&mut u])?);
            let e = dx.post(comm, &mut [&mut u]).unwrap_err();
            assert!(e.to_string().contains("leaked"), "{e}");
            let mut h = filled(&topo, l, 2);
            u.upload(&h).map_err(dev)?;
            dx.exchange(comm, &mut [&mut u])?;
            Exchanger::new(&topo, 1, 5)?.exchange(comm, &mut [&mut h])?;
            let mut back = Field::new(l);
            u.download(&mut back).map_err(dev)?;
            assert_eq!(back.as_slice(), h.as_slice());
            Ok::<_, HaloError>(())
        })
        .unwrap();
    }

    /// Fields that do not match the exchanger are refused before anything
    /// is sent.
    #[test]
    fn mismatched_fields_are_refused() {
        let Some(device) = device() else { return };
        local::run(2, move |comm| {
            let g = [8, 8, 8];
            let grid = ProcessGrid::for_shape(g, comm.size(), [true; 3])?;
            let dec = BlockDecomposition::new(g, grid)?;
            let topo = Topology::new(comm, &dec, HaloSpec::uniform(1, Neighborhood::Faces))?;
            let mut dx = DeviceExchanger::<f64>::new(comm, &topo, &device, 2, 0, None)?;
            let mut u = DeviceField::new(&device, topo.layout(1), "u").map_err(dev)?;
            let e = dx.exchange(comm, &mut [&mut u]).unwrap_err();
            assert!(e.to_string().contains("2 components"), "{e}");
            let e = DeviceExchanger::<f64>::new(comm, &topo, &device, 1, MAX_CHANNEL + 1, None)
                .unwrap_err();
            assert!(e.to_string().contains("out of range"), "{e}");
            Ok::<_, HaloError>(())
        })
        .unwrap();
    }
}
