//! The exchange itself: post (pack, send, post receives) and finish (wait,
//! unpack), fused over several fields.

use crate::field::{FieldLayout, HaloData};
use crate::topology::{dir_index, Topology};
use crate::HaloError;
use comm::{as_bytes, as_bytes_mut, Communicator, Elem, Request};
use std::time::{Duration, Instant};

/// Largest channel number: tags are `channel * 27 + direction`, kept below
/// the 32767 every MPI implementation guarantees.
pub const MAX_CHANNEL: u16 = 1212;

/// Checks that fields of `layouts` fit an exchanger built on `topo` for
/// `components` components in total.
pub(crate) fn check_fields(
    topo: &Topology,
    components: usize,
    layouts: &[FieldLayout],
) -> Result<(), HaloError> {
    let total: usize = layouts.iter().map(|l| l.components).sum();
    if total != components {
        return Err(HaloError::Invalid(format!(
            "the exchanger was built for {components} components in total, the fields hold {total}"
        )));
    }
    let want = topo.layout(1);
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

/// Checks that `finish` was given fields of the layouts `post` was given.
pub(crate) fn check_same_fields(
    given: impl Iterator<Item = FieldLayout> + Clone,
    posted: &[FieldLayout],
) -> Result<(), HaloError> {
    if given.clone().eq(posted.iter().copied()) {
        return Ok(());
    }
    let layouts: Vec<FieldLayout> = given.collect();
    Err(HaloError::Invalid(format!(
        "finish was given fields with layouts {layouts:?}, but post was given {posted:?}"
    )))
}

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
/// Built once; every exchange reuses its buffers. One message per neighbour
/// carries every component of every field. An exchanger has one exchange
/// in flight at most: [`post`] borrows it mutably until the returned
/// [`Pending`] is finished, so posting twice or finishing twice does not
/// compile:
///
/// ```compile_fail
/// # use halo::{Exchanger, Field, Topology};
/// # fn f(ex: &mut Exchanger, c: &dyn comm::Communicator, u: &mut Field<f64>) -> Result<(), halo::HaloError> {
/// let first = ex.post(c, &mut [&mut *u])?;
/// let second = ex.post(c, &mut [&mut *u])?; // error: `*ex` is already borrowed
/// # first.finish(&mut [&mut *u])?; second.finish(&mut [&mut *u])
/// # }
/// ```
///
/// ```compile_fail
/// # use halo::{Exchanger, Field, Topology};
/// # fn f(ex: &mut Exchanger, c: &dyn comm::Communicator, u: &mut Field<f64>) -> Result<(), halo::HaloError> {
/// let pending = ex.post(c, &mut [&mut *u])?;
/// pending.finish(&mut [&mut *u])?;
/// pending.finish(&mut [&mut *u]) // error: use of moved value `pending`
/// # }
/// ```
///
/// The exchanger owns the buffers the messages move through *and* the
/// requests in flight, so no misuse of safe code can leave a transfer
/// writing into freed memory: a [`Pending`] that is dropped waits for its
/// messages; one that is leaked (`std::mem::forget`) leaves them with the
/// exchanger, whose next [`post`] completes them (and reports the leak as
/// an error) and whose drop waits for them.
///
/// [`post`]: Exchanger::post
#[derive(Debug)]
pub struct Exchanger<T: Elem = f64> {
    topo: Topology,
    components: usize,
    channel: u16,
    send: Vec<Vec<T>>,
    recv: Vec<Vec<T>>,
    /// Receives in flight, one per remote neighbour (in `recv_of` order).
    recvs: Vec<Request>,
    /// The neighbour index of each receive.
    recv_of: Vec<usize>,
    /// Sends in flight.
    sends: Vec<Request>,
    /// The layouts of the fields of the exchange in flight.
    layouts: Vec<FieldLayout>,
    /// The periodic self-copies `(owned source, ghost destination)`: the
    /// self-neighbour in direction `o` fills its ghosts from the owned
    /// cells this rank would send in direction `-o`.
    self_copies: Vec<(crate::Region, crate::Region)>,
    /// Whether the communicator was told what this exchanger sends
    /// (`Communicator::reserve_messages`, on the first `post`).
    reserved: bool,
    stats: ExchangeStats,
}

impl<T: Elem> Drop for Exchanger<T> {
    fn drop(&mut self) {
        // The requests go before the buffers they move bytes through (each
        // waits, or is abandoned while unwinding, see `comm::Request`).
        self.recvs.clear();
        self.sends.clear();
    }
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
            recvs: Vec::with_capacity(topo.neighbors().len()),
            recv_of: Vec::with_capacity(topo.neighbors().len()),
            sends: Vec::with_capacity(topo.neighbors().len()),
            layouts: Vec::new(),
            self_copies: topo.self_copies(),
            reserved: false,
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

    /// Completes the transfers of an exchange whose [`Pending`] was leaked;
    /// true if there were any.
    fn drain(&mut self) -> bool {
        let leaked = !self.recvs.is_empty() || !self.sends.is_empty();
        // Errors of a transfer nobody waits for any more do not matter.
        let _ = comm::wait_all(&mut self.recvs);
        let _ = comm::wait_all(&mut self.sends);
        self.recvs.clear();
        self.recv_of.clear();
        self.sends.clear();
        leaked
    }

    /// Packs the owned boundary cells of `fields`, sends them, posts the
    /// receives, and fills the ghost cells whose neighbour is this rank
    /// itself (periodic axes with one rank) by local copies. The fields may
    /// then be read while the exchange is in flight; the ghost cells that
    /// come by message are written by [`Pending::finish`], which must be
    /// given the same fields in the same order. Values are those of the
    /// owned cells at `post`.
    ///
    /// # Errors
    /// [`HaloError::Invalid`] when the fields do not match the exchanger or
    /// the communicator is not the topology's, and when the previous
    /// exchange's [`Pending`] was leaked instead of finished or dropped
    /// (its transfers are completed first, so the next `post` works).
    pub fn post<'a, F: HaloData<T> + ?Sized>(
        &'a mut self,
        comm: &'a dyn Communicator,
        fields: &mut [&mut F],
    ) -> Result<Pending<'a, T>, HaloError> {
        let t0 = Instant::now();
        if self.drain() {
            return Err(HaloError::Invalid(
                "the previous exchange was neither finished nor dropped (its Pending was \
                 leaked); its messages have been received and discarded"
                    .into(),
            ));
        }
        // The layouts of this exchange, kept in the exchanger (reused, and
        // nothing for a leaked `Pending` to lose) for `finish` to compare.
        let mut layouts = std::mem::take(&mut self.layouts);
        layouts.clear();
        layouts.extend(fields.iter().map(|f| f.layout()));
        let checked = check_fields(&self.topo, self.components, &layouts);
        self.layouts = layouts;
        checked?;
        if comm.rank() != self.topo.rank() {
            return Err(HaloError::Invalid(format!(
                "the topology belongs to rank {}, the communicator says rank {}",
                self.topo.rank(),
                comm.rank()
            )));
        }
        let me = self.topo.rank();
        if !self.reserved {
            // One message per remote neighbour and exchange; a neighbour
            // can be one exchange ahead, so two may be in flight.
            let remote = self.send.iter().filter(|b| !b.is_empty()).count();
            let largest = self.send.iter().map(Vec::len).max().unwrap_or(0);
            comm.reserve_messages(2 * remote, largest * std::mem::size_of::<T>());
            self.reserved = true;
        }
        let Exchanger {
            topo,
            send,
            recv,
            recvs,
            recv_of,
            sends,
            stats,
            channel,
            components,
            self_copies,
            ..
        } = self;
        // Pack first: a storage that fails to pack (a device error) leaves
        // nothing in flight.
        for (nb, buf) in topo.neighbors().iter().zip(send.iter_mut()) {
            if nb.rank == me {
                continue;
            }
            let n = nb.send.len();
            let mut p = 0;
            for f in fields.iter() {
                for c in 0..f.layout().components {
                    f.pack(c, &nb.send, &mut buf[p..p + n])?;
                    p += n;
                }
            }
        }
        // Receives before sends, so messages can land as soon as they are
        // sent.
        for (i, (nb, buf)) in topo.neighbors().iter().zip(recv.iter_mut()).enumerate() {
            if nb.rank != me {
                // The neighbour sends toward us, i.e. in direction -offset.
                let tag = u32::from(*channel) * 27 + dir_index(nb.offset.map(|x| -x)) as u32;
                let bytes = as_bytes_mut(buf.as_mut_slice());
                // SAFETY: the buffer is owned by the exchanger, which owns
                // the request too: it is neither freed (the exchanger's drop
                // completes the requests first) nor touched (only `finish`
                // reads it, after the request completed; `post` drains
                // leftover requests before repacking) until the request
                // completes.
                let r = unsafe { comm.irecv_raw(nb.rank, tag, bytes.as_mut_ptr(), bytes.len()) };
                match r {
                    Ok(r) => {
                        recvs.push(r);
                        recv_of.push(i);
                    }
                    Err(e) => {
                        recvs.clear();
                        recv_of.clear();
                        return Err(e.into());
                    }
                }
            }
        }
        for (nb, buf) in topo.neighbors().iter().zip(send.iter()) {
            if nb.rank != me {
                let tag = u32::from(*channel) * 27 + dir_index(nb.offset) as u32;
                let bytes = as_bytes(buf.as_slice());
                // SAFETY: as for the receives: the exchanger owns the buffer
                // and the request, and writes the buffer again only in a
                // later `post`, after these sends completed.
                let r = unsafe { comm.isend_raw(nb.rank, tag, bytes.as_ptr(), bytes.len()) };
                match r {
                    Ok(r) => sends.push(r),
                    Err(e) => {
                        recvs.clear();
                        recv_of.clear();
                        sends.clear();
                        return Err(e.into());
                    }
                }
                stats.messages += 1;
                stats.values_sent += buf.len() as u64;
            } else {
                stats.values_copied += (nb.send.len() * *components) as u64;
            }
        }
        // Local copies: the self-neighbour in direction `o` fills its ghosts
        // from the owned cells this rank would send in direction `-o`. Ghost
        // and owned cells never overlap, so every copy reads values as of
        // `post`, like the messages.
        if !self_copies.is_empty() {
            for f in fields.iter_mut() {
                for c in 0..f.layout().components {
                    f.copy_regions(c, self_copies)?;
                }
            }
        }
        stats.exchanges += 1;
        stats.post_time += t0.elapsed();
        Ok(Pending { comm, ex: self })
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

/// An exchange in flight, returned by [`Exchanger::post`]. Dropping it
/// without [`finish`](Self::finish) waits for its messages and leaves the
/// ghost cells they would have filled unchanged.
#[must_use = "an exchange in flight must be finished to fill the ghost cells"]
pub struct Pending<'a, T: Elem> {
    comm: &'a dyn Communicator,
    ex: &'a mut Exchanger<T>,
}

