//! Device-to-device messages between ranks that share a machine (feature
//! `cuda`): [`Links`], the transport under `halo`'s direct exchange and
//! `dfft`'s device reshapes.
//!
//! A rank reads the buffer its neighbour packed without the bytes leaving
//! the device(s). Every directed link (sender, key) has a device buffer and
//! a `packed` event owned by the sender, and a `consumed` event owned by
//! the receiver. How the two sides get hold of each other's halves depends
//! on where the ranks run ([`Reach`]):
//!
//! - **Threads of one process** ([`Reach::Process`]) share the address
//!   space: the halves are found once, at construction, through a
//!   process-wide registry keyed by a number rank 0 draws for the set of
//!   links, so nothing that travels in a message is ever dereferenced. The
//!   halves are reference-counted between the two sides. A buffer on
//!   another GPU is copied to a local one (a peer copy) before it is read.
//! - **Processes of one machine** ([`Reach::Node`], e.g. MPI ranks on one
//!   node) exchange CUDA IPC handles at construction: the sender's buffer
//!   (allocated with `cuMemAlloc`, as IPC requires) is mapped into the
//!   receiver's context (with peer access on another GPU), and the events
//!   are created inter-process and opened on the other side. The driver
//!   checks the mapping's size against the length the sender announced.
//!   Where the driver refuses (no IPC between the processes, no peer access
//!   between the GPUs), construction gives `None` on every rank and the
//!   caller stages through the host. A peer process on the same GPU is
//!   waited for on the host rather than by a stream: processes take turns
//!   on a GPU, and a stream blocked on another process's event keeps its
//!   context's turn while the work it waits for cannot run.
//!
//! One round is then, for both:
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
//!    `main` ([`Links::incoming`]);
//! 5. [`Links::consumed`]: record `consumed` and send the acknowledgement.
//!
//! The host never waits for the device: every wait is a stream waiting for
//! an event. A notice is sent only after its `packed` event is recorded and
//! an acknowledgement only after `consumed` is, so an event is always
//! waited for at the record that belongs to the round. The communicator
//! carries only the notices, so a failed peer surfaces as the
//! communicator's error.
//!
//! **Release.** Each side drains its `main` stream before it lets go of
//! anything, so no kernel of its own still uses a buffer or an event. In
//! one process the reference counts do the rest. Across processes the
//! driver forbids freeing a buffer or an event another process still has
//! open, so dropping [`Links`] there is a handshake with every linked
//! rank: each side closes what it opened of its peers', tells them
//! (a last message on the link's tags), and frees its own halves only once
//! every peer has said the same. Like freeing an MPI communicator, it
//! therefore completes only when the linked ranks drop their links too (or
//! their communicator reports them failed).

use crate::cuda::Device;
use crate::GpuError;
use comm::{as_bytes_mut, CommError, CommExt, Communicator, Request};
use cudarc::driver::{
    sys, CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceRepr, DriverError,
    ValidAsZeroBits,
};
use std::any::Any;
use std::collections::HashMap;
use std::mem::ManuallyDrop;
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
    /// ranks, two sets of links on one tag, a peer that dropped its links).
    #[error("{0}")]
    Protocol(String),
}

