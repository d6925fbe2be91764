//! Device-to-device messages through NCCL between ranks with one GPU each
//! (feature `cuda`): [`NcclLinks`], the transport under `halo`'s NCCL
//! exchange and `dfft`'s NCCL reshapes.
//!
//! Unlike [`Links`](crate::links::Links), which lets a rank read the buffer
//! its neighbour packed, NCCL copies each message into a buffer of the
//! receiver's, so the ranks may be anywhere NCCL reaches (NVLink, PCIe,
//! InfiniBand with GPUDirect, sockets): threads of one process with a GPU
//! each, or processes on any number of machines. NCCL refuses two ranks of
//! one communicator on the same GPU; [`NcclComm::new`] finds that before
//! NCCL is asked and names the ranks.
//!
//! An [`NcclComm`] is one NCCL communicator over the ranks of a
//! communicator, made once (collectively) and shared by any number of
//! [`NcclLinks`] of the rank (a halo exchanger and the reshapes of an FFT
//! plan, say); calls into it are serialised by a lock, as NCCL requires.
//!
//! Every link has a buffer on each side, owned here. One round is:
//!
//! 1. the caller fills the outgoing buffers with work on `main`
//!    ([`NcclLinks::outgoing`]);
//! 2. [`NcclLinks::post`] queues one NCCL group (every send, then every
//!    receive) on a stream of the links' own, after the work queued on
//!    `main` so far, and sends each remote receiver an 8-byte notice (the
//!    round's number) through the communicator. `main` is free meanwhile:
//!    work queued on the device's `side` stream after `post` (the interior
//!    of an overlapped step) does not wait for the messages;
//! 3. [`NcclLinks::arrival`] makes `main` wait for the group and returns
//!    each incoming link once its sender's notice has arrived (links to
//!    the rank itself at once); the caller reads [`NcclLinks::incoming`]
//!    with work on `main`.
//!
//! **Matching.** NCCL pairs the sends from rank `a` to rank `b` with the
//! receives of `b` from `a` in the order they are queued. Both sides queue
//! them sorted by `(peer, key)`, the key being the sender's, so the `k`-th
//! message from `a` to `b` lands in the buffer `b` keeps for the `k`-th:
//! several links between two ranks (both neighbours along a periodic axis
//! of two ranks) and links to the rank itself (a periodic axis of one rank:
//! NCCL copies a send to self into the matching receive) are all paired
//! by their keys.
//!
//! **Ordering.** The group waits for `main` (an event recorded by `post`),
//! and `main` waits for the group (an event recorded after it) before
//! anything reads the received values or refills the send buffers, so no
//! buffer is written while it is still read.
//!
//! **Failure.** NCCL's kernels wait on the device for their peers; a peer
//! that failed before queueing its half would leave `main` waiting for
//! ever. The notices are the guard: a round's incoming links are read only
//! after their senders' notices (sent after their groups were queued), and
//! where the communicator reports a peer failed instead, the NCCL
//! communicator is aborted (NCCL stops its kernels), so nothing on `main`
//! waits for a rank that is gone. The same happens when links are dropped
//! with notices still owed, after any error. What this cannot see is a
//! process that dies after its notice went out, with its half queued but
//! not run: NCCL's own proxy reports a broken connection as an asynchronous
//! error of the communicator, which is not polled here.

use crate::cuda::Device;
use crate::links::{driver, node_token, uuid_words, LinkError, LinkSpec};
use crate::GpuError;
use comm::{as_bytes_mut, CommExt, Communicator, Request};
use cudarc::driver::ValidAsZeroBits;
use cudarc::driver::{
    CudaEvent, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr,
};
use cudarc::nccl::sys;
use std::ffi::CStr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Checks that the NCCL library can be opened (the first call into a
/// library `cudarc` cannot open would abort the process).
pub fn check_nccl() -> Result<(), GpuError> {
    // SAFETY: only tries to open the library by its usual names.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(GpuError::Library {
            what: "NCCL (libnccl)",
            detail: "no libnccl.so found; it ships with NVIDIA's HPC SDK and as the \
                     libnccl2 package"
                .into(),
        })
    }
}