impl<T: Elem> std::fmt::Debug for Pending<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("rank", &self.ex.topo.rank())
            .field("receives", &self.ex.recvs.len())
            .finish()
    }
}

impl<T: Elem> Drop for Pending<'_, T> {
    fn drop(&mut self) {
        self.ex.drain();
    }
}

/// Unpacks one neighbour's buffer (all components of all fields, in order)
/// into the ghost cells it fills.
fn unpack_into<T: Elem, F: HaloData<T> + ?Sized>(
    fields: &mut [&mut F],
    nb: &crate::Neighbor,
    buf: &[T],
) -> Result<(), HaloError> {
    let n = nb.recv.len();
    let mut p = 0;
    for f in fields.iter_mut() {
        for c in 0..f.layout().components {
            f.unpack(c, &nb.recv, &buf[p..p + n])?;
            p += n;
        }
    }
    Ok(())
}

impl<T: Elem> Pending<'_, T> {
    /// Waits for the messages and unpacks them (each as it arrives) into the
    /// ghost cells of `fields`, which must be the fields given to `post`.
    pub fn finish<F: HaloData<T> + ?Sized>(self, fields: &mut [&mut F]) -> Result<(), HaloError> {
        check_same_fields(fields.iter().map(|f| f.layout()), &self.ex.layouts)?;
        let ex = &mut *self.ex;
        let nbs = ex.topo.neighbors();
        let mut unpack_time = Duration::ZERO;
        let mut wait_time = Duration::ZERO;
        loop {
            let t = Instant::now();
            let Some(k) = self.comm.wait_any(&mut ex.recvs)? else {
                break;
            };
            wait_time += t.elapsed();
            let t = Instant::now();
            let i = ex.recv_of[k];
            // Request `k` has completed: the backend is done with the buffer.
            // On an error the `Pending` is dropped on return, which waits
            // for the remaining messages.
            unpack_into(fields, &nbs[i], &ex.recv[i])?;
            unpack_time += t.elapsed();
        }
        let t = Instant::now();
        let sent = comm::wait_all(&mut ex.sends);
        wait_time += t.elapsed();
        ex.recvs.clear();
        ex.recv_of.clear();
        ex.sends.clear();
        ex.stats.wait_time += wait_time;
        ex.stats.unpack_time += unpack_time;
        sent?;
        Ok(())
    }
}
