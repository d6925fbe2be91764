//! Device-to-device messages between the ranks of one process (feature
//! `cuda`): [`Links`], the transport under `halo`'s direct exchange and
//! `dfft`'s device reshapes.
//!
//! Ranks that are threads of one process share the address space and, on
//! one GPU, the device's primary context, so a rank can read the buffer
//! its neighbour packed without the bytes leaving the device. Every
//! directed link (sender, key) has a device buffer and a `packed` event
//! owned by the sender, and a `consumed` event owned by the receiver; the
//! two sides find each other's halves once, at construction, through a
//! process-wide registry keyed by a number rank 0 draws for the set of
//! links, so nothing that travels in a message is ever dereferenced. One
//! round is then:
//!
//! 1. [`Links::begin`]: receive the previous round's acknowledgements and
//!    make `main` wait for the receivers' `consumed` events (they have
//!    finished reading the buffers);
//! 2. the caller fills the outgoing buffers on `main`
//!    ([`Links::outgoing`]);
//! 3. [`Links::post`]: record `packed`, post the receives of the incoming
//!    notices and send each receiver an 8-byte notice (the round's number)
//!    through the communicator;
//! 4. [`Links::arrival`], as each notice arrives: make `main` wait for the
//!    sender's `packed` event; the caller reads the sender's buffer on
//!    `main` ([`Links::incoming`]: the buffer itself on the same device, a
//!    local copy of it otherwise);
//! 5. [`Links::consumed`]: record `consumed` and send the acknowledgement.
//!
//! The host never waits for the device: every wait is a stream waiting for
//! an event. A notice is sent only after its `packed` event is recorded and
//! an acknowledgement only after `consumed` is, so an event is always
//! waited for at the record that belongs to the round. The communicator
//! carries only the notices, so a failed peer surfaces as the
//! communicator's error. The halves are reference-counted between the two
//! sides of a link, and each side drains its `main` stream before it lets
//! go of them, so neither is freed while the other's kernels may use it.

use crate::cuda::Device;
use crate::GpuError;
use comm::{as_bytes_mut, CommError, CommExt, Communicator, Request};
use cudarc::driver::{sys, CudaEvent, CudaSlice, CudaView, DeviceRepr, ValidAsZeroBits};
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// What setting up or running links can report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The communicator failed (a failed peer included).
    #[error(transparent)]
    Comm(#[from] CommError),
    /// A device call failed.
    #[error(transparent)]
    Device(#[from] GpuError),
    /// The two sides of a link disagree (different arguments on different
    /// ranks, two sets of links on one tag, ranks in different processes).
    #[error("{0}")]
    Protocol(String),
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

/// Whether every rank of `comm` runs in this process (collective): the
/// condition for [`Links`].
pub fn one_process(comm: &dyn Communicator) -> Result<bool, LinkError> {
    let mut tokens = vec![0u64; comm.size()];
    comm.allgather(&[process_token()], &mut tokens)?;
    Ok(tokens.iter().all(|&t| t == tokens[0]))
}

/// Registry keys: (number of the set of links, sender rank, link key, side).
type Key = (u64, usize, u32, u8);
const SEND_SIDE: u8 = 0;
const RECV_SIDE: u8 = 1;

type Registry = Mutex<HashMap<Key, Arc<dyn Any + Send + Sync>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The sender's half of a link.
struct SendSide<T> {
    /// Filled by the sender (under the lock while it queues the work), read
    /// by the receiver (under the lock while it queues its reads).
    buf: Mutex<CudaSlice<T>>,
    len: usize,
    packed: CudaEvent,
    ordinal: usize,
}

/// The receiver's half of a link.
struct RecvSide {
    consumed: CudaEvent,
}

/// One end of a link as the caller describes it: the other rank, the
/// link's key (unique among the sender's links), the number of values,
/// and the tags of the notice and of the acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSpec {
    /// The rank at the other end.
    pub peer: usize,
    /// The link's key among the sender's links (for an incoming link: the
    /// key the sender gave it).
    pub key: u32,
    /// Values the link carries.
    pub len: usize,
    /// Tag of the notice (sender to receiver).
    pub notice_tag: u32,
    /// Tag of the acknowledgement (receiver to sender).
    pub ack_tag: u32,
}

struct Out<T> {
    spec: LinkSpec,
    own: Arc<SendSide<T>>,
    peer: Arc<RecvSide>,
    /// The round whose acknowledgement is still to be received.
    owed: Option<u64>,
}

struct In<T> {
    spec: LinkSpec,
    peer: Arc<SendSide<T>>,
    own: Arc<RecvSide>,
    /// A local copy of the peer's buffer when it lives on another device.
    staging: Option<CudaSlice<T>>,
}

/// Device-to-device links of one rank; see the module documentation.
pub struct Links<T> {
    device: Arc<Device>,
    outs: Vec<Out<T>>,
    ins: Vec<In<T>>,
    /// Incoming notices, one slot per incoming link.
    notices: Vec<u64>,
    /// Receives of notices in flight (in `recv_of` order).
    recvs: Vec<Request>,
    /// The incoming link of each receive.
    recv_of: Vec<usize>,
    /// The number of the next round.
    next: u64,
}

impl<T> std::fmt::Debug for Links<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links")
            .field("outgoing", &self.outs.len())
            .field("incoming", &self.ins.len())
            .field("round", &self.next)
            .finish()
    }
}