/// The NCCL version as `major.minor.patch`.
pub fn version() -> Result<String, GpuError> {
    check_nccl()?;
    let mut v = 0;
    // SAFETY: writes one int.
    let r = unsafe { sys::ncclGetVersion(&mut v) };
    nccl_ok("ncclGetVersion", r, None)?;
    // NCCL_VERSION(X, Y, Z): X * 10000 + Y * 100 + Z from 2.9 on.
    Ok(format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100))
}

/// The error of an NCCL call, with the library's words for it and, where
/// a communicator is given, its last error message.
fn nccl_ok(
    call: &str,
    r: sys::ncclResult_t,
    comm: Option<sys::ncclComm_t>,
) -> Result<(), GpuError> {
    use sys::ncclResult_t::*;
    if matches!(r, ncclSuccess) {
        return Ok(());
    }
    let text = |p: *const std::ffi::c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: NCCL returns NUL-terminated static or per-thread
            // strings, read at once.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // SAFETY: both take any value (a null communicator included) and
    // return a string NCCL owns.
    let what = text(unsafe { sys::ncclGetErrorString(r) });
    let last = text(unsafe { sys::ncclGetLastError(comm.unwrap_or(std::ptr::null_mut())) });
    Err(GpuError::Driver {
        call: call.to_string(),
        detail: if last.is_empty() {
            format!("{r:?}: {what}")
        } else {
            format!("{r:?}: {what}; {last}")
        },
    })
}

/// The words each rank tells the others at construction: whether NCCL
/// loads (1) or not (0), its machine, its GPU's UUID and ordinal.
const ABOUT: usize = 5;

/// The NCCL handle and whether it has been aborted (then it is gone).
struct Handle {
    raw: sys::ncclComm_t,
    aborted: bool,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a
// time: it is only reached through the lock of `NcclComm::handle`.
unsafe impl Send for Handle {}

/// One NCCL communicator over the ranks of a communicator, this rank on
/// one GPU; see the module documentation.
pub struct NcclComm {
    device: Arc<Device>,
    rank: usize,
    size: usize,
    handle: Mutex<Handle>,
}

impl std::fmt::Debug for NcclComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclComm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("device", &self.device.info().ordinal)
            .finish()
    }
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        // Every `NcclLinks` holds the communicator and drains its stream
        // before letting go, so no operation of it is in flight here.
        let h = self.handle.get_mut().unwrap_or_else(|e| e.into_inner());
        if !h.aborted {
            // SAFETY: the communicator is valid and no longer used.
            unsafe { sys::ncclCommDestroy(h.raw) };
        }
    }
}

impl NcclComm {
    /// An NCCL communicator over the ranks of `comm`, this rank on
    /// `device`. Collective over `comm`; every rank fails, with the same
    /// reason, where NCCL cannot be loaded on one of them or two ranks are
    /// on one GPU.
    pub fn new(comm: &dyn Communicator, device: &Arc<Device>) -> Result<Arc<Self>, LinkError> {
        Self::checked(comm, device, None)
    }

