//! The exchange itself: post (pack, send, post receives) and finish (wait,
//! unpack), fused over several fields.

use crate::field::{FieldLayout, HaloData};
use crate::topology::{dir_index, Topology};
use crate::HaloError;
use comm::{CommExt, Communicator, Elem, Request};
use std::time::{Duration, Instant};

/// Largest channel number: tags are `channel * 27 + direction`, kept below
/// the 32767 every MPI implementation guarantees.
pub const MAX_CHANNEL: u16 = 1212;

/// Counters kept by an [`Exchanger`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ExchangeStats {
    /// Exchanges posted.
    pub exchanges: u64,
    /// Messages sent to other ranks.
    pub messages: u64,
    /// Values sent to other ranks.
    pub values_sent: u64,
    /// Values copied locally (periodic self-neighbours).
    pub values_copied: u64,
    /// Time spent in `post` (packing and sending).
    pub post_time: Duration,
    /// Time spent in `finish` waiting for messages.
    pub wait_time: Duration,
    /// Time spent in `finish` unpacking.
    pub unpack_time: Duration,
}

/// The buffers and bookkeeping for exchanging a fixed set of fields (a fixed
/// total number of components) on one topology.
///
/// Built once; every exchange reuses its buffers (no allocation per
/// exchange). One message per neighbour carries every component of every
/// field. An exchanger has one exchange in flight at most: [`post`] borrows
/// it mutably until the returned [`Pending`] is finished, so posting twice
/// or finishing twice does not compile.
///
/// [`post`]: Exchanger::post
#[derive(Debug)]
pub struct Exchanger<T: Elem = f64> {
    topo: Topology,
    components: usize,
    channel: u16,
    send: Vec<Vec<T>>,
    recv: Vec<Vec<T>>,
    stats: ExchangeStats,
}

impl<T: Elem + Default> Exchanger<T> {
    /// An exchanger for fields with `components` components in total, using
    /// message channel `channel` (exchangers that may be in flight at the
    /// same time on one communicator need distinct channels).
    pub fn new(topo: &Topology, components: usize, channel: u16) -> Result<Self, HaloError> {
        if channel > MAX_CHANNEL {
            return Err(HaloError::Invalid(format!(
                "channel {channel} is out of range (valid: 0..={MAX_CHANNEL})"
            )));
        }
        // Periodic self-neighbours are copied in place and need no buffer.
        let me = topo.rank();
        let size = |n: &crate::Neighbor| {
            if n.rank == me {
                0
            } else {
                n.send.len() * components
            }
        };
        Ok(Exchanger {
            topo: topo.clone(),
            components,
            channel,
            send: topo
                .neighbors()
                .iter()
                .map(|n| vec![T::default(); size(n)])
                .collect(),
            recv: topo
                .neighbors()
                .iter()
                .map(|n| vec![T::default(); size(n)])
                .collect(),
            stats: ExchangeStats::default(),
        })
    }
}

impl<T: Elem> Exchanger<T> {
    /// The topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Counters since creation (or the last [`reset_stats`](Self::reset_stats)).
    pub fn stats(&self) -> ExchangeStats {
        self.stats
    }

    /// Zeroes the counters.
    pub fn reset_stats(&mut self) {
        self.stats = ExchangeStats::default();
    }

    fn check_fields(&self, layouts: &[FieldLayout]) -> Result<(), HaloError> {
        let total: usize = layouts.iter().map(|l| l.components).sum();
        if total != self.components {
            return Err(HaloError::Invalid(format!(
                "the exchanger was built for {} components in total, the fields hold {total}",
                self.components
            )));
        }
        let want = self.topo.layout(1);
        for (i, l) in layouts.iter().enumerate() {
            if l.owned != want.owned || l.ghost != want.ghost {
                return Err(HaloError::Invalid(format!(
                    "field {i} has owned shape {:?} and ghost {:?}, the topology has {:?} and {:?}",
                    l.owned, l.ghost, want.owned, want.ghost
                )));
            }
        }
        Ok(())
    }