pub(crate) fn driver(call: &'static str) -> impl FnOnce(DriverError) -> GpuError {
    move |e| GpuError::Driver {
        call: call.to_string(),
        detail: format!("{e:?}"),
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

/// A number that is the same for the processes of one running machine and
/// differs between machines: a fixed hash of the kernel's boot id and the
/// host name; 0 where either cannot be read (then no two processes are
/// taken to share a machine).
pub(crate) fn node_token() -> u64 {
    static TOKEN: OnceLock<u64> = OnceLock::new();
    *TOKEN.get_or_init(|| {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        match (
            read("/proc/sys/kernel/random/boot_id"),
            read("/proc/sys/kernel/hostname"),
        ) {
            (Some(boot), Some(host)) => {
                // FNV-1a: the same on every process, unlike the standard
                // hasher's random keys.
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for b in boot.trim().bytes().chain([0]).chain(host.trim().bytes()) {
                    h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
                }
                h.max(1)
            }
            _ => 0,
        }
    })
}

/// Where the ranks of a communicator run, as far as [`Links`] go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reach {
    /// Every rank is a thread of this process.
    Process,
    /// The ranks are processes of one machine (CUDA IPC).
    Node,
}

/// Where the ranks of `comm` run (collective): `None` when they span
/// machines, so no [`Links`] can join them.
pub fn reach(comm: &dyn Communicator) -> Result<Option<Reach>, LinkError> {
    let mut tokens = vec![0u64; 2 * comm.size()];
    comm.allgather(&[process_token(), node_token()], &mut tokens)?;
    let (procs, nodes): (Vec<u64>, Vec<u64>) = tokens.chunks_exact(2).map(|t| (t[0], t[1])).unzip();
    Ok(if procs.iter().all(|&t| t == procs[0]) {
        Some(Reach::Process)
    } else if nodes[0] != 0 && nodes.iter().all(|&t| t == nodes[0]) {
        Some(Reach::Node)
    } else {
        None
    })
}

/// This rank's place among the ranks of `comm` on its machine (collective):
/// `(its index among them, how many there are)`, in rank order. The
/// default device of a rank is its index modulo the device count, so on
/// several machines each fills its own GPUs from 0.
pub fn node_ranks(comm: &dyn Communicator) -> Result<(usize, usize), LinkError> {
    let mut tokens = vec![0u64; comm.size()];
    // Where the machine cannot be told (token 0), every process counts as
    // a machine of its own.
    let mine = match node_token() {
        0 => process_token(),
        t => t,
    };
    comm.allgather(&[mine], &mut tokens)?;
    let me = comm.rank();
    Ok((
        tokens[..me].iter().filter(|&&t| t == mine).count(),
        tokens.iter().filter(|&&t| t == mine).count(),
    ))
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

/// A driver event without timing: created here (exportable to other
/// processes or not) or opened from another process's handle.
struct Event {
    raw: sys::CUevent,
    ctx: Arc<CudaContext>,
}

// SAFETY: a CUevent is a driver handle, valid on any thread (the driver
// API is thread-safe); it is destroyed once, by the owner's drop.
unsafe impl Send for Event {}
// SAFETY: as above; `&Event` only records and waits through the driver.
unsafe impl Sync for Event {}

impl Event {
    fn new(ctx: &Arc<CudaContext>, exportable: bool) -> Result<Self, GpuError> {
        let mut flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        if exportable {
            flags |= sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32;
        }
        ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one event handle to `raw`.
        unsafe { sys::cuEventCreate(&mut raw, flags) }
            .result()
            .map_err(driver("cuEventCreate"))?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// The handle another process opens (the event must be exportable).
    fn export(&self) -> Result<sys::CUipcEventHandle, GpuError> {
        let mut h = sys::CUipcEventHandle { reserved: [0; 64] };
        self.ctx
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))?;
        // SAFETY: `raw` is a live event; writes the 64-byte handle.
        unsafe { sys::cuIpcGetEventHandle(&mut h, self.raw) }
            .result()
            .map_err(driver("cuIpcGetEventHandle"))?;
        Ok(h)
    }

    /// The event of another process behind `h`.
    fn open(ctx: &Arc<CudaContext>, h: sys::CUipcEventHandle) -> Result<Self, GpuError> {
        ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one event handle to `raw`; the driver validates
        // the handle.
        unsafe { sys::cuIpcOpenEventHandle(&mut raw, h) }
            .result()
            .map_err(driver("cuIpcOpenEventHandle"))?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// Records the event after the work queued on `stream` (a stream of the
    /// event's context).
    fn record(&self, stream: &CudaStream) -> Result<(), GpuError> {
        self.ctx
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))?;
        // SAFETY: both handles are live (the stream is borrowed, the event
        // owned by `self`).
        unsafe { sys::cuEventRecord(self.raw, stream.cu_stream()) }
            .result()
            .map_err(driver("cuEventRecord"))
    }

    /// Returns once the work before the event's last record has run.
    ///
    /// For a peer process on the same GPU, instead of a stream waiting:
    /// without MPS the processes' contexts take turns on the GPU, and a
    /// stream blocked on another process's event keeps its context's turn
    /// (until the time slice ends) while the work it waits for cannot
    /// run. Measured on an H200 with heat3d under `mpirun -np 2`,
    /// overlapped: 2.46 ms a step with the stream waiting.
    fn host_wait(&self) -> Result<(), GpuError> {
        self.ctx
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))?;
        // SAFETY: the event is live.
        unsafe { sys::cuEventSynchronize(self.raw) }
            .result()
            .map_err(driver("cuEventSynchronize"))
    }

    /// Makes the work queued on `stream` after this call wait for the
    /// event's last record (the event may belong to another context).
    fn wait_by(&self, stream: &CudaStream) -> Result<(), GpuError> {
        stream
            .context()
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))?;
        // SAFETY: both handles are live.
        unsafe { sys::cuStreamWaitEvent(stream.cu_stream(), self.raw, 0) }
            .result()
            .map_err(driver("cuStreamWaitEvent"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the event is live and destroyed only here; every use of
        // it by this side's streams has completed (the owners drain `main`
        // first).
        let _ = unsafe { sys::cuEventDestroy_v2(self.raw) };
    }
}