    /// As [`new`](Self::new); `bad`, where this rank already knows it
    /// cannot take part, fails every rank (this one with `bad`).
    fn checked(
        comm: &dyn Communicator,
        device: &Arc<Device>,
        bad: Option<LinkError>,
    ) -> Result<Arc<Self>, LinkError> {
        let (me, size) = (comm.rank(), comm.size());
        // A rank that cannot take part still joins the gather below, with
        // a last word of 0, so that every rank fails rather than waits.
        // Who can load NCCL, and which GPU of which machine each rank has.
        let loads = check_nccl().is_ok();
        let uuid = uuid_words(device);
        let mine = match (&bad, &uuid) {
            (None, Ok(uuid)) => [
                u64::from(loads),
                node_token(),
                uuid[0],
                uuid[1],
                device.info().ordinal as u64 + 1,
            ],
            _ => [0; ABOUT],
        };
        let mut all = vec![0u64; ABOUT * size];
        comm.allgather(&mine, &mut all)?;
        if let Some(e) = bad {
            return Err(e);
        }
        uuid?;
        let about: Vec<&[u64]> = all.chunks_exact(ABOUT).collect();
        if let Some(r) = about.iter().position(|a| a[4] == 0) {
            return Err(LinkError::Protocol(format!(
                "rank {r} could not set up its NCCL links"
            )));
        }
        for a in 0..size {
            for b in a + 1..size {
                let (x, y) = (about[a], about[b]);
                // Token 0: the machine cannot be told; the GPU's UUID still
                // is unique.
                if x[1] == y[1] && x[2] == y[2] && x[3] == y[3] {
                    return Err(LinkError::Protocol(format!(
                        "NCCL needs one GPU per rank, but ranks {a} and {b} are on the same GPU \
                         (device {} of their machine); run one rank per GPU, or exchange \
                         through the direct or the host-staged transport",
                        x[4] - 1
                    )));
                }
            }
        }
        if let Some(r) = about.iter().position(|a| a[0] == 0) {
            return Err(if r == me {
                check_nccl()
                    .err()
                    .map(LinkError::Device)
                    .unwrap_or_else(|| LinkError::Protocol("NCCL could not be loaded".into()))
            } else {
                LinkError::Protocol(format!("rank {r} cannot load the NCCL library"))
            });
        }
        // Rank 0 draws the communicator's identity; a failure there is
        // told to every rank with it (word 0).
        let mut id = [0u64; 17];
        if me == 0 {
            let mut raw = std::mem::MaybeUninit::<sys::ncclUniqueId>::uninit();
            // SAFETY: writes one `ncclUniqueId`.
            let r = unsafe { sys::ncclGetUniqueId(raw.as_mut_ptr()) };
            if nccl_ok("ncclGetUniqueId", r, None).is_ok() {
                // SAFETY: initialised by the successful call.
                let raw = unsafe { raw.assume_init() };
                id[0] = 1;
                for (i, c) in raw.internal.iter().enumerate() {
                    id[1 + i / 8] |= u64::from(*c as u8) << (8 * (i % 8));
                }
            }
        }
        comm.broadcast(&mut id, 0)?;
        if id[0] != 1 {
            return Err(LinkError::Protocol(
                "rank 0 could not draw an NCCL communicator identity (ncclGetUniqueId failed)"
                    .into(),
            ));
        }
        let mut unique = sys::ncclUniqueId { internal: [0; 128] };
        for (i, c) in unique.internal.iter_mut().enumerate() {
            *c = (id[1 + i / 8] >> (8 * (i % 8))) as u8 as std::ffi::c_char;
        }
        // Every rank is alive here (the broadcast completed), and each
        // goes straight into the initialisation, which waits for all.
        device
            .context()
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))?;
        let mut raw = std::mem::MaybeUninit::<sys::ncclComm_t>::uninit();
        // SAFETY: writes one communicator handle; the identity is the one
        // every rank received, the rank and size are the communicator's.
        let r = unsafe { sys::ncclCommInitRank(raw.as_mut_ptr(), size as i32, unique, me as i32) };
        nccl_ok("ncclCommInitRank", r, None)?;
        Ok(Arc::new(NcclComm {
            device: device.clone(),
            rank: me,
            size,
            handle: Mutex::new(Handle {
                // SAFETY: initialised by the successful call.
                raw: unsafe { raw.assume_init() },
                aborted: false,
            }),
        }))
    }

    /// This rank's place in the communicator.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The device this rank's half runs on.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    fn lock(&self) -> MutexGuard<'_, Handle> {
        self.handle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops every NCCL operation of this rank on the communicator and
    /// frees it (once); every later round of links over it fails.
    fn abort(&self) {
        let mut h = self.lock();
        if !h.aborted {
            h.aborted = true;
            // SAFETY: the communicator is valid and used by no other
            // thread (the lock is held); it is never used again.
            unsafe { sys::ncclCommAbort(h.raw) };
        }
    }
}

/// NCCL links of one rank; see the module documentation.
pub struct NcclLinks<T> {
    device: Arc<Device>,
    nccl: Arc<NcclComm>,
    /// The stream the NCCL groups run on, and the events that order it
    /// with `main`: `packed` (recorded on `main` by `post`) and `done`
    /// (recorded after each group).
    stream: Arc<CudaStream>,
    packed: CudaEvent,
    done: CudaEvent,
    /// `main` has not yet been made to wait for the last group.
    owed_done: bool,
    outs: Vec<(LinkSpec, CudaSlice<T>)>,
    ins: Vec<(LinkSpec, CudaSlice<T>)>,
    /// The order in which sends and receives are queued: by (peer, key).
    send_order: Vec<usize>,
    recv_order: Vec<usize>,
    /// Incoming notices, one slot per incoming link.
    notices: Vec<u64>,
    /// Receives of notices in flight, and the incoming link of each.
    recvs: Vec<Request>,
    recv_of: Vec<usize>,
    /// Incoming links from this rank itself still to be returned by
    /// `arrival` this round.
    local: Vec<usize>,
    /// The number of the next round.
    next: u64,
}