    /// Packs the owned boundary cells of `fields`, sends them, posts the
    /// receives, and fills the ghost cells whose neighbour is this rank
    /// itself (periodic axes with one rank) by local copies. The fields may
    /// then be read while the exchange is in flight; the ghost cells that
    /// come by message are written by [`Pending::finish`], which must be
    /// given the same fields in the same order. Values are those of the
    /// owned cells at `post`.
    pub fn post<'a, F: HaloData<T> + ?Sized>(
        &'a mut self,
        comm: &'a dyn Communicator,
        fields: &mut [&mut F],
    ) -> Result<Pending<'a, T>, HaloError> {
        let t0 = Instant::now();
        let layouts: Vec<FieldLayout> = fields.iter().map(|f| f.layout()).collect();
        self.check_fields(&layouts)?;
        if comm.rank() != self.topo.rank() {
            return Err(HaloError::Invalid(format!(
                "the topology belongs to rank {}, the communicator says rank {}",
                self.topo.rank(),
                comm.rank()
            )));
        }
        let me = self.topo.rank();
        let Exchanger {
            topo,
            send,
            recv,
            stats,
            channel,
            ..
        } = self;
        let mut reqs = Vec::with_capacity(send.len());
        let mut slots = Vec::with_capacity(send.len());
        // Receives first, so messages can land as soon as they are sent.
        for (i, (nb, buf)) in topo.neighbors().iter().zip(recv.iter_mut()).enumerate() {
            if nb.rank != me {
                // The neighbour sends toward us, i.e. in direction -offset.
                let tag = u32::from(*channel) * 27 + dir_index(nb.offset.map(|x| -x)) as u32;
                let (ptr, len) = (buf.as_mut_ptr(), buf.len());
                // SAFETY: `ptr` points to `len` initialised values owned by
                // `recv`, which stays exclusively borrowed for 'a through
                // `Pending`; the slice is the only live reference to them
                // until its request completes and drops it.
                let slice = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
                reqs.push(comm.irecv(nb.rank, tag, slice)?);
                slots.push(RecvSlot {
                    neighbor: i,
                    ptr,
                    len,
                });
            }
        }
        for (nb, buf) in topo.neighbors().iter().zip(send.iter_mut()) {
            if nb.rank == me {
                continue;
            }
            let n = nb.send.len();
            let mut p = 0;
            for f in fields.iter() {
                for c in 0..f.layout().components {
                    f.pack(c, &nb.send, &mut buf[p..p + n]);
                    p += n;
                }
            }
        }
        let mut sends = Vec::with_capacity(send.len());
        for (nb, buf) in topo.neighbors().iter().zip(send.iter()) {
            if nb.rank != me {
                let tag = u32::from(*channel) * 27 + dir_index(nb.offset) as u32;
                sends.push(comm.isend(nb.rank, tag, buf.as_slice())?);
                stats.messages += 1;
                stats.values_sent += buf.len() as u64;
            } else {
                stats.values_copied += (nb.send.len() * self.components) as u64;
            }
        }
        // Local copies: the self-neighbour in direction `o` fills its ghosts
        // from the owned cells this rank would send in direction `-o`. Ghost
        // and owned cells never overlap, so every copy reads values as of
        // `post`, like the messages.
        let nbs = topo.neighbors();
        for nb in nbs.iter().filter(|nb| nb.rank == me) {
            let back = nb.offset.map(|x| -x);
            let src = nbs
                .iter()
                .find(|m| m.offset == back)
                .expect("periodic self-neighbours come in opposite pairs");
            for f in fields.iter_mut() {
                for c in 0..f.layout().components {
                    f.copy_region(c, &src.send, &nb.recv);
                }
            }
        }
        stats.exchanges += 1;
        stats.post_time += t0.elapsed();
        Ok(Pending {
            comm,
            topo,
            layouts,
            recvs: reqs,
            slots,
            sends,
            stats,
            _recv: std::marker::PhantomData,
        })
    }

    /// A blocking exchange: [`post`](Self::post) then
    /// [`finish`](Pending::finish).
    pub fn exchange<F: HaloData<T> + ?Sized>(
        &mut self,
        comm: &dyn Communicator,
        fields: &mut [&mut F],
    ) -> Result<(), HaloError> {
        let pending = self.post(comm, fields)?;
        pending.finish(fields)
    }
}

/// An exchange in flight, returned by [`Exchanger::post`].
#[must_use = "an exchange in flight must be finished to fill the ghost cells"]
pub struct Pending<'a, T: Elem> {
    comm: &'a dyn Communicator,
    topo: &'a Topology,
    layouts: Vec<FieldLayout>,
    recvs: Vec<Request<'a>>,
    slots: Vec<RecvSlot<T>>,
    sends: Vec<Request<'a>>,
    stats: &'a mut ExchangeStats,
    _recv: std::marker::PhantomData<&'a mut [Vec<T>]>,
}

impl<T: Elem> std::fmt::Debug for Pending<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("rank", &self.topo.rank())
            .field("receives", &self.recvs.len())
            .finish()
    }
}

/// Unpacks one neighbour's buffer (all components of all fields, in order)
/// into the ghost cells it fills.
fn unpack_into<T: Elem, F: HaloData<T> + ?Sized>(
    fields: &mut [&mut F],
    nb: &crate::Neighbor,
    buf: &[T],
) {
    let n = nb.recv.len();
    let mut p = 0;
    for f in fields.iter_mut() {
        for c in 0..f.layout().components {
            f.unpack(c, &nb.recv, &buf[p..p + n]);
            p += n;
        }
    }
}

/// Where the message of one pending receive lands.
#[derive(Debug)]
struct RecvSlot<T> {
    neighbor: usize,
    ptr: *mut T,
    len: usize,
}

impl<T: Elem> Pending<'_, T> {
    /// Waits for the messages and unpacks them (each as it arrives) into the
    /// ghost cells of `fields`, which must be the fields given to `post`.
    pub fn finish<F: HaloData<T> + ?Sized>(
        mut self,
        fields: &mut [&mut F],
    ) -> Result<(), HaloError> {
        let layouts: Vec<FieldLayout> = fields.iter().map(|f| f.layout()).collect();
        if layouts != self.layouts {
            return Err(HaloError::Invalid(format!(
                "finish was given fields with layouts {layouts:?}, but post was given {:?}",
                self.layouts
            )));
        }
        let nbs = self.topo.neighbors();
        let mut unpack_time = Duration::ZERO;
        let mut wait_time = Duration::ZERO;
        loop {
            let t = Instant::now();
            let Some(k) = self.comm.wait_any(&mut self.recvs)? else {
                break;
            };
            // A completed request has released its buffer.
            self.recvs[k].wait()?;
            wait_time += t.elapsed();
            let t = Instant::now();
            let slot = &self.slots[k];
            // SAFETY: request `k` is complete, so the mutable slice it held is
            // gone; the buffer is initialised, lives for 'a and nothing else
            // refers to it.
            let buf = unsafe { std::slice::from_raw_parts(slot.ptr.cast_const(), slot.len) };
            unpack_into(fields, &nbs[slot.neighbor], buf);
            unpack_time += t.elapsed();
        }
        let t = Instant::now();
        comm::wait_all(&mut self.sends)?;
        wait_time += t.elapsed();
        self.stats.wait_time += wait_time;
        self.stats.unpack_time += unpack_time;
        Ok(())
    }
}