/// Where a link buffer's memory comes from, which says how it is let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alloc {
    /// `cudarc`'s allocation on the stream (one process).
    Stream,
    /// `cuMemAlloc`, exported to another process: `cuMemFree`.
    Exported,
    /// Another process's allocation mapped here: `cuIpcCloseMemHandle`.
    Mapped,
}

/// A link's device buffer.
struct Buffer<T> {
    slice: ManuallyDrop<CudaSlice<T>>,
    alloc: Alloc,
    ctx: Arc<CudaContext>,
}

impl<T> Drop for Buffer<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.slice` is not used again.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        if self.alloc == Alloc::Stream {
            return drop(slice);
        }
        let ptr = slice.leak();
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from `cuMemAlloc` or `cuIpcOpenMemHandle` (as
        // `alloc` says) and is released once, here, after this side's
        // streams finished with it and (exported) after every process
        // that mapped it closed its mapping (the release handshake).
        let _ = unsafe {
            match self.alloc {
                Alloc::Exported => sys::cuMemFree_v2(ptr),
                _ => sys::cuIpcCloseMemHandle(ptr),
            }
        };
    }
}

impl<T: DeviceRepr + ValidAsZeroBits> Buffer<T> {
    /// A zeroed buffer of `n` values for a link within the process.
    fn local(device: &Device, n: usize) -> Result<Self, GpuError> {
        Ok(Buffer {
            slice: ManuallyDrop::new(device.alloc_zeros::<T>(n.max(1), "link send buffer")?),
            alloc: Alloc::Stream,
            ctx: device.context().clone(),
        })
    }

    /// A zeroed buffer of `n` values other processes can map, and its
    /// handle.
    fn exported(device: &Device, n: usize) -> Result<(Self, sys::CUipcMemHandle), GpuError> {
        let what = "link send buffer";
        let bytes = n
            .max(1)
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| GpuError::Invalid(format!("{what}: {n} values overflow usize bytes")))?;
        let (free, total) = device.memory()?;
        let oom = || GpuError::OutOfMemory {
            what: what.to_string(),
            device: device.info().ordinal,
            bytes,
            free,
            total,
        };
        if bytes > free {
            return Err(oom());
        }
        let ctx = device.context().clone();
        ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: writes one device pointer to `ptr`.
        match unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) } {
            sys::CUresult::CUDA_SUCCESS => {}
            sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => return Err(oom()),
            e => return Err(driver("cuMemAlloc")(DriverError(e))),
        }
        // SAFETY: `ptr` is a fresh allocation of `bytes` bytes; the values
        // are made valid (zero) before anything reads them, and it is
        // freed once, by `Buffer`'s drop (the slice is leaked there).
        let buf = Buffer {
            slice: ManuallyDrop::new(unsafe {
                device.main().upgrade_device_ptr::<T>(ptr, n.max(1))
            }),
            alloc: Alloc::Exported,
            ctx,
        };
        // SAFETY: writes `bytes` bytes inside the allocation.
        unsafe { sys::cuMemsetD8_v2(ptr, 0, bytes) }
            .result()
            .map_err(driver("cuMemsetD8"))?;
        let mut h = sys::CUipcMemHandle { reserved: [0; 64] };
        // SAFETY: `ptr` is the base of a live `cuMemAlloc` allocation;
        // writes the 64-byte handle.
        unsafe { sys::cuIpcGetMemHandle(&mut h, ptr) }
            .result()
            .map_err(driver("cuIpcGetMemHandle"))?;
        Ok((buf, h))
    }

    /// Another process's buffer of `n` values behind `h`, mapped here.
    fn mapped(device: &Device, h: sys::CUipcMemHandle, n: usize) -> Result<Self, GpuError> {
        let ctx = device.context().clone();
        ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
        let mut ptr: sys::CUdeviceptr = 0;
        let flags = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        // SAFETY: writes one device pointer to `ptr`; the driver validates
        // the handle.
        unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, h, flags) }
            .result()
            .map_err(driver("cuIpcOpenMemHandle"))?;
        let close = |e: GpuError| {
            // SAFETY: `ptr` was just opened and is closed once, here.
            let _ = unsafe { sys::cuIpcCloseMemHandle(ptr) };
            e
        };
        // The mapping must hold the values the sender announced.
        let (mut base, mut size): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: writes the allocation's base and size.
        unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) }
            .result()
            .map_err(driver("cuMemGetAddressRange"))
            .map_err(close)?;
        let need = n.max(1) * std::mem::size_of::<T>();
        if (base + size as u64) < ptr + need as u64 {
            return Err(close(GpuError::Invalid(format!(
                "a mapped link buffer holds {} bytes past its start, {need} were announced",
                base + size as u64 - ptr
            ))));
        }
        // SAFETY: the mapping holds `n` values (checked above), written by
        // the peer as `T`s, and is closed once, by `Buffer`'s drop, before
        // the peer frees the allocation (the release handshake).
        let slice = unsafe { device.main().upgrade_device_ptr::<T>(ptr, n.max(1)) };
        Ok(Buffer {
            slice: ManuallyDrop::new(slice),
            alloc: Alloc::Mapped,
            ctx,
        })
    }
}

/// The sender's half of a link.
struct SendSide<T> {
    /// Filled by the sender (under the lock while it queues the work), read
    /// by the receiver (under the lock while it queues its reads).
    buf: Mutex<Buffer<T>>,
    len: usize,
    packed: Event,
    ordinal: usize,
}

/// The receiver's half of a link.
struct RecvSide {
    consumed: Event,
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
    /// The receiver's half (in another process: its event, opened here;
    /// `None` only while the links are dropped).
    peer: Option<Arc<RecvSide>>,
    /// The round whose acknowledgement is still to be received.
    owed: Option<u64>,
    /// Wait for the peer's event on the host (see [`Event::host_wait`]).
    host_waits: bool,
}

struct In<T> {
    spec: LinkSpec,
    /// The sender's half (in another process: its buffer and event,
    /// opened here; `None` only while the links are dropped).
    peer: Option<Arc<SendSide<T>>>,
    own: Arc<RecvSide>,
    /// A local copy of the peer's buffer when it lives on another device
    /// of this process.
    staging: Option<CudaSlice<T>>,
    /// Wait for the peer's event on the host (see [`Event::host_wait`]).
    host_waits: bool,
}

/// The links' own communicator and the ranks they join (processes of one
/// machine).
type Release = (Mutex<Box<dyn Communicator>>, Vec<usize>);

/// Device-to-device links of one rank; see the module documentation.
pub struct Links<T> {
    device: Arc<Device>,
    reach: Reach,
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
    /// Processes of one machine: a communicator of their own (split from
    /// the caller's at construction) for the handles and the release
    /// handshake, and the ranks to release with.
    release: Option<Release>,
}

impl<T> std::fmt::Debug for Links<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links")
            .field("reach", &self.reach)
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
        let Some((comm, peers)) = self.release.take() else {
            return;
        };
        // Across processes: close what this rank opened of its peers',
        // tell them, and free its own halves (the fields, dropped after
        // this) only once each peer has said the same.
        for l in &mut self.outs {
            l.peer = None;
        }
        for l in &mut self.ins {
            l.peer = None;
            l.staging = None;
        }
        let comm = comm.into_inner().unwrap_or_else(|e| e.into_inner());
        let done = [0u64; 1];
        let mut got = vec![[0u64; 1]; peers.len()];
        let r = comm::scope(comm.as_ref(), |s| {
            for &q in &peers {
                s.isend(q, RELEASE_TAG, &done)?;
            }
            for (&q, g) in peers.iter().zip(got.iter_mut()) {
                s.irecv(q, RELEASE_TAG, g)?;
            }
            s.wait_all()
        });
        if r.is_err() {
            // A peer failed: it has no mapping left to protect (its
            // process is gone, or it cannot reach this rank either), but
            // nothing is known for sure, so this rank's exported buffers
            // and events are leaked rather than freed under a mapping.
            for l in &self.outs {
                std::mem::forget(l.own.clone());
            }
            for l in &self.ins {
                std::mem::forget(l.own.clone());
            }
        }
    }
}

/// The tag of the release messages, on the links' own communicator.
const RELEASE_TAG: u32 = 1;
/// The tag of the handles of link `key` sent at construction, on the
/// links' own communicator: the sender's (`back` false) or the receiver's.
fn handle_tag(key: u32, back: bool) -> u32 {
    key.saturating_mul(2).saturating_add(2 + u32::from(back))
}

/// The buffer of an outgoing link, locked while the caller queues the work
/// that fills it. It lends views only, never the buffer itself: another
/// process may have the allocation mapped, so it must stay the one the
/// links created.
pub struct Outgoing<'a, T>(MutexGuard<'a, Buffer<T>>);

impl<T> Outgoing<'_, T> {
    /// The number of values the buffer holds (at least the link's length).
    pub fn len(&self) -> usize {
        self.0.slice.len()
    }

    /// Whether the buffer holds no value (never: an empty link still has
    /// one value).
    pub fn is_empty(&self) -> bool {
        self.0.slice.is_empty()
    }

    /// The values of `range`, to fill with work on `main`.
    pub fn slice_mut(&mut self, range: impl std::ops::RangeBounds<usize>) -> CudaViewMut<'_, T> {
        self.0.slice.slice_mut(range)
    }
}

impl<T> std::fmt::Debug for Outgoing<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing")
            .field("len", &self.0.slice.len())
            .finish()
    }
}

/// A buffer an incoming link is read from: the sender's own buffer (on the
/// same device, or mapped from another process), or a local copy of it.
pub struct Incoming<'a, T> {
    source: Source<'a, T>,
    len: usize,
}

enum Source<'a, T> {
    /// The sender's buffer, locked while the caller queues its reads.
    Peer(MutexGuard<'a, Buffer<T>>),
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
            Source::Peer(g) => g.slice.slice(..self.len),
            Source::Copy(s) => s.slice(..self.len),
        }
    }
}

/// What one rank sends each receiver at construction across processes:
/// the length, the device ordinal, the buffer's and the `packed` event's
/// IPC handles, and the GPU's UUID.
const SEND_HANDLES: usize = 2 + 8 + 8 + 2;
/// What one rank sends each sender: the `consumed` event's handle and the
/// GPU's UUID.
const RECV_HANDLES: usize = 8 + 2;

fn handle_words(h: &[std::ffi::c_char; 64]) -> [u64; 8] {
    let mut w = [0u64; 8];
    for (i, c) in h.iter().enumerate() {
        w[i / 8] |= u64::from(*c as u8) << (8 * (i % 8));
    }
    w
}

/// The GPU's UUID in two words (which GPU, whatever a process numbers it).
pub(crate) fn uuid_words(device: &Device) -> Result<[u64; 2], GpuError> {
    let u = device.context().uuid().map_err(driver("cuDeviceGetUuid"))?;
    let mut w = [0u64; 2];
    for (i, c) in u.bytes.iter().enumerate() {
        w[i / 8] |= u64::from(*c as u8) << (8 * (i % 8));
    }
    Ok(w)
}

fn words_handle(w: &[u64]) -> [std::ffi::c_char; 64] {
    let mut h = [0 as std::ffi::c_char; 64];
    for (i, c) in h.iter_mut().enumerate() {
        *c = (w[i / 8] >> (8 * (i % 8))) as u8 as std::ffi::c_char;
    }
    h
}

/// How construction ended on one rank, ordered by severity (the
/// collective outcome is the worst).
const BUILT: i64 = 0;
/// The driver refused IPC: every rank falls back (`None`).
const REFUSED: i64 = 1;
/// A protocol or setup error: every rank fails.
const FAILED: i64 = 2;

impl<T: DeviceRepr + ValidAsZeroBits + Send + Sync + 'static> Links<T> {
    /// Links from this rank to `outs` and from `ins`, on `device`, or
    /// `None` when the ranks of `comm` span machines, or are processes of
    /// one machine between which the driver refuses IPC (then nothing is
    /// built, on every rank). Collective over `comm`: every rank calls it,
    /// with link descriptions that match its peers' (an outgoing link
    /// `(q, key)` of rank `r` is the incoming link `(r, key)` of rank `q`,
    /// with the same length and tags). Links to the rank itself are not
    /// allowed.
    pub fn new(
        comm: &dyn Communicator,
        device: &Arc<Device>,
        outs: &[LinkSpec],
        ins: &[LinkSpec],
    ) -> Result<Option<Self>, LinkError> {
        let Some(reach) = reach(comm)? else {
            return Ok(None);
        };
        let me = comm.rank();
        // A bad link fails this rank's setup; the others learn it from the
        // final reduction instead of waiting for it.
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
        match reach {
            Reach::Process => Self::in_process(comm, device, outs, ins, bad).map(Some),
            Reach::Node => Self::across_processes(comm, device, outs, ins, bad),
        }
    }

    /// Every rank learns the worst outcome; a rank that did well but sees
    /// another fail gets `theirs`.
    fn agree(comm: &dyn Communicator, mine: i64, theirs: &str) -> Result<i64, LinkError> {
        let mut worst = [mine];
        comm.allreduce_i64(&mut worst, comm::ReduceOp::Max)?;
        if worst[0] == FAILED && mine != FAILED {
            return Err(LinkError::Protocol(theirs.into()));
        }
        Ok(worst[0])
    }

    fn in_process(
        comm: &dyn Communicator,
        device: &Arc<Device>,
        outs: &[LinkSpec],
        ins: &[LinkSpec],
        bad: Option<LinkError>,
    ) -> Result<Self, LinkError> {
        let me = comm.rank();
        // A number for this set of links, the same on every rank.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut number = [NEXT.fetch_add(1, Ordering::Relaxed)];
        comm.broadcast(&mut number, 0)?;
        let number = number[0];
        let ordinal = device.info().ordinal;
        let ctx = device.context();
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
                    buf: Mutex::new(Buffer::local(device, l.len)?),
                    len: l.len,
                    packed: Event::new(ctx, false)?,
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
                let r = Arc::new(RecvSide {
                    consumed: Event::new(ctx, false)?,
                });
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
                    peer: Some(peer),
                    owed: None,
                    host_waits: false,
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
                    peer: Some(peer),
                    own,
                    staging,
                    host_waits: false,
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
        let mine = if fetched.is_err() { FAILED } else { BUILT };
        Self::agree(comm, mine, "another rank failed to set up its device links")?;
        let (outs, ins) = fetched?;
        Ok(Self::assemble(device, Reach::Process, outs, ins, None))
    }

    fn assemble(
        device: &Arc<Device>,
        reach: Reach,
        outs: Vec<Out<T>>,
        ins: Vec<In<T>>,
        release: Option<Release>,
    ) -> Self {
        let n = ins.len();
        Links {
            device: device.clone(),
            reach,
            outs,
            ins,
            notices: vec![0; n],
            recvs: Vec::with_capacity(n),
            recv_of: Vec::with_capacity(n),
            next: 0,
            release,
        }
    }

    fn across_processes(
        comm: &dyn Communicator,
        device: &Arc<Device>,
        outs: &[LinkSpec],
        ins: &[LinkSpec],
        bad: Option<LinkError>,
    ) -> Result<Option<Self>, LinkError> {
        let me = comm.rank();
        let own = comm
            .split(Some(0), me)?
            .ok_or_else(|| LinkError::Protocol("the links' communicator split gave none".into()))?;
        let ordinal = device.info().ordinal;
        let ctx = device.context();
        // This rank's halves and their handles.
        let uuid = uuid_words(device);
        type Made<T> = (
            Vec<(Arc<SendSide<T>>, [u64; SEND_HANDLES])>,
            Vec<(Arc<RecvSide>, [u64; RECV_HANDLES])>,
        );
        let made = (|| -> Result<Made<T>, LinkError> {
            if let Some(e) = bad {
                return Err(e);
            }
            let uuid = uuid.clone()?;
            let mut sends = Vec::with_capacity(outs.len());
            for l in outs {
                let (buf, mh) = Buffer::exported(device, l.len)?;
                let packed = Event::new(ctx, true)?;
                let mut w = [0u64; SEND_HANDLES];
                w[0] = l.len as u64;
                w[1] = ordinal as u64;
                w[2..10].copy_from_slice(&handle_words(&mh.reserved));
                w[10..18].copy_from_slice(&handle_words(&packed.export()?.reserved));
                w[18..20].copy_from_slice(&uuid);
                sends.push((
                    Arc::new(SendSide {
                        buf: Mutex::new(buf),
                        len: l.len,
                        packed,
                        ordinal,
                    }),
                    w,
                ));
            }
            let mut recvs = Vec::with_capacity(ins.len());
            for _ in ins {
                let consumed = Event::new(ctx, true)?;
                let mut w = [0u64; RECV_HANDLES];
                w[..8].copy_from_slice(&handle_words(&consumed.export()?.reserved));
                w[8..10].copy_from_slice(&uuid);
                recvs.push((Arc::new(RecvSide { consumed }), w));
            }
            Ok((sends, recvs))
        })();
        let (sends, recvs) = match made {
            Ok(m) => {
                Self::agree(
                    comm,
                    BUILT,
                    "another rank failed to set up its device links",
                )?;
                m
            }
            Err(e) => {
                Self::agree(comm, FAILED, "")?;
                return Err(e);
            }
        };
        // Handles go to the other side of each link.
        let mut got_send = vec![[0u64; SEND_HANDLES]; ins.len()];
        let mut got_recv = vec![[0u64; RECV_HANDLES]; outs.len()];
        comm::scope(own.as_ref(), |s| {
            for (l, g) in ins.iter().zip(got_send.iter_mut()) {
                s.irecv(l.peer, handle_tag(l.key, false), g)?;
            }
            for (l, g) in outs.iter().zip(got_recv.iter_mut()) {
                s.irecv(l.peer, handle_tag(l.key, true), g)?;
            }
            for (l, (_, w)) in outs.iter().zip(&sends) {
                s.isend(l.peer, handle_tag(l.key, false), w)?;
            }
            for (l, (_, w)) in ins.iter().zip(&recvs) {
                s.isend(l.peer, handle_tag(l.key, true), w)?;
            }
            s.wait_all()
        })?;
        // Open the peers' halves.
        let mut o = Vec::with_capacity(outs.len());
        let mut i = Vec::with_capacity(ins.len());
        let opened = (|| -> Result<(), LinkError> {
            let uuid = uuid.clone()?;
            for ((l, (own, _)), w) in outs.iter().zip(&sends).zip(&got_recv) {
                let consumed = Event::open(
                    ctx,
                    sys::CUipcEventHandle {
                        reserved: words_handle(&w[..8]),
                    },
                )?;
                o.push(Out {
                    spec: *l,
                    own: own.clone(),
                    peer: Some(Arc::new(RecvSide { consumed })),
                    owed: None,
                    host_waits: w[8..10] == uuid,
                });
            }
            for ((l, (own, _)), w) in ins.iter().zip(&recvs).zip(&got_send) {
                if w[0] != l.len as u64 {
                    return Err(LinkError::Protocol(format!(
                        "rank {} sends {} values to rank {me}, which expects {}",
                        l.peer, w[0], l.len
                    )));
                }
                let buf = Buffer::mapped(
                    device,
                    sys::CUipcMemHandle {
                        reserved: words_handle(&w[2..10]),
                    },
                    l.len,
                )?;
                let packed = Event::open(
                    ctx,
                    sys::CUipcEventHandle {
                        reserved: words_handle(&w[10..18]),
                    },
                )?;
                i.push(In {
                    spec: *l,
                    peer: Some(Arc::new(SendSide {
                        buf: Mutex::new(buf),
                        len: l.len,
                        packed,
                        ordinal: w[1] as usize,
                    })),
                    own: own.clone(),
                    staging: None,
                    host_waits: w[18..20] == uuid,
                });
            }
            Ok(())
        })();
        let mine = match &opened {
            Ok(()) => BUILT,
            Err(LinkError::Device(_)) => REFUSED,
            Err(_) => FAILED,
        };
        let mut peers: Vec<usize> = outs.iter().chain(ins).map(|l| l.peer).collect();
        peers.sort_unstable();
        peers.dedup();
        let links = Self::assemble(device, Reach::Node, o, i, Some((Mutex::new(own), peers)));
        // From here on, dropping `links` releases what was opened before
        // its owners free anything.
        match Self::agree(comm, mine, "another rank failed to set up its device links") {
            Ok(BUILT) => Ok(Some(links)),
            Ok(_) => {
                drop(links);
                match opened {
                    Err(e @ LinkError::Protocol(_)) => Err(e),
                    _ => Ok(None),
                }
            }
            Err(e) => {
                drop(links);
                Err(e)
            }
        }
    }

    /// Where the linked ranks run.
    pub fn reach(&self) -> Reach {
        self.reach
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
                if let Some(p) = &l.peer {
                    if l.host_waits {
                        p.consumed.host_wait()?;
                    } else {
                        p.consumed.wait_by(&main)?;
                    }
                }
            }
        }
        Ok(left)
    }

    /// The buffer of outgoing link `k`, to fill with work on `main` between
    /// [`begin`](Self::begin) and [`post`](Self::post) (hold it only while
    /// queueing the work).
    pub fn outgoing(&self, k: usize) -> Outgoing<'_, T> {
        Outgoing(
            self.outs[k]
                .own
                .buf
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// Step 3: marks the outgoing buffers filled (by the work queued on
    /// `main` so far), posts the receives of the incoming notices and
    /// sends the notices. Returns the round's number. Notices of a round
    /// whose arrivals were not all taken are received and acknowledged
    /// unread first ([`drain`](Self::drain)); the error then says so, and
    /// nothing is posted (a second receive into a slot still in flight
    /// would let MPI write memory this type also hands out).
    pub fn post(&mut self, comm: &dyn Communicator) -> Result<u64, LinkError> {
        if self.drain(comm)? {
            return Err(LinkError::Protocol(
                "the previous round was not finished (its notices have been received and \
                 acknowledged unread)"
                    .into(),
            ));
        }
        let main = self.device.main().clone();
        for l in &self.outs {
            l.own.packed.record(&main)?;
        }
        let round = self.next;
        self.next += 1;
        for (k, l) in self.ins.iter().enumerate() {
            let slot = as_bytes_mut(std::slice::from_mut(&mut self.notices[k]));
            // SAFETY: the slot is owned by `self`, which owns the request
            // too: the slot is neither freed (the drop completes the
            // requests first) nor touched (read only after the request
            // completed; no request was in flight on entry, `drain` above
            // completed any) while the request is in flight.
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
            let Some(peer) = &l.peer else {
                return Ok(());
            };
            if l.host_waits {
                peer.packed.host_wait()?;
            } else {
                peer.packed.wait_by(main)?;
            }
            if let Some(st) = &mut l.staging {
                let buf = peer.buf.lock().unwrap_or_else(|e| e.into_inner());
                main.memcpy_dtod(&buf.slice.slice(..peer.len), &mut st.slice_mut(..peer.len))
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
        let source = match (&l.staging, &l.peer) {
            (Some(s), _) => Source::Copy(s),
            (None, Some(p)) => Source::Peer(p.buf.lock().unwrap_or_else(|e| e.into_inner())),
            (None, None) => unreachable!("a link's peer half is let go only by the drop"),
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
        let rec = l.own.consumed.record(self.device.main());
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

    /// In-process ranks are all on this machine, in rank order.
    #[test]
    fn in_process_ranks_share_a_node() {
        let all = comm::local::run(3, |c| node_ranks(c)).unwrap();
        assert_eq!(all, vec![(0, 3), (1, 3), (2, 3)]);
    }

    /// In-process ranks share one process and see the same tokens.
    #[test]
    fn in_process_ranks_reach_each_other_in_the_process() {
        for ranks in [1, 2, 5] {
            let all = comm::local::run(ranks, |c| reach(c)).unwrap();
            assert!(
                all.iter().all(|&r| r == Some(Reach::Process)),
                "{ranks} ranks: {all:?}"
            );
        }
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