impl<T> std::fmt::Debug for NcclLinks<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclLinks")
            .field("outgoing", &self.outs.len())
            .field("incoming", &self.ins.len())
            .field("round", &self.next)
            .finish()
    }
}

impl<T> Drop for NcclLinks<T> {
    fn drop(&mut self) {
        // Notices still owed mean a round that was not finished: its
        // senders may be gone, so NCCL's kernels are stopped rather than
        // waited for (the requests are dropped first, which waits for them
        // or returns once the peer is reported failed).
        let owed = !self.recvs.is_empty();
        self.recvs.clear();
        if owed {
            self.nccl.abort();
        }
        // No kernel of this rank uses the buffers once both streams are
        // drained; then they are freed (after this), and the communicator
        // once its last holder lets go.
        let _ = self.stream.synchronize();
        let _ = self.device.main().synchronize();
    }
}

impl<T: DeviceRepr + ValidAsZeroBits + Send + Sync + 'static> NcclLinks<T> {
    /// Links from this rank to `outs` and from `ins`, on `device`, through
    /// a new NCCL communicator over the ranks of `comm` (see
    /// [`NcclComm::new`]). Collective over `comm`: every rank calls it,
    /// with link descriptions that match its peers' (an outgoing link
    /// `(q, key)` of rank `r` is the incoming link `(r, key)` of rank `q`,
    /// with the same length and tags); links to the rank itself are
    /// allowed.
    pub fn new(
        comm: &dyn Communicator,
        device: &Arc<Device>,
        outs: &[LinkSpec],
        ins: &[LinkSpec],
    ) -> Result<Self, LinkError> {
        let bad = Self::bad_peer(comm, outs, ins);
        let nccl = NcclComm::checked(comm, device, bad)?;
        Self::over(comm, &nccl, outs, ins)
    }

    /// A link to a rank `comm` does not have.
    fn bad_peer(comm: &dyn Communicator, outs: &[LinkSpec], ins: &[LinkSpec]) -> Option<LinkError> {
        let (me, size) = (comm.rank(), comm.size());
        outs.iter().chain(ins).find(|l| l.peer >= size).map(|l| {
            LinkError::Protocol(format!(
                "a link from rank {me} to rank {} (valid: 0..{size})",
                l.peer
            ))
        })
    }

    /// As [`new`](Self::new), over the NCCL communicator `nccl` (made over
    /// the same ranks as `comm`, in the same order).
    pub fn over(
        comm: &dyn Communicator,
        nccl: &Arc<NcclComm>,
        outs: &[LinkSpec],
        ins: &[LinkSpec],
    ) -> Result<Self, LinkError> {
        let bad = Self::bad_peer(comm, outs, ins).or_else(|| {
            (comm.rank() != nccl.rank || comm.size() != nccl.size).then(|| {
                LinkError::Protocol(format!(
                    "the NCCL communicator has rank {} of {}, the communicator rank {} of {}",
                    nccl.rank,
                    nccl.size,
                    comm.rank(),
                    comm.size()
                ))
            })
        });
        // Every rank's links exist before any round is queued, or every
        // rank fails.
        let made = match bad {
            Some(e) => Err(e),
            None => Self::make(nccl, outs, ins),
        };
        let mut worst = [i64::from(made.is_err())];
        comm.allreduce_i64(&mut worst, comm::ReduceOp::Max)?;
        let links = made?;
        if worst[0] != 0 {
            return Err(LinkError::Protocol(
                "another rank could not set up its NCCL links".into(),
            ));
        }
        Ok(links)
    }

    /// This rank's half of the links: the stream, the events, the buffers.
    fn make(nccl: &Arc<NcclComm>, outs: &[LinkSpec], ins: &[LinkSpec]) -> Result<Self, LinkError> {
        let device = nccl.device.clone();
        let ctx = device.context();
        let mut links = NcclLinks {
            device: device.clone(),
            nccl: nccl.clone(),
            stream: ctx.new_stream().map_err(driver("cuStreamCreate"))?,
            packed: ctx.new_event(None).map_err(driver("cuEventCreate"))?,
            done: ctx.new_event(None).map_err(driver("cuEventCreate"))?,
            owed_done: false,
            outs: Vec::with_capacity(outs.len()),
            ins: Vec::with_capacity(ins.len()),
            send_order: queue_order(outs),
            recv_order: queue_order(ins),
            notices: vec![0; ins.len()],
            recvs: Vec::new(),
            recv_of: Vec::new(),
            local: Vec::new(),
            next: 0,
        };
        for l in outs {
            let b = device.alloc_zeros(l.len, "an NCCL send buffer")?;
            links.outs.push((*l, b));
        }
        for l in ins {
            let b = device.alloc_zeros(l.len, "an NCCL receive buffer")?;
            links.ins.push((*l, b));
        }
        Ok(links)
    }

    /// The number of outgoing links.
    pub fn outgoing_count(&self) -> usize {
        self.outs.len()
    }

    /// The number of incoming links.
    pub fn incoming_count(&self) -> usize {
        self.ins.len()
    }

    /// The buffer of outgoing link `k` (`len` values), to fill with work on
    /// `main` before [`post`](Self::post).
    pub fn outgoing(&mut self, k: usize) -> CudaViewMut<'_, T> {
        let (spec, buf) = &mut self.outs[k];
        buf.slice_mut(..spec.len)
    }

    /// Queues the round's NCCL group on the links' stream, after the work
    /// queued on `main` so far (the fills of the outgoing buffers), and
    /// sends the notices. Returns the round's
    /// number. Notices of a round that was not finished are received and
    /// discarded first ([`drain`](Self::drain)); the error then says so,
    /// and nothing is queued.
    pub fn post(&mut self, comm: &dyn Communicator) -> Result<u64, LinkError> {
        if self.drain(comm)? {
            return Err(LinkError::Protocol(
                "the previous round was not finished (its notices have been received and \
                 discarded)"
                    .into(),
            ));
        }
        let round = self.next;
        self.next += 1;
        let main = self.device.main().clone();
        let on = self.stream.clone();
        let stream = on.cu_stream() as sys::cudaStream_t;
        let bytes = std::mem::size_of::<T>();
        let nccl = self.nccl.clone();
        let handle = nccl.lock();
        if handle.aborted {
            return Err(LinkError::Protocol(
                "the NCCL communicator was aborted after an earlier error".into(),
            ));
        }
        let raw = handle.raw;
        let queued = (|| {
            self.packed.record(&main).map_err(driver("cuEventRecord"))?;
            on.wait(&self.packed).map_err(driver("cuStreamWaitEvent"))?;
            // SAFETY: group calls only bracket the operations below.
            nccl_ok(
                "ncclGroupStart",
                unsafe { sys::ncclGroupStart() },
                Some(raw),
            )?;
            let mut first = Ok(());
            for &k in &self.send_order {
                let (spec, buf) = &self.outs[k];
                let (p, _) = buf.device_ptr(&on);
                // SAFETY: `p` holds at least `spec.len` values of `T` (the
                // buffer was allocated with that length), owned by `self`
                // and freed only after both streams are drained (the
                // drop); the operation runs on the links' stream after the
                // work queued on `main` that filled the buffer, and `main`
                // refills it only after waiting for `done`.
                let r = unsafe {
                    sys::ncclSend(
                        p as *const std::ffi::c_void,
                        spec.len * bytes,
                        sys::ncclDataType_t::ncclUint8,
                        spec.peer as i32,
                        raw,
                        stream,
                    )
                };
                first = first.and(nccl_ok("ncclSend", r, Some(raw)));
            }
            for &k in &self.recv_order {
                let (spec, buf) = &mut self.ins[k];
                let (p, _) = buf.device_ptr_mut(&on);
                // SAFETY: as for the sends; the buffer is written only by
                // this operation, after `main`'s reads of the previous
                // round (they precede `packed`), and read by work queued
                // on `main` after it waited for `done`.
                let r = unsafe {
                    sys::ncclRecv(
                        p as *mut std::ffi::c_void,
                        spec.len * bytes,
                        sys::ncclDataType_t::ncclUint8,
                        spec.peer as i32,
                        raw,
                        stream,
                    )
                };
                first = first.and(nccl_ok("ncclRecv", r, Some(raw)));
            }
            // The group is closed whatever happened inside it.
            // SAFETY: closes the group opened above.
            let end = nccl_ok("ncclGroupEnd", unsafe { sys::ncclGroupEnd() }, Some(raw));
            first.and(end)?;
            self.done.record(&on).map_err(driver("cuEventRecord"))?;
            self.owed_done = true;
            Ok::<_, GpuError>(())
        })();
        drop(handle);
        if let Err(e) = queued {
            // The peers may have queued their halves: stop everything.
            nccl.abort();
            return Err(e.into());
        }
        let me = comm.rank();
        self.local.clear();
        for (k, (l, _)) in self.ins.iter().enumerate() {
            if l.peer == me {
                self.local.push(k);
                continue;
            }
            let slot = as_bytes_mut(std::slice::from_mut(&mut self.notices[k]));
            // SAFETY: the slot is owned by `self`, which owns the request
            // too: the slot is neither freed (the drop completes the
            // requests first) nor touched (read only after the request
            // completed; `post` drains leftover requests first) while the
            // request is in flight.
            let r = unsafe { comm.irecv_raw(l.peer, l.notice_tag, slot.as_mut_ptr(), slot.len()) };
            match r {
                Ok(r) => {
                    self.recvs.push(r);
                    self.recv_of.push(k);
                }
                Err(e) => {
                    self.nccl.abort();
                    return Err(e.into());
                }
            }
        }
        for (l, _) in &self.outs {
            if l.peer != me {
                if let Err(e) = comm.send(l.peer, l.notice_tag, &[round]) {
                    self.nccl.abort();
                    return Err(e.into());
                }
            }
        }
        Ok(round)
    }

    /// The next incoming link of round `round` whose sender has queued its
    /// half (its notice arrived; links from this rank itself at once), or
    /// `None` once every incoming link has been returned. Where the
    /// communicator reports an error (a failed peer), the NCCL
    /// communicator is aborted first.
    pub fn arrival(
        &mut self,
        comm: &dyn Communicator,
        round: u64,
    ) -> Result<Option<usize>, LinkError> {
        self.wait_done()?;
        if let Some(k) = self.local.pop() {
            return Ok(Some(k));
        }
        let k = match comm.wait_any(&mut self.recvs) {
            Ok(Some(k)) => k,
            Ok(None) => {
                self.recvs.clear();
                self.recv_of.clear();
                return Ok(None);
            }
            Err(e) => {
                self.nccl.abort();
                self.recvs.clear();
                self.recv_of.clear();
                return Err(e.into());
            }
        };
        let li = self.recv_of[k];
        self.recvs.swap_remove(k);
        self.recv_of.swap_remove(k);
        let got = self.notices[li];
        if got != round {
            self.nccl.abort();
            return Err(LinkError::Protocol(format!(
                "rank {} sent round {got} where {round} was expected (two sets of links on one \
                 tag?)",
                self.ins[li].0.peer
            )));
        }
        Ok(Some(li))
    }

    /// The values of incoming link `k`, to read with work on `main` after
    /// [`arrival`](Self::arrival) returned it.
    pub fn incoming(&self, k: usize) -> CudaView<'_, T> {
        let (spec, buf) = &self.ins[k];
        buf.slice(..spec.len)
    }

    /// Completes the receives of notices still in flight without reading
    /// the buffers; true if there were any. An error of the communicator
    /// aborts the NCCL communicator.
    pub fn drain(&mut self, comm: &dyn Communicator) -> Result<bool, LinkError> {
        let left = !self.recvs.is_empty() || !self.local.is_empty();
        self.local.clear();
        self.wait_done()?;
        loop {
            match comm.wait_any(&mut self.recvs) {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    self.nccl.abort();
                    self.recvs.clear();
                    self.recv_of.clear();
                    return Err(e.into());
                }
            }
        }
        self.recvs.clear();
        self.recv_of.clear();
        Ok(left)
    }
}