impl<T> Drop for Links<T> {
    fn drop(&mut self) {
        // Receives of notices go before their slots (a round that was
        // never finished waits here); then `main` is drained, so no work of
        // this rank still reads a neighbour's buffer or writes its own when
        // the halves are released.
        self.recvs.clear();
        let _ = self.device.main().synchronize();
    }
}

/// A buffer an incoming link is read from: the sender's own buffer on the
/// same device, or a local copy of it.
pub struct Incoming<'a, T> {
    source: Source<'a, T>,
    len: usize,
}

enum Source<'a, T> {
    /// The sender's buffer, locked while the caller queues its reads.
    Peer(MutexGuard<'a, CudaSlice<T>>),
    /// The local copy of a buffer on another device.
    Copy(&'a CudaSlice<T>),
}

impl<T> std::fmt::Debug for Incoming<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incoming")
            .field("len", &self.len)
            .field("copied", &matches!(self.source, Source::Copy(_)))
            .finish()
    }
}

impl<T> Incoming<'_, T> {
    /// The values the link carries.
    pub fn view(&self) -> CudaView<'_, T> {
        match &self.source {
            Source::Peer(g) => g.slice(..self.len),
            Source::Copy(s) => s.slice(..self.len),
        }
    }
}

impl<T: DeviceRepr + ValidAsZeroBits + Send + Sync + 'static> Links<T> {
    /// Links from this rank to `outs` and from `ins`, on `device`, or
    /// `None` when the ranks of `comm` span processes (then nothing is
    /// built). Collective over `comm`: every rank calls it, with link
    /// descriptions that match its peers' (an outgoing link `(q, key)` of
    /// rank `r` is the incoming link `(r, key)` of rank `q`, with the same
    /// length and tags). Links to the rank itself are not allowed.
    pub fn new(
        comm: &dyn Communicator,
        device: &Arc<Device>,
        outs: &[LinkSpec],
        ins: &[LinkSpec],
    ) -> Result<Option<Self>, LinkError> {
        if !one_process(comm)? {
            return Ok(None);
        }
        let me = comm.rank();
        // A bad link fails this rank's setup; the others learn it from the
        // final reduction instead of waiting for it at a barrier.
        let bad = outs
            .iter()
            .chain(ins)
            .find(|l| l.peer == me || l.peer >= comm.size())
            .map(|l| {
                LinkError::Protocol(format!(
                    "a link from rank {me} to rank {} (valid: the other ranks, 0..{} but {me})",
                    l.peer,
                    comm.size()
                ))
            });
        // A number for this set of links, the same on every rank.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut number = [NEXT.fetch_add(1, Ordering::Relaxed)];
        comm.broadcast(&mut number, 0)?;
        let number = number[0];
        let ordinal = device.info().ordinal;
        let ctx = device.context();
        let event = || {
            ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(|e| GpuError::Driver {
                    call: "cuEventCreate".into(),
                    detail: format!("{e:?}"),
                })
        };
        // This rank's halves, published before anyone looks and removed
        // after everyone has.
        let mut published: Vec<Key> = Vec::new();
        type Halves<T> = (Vec<Arc<SendSide<T>>>, Vec<Arc<RecvSide>>);
        let mut publish = || -> Result<Halves<T>, LinkError> {
            if let Some(e) = bad.clone() {
                return Err(e);
            }
            let mut sends = Vec::with_capacity(outs.len());
            for l in outs {
                let s = Arc::new(SendSide {
                    buf: Mutex::new(device.alloc_zeros::<T>(l.len.max(1), "link send buffer")?),
                    len: l.len,
                    packed: event()?,
                    ordinal,
                });
                let key = (number, me, l.key, SEND_SIDE);
                registry()
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, s.clone());
                published.push(key);
                sends.push(s);
            }
            let mut recvs = Vec::with_capacity(ins.len());
            for l in ins {
                let r = Arc::new(RecvSide { consumed: event()? });
                let key = (number, l.peer, l.key, RECV_SIDE);
                registry()
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, r.clone());
                published.push(key);
                recvs.push(r);
            }
            Ok((sends, recvs))
        };
        let made = publish();
        comm.barrier()?;
        let fetched = made.and_then(|(sends, recvs)| {
            let reg = registry().lock().unwrap_or_else(|e| e.into_inner());
            let missing = |peer: usize, what: &str| {
                LinkError::Protocol(format!(
                    "rank {peer} published no {what} for a link with rank {me} (links built \
                     with different arguments on different ranks)"
                ))
            };
            let mut o = Vec::with_capacity(outs.len());
            for (l, own) in outs.iter().zip(sends) {
                let peer = reg
                    .get(&(number, me, l.key, RECV_SIDE))
                    .and_then(|a| a.clone().downcast::<RecvSide>().ok())
                    .ok_or_else(|| missing(l.peer, "receive side"))?;
                o.push(Out {
                    spec: *l,
                    own,
                    peer,
                    owed: None,
                });
            }
            let mut i = Vec::with_capacity(ins.len());
            for (l, own) in ins.iter().zip(recvs) {
                let peer = reg
                    .get(&(number, l.peer, l.key, SEND_SIDE))
                    .and_then(|a| a.clone().downcast::<SendSide<T>>().ok())
                    .ok_or_else(|| missing(l.peer, "send side"))?;
                if peer.len != l.len {
                    return Err(LinkError::Protocol(format!(
                        "rank {} sends {} values to rank {me}, which expects {}",
                        l.peer, peer.len, l.len
                    )));
                }
                let staging = if peer.ordinal == ordinal {
                    None
                } else {
                    Some(device.alloc_zeros::<T>(l.len.max(1), "link staging")?)
                };
                i.push(In {
                    spec: *l,
                    peer,
                    own,
                    staging,
                });
            }
            Ok((o, i))
        });
        comm.barrier()?;
        {
            let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
            for k in &published {
                reg.remove(k);
            }
        }
        // Every rank learns whether every rank succeeded, so none waits for
        // a peer that gave up.
        let mut any = [i64::from(fetched.is_err())];
        comm.allreduce_i64(&mut any, comm::ReduceOp::Max)?;
        let (outs, ins) = match fetched {
            Ok(v) if any[0] == 0 => v,
            Ok(_) => {
                return Err(LinkError::Protocol(
                    "another rank failed to set up its device links".into(),
                ))
            }
            Err(e) => return Err(e),
        };
        let n = ins.len();
        Ok(Some(Links {
            device: device.clone(),
            outs,
            ins,
            notices: vec![0; n],
            recvs: Vec::with_capacity(n),
            recv_of: Vec::with_capacity(n),
            next: 0,
        }))
    }

    /// The number of outgoing links.
    pub fn outgoing_count(&self) -> usize {
        self.outs.len()
    }

    /// The number of incoming links.
    pub fn incoming_count(&self) -> usize {
        self.ins.len()
    }

    /// Step 1 of a round: the previous round's buffers are free once their
    /// receivers have read them (the acknowledgement says `consumed` is
    /// recorded, and `main` waits for it). Also completes, and
    /// acknowledges unread, the notices of a round that was not finished
    /// ([`drain`](Self::drain)); true if there were any.
    pub fn begin(&mut self, comm: &dyn Communicator) -> Result<bool, LinkError> {
        let left = self.drain(comm)?;
        let main = self.device.main().clone();
        for l in &mut self.outs {
            if let Some(owed) = l.owed {
                let mut ack = [0u64];
                comm.recv(l.spec.peer, l.spec.ack_tag, &mut ack)?;
                l.owed = None;
                if ack[0] != owed {
                    return Err(LinkError::Protocol(format!(
                        "rank {} acknowledged round {} where {owed} was sent (two sets of \
                         links on one tag?)",
                        l.spec.peer, ack[0]
                    )));
                }
                main.wait(&l.peer.consumed).map_err(|e| GpuError::Driver {
                    call: "cuStreamWaitEvent".into(),
                    detail: format!("{e:?}"),
                })?;
            }
        }
        Ok(left)
    }

    /// The buffer of outgoing link `k`, to fill with work on `main` between
    /// [`begin`](Self::begin) and [`post`](Self::post) (hold the guard only
    /// while queueing the work).
    pub fn outgoing(&self, k: usize) -> MutexGuard<'_, CudaSlice<T>> {
        self.outs[k]
            .own
            .buf
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Step 3: marks the outgoing buffers filled (by the work queued on
    /// `main` so far), posts the receives of the incoming notices and
    /// sends the notices. Returns the round's number.
    pub fn post(&mut self, comm: &dyn Communicator) -> Result<u64, LinkError> {
        let main = self.device.main().clone();
        for l in &self.outs {
            l.own.packed.record(&main).map_err(|e| GpuError::Driver {
                call: "cuEventRecord".into(),
                detail: format!("{e:?}"),
            })?;
        }
        let round = self.next;
        self.next += 1;
        for (k, l) in self.ins.iter().enumerate() {
            let slot = as_bytes_mut(std::slice::from_mut(&mut self.notices[k]));
            // SAFETY: the slot is owned by `self`, which owns the request
            // too: the slot is neither freed (the drop completes the
            // requests first) nor touched (read only after the request
            // completed; `begin` drains leftover requests first) while the
            // request is in flight.
            let r = unsafe {
                comm.irecv_raw(
                    l.spec.peer,
                    l.spec.notice_tag,
                    slot.as_mut_ptr(),
                    slot.len(),
                )
            }?;
            self.recvs.push(r);
            self.recv_of.push(k);
        }
        for l in &mut self.outs {
            comm.send(l.spec.peer, l.spec.notice_tag, &[round])?;
            l.owed = Some(round);
        }
        Ok(round)
    }

    /// Step 4: waits for the next notice of round `round` and makes `main`
    /// wait for its sender's `packed` event; `None` once every incoming
    /// link has arrived. The caller then reads [`incoming`](Self::incoming)
    /// on `main` and calls [`consumed`](Self::consumed).
    pub fn arrival(
        &mut self,
        comm: &dyn Communicator,
        round: u64,
    ) -> Result<Option<usize>, LinkError> {
        let Some(k) = comm.wait_any(&mut self.recvs)? else {
            self.recvs.clear();
            self.recv_of.clear();
            return Ok(None);
        };
        let li = self.recv_of[k];
        // Off the list: `drain` must not acknowledge it again.
        self.recvs.swap_remove(k);
        self.recv_of.swap_remove(k);
        let got = self.notices[li];
        let l = &mut self.ins[li];
        let wait = (|| {
            if got != round {
                return Err(LinkError::Protocol(format!(
                    "rank {} sent round {got} where {round} was expected (two sets of links \
                     on one tag?)",
                    l.spec.peer
                )));
            }
            let main = self.device.main();
            let driver = |call: &str| {
                let call = call.to_string();
                move |e: cudarc::driver::DriverError| GpuError::Driver {
                    call,
                    detail: format!("{e:?}"),
                }
            };
            main.wait(&l.peer.packed)
                .map_err(driver("cuStreamWaitEvent"))?;
            if let Some(st) = &mut l.staging {
                let buf = l.peer.buf.lock().unwrap_or_else(|e| e.into_inner());
                main.memcpy_dtod(&buf.slice(..l.peer.len), &mut st.slice_mut(..l.peer.len))
                    .map_err(driver("cuMemcpyPeerAsync"))?;
            }
            Ok(())
        })();
        if let Err(e) = wait {
            // Acknowledged all the same, so the sender does not wait for
            // ever; the round's data are invalid anyway.
            let _ = comm.send(l.spec.peer, l.spec.ack_tag, &[got]);
            return Err(e);
        }
        Ok(Some(li))
    }

    /// The values of incoming link `k` after [`arrival`](Self::arrival)
    /// returned it, to read with work on `main` before
    /// [`consumed`](Self::consumed) (hold it only while queueing the work).
    pub fn incoming(&self, k: usize) -> Incoming<'_, T> {
        let l = &self.ins[k];
        let source = match &l.staging {
            None => Source::Peer(l.peer.buf.lock().unwrap_or_else(|e| e.into_inner())),
            Some(s) => Source::Copy(s),
        };
        Incoming {
            source,
            len: l.spec.len,
        }
    }

    /// Step 5: incoming link `k` has been read by the work queued on `main`
    /// so far; records `consumed` and acknowledges round `round`.
    pub fn consumed(
        &mut self,
        comm: &dyn Communicator,
        k: usize,
        round: u64,
    ) -> Result<(), LinkError> {
        let l = &self.ins[k];
        let rec = l
            .own
            .consumed
            .record(self.device.main())
            .map_err(|e| GpuError::Driver {
                call: "cuEventRecord".into(),
                detail: format!("{e:?}"),
            });
        let acked = comm.send(l.spec.peer, l.spec.ack_tag, &[round]);
        rec?;
        acked?;
        Ok(())
    }

    /// Completes the receives of notices still in flight and acknowledges
    /// them without reading the buffers; true if there were any.
    pub fn drain(&mut self, comm: &dyn Communicator) -> Result<bool, LinkError> {
        let left = !self.recvs.is_empty();
        let mut first = Ok(());
        loop {
            let k = match comm.wait_any(&mut self.recvs) {
                Ok(Some(k)) => k,
                Ok(None) => break,
                Err(e) => {
                    // The remaining requests are dropped (which waits, or
                    // returns once the communicator reports the peer
                    // failed).
                    self.recvs.clear();
                    self.recv_of.clear();
                    return Err(e.into());
                }
            };
            let li = self.recv_of[k];
            let l = &self.ins[li];
            if let Err(e) = comm.send(l.spec.peer, l.spec.ack_tag, &[self.notices[li]]) {
                if first.is_ok() {
                    first = Err(e.into());
                }
            }
        }
        self.recvs.clear();
        self.recv_of.clear();
        first.map(|()| left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In-process ranks share one process; the token is stable within it.
    #[test]
    fn in_process_ranks_are_one_process() {
        for ranks in [1, 2, 5] {
            let all = comm::local::run(ranks, |c| one_process(c)).unwrap();
            assert!(all.iter().all(|&b| b), "{ranks} ranks: {all:?}");
        }
        assert_eq!(process_token(), process_token());
    }

    /// A link to the rank itself or past the communicator is refused
    /// before anything is allocated (needs a device to get that far).
    #[test]
    fn links_to_self_are_refused() {
        let Ok(d) = Device::open(0) else {
            eprintln!("skipped: no CUDA device");
            return;
        };
        let d = Arc::new(d);
        let errs = comm::local::run(2, move |c| {
            let me = c.rank();
            let l = LinkSpec {
                peer: me,
                key: 0,
                len: 4,
                notice_tag: 1,
                ack_tag: 2,
            };
            Ok::<_, LinkError>(Links::<f64>::new(c, &d, &[l], &[]).unwrap_err().to_string())
        })
        .unwrap();
        for e in errs {
            assert!(e.contains("valid: the other ranks"), "{e}");
        }
        // Only rank 1 is wrong: rank 0 is told, instead of waiting for it.
        let d = Device::open(0).map(Arc::new).unwrap();
        let errs = comm::local::run(2, move |c| {
            let me = c.rank();
            let l = LinkSpec {
                peer: 1,
                key: 0,
                len: 4,
                notice_tag: 1,
                ack_tag: 2,
            };
            // Rank 0 asks for nothing; rank 1 for a link to itself.
            let o = if me == 0 { vec![] } else { vec![l] };
            Ok::<_, LinkError>(Links::<f64>::new(c, &d, &o, &[]).unwrap_err().to_string())
        })
        .unwrap();
        assert!(errs[0].contains("another rank failed"), "{}", errs[0]);
        assert!(errs[1].contains("valid: the other ranks"), "{}", errs[1]);
    }
}