impl<T> NcclLinks<T> {
    /// Makes `main` wait for the last group, once per round.
    fn wait_done(&mut self) -> Result<(), LinkError> {
        if self.owed_done {
            self.device
                .main()
                .wait(&self.done)
                .map_err(driver("cuStreamWaitEvent"))?;
            self.owed_done = false;
        }
        Ok(())
    }
}

/// The order in which to queue the operations of `links`: by peer, then
/// by key (the sender's), so both ends of every pair of ranks queue their
/// halves of the same messages in the same order.
pub fn queue_order(links: &[LinkSpec]) -> Vec<usize> {
    let mut o: Vec<usize> = (0..links.len()).collect();
    o.sort_by_key(|&k| (links[k].peer, links[k].key));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(peer: usize, key: u32) -> LinkSpec {
        LinkSpec {
            peer,
            key,
            len: 1,
            notice_tag: key,
            ack_tag: key,
        }
    }

    /// Rank 0 sends to rank 1 under keys 5 and 2, rank 1 receives from
    /// rank 0 under the same keys listed the other way round: both queue
    /// key 2 first, so the messages pair up by key.
    #[test]
    fn both_ends_queue_a_pair_of_ranks_in_key_order() {
        let sends = [spec(1, 5), spec(0, 9), spec(1, 2)];
        let recvs = [spec(0, 2), spec(0, 5)];
        let s: Vec<(usize, u32)> = queue_order(&sends)
            .iter()
            .map(|&k| (sends[k].peer, sends[k].key))
            .filter(|&(p, _)| p == 1)
            .collect();
        let r: Vec<u32> = queue_order(&recvs).iter().map(|&k| recvs[k].key).collect();
        assert_eq!(s, vec![(1, 2), (1, 5)]);
        assert_eq!(r, vec![2, 5]);
        assert_eq!(queue_order(&sends), vec![1, 2, 0]);
    }

    /// Without a device the links cannot be built; with one, a rank that
    /// sends to itself gets back what it sent, link by link, over several
    /// rounds (NCCL pairs the self-sends by key).
    #[test]
    fn a_rank_sends_to_itself_through_nccl() {
        let device = match Device::open(0) {
            Ok(d) => Arc::new(d),
            Err(e) => {
                eprintln!("skipped: no CUDA device ({e})");
                return;
            }
        };
        if let Err(e) = check_nccl() {
            eprintln!("skipped: no CUDA device with NCCL ({e})");
            return;
        }
        let c = comm::local::run(1, move |comm| {
            // Keys listed out of order, lengths all different.
            let keys = [7u32, 1, 4];
            let specs: Vec<LinkSpec> = keys
                .iter()
                .map(|&k| LinkSpec {
                    peer: 0,
                    key: k,
                    len: 3 + k as usize,
                    notice_tag: k,
                    ack_tag: 100 + k,
                })
                .collect();
            let mut ins = specs.clone();
            ins.reverse();
            let mut l = NcclLinks::<f64>::new(comm, &device, &specs, &ins)?;
            for round in 0..3u64 {
                let value =
                    |key: u32, i: usize| (round * 1000 + u64::from(key) * 10) as f64 + i as f64;
                for (k, s) in specs.iter().enumerate() {
                    let host: Vec<f64> = (0..s.len).map(|i| value(s.key, i)).collect();
                    device
                        .main()
                        .memcpy_htod(&host, &mut l.outgoing(k))
                        .map_err(driver("cuMemcpyHtoDAsync"))?;
                }
                assert_eq!(l.post(comm)?, round);
                let mut seen = vec![];
                while let Some(k) = l.arrival(comm, round)? {
                    let key = ins[k].key;
                    let mut got = vec![0.0; ins[k].len];
                    device.copy_to_host(&l.incoming(k), &mut got)?;
                    let want: Vec<f64> = (0..ins[k].len).map(|i| value(key, i)).collect();
                    assert_eq!(got, want, "round {round} key {key}");
                    seen.push(key);
                }
                seen.sort();
                assert_eq!(seen, vec![1, 4, 7]);
            }
            Ok::<_, LinkError>(())
        });
        c.unwrap();
    }
}
