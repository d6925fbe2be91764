//! The MPI backend: the [`Communicator`] trait over an MPI library, through
//! rsmpi's raw C bindings (`mpi::ffi`).
//!
//! ```no_run
//! use comm::{CommExt, Communicator, ReduceOp};
//!
//! // Under `mpirun -np 4 prog`: every process is one rank of the world.
//! let total = comm::mpi::run(|c: &dyn Communicator| {
//!     c.allreduce_scalar(c.rank() as f64, ReduceOp::Sum)
//! })
//! .unwrap();
//! assert_eq!(total, 6.0);
//! ```
//!
//! **Start-up.** [`init`] initialises MPI (asking for
//! `MPI_THREAD_MULTIPLE`) and returns an [`MpiUniverse`]; MPI is finalised
//! when the universe drops, after which every call on a leftover
//! [`MpiComm`] returns an error (and dropping it frees nothing). [`run`]
//! does init, run, finalise in one call; [`is_launched_by_mpirun`] tells a
//! program whether to pick this backend or [`crate::local`].
//!
//! **Failure.** MPI has no way to tell the other ranks that one rank gave
//! up, so a failed rank would leave its peers blocked forever. [`run`]
//! therefore turns an `Err` or a panic on *any* rank into
//! `rank r failed: msg` on stderr followed by `MPI_Abort(MPI_COMM_WORLD, 1)`:
//! under MPI a failed rank aborts the whole job (the in-process backend
//! reports [`CommError::PeerFailed`] to the survivors instead). A deadlock
//! (mismatched tags or collectives) is not detected: MPI waits forever.
//!
//! **Errors.** Communicators use `MPI_ERRORS_RETURN`, so MPI errors come
//! back as [`CommError::Mpi`] (with the library's `MPI_Error_string`)
//! instead of aborting.
//!
//! **Receives.** A receive from another rank is posted at once with
//! `MPI_Irecv` straight into the caller's buffer (no copy), so MPI can
//! match it while this rank is busy elsewhere (inside a blocking send, a
//! collective, ...) exactly as in C. When it completes, the length MPI
//! reports (`MPI_Get_elements_x`) must equal the buffer length; a shorter
//! message, or a longer one (`MPI_ERR_TRUNCATE`), gives
//! [`CommError::MessageTruncated`] with both lengths, as in the in-process
//! backend (a shorter message has been written to the start of the buffer).
//! **Caveat, Open MPI 4.1:** its single-copy (RDMA "get"/"put") path, used
//! for messages above the eager limit (4 KiB in shared memory), writes a
//! *longer* message in full, past the end of the receive buffer, before it
//! reports the truncation. Such a mismatch is a bug in the calling program
//! (the in-process backend reports it cleanly, so test there first), but
//! under that library it corrupts memory. The only way around it is to
//! match a message before giving MPI the buffer (a matched probe), which
//! would leave the receive invisible to MPI's progress and deadlock common
//! patterns such as `irecv; send; wait` with large messages, so it is not
//! done.
//!
//! **Messages to itself.** Sends from a rank to itself never go through
//! MPI: they are copied into a mailbox of the communicator (so the send
//! completes at once) and taken out by the matching receive, in order,
//! with an exact length check and without touching the buffer on a
//! mismatch. This sidesteps two more Open MPI 4.1 defects of its `self`
//! transport: a message longer than the buffer is silently truncated below
//! about 1 KB and written past the buffer above it.
//!
//! **Collective argument checks.** MPI trusts every rank to pass matching
//! sizes to a collective; when they differ, MPI may hang, corrupt data, or
//! (Open MPI 4.1) write past a receive buffer. So by default each
//! collective first checks the sizes: alltoallv / alltoallw / allgatherv
//! exchange the per-peer sizes (one `MPI_Alltoall` / `MPI_Allgather` of one
//! `u64` per rank) and then agree on the outcome (one `MPI_Allreduce` of
//! one integer); broadcast and allreduce agree on the length (and root)
//! with one `MPI_Allreduce` of two or four integers. On a mismatch *every*
//! rank returns an error, the one that found it a
//! [`CommError::LengthMismatch`] naming the values, the others a
//! [`CommError::Invalid`] naming that rank, and no data moves. This adds
//! one or two small collectives of latency per call, which matters for
//! small latency-bound operations; a program that knows its sizes agree
//! can turn the checks off with the `unsafe` [`MpiComm::disable_checks`]
//! (inherited by `split` and [`MpiComm::cart_create`]), whose contract is
//! that sizes always match; mismatched sizes are then undefined
//! behaviour, as in C. No environment variable turns them off. Arguments that are wrong on one rank alone (a
//! layout that overruns its buffer, a count array of the wrong length) are
//! part of the agreed outcome in checked mode; without checks that rank
//! returns early and the others may wait in the collective for ever.
//!
//! **Large messages.** MPI-3 counts are `int`. Point-to-point messages of
//! any length are described by a derived datatype when they exceed
//! `i32::MAX` bytes. Collective byte counts and displacements above
//! `i32::MAX` are sent as units of up to 64 KiB (the largest power of two
//! dividing every count and displacement involved); reductions and
//! broadcasts are split into chunks. Only sizes that fit none of these
//! give [`CommError::Invalid`].
//!
//! **Requests.** Sends hand the caller's buffer to `MPI_Isend` without
//! copying, and receives give MPI the caller's buffer directly. That is why
//! [`Communicator::isend_raw`] / [`irecv_raw`](Communicator::irecv_raw) are
//! `unsafe`: their caller keeps the buffer alive until the request
//! completes. Safe code goes through [`crate::scope()`], which owns the
//! requests and completes them before the borrowed buffers can go, so a
//! leaked request cannot leave MPI writing into freed memory. A request
//! dropped before completion waits for it. [`Communicator::wait_any`] polls the pending
//! requests in turn (the trait's [`Request`] hides the raw handles, so
//! `MPI_Waitany` cannot be used, and receives from the rank itself have no
//! MPI request); each `MPI_Test` also drives MPI's progress engine.
//!
//! **Threads.** A communicator may move to another thread (the trait needs
//! `Send`). With `MPI_THREAD_MULTIPLE` (Open MPI and MPICH provide it) calls
//! go straight to MPI; with `MPI_THREAD_SERIALIZED` every MPI call of this
//! module takes one process-wide lock (so a blocking wait on one thread
//! holds up MPI calls on the others); with less, calls from a thread other
//! than the one that called [`init`] return an error.
//!
//! **Tags.** User tags are checked against both [`MAX_USER_TAG`] and the
//! library's `MPI_TAG_UB` attribute (read at [`init`]; the standard only
//! guarantees 32767, Open MPI and MPICH allow far more); a tag above either
//! gives [`CommError::InvalidTag`] naming the smaller bound. Collectives use
//! MPI's own collectives, which never match user messages.
//!
//! **Reductions.** `allreduce_f64` with [`ReduceOp::Sum`] relies on the MPI
//! library returning the same bits on every rank, which the standard
//! recommends and Open MPI and MPICH do; the bits may depend on the rank
//! count and the algorithm MPI picks. Use [`crate::exact`] for sums that
//! must not.

use crate::communicator::{
    validate_peer, validate_tag, validate_v, Communicator, ReduceOp, Request, RequestImpl, Strided,
    MAX_USER_TAG,
};
use crate::error::{CommError, Result};
use crate::grid::ProcessGrid;
use mpi::environment::Threading;
use mpi::ffi;
use std::cell::Cell;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{
    Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
use std::thread::ThreadId;

// ---------------------------------------------------------------------------
// Process-wide state
// ---------------------------------------------------------------------------

/// MPI has not been initialised by this module.
const STATE_NONE: u8 = 0;
/// MPI is initialised and usable.
const STATE_LIVE: u8 = 1;
/// MPI has been finalised; it cannot come back.
const STATE_FINALIZED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(STATE_NONE);
/// Every MPI call holds this lock: shared when the library provides
/// `MPI_THREAD_MULTIPLE`, exclusive otherwise; finalisation takes it
/// exclusively, so it never races with a call in flight.
static MPI_LOCK: RwLock<()> = RwLock::new(());
/// True when MPI calls must be serialised (library below `MULTIPLE`).
static SERIALIZE: AtomicBool = AtomicBool::new(true);
/// True when only the initialising thread may call MPI (below `SERIALIZED`).
static FUNNELED: AtomicBool = AtomicBool::new(true);
/// The thread that called [`init`].
static INIT_THREAD: OnceLock<ThreadId> = OnceLock::new();
/// Largest usable tag: `min(MPI_TAG_UB, MAX_USER_TAG)`.
static TAG_LIMIT: AtomicU32 = AtomicU32::new(32767);
/// The self-message mailbox of `MPI_COMM_WORLD`.
static WORLD_MAILBOX: OnceLock<Arc<Mailbox>> = OnceLock::new();

thread_local! {
    /// True while this thread holds a [`Guard`], so nested calls (a
    /// communicator dropped inside an operation) do not lock again.
    static HELD: Cell<bool> = const { Cell::new(false) };
}

/// Proof that the caller may make MPI calls now (see [`MPI_LOCK`]).
struct Guard {
    _shared: Option<RwLockReadGuard<'static, ()>>,
    _exclusive: Option<RwLockWriteGuard<'static, ()>>,
    outer: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.outer {
            HELD.with(|h| h.set(false));
        }
    }
}

const FINALIZED_MSG: &str =
    "MPI has been finalised (the MpiUniverse was dropped); this communicator can no longer be used";

/// Checks that MPI is usable from this thread and takes the call lock
/// (re-entrant: a nested call on the same thread reuses the outer lock).
fn enter() -> Result<Guard> {
    if HELD.with(Cell::get) {
        return Ok(Guard {
            _shared: None,
            _exclusive: None,
            outer: false,
        });
    }
    match STATE.load(Ordering::Acquire) {
        STATE_LIVE => {}
        STATE_FINALIZED => return Err(CommError::invalid(FINALIZED_MSG)),
        _ => {
            return Err(CommError::invalid(
                "MPI is not initialised: call comm::mpi::init() first",
            ))
        }
    }
    if FUNNELED.load(Ordering::Relaxed) && INIT_THREAD.get() != Some(&std::thread::current().id()) {
        return Err(CommError::invalid(
            "this MPI library provides less than MPI_THREAD_SERIALIZED, so MPI may only be called \
             from the thread that called comm::mpi::init()",
        ));
    }
    let (shared, exclusive) = if SERIALIZE.load(Ordering::Relaxed) {
        (
            None,
            Some(MPI_LOCK.write().unwrap_or_else(|p| p.into_inner())),
        )
    } else {
        (
            Some(MPI_LOCK.read().unwrap_or_else(|p| p.into_inner())),
            None,
        )
    };
    // Finalisation may have slipped in between the check and the lock.
    if STATE.load(Ordering::Acquire) != STATE_LIVE {
        return Err(CommError::invalid(FINALIZED_MSG));
    }
    HELD.with(|h| h.set(true));
    Ok(Guard {
        _shared: shared,
        _exclusive: exclusive,
        outer: true,
    })
}

// Predefined handles. The rsmpi C shim exports them as `const` globals,
// which Rust sees as extern statics; reading one needs `unsafe`.

fn comm_world() -> ffi::MPI_Comm {
    // SAFETY: reads an immutable constant defined by the rsmpi C shim.
    unsafe { ffi::RSMPI_COMM_WORLD }
}

fn comm_null() -> ffi::MPI_Comm {
    // SAFETY: as in `comm_world`.
    unsafe { ffi::RSMPI_COMM_NULL }
}

fn byte_type() -> ffi::MPI_Datatype {
    // SAFETY: as in `comm_world`.
    unsafe { ffi::RSMPI_UINT8_T }
}

fn i64_type() -> ffi::MPI_Datatype {
    // SAFETY: as in `comm_world`.
    unsafe { ffi::RSMPI_INT64_T }
}

fn u64_type() -> ffi::MPI_Datatype {
    // SAFETY: as in `comm_world`.
    unsafe { ffi::RSMPI_UINT64_T }
}

fn request_null() -> ffi::MPI_Request {
    // SAFETY: as in `comm_world`.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

fn new_status() -> ffi::MPI_Status {
    // SAFETY: `MPI_Status` is a C struct of integers; all zeros is valid.
    unsafe { std::mem::zeroed() }
}

const SUCCESS: c_int = ffi::MPI_SUCCESS as c_int;

/// Builds [`CommError::Mpi`] for `code`, with the library's message.
fn mpi_error(call: &'static str, code: c_int) -> CommError {
    let mut buf = vec![0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters as required;
    // MPI_Error_string may be called at any time.
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr(), &mut len) };
    let message = if rc == SUCCESS {
        let bytes: Vec<u8> = buf[..len.clamp(0, buf.len() as c_int) as usize]
            .iter()
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    } else {
        format!("unknown MPI error code {code}")
    };
    CommError::Mpi {
        call,
        code,
        message,
    }
}

/// Maps an MPI return code to a result.
fn check(call: &'static str, code: c_int) -> Result<()> {
    if code == SUCCESS {
        Ok(())
    } else {
        Err(mpi_error(call, code))
    }
}

fn to_int(x: usize, what: &str) -> Result<c_int> {
    c_int::try_from(x).map_err(|_| {
        CommError::invalid(format!(
            "{what}: {x} does not fit the C int that MPI takes (at most {})",
            c_int::MAX
        ))
    })
}

fn to_aint(x: usize, what: &str) -> Result<ffi::MPI_Aint> {
    ffi::MPI_Aint::try_from(x)
        .map_err(|_| CommError::invalid(format!("{what}: {x} bytes does not fit MPI_Aint")))
}

/// Bytes in a chunk of a chunked broadcast.
const BCAST_CHUNK: usize = 1 << 30;
/// Elements in a chunk of a chunked allreduce.
const REDUCE_CHUNK: usize = 1 << 27;
/// Largest unit [`byte_unit`] uses for large messages (64 KiB).
const MAX_UNIT_LOG2: u32 = 16;

/// The number of bytes per MPI element so that every value of `sizes`
/// (byte counts and displacements) is a whole number of elements that fits
/// a C int: 1 when they all fit, else the largest power of two (at most
/// 64 KiB) dividing all of them.
fn byte_unit(sizes: &[usize], what: &str) -> Result<usize> {
    let max = sizes.iter().copied().max().unwrap_or(0);
    if max <= c_int::MAX as usize {
        return Ok(1);
    }
    let tz = sizes
        .iter()
        .filter(|&&s| s != 0)
        .map(|s| s.trailing_zeros())
        .min()
        .unwrap_or(0)
        .min(MAX_UNIT_LOG2);
    let unit = 1usize << tz;
    if max / unit > c_int::MAX as usize {
        return Err(CommError::invalid(format!(
            "{what}: {max} bytes exceeds MPI's int count limit ({}) and the sizes involved share \
             only the factor {unit}, too small to send them as larger units",
            c_int::MAX
        )));
    }
    Ok(unit)
}

/// The buffer addresses of a collective with separate send and receive
/// buffers. An empty slice's address is a dangling one, the type's
/// alignment: `0x1` for bytes, which is Open MPI's `MPI_IN_PLACE`, so a
/// rank that sends nothing would ask for an in-place collective
/// (`MPI_ERR_ARG` where its receive buffer is empty too, a wrong transfer
/// otherwise). An empty side is given a byte of `spare` instead, which MPI
/// never reads or writes (its counts are all zero).
fn apart(send: &[u8], recv: &mut [u8], spare: &mut [u8; 2]) -> (*const c_void, *mut c_void) {
    let (a, b) = spare.split_at_mut(1);
    let s = if send.is_empty() {
        a.as_ptr()
    } else {
        send.as_ptr()
    };
    let r = if recv.is_empty() {
        b.as_mut_ptr()
    } else {
        recv.as_mut_ptr()
    };
    (s.cast(), r.cast())
}

/// An MPI datatype; derived ones are freed on drop. Create and drop it
/// while holding a [`Guard`].
struct Dt {
    raw: ffi::MPI_Datatype,
    owned: bool,
}

impl Dt {
    fn predefined(raw: ffi::MPI_Datatype) -> Self {
        Dt { raw, owned: false }
    }

    /// Takes ownership of a freshly created type (committed here when
    /// `commit`), or reports the creating call's error.
    fn created(
        call: &'static str,
        rc: c_int,
        mut raw: ffi::MPI_Datatype,
        commit: bool,
    ) -> Result<Self> {
        check(call, rc)?;
        if commit {
            // SAFETY: `raw` is a valid, uncommitted derived datatype.
            let rc = unsafe { ffi::MPI_Type_commit(&mut raw) };
            let dt = Dt { raw, owned: true };
            check("MPI_Type_commit", rc)?;
            return Ok(dt);
        }
        Ok(Dt { raw, owned: true })
    }

    /// `n` contiguous copies of `inner`.
    fn contiguous(n: usize, inner: &Dt, commit: bool) -> Result<Self> {
        let n = to_int(n, "contiguous datatype count")?;
        let mut raw = inner.raw;
        // SAFETY: `inner` is a valid datatype; `raw` is an out-parameter.
        let rc = unsafe { ffi::MPI_Type_contiguous(n, inner.raw, &mut raw) };
        Dt::created("MPI_Type_contiguous", rc, raw, commit)
    }

    /// MPI elements of `unit` bytes: `MPI_UINT8_T` for 1, else a committed
    /// contiguous type.
    fn bytes(unit: usize) -> Result<Self> {
        let b = Dt::predefined(byte_type());
        if unit == 1 {
            return Ok(b);
        }
        Dt::contiguous(unit, &b, true)
    }

    /// A datatype and count describing exactly `n` bytes: `MPI_UINT8_T`
    /// when `n` fits a C int, else a committed struct of 1 GiB blocks and
    /// the remainder (the type signature is `n` bytes either way, so it
    /// matches any other description of `n` bytes).
    fn exact_bytes(n: usize) -> Result<(Self, c_int)> {
        if n <= c_int::MAX as usize {
            return Ok((Dt::predefined(byte_type()), n as c_int));
        }
        const BLOCK: usize = 1 << 30;
        let byte = Dt::predefined(byte_type());
        let block = Dt::contiguous(BLOCK, &byte, false)?;
        let blocks = Dt::contiguous(n / BLOCK, &block, false)?;
        let lens = [1, (n % BLOCK) as c_int];
        let displs = [0, to_aint(n / BLOCK * BLOCK, "message length")?];
        let types = [blocks.raw, byte.raw];
        let mut raw = blocks.raw;
        // SAFETY: three arrays of two entries each, valid datatypes.
        let rc = unsafe {
            ffi::MPI_Type_create_struct(2, lens.as_ptr(), displs.as_ptr(), types.as_ptr(), &mut raw)
        };
        Ok((Dt::created("MPI_Type_create_struct", rc, raw, true)?, 1))
    }

    /// The committed datatype reading `l` (elements of `elem` bytes) from a
    /// buffer start, or `None` when `l` is empty: nested hvectors over
    /// contiguous blocks of `elem` bytes (`k` innermost), placed at byte
    /// displacement `offset * elem` by an hindexed block, so displacements
    /// are `MPI_Aint` rather than the `int` of `MPI_Alltoallw`.
    fn strided(l: &Strided, elem: usize) -> Result<Option<Self>> {
        if l.is_empty() || elem == 0 {
            return Ok(None);
        }
        let bytes = |x: usize, what: &str| -> Result<ffi::MPI_Aint> {
            x.checked_mul(elem)
                .ok_or_else(|| {
                    CommError::invalid(format!("{what} of {l:?}: byte offset overflows"))
                })
                .and_then(|b| to_aint(b, what))
        };
        let base = Dt::bytes(1)?;
        let mut cur = Dt::contiguous(elem, &base, false)?;
        for d in (0..4).rev() {
            let n = l.counts[d];
            if n == 1 {
                continue;
            }
            cur = if d == 3 && l.strides[3] == 1 {
                Dt::contiguous(n, &cur, false)?
            } else {
                let count = to_int(n, "strided layout count")?;
                let stride = bytes(l.strides[d], "stride")?;
                let mut raw = cur.raw;
                // SAFETY: `cur` is a valid datatype; `raw` is an out-parameter.
                let rc =
                    unsafe { ffi::MPI_Type_create_hvector(count, 1, stride, cur.raw, &mut raw) };
                Dt::created("MPI_Type_create_hvector", rc, raw, false)?
            };
            // The assignment freed the inner type, which MPI allows once
            // the types built from it exist.
        }
        let disp = [bytes(l.offset, "offset")?];
        let mut raw = cur.raw;
        // SAFETY: one displacement in a valid array; `cur` is a valid datatype.
        let rc =
            unsafe { ffi::MPI_Type_create_hindexed_block(1, 1, disp.as_ptr(), cur.raw, &mut raw) };
        Dt::created("MPI_Type_create_hindexed_block", rc, raw, true).map(Some)
    }
}

impl Drop for Dt {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: an owned derived datatype is freed exactly once; MPI
            // lets operations and types built from it finish or live on.
            unsafe { ffi::MPI_Type_free(&mut self.raw) };
        }
    }
}

// ---------------------------------------------------------------------------
// Start-up and shutdown
// ---------------------------------------------------------------------------

/// The initialised MPI environment; MPI is finalised when it drops.
///
/// Hold it for as long as communicators are in use: after it drops, every
/// operation on an [`MpiComm`] returns an error.
pub struct MpiUniverse {
    universe: Option<mpi::environment::Universe>,
    threading: Threading,
}

impl std::fmt::Debug for MpiUniverse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiUniverse")
            .field("threading", &self.threading)
            .field("tag_limit", &TAG_LIMIT.load(Ordering::Relaxed))
            .finish()
    }
}

impl MpiUniverse {
    /// A handle on `MPI_COMM_WORLD` (never freed).
    pub fn world(&self) -> MpiComm {
        MpiComm::world()
    }

    /// The thread support the library provides (this module asks for
    /// `MPI_THREAD_MULTIPLE`).
    pub fn threading(&self) -> Threading {
        self.threading
    }

    /// The largest tag a user message may carry: the smaller of
    /// [`MAX_USER_TAG`] and the library's `MPI_TAG_UB`.
    pub fn tag_limit(&self) -> u32 {
        TAG_LIMIT.load(Ordering::Relaxed)
    }
}

impl Drop for MpiUniverse {
    fn drop(&mut self) {
        // Wait for calls in flight, then forbid new ones before finalising.
        let _g = MPI_LOCK.write().unwrap_or_else(|p| p.into_inner());
        STATE.store(STATE_FINALIZED, Ordering::Release);
        // rsmpi's `Universe` calls MPI_Finalize when dropped.
        drop(self.universe.take());
    }
}

/// Initialises MPI (asking for `MPI_THREAD_MULTIPLE`), sets
/// `MPI_ERRORS_RETURN` on `MPI_COMM_WORLD` and `MPI_COMM_SELF`, and reads
/// `MPI_TAG_UB`.
///
/// # Errors
/// [`CommError::Invalid`] when MPI is already initialised (by this module
/// or by other code) or was finalised: MPI can start only once per
/// process. [`CommError::Mpi`] when the error handler or the tag bound
/// cannot be set up.
pub fn init() -> Result<MpiUniverse> {
    if STATE.load(Ordering::Acquire) == STATE_FINALIZED || mpi::environment::is_finalized() {
        return Err(CommError::invalid(
            "MPI was already finalised in this process; it cannot be initialised again",
        ));
    }
    let (universe, threading) = mpi::initialize_with_threading(Threading::Multiple).ok_or_else(|| {
        CommError::invalid("MPI is already initialised in this process (comm::mpi::init can be called only once)")
    })?;
    let _ = INIT_THREAD.set(std::thread::current().id());
    SERIALIZE.store(threading < Threading::Multiple, Ordering::Relaxed);
    FUNNELED.store(threading < Threading::Serialized, Ordering::Relaxed);
    let u = MpiUniverse {
        universe: Some(universe),
        threading,
    };
    STATE.store(STATE_LIVE, Ordering::Release);
    let _g = enter()?;
    // SAFETY: valid predefined communicators and error handler.
    let rc = unsafe { ffi::MPI_Comm_set_errhandler(comm_world(), ffi::RSMPI_ERRORS_RETURN) };
    check("MPI_Comm_set_errhandler", rc)?;
    // SAFETY: as above.
    let rc =
        unsafe { ffi::MPI_Comm_set_errhandler(ffi::RSMPI_COMM_SELF, ffi::RSMPI_ERRORS_RETURN) };
    check("MPI_Comm_set_errhandler", rc)?;
    let mut value: *mut c_int = std::ptr::null_mut();
    let mut flag: c_int = 0;
    // SAFETY: for MPI_TAG_UB the attribute value is a pointer to an int,
    // stored into `value`; `flag` tells whether it is set.
    let rc = unsafe {
        ffi::MPI_Comm_get_attr(
            comm_world(),
            ffi::MPI_TAG_UB as c_int,
            (&mut value as *mut *mut c_int).cast::<c_void>(),
            &mut flag,
        )
    };
    check("MPI_Comm_get_attr(MPI_TAG_UB)", rc)?;
    let ub = if flag != 0 && !value.is_null() {
        // SAFETY: MPI returned a pointer to its int attribute, valid until finalisation.
        unsafe { *value }
    } else {
        32767
    };
    TAG_LIMIT.store((ub.max(0) as u32).min(MAX_USER_TAG), Ordering::Relaxed);
    Ok(u)
}

/// True when this process was started by an MPI launcher (`mpirun`,
/// `mpiexec`, `srun` with PMI), judged from the environment variables
/// launchers set: `OMPI_COMM_WORLD_SIZE` (Open MPI), `PMI_SIZE`,
/// `PMI_RANK` (MPICH / Intel MPI / Slurm PMI-1/2), `PMIX_RANK` (PMIx),
/// `MV2_COMM_WORLD_SIZE` (MVAPICH2) and `MPI_LOCALNRANKS` (MPICH Hydra).
///
/// Lets a program pick this backend under a launcher and the in-process
/// backend otherwise.
pub fn is_launched_by_mpirun() -> bool {
    crate::launcher::is_launched_by_mpirun()
}

/// Aborts every process of the MPI job with `code` (`MPI_Abort` on
/// `MPI_COMM_WORLD`); exits the process if MPI is not running.
pub fn abort(code: i32) -> ! {
    if STATE.load(Ordering::Acquire) == STATE_LIVE {
        // SAFETY: MPI is initialised; MPI_Abort may be called from any
        // thread (it ends the job, so the call lock does not matter).
        unsafe { ffi::MPI_Abort(comm_world(), code) };
    }
    std::process::exit(code)
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

/// Initialises MPI, runs `f` on the world communicator, finalises MPI and
/// returns what `f` returned on this rank.
///
/// **A failed rank aborts the job.** If `f` returns an error or panics on
/// any rank, that rank prints `rank r failed: msg` to stderr and calls
/// `MPI_Abort(MPI_COMM_WORLD, 1)`, which ends every process of the job
/// with a non-zero exit status, so no other rank waits forever for it.
/// This function therefore only returns on success, or with `Err` when MPI
/// cannot be initialised.
pub fn run<R, E: std::fmt::Display>(
    f: impl FnOnce(&dyn Communicator) -> std::result::Result<R, E>,
) -> std::result::Result<R, String> {
    let universe = init().map_err(|e| e.to_string())?;
    let world = universe.world();
    let msg = match catch_unwind(AssertUnwindSafe(|| f(&world))) {
        Ok(Ok(v)) => {
            drop(world);
            drop(universe);
            return Ok(v);
        }
        Ok(Err(e)) => e.to_string(),
        Err(p) => panic_message(&*p),
    };
    eprintln!("rank {} failed: {msg}", world.rank());
    abort(1)
}

// ---------------------------------------------------------------------------
// The communicator
// ---------------------------------------------------------------------------

/// One rank's handle on an MPI communicator.
///
/// Obtained from [`MpiUniverse::world`], [`Communicator::split`] or
/// [`MpiComm::cart_create`]; communicators other than the world are freed
/// (`MPI_Comm_free`) on drop, unless MPI was finalised first.
pub struct MpiComm {
    raw: ffi::MPI_Comm,
    rank: usize,
    size: usize,
    owned: bool,
    checks: bool,
    /// Messages this rank sent to itself (shared by every handle on the
    /// same MPI communicator: all world handles use one).
    mailbox: Arc<Mailbox>,
    /// Not `Sync` whatever the handle type of the MPI library: one
    /// communicator is used by one thread at a time.
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: an MPI communicator handle names a process-wide object, not
// thread-local state. Every call made through it goes through `enter()`,
// which serialises calls when the library provides less than
// MPI_THREAD_MULTIPLE and refuses calls from other threads when it
// provides less than MPI_THREAD_SERIALIZED, so moving the handle to
// another thread never breaks the library's threading rules. (`MpiComm` is
// not `Sync`, so one communicator is never used by two threads at once.)
unsafe impl Send for MpiComm {}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiComm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("world", &!self.owned)
            .field("checks", &self.checks)
            .finish()
    }
}

impl MpiComm {
    fn world() -> MpiComm {
        let mut c = MpiComm {
            raw: comm_world(),
            rank: 0,
            size: 1,
            owned: false,
            checks: true,
            mailbox: WORLD_MAILBOX.get_or_init(Default::default).clone(),
            _not_sync: PhantomData,
        };
        if let Ok(g) = enter() {
            // Rank and size of the world cannot fail once MPI is up.
            let _ = c.query(&g);
        }
        c
    }

    /// Wraps a new communicator (freed on drop), or `None` for `MPI_COMM_NULL`.
    fn adopt(&self, raw: ffi::MPI_Comm, g: &Guard) -> Result<Option<MpiComm>> {
        if raw == comm_null() {
            return Ok(None);
        }
        let mut c = MpiComm {
            raw,
            rank: 0,
            size: 1,
            owned: true,
            checks: self.checks,
            mailbox: Default::default(),
            _not_sync: PhantomData,
        };
        c.query(g)?;
        // SAFETY: `raw` is a valid communicator; the handler is predefined.
        // (It inherits the parent's handler; setting it again is harmless.)
        let rc = unsafe { ffi::MPI_Comm_set_errhandler(raw, ffi::RSMPI_ERRORS_RETURN) };
        check("MPI_Comm_set_errhandler", rc)?;
        Ok(Some(c))
    }

    fn query(&mut self, _g: &Guard) -> Result<()> {
        let (mut rank, mut size) = (0 as c_int, 0 as c_int);
        // SAFETY: valid communicator, valid out-pointers.
        let rc = unsafe { ffi::MPI_Comm_rank(self.raw, &mut rank) };
        check("MPI_Comm_rank", rc)?;
        // SAFETY: as above.
        let rc = unsafe { ffi::MPI_Comm_size(self.raw, &mut size) };
        check("MPI_Comm_size", rc)?;
        self.rank = rank as usize;
        self.size = size as usize;
        Ok(())
    }

    /// The raw `MPI_Comm` handle, for calling MPI directly. It stays valid
    /// while `self` lives (and MPI is not finalised).
    pub fn as_raw(&self) -> ffi::MPI_Comm {
        self.raw
    }

    /// Whether collectives on this communicator check that every rank
    /// passed matching sizes (on unless [`disable_checks`](Self::disable_checks)
    /// was called; see the [module documentation](self)).
    pub fn checks(&self) -> bool {
        self.checks
    }

    /// Turns the collective size checks back on for this communicator (and
    /// those later split from it). Every rank must do the same.
    pub fn enable_checks(&mut self) {
        self.checks = true;
    }

    /// Turns the collective size checks off for this communicator (and
    /// those later split from it), saving one or two small collectives per
    /// call. Every rank must do the same.
    ///
    /// # Safety
    /// Every later collective on this communicator must receive matching
    /// sizes on every rank (counts, layouts, lengths, root): MPI does not
    /// check them, and the MPI library may write past a buffer when they
    /// differ.
    pub unsafe fn disable_checks(&mut self) {
        self.checks = false;
    }

    /// Collective: a Cartesian communicator over `grid` (`MPI_Cart_create`
    /// without reordering), whose ranks are those of `self`.
    ///
    /// # Errors
    /// [`CommError::Invalid`] when the grid size differs from the
    /// communicator size, or when MPI's coordinates of this rank
    /// (`MPI_Cart_coords`) differ from [`ProcessGrid::coords`] (row-major,
    /// last axis fastest), so the two cannot be mixed; MPI errors.
    pub fn cart_create(&self, grid: &ProcessGrid) -> Result<MpiComm> {
        grid.check_comm(self)?;
        let g = enter()?;
        let dims = grid
            .dims()
            .iter()
            .map(|&d| to_int(d, "process grid dimension"))
            .collect::<Result<Vec<_>>>()?;
        let periods = grid.periodic().map(c_int::from);
        let mut raw = comm_null();
        // SAFETY: arrays of 3 ints as `ndims = 3` requires; valid communicator.
        let rc = unsafe {
            ffi::MPI_Cart_create(self.raw, 3, dims.as_ptr(), periods.as_ptr(), 0, &mut raw)
        };
        check("MPI_Cart_create", rc)?;
        let cart = self.adopt(raw, &g)?.ok_or_else(|| {
            CommError::invalid("MPI_Cart_create returned MPI_COMM_NULL for a member rank")
        })?;
        let mut coords = [0 as c_int; 3];
        // SAFETY: room for 3 coordinates; valid Cartesian communicator.
        let rc =
            unsafe { ffi::MPI_Cart_coords(cart.raw, cart.rank as c_int, 3, coords.as_mut_ptr()) };
        check("MPI_Cart_coords", rc)?;
        let mpi_coords = coords.map(|c| c as usize);
        let ours = grid.coords(self.rank);
        if cart.rank != self.rank || mpi_coords != ours {
            return Err(CommError::invalid(format!(
                "MPI_Cart_create placed rank {} (cart rank {}) at {mpi_coords:?} but the process grid {:?} puts it at {ours:?}",
                self.rank,
                cart.rank,
                grid.dims()
            )));
        }
        Ok(cart)
    }

    fn check_tag(&self, tag: u32) -> Result<()> {
        validate_tag(tag)?;
        let max = TAG_LIMIT.load(Ordering::Relaxed);
        if tag > max {
            return Err(CommError::InvalidTag { tag, max });
        }
        Ok(())
    }

    /// Checked mode: the alltoall of `mine[r]` (what this rank sends to
    /// `r`, or `None` when this rank's own arguments are invalid); returns
    /// what each rank sends to this one (`None` from invalid ranks).
    fn exchange_counts(&self, mine: Option<&[usize]>, _g: &Guard) -> Result<Vec<Option<usize>>> {
        let send: Vec<u64> = match mine {
            Some(m) => m.iter().map(|&c| c as u64).collect(),
            None => vec![u64::MAX; self.size],
        };
        let mut recv = vec![0u64; self.size];
        // SAFETY: both buffers hold `size` u64 values, one per rank.
        let rc = unsafe {
            ffi::MPI_Alltoall(
                send.as_ptr().cast::<c_void>(),
                1,
                u64_type(),
                recv.as_mut_ptr().cast::<c_void>(),
                1,
                u64_type(),
                self.raw,
            )
        };
        check("MPI_Alltoall", rc)?;
        Ok(recv
            .into_iter()
            .map(|c| (c != u64::MAX).then_some(c as usize))
            .collect())
    }

    /// Checked mode: makes every rank return an error when any rank found
    /// one (one `MPI_Allreduce`); a rank without an error of its own gets
    /// one naming the lowest rank that has.
    fn agree(&self, what: &str, local: Result<()>, g: &Guard) -> Result<()> {
        let mut v = [if local.is_ok() {
            i64::MAX
        } else {
            self.rank as i64
        }];
        self.allreduce_raw(&mut v, i64_type(), ReduceOp::Min, g)?;
        match local {
            Err(e) => Err(e),
            Ok(()) if v[0] == i64::MAX => Ok(()),
            Ok(()) => Err(CommError::invalid(format!(
                "{what}: rank {} passed sizes that do not match its peers' (its own error says how); \
                 nothing was exchanged",
                v[0]
            ))),
        }
    }

    /// Checked mode: every rank passed the same `values` (one
    /// `MPI_Allreduce`); the error names the spread.
    fn agree_values(&self, what: &str, names: &[&str], values: &[usize], g: &Guard) -> Result<()> {
        let mut v: Vec<i64> = values
            .iter()
            .flat_map(|&x| [x as i64, -(x as i64)])
            .collect();
        self.allreduce_raw(&mut v, i64_type(), ReduceOp::Max, g)?;
        for (i, (name, &x)) in names.iter().zip(values).enumerate() {
            let (max, min) = (v[2 * i] as usize, (-v[2 * i + 1]) as usize);
            if min != max {
                return Err(CommError::length(
                    format!(
                        "{what}: {name} on rank {} (the ranks pass values from {min} to {max}; \
                         nothing was exchanged)",
                        self.rank
                    ),
                    if x != min { min } else { max },
                    x,
                ));
            }
        }
        Ok(())
    }

    fn allreduce_raw<T: crate::Elem>(
        &self,
        data: &mut [T],
        dt: ffi::MPI_Datatype,
        op: ReduceOp,
        _g: &Guard,
    ) -> Result<()> {
        // SAFETY: predefined operation handles from the rsmpi shim.
        let op = unsafe {
            match op {
                ReduceOp::Min => ffi::RSMPI_MIN,
                ReduceOp::Max => ffi::RSMPI_MAX,
                ReduceOp::Sum => ffi::RSMPI_SUM,
            }
        };
        // MPI_IN_PLACE is a macro the bindings cannot see, so reduce a copy.
        let send = data.to_vec();
        for (s, r) in send.chunks(REDUCE_CHUNK).zip(data.chunks_mut(REDUCE_CHUNK)) {
            // SAFETY: `s` and `r` hold the same count (< 2^31) of elements
            // of the type `dt` describes, and do not overlap.
            let rc = unsafe {
                ffi::MPI_Allreduce(
                    s.as_ptr().cast::<c_void>(),
                    r.as_mut_ptr().cast::<c_void>(),
                    s.len() as c_int,
                    dt,
                    op,
                    self.raw,
                )
            };
            check("MPI_Allreduce", rc)?;
        }
        Ok(())
    }
}

impl Drop for MpiComm {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // After finalisation (or from a thread MPI may not be called on)
        // the handle is simply forgotten.
        if let Ok(_g) = enter() {
            // SAFETY: an owned communicator, freed exactly once.
            unsafe { ffi::MPI_Comm_free(&mut self.raw) };
        }
    }
}

/// Messages a rank sent to itself on one communicator: `(tag, bytes)` in
/// send order.
#[derive(Default)]
struct Mailbox {
    queue: Mutex<VecDeque<(u32, Vec<u8>)>>,
    arrived: Condvar,
}

impl Mailbox {
    fn lock(&self) -> MutexGuard<'_, VecDeque<(u32, Vec<u8>)>> {
        // Never held across user code: a poisoned lock still guards
        // consistent data.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn post(&self, tag: u32, data: &[u8]) {
        self.lock().push_back((tag, data.to_vec()));
        self.arrived.notify_all();
    }

    /// Removes the oldest message with `tag`, blocking for it if `block`.
    fn take(&self, tag: u32, block: bool) -> Option<Vec<u8>> {
        let mut q = self.lock();
        loop {
            if let Some(i) = q.iter().position(|m| m.0 == tag) {
                return q.remove(i).map(|m| m.1);
            }
            if !block {
                return None;
            }
            q = self.arrived.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// What a request is waiting for.
enum Pending {
    /// An MPI request: a send, or a receive from another rank (source,
    /// tag, buffer length).
    Mpi {
        raw: ffi::MPI_Request,
        recv: Option<(usize, u32, usize)>,
    },
    /// A receive from the rank itself, served by the mailbox.
    FromSelf {
        mailbox: Arc<Mailbox>,
        src: usize,
        tag: u32,
        buf: *mut u8,
        len: usize,
    },
    /// Complete (successfully or not).
    Done,
}

/// A send or receive in flight. It holds raw handles and the buffer's
/// address only: the contract of `isend_raw` / `irecv_raw` keeps the buffer
/// alive until it completes.
struct MpiRequest {
    pending: Pending,
}

// SAFETY: as for `MpiComm`: MPI handles name process-wide objects and every
// MPI call goes through `enter()`; the mailbox is shared through a mutex;
// the buffer pointer is covered by the contract of `isend_raw` /
// `irecv_raw` (valid, and for receives touched by nobody else, until the
// request completes), and the request is used by one thread at a time
// (`&mut self`).
unsafe impl Send for MpiRequest {}

impl MpiRequest {
    fn done(&self) -> bool {
        matches!(self.pending, Pending::Done)
    }

    /// Delivers a message from the mailbox (exact length or an error; the
    /// buffer is untouched on a mismatch).
    fn deliver(&mut self, msg: Vec<u8>) -> Result<()> {
        let Pending::FromSelf {
            src, tag, buf, len, ..
        } = std::mem::replace(&mut self.pending, Pending::Done)
        else {
            unreachable!("deliver is only called for receives from self")
        };
        if msg.len() != len {
            return Err(CommError::MessageTruncated {
                src,
                tag,
                expected: len,
                got: msg.len(),
            });
        }
        // SAFETY: `buf` is the start of the `len`-byte buffer that the
        // contract of `irecv_raw` keeps valid and ours until completion.
        unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), buf, len) };
        Ok(())
    }

    /// Interprets the outcome of a completed MPI_Test / MPI_Wait.
    fn finish(&mut self, call: &'static str, rc: c_int, status: &ffi::MPI_Status) -> Result<()> {
        let Pending::Mpi { recv, .. } = std::mem::replace(&mut self.pending, Pending::Done) else {
            unreachable!("finish is only called for MPI requests")
        };
        let Some((src, tag, expected)) = recv else {
            return check(call, rc);
        };
        let mut count: ffi::MPI_Count = 0;
        // SAFETY: a status filled by the completing call; byte datatype.
        let grc = unsafe { ffi::MPI_Get_elements_x(status, byte_type(), &mut count) };
        let got = (grc == SUCCESS && count >= 0).then_some(count as usize);
        if rc != SUCCESS {
            let mut class = rc;
            // SAFETY: plain query with a valid out-pointer.
            unsafe { ffi::MPI_Error_class(rc, &mut class) };
            if class == ffi::MPI_ERR_TRUNCATE as c_int {
                // Open MPI reports the full length; a library that reports
                // only the bytes delivered gets `expected + 1` ("longer").
                let got = got.filter(|&g| g > expected).unwrap_or(expected + 1);
                return Err(CommError::MessageTruncated {
                    src,
                    tag,
                    expected,
                    got,
                });
            }
            return Err(mpi_error(call, rc));
        }
        match got {
            Some(g) if g == expected => Ok(()),
            Some(g) => Err(CommError::MessageTruncated {
                src,
                tag,
                expected,
                got: g,
            }),
            None => Err(CommError::invalid(format!(
                "MPI_Get_elements_x failed for the message from rank {src} with tag {tag}"
            ))),
        }
    }
}

impl RequestImpl for MpiRequest {
    fn test(&mut self) -> Result<bool> {
        match &mut self.pending {
            Pending::Done => Ok(true),
            Pending::FromSelf { mailbox, tag, .. } => match mailbox.take(*tag, false) {
                Some(msg) => self.deliver(msg).map(|()| true),
                None => Ok(false),
            },
            Pending::Mpi { raw, .. } => {
                let _g = enter()?;
                let mut flag: c_int = 0;
                let mut status = new_status();
                // SAFETY: a live request handle owned by `self`; valid out-pointers.
                let rc = unsafe { ffi::MPI_Test(raw, &mut flag, &mut status) };
                if rc == SUCCESS && flag == 0 {
                    return Ok(false);
                }
                self.finish("MPI_Test", rc, &status).map(|()| true)
            }
        }
    }

    fn wait(&mut self) -> Result<()> {
        match &mut self.pending {
            Pending::Done => Ok(()),
            Pending::FromSelf { mailbox, tag, .. } => {
                let msg = mailbox
                    .take(*tag, true)
                    .expect("a blocking take returns a message");
                self.deliver(msg)
            }
            Pending::Mpi { raw, .. } => {
                let _g = enter()?;
                let mut status = new_status();
                // SAFETY: a live request handle owned by `self`; valid out-pointer.
                let rc = unsafe { ffi::MPI_Wait(raw, &mut status) };
                self.finish("MPI_Wait", rc, &status)
            }
        }
    }

    /// A rank unwinding from a panic with a transfer in flight cannot wait
    /// (the peer may never answer) nor release the buffer while MPI may use
    /// it; `mpi::run` would abort the job for the panic anyway, so abort
    /// now, with a message.
    fn abandon(&mut self) {
        if let Pending::Mpi { .. } = self.pending {
            if self.test().unwrap_or(false) {
                return;
            }
            if STATE.load(Ordering::Acquire) == STATE_LIVE {
                eprintln!(
                    "comm::mpi: a rank panicked with an MPI transfer in flight; aborting the job"
                );
                abort(70);
            }
        }
    }
}

impl Drop for MpiRequest {
    fn drop(&mut self) {
        // `Request` waits before dropping us, so this only runs when that
        // wait could not reach MPI. After finalisation nothing moves any
        // more (and a receive from self holds no MPI state); but a transfer
        // stranded on a thread MPI may not be called from would leave MPI
        // using a released buffer, so stop instead.
        if let Pending::Mpi { .. } = self.pending {
            let _ = self.wait();
            if !self.done() && STATE.load(Ordering::Acquire) == STATE_LIVE {
                eprintln!(
                    "comm::mpi: an MPI transfer could not be completed before its buffer was released; aborting"
                );
                std::process::abort();
            }
        }
    }
}

impl Communicator for MpiComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn backend(&self) -> &'static str {
        "mpi"
    }

    fn barrier(&self) -> Result<()> {
        let _g = enter()?;
        // SAFETY: valid communicator.
        check("MPI_Barrier", unsafe { ffi::MPI_Barrier(self.raw) })
    }

    fn split(&self, color: Option<u32>, key: usize) -> Result<Option<Box<dyn Communicator>>> {
        let color = match color {
            Some(c) => to_int(c as usize, "split colour")?,
            // SAFETY: reads an immutable constant of the rsmpi C shim.
            None => unsafe { ffi::RSMPI_UNDEFINED },
        };
        let key = to_int(key, "split key")?;
        let g = enter()?;
        let mut raw = comm_null();
        // SAFETY: valid communicator; `raw` is an out-parameter.
        let rc = unsafe { ffi::MPI_Comm_split(self.raw, color, key, &mut raw) };
        check("MPI_Comm_split", rc)?;
        Ok(self
            .adopt(raw, &g)?
            .map(|c| Box::new(c) as Box<dyn Communicator>))
    }

    /// A send to this rank itself is copied into the communicator's mailbox
    /// and complete at once; others start `MPI_Isend` on `data`.
    unsafe fn isend_raw(
        &self,
        dest: usize,
        tag: u32,
        data: *const u8,
        len: usize,
    ) -> Result<Request> {
        validate_peer(dest, self.size)?;
        self.check_tag(tag)?;
        if dest == self.rank {
            // SAFETY: the caller guarantees `len` readable bytes.
            let bytes = unsafe { crate::communicator::raw_slice(data, len) };
            self.mailbox.post(tag, bytes);
            return Ok(Request::completed());
        }
        let _g = enter()?;
        let (dt, n) = Dt::exact_bytes(len)?;
        let mut raw = request_null();
        // SAFETY: `n` elements of `dt` are exactly the `len` bytes at
        // `data`, which the caller keeps valid and unmodified until the
        // returned request completes (contract of `isend_raw`). `dt` may be
        // freed once the send started.
        let rc = unsafe {
            ffi::MPI_Isend(
                data.cast::<c_void>(),
                n,
                dt.raw,
                dest as c_int,
                tag as c_int,
                self.raw,
                &mut raw,
            )
        };
        check("MPI_Isend", rc)?;
        Ok(Request::new(Box::new(MpiRequest {
            pending: Pending::Mpi { raw, recv: None },
        })))
    }

    /// A receive from another rank starts `MPI_Irecv` into `buf`; one from
    /// this rank itself waits for its mailbox.
    unsafe fn irecv_raw(&self, src: usize, tag: u32, buf: *mut u8, len: usize) -> Result<Request> {
        validate_peer(src, self.size)?;
        self.check_tag(tag)?;
        if src == self.rank {
            return Ok(Request::new(Box::new(MpiRequest {
                pending: Pending::FromSelf {
                    mailbox: self.mailbox.clone(),
                    src,
                    tag,
                    buf,
                    len,
                },
            })));
        }
        let _g = enter()?;
        let (dt, n) = Dt::exact_bytes(len)?;
        let mut raw = request_null();
        // SAFETY: `n` elements of `dt` are exactly the `len` bytes at `buf`,
        // which the caller keeps valid and untouched until the returned
        // request completes (contract of `irecv_raw`).
        let rc = unsafe {
            ffi::MPI_Irecv(
                buf.cast::<c_void>(),
                n,
                dt.raw,
                src as c_int,
                tag as c_int,
                self.raw,
                &mut raw,
            )
        };
        check("MPI_Irecv", rc)?;
        Ok(Request::new(Box::new(MpiRequest {
            pending: Pending::Mpi {
                raw,
                recv: Some((src, tag, len)),
            },
        })))
    }

    /// Polls the pending requests with `MPI_Test` in turn (yielding the
    /// thread between rounds after a short spin) until one completes.
    fn wait_any(&self, reqs: &mut [Request]) -> Result<Option<usize>> {
        let mut rounds = 0u32;
        loop {
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
            rounds = rounds.saturating_add(1);
            if rounds > 64 {
                std::thread::yield_now();
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
        let (p, me) = (self.size, self.rank);
        let local = (|| {
            validate_v("alltoallv send", send.len(), send_counts, send_displs, p)?;
            validate_v("alltoallv receive", recv.len(), recv_counts, recv_displs, p)?;
            if send_counts[me] != recv_counts[me] {
                return Err(CommError::length(
                    format!("alltoallv block kept by rank {me}"),
                    recv_counts[me],
                    send_counts[me],
                ));
            }
            let su = byte_unit(&[send_counts, send_displs].concat(), "alltoallv send")?;
            let ru = byte_unit(&[recv_counts, recv_displs].concat(), "alltoallv receive")?;
            Ok((su, ru))
        })();
        let g = enter()?;
        let (su, ru) = if self.checks {
            let got = self.exchange_counts(local.is_ok().then_some(send_counts), &g)?;
            let local = local.and_then(|units| {
                match (0..p).find(|&r| got[r].is_some_and(|c| c != recv_counts[r])) {
                    Some(r) => Err(CommError::length(
                        format!(
                            "alltoallv: recv_counts[{r}] on rank {me} (rank {r} sends {} bytes)",
                            got[r].unwrap_or(0)
                        ),
                        got[r].unwrap_or(0),
                        recv_counts[r],
                    )),
                    None => Ok(units),
                }
            });
            let units = local.as_ref().map_or((1, 1), |&u| u);
            self.agree("alltoallv", local.map(|_| ()), &g)?;
            units
        } else {
            local?
        };
        let div = |v: &[usize], u: usize| v.iter().map(|&x| (x / u) as c_int).collect::<Vec<_>>();
        let (sc, sd) = (div(send_counts, su), div(send_displs, su));
        let (rc_, rd) = (div(recv_counts, ru), div(recv_displs, ru));
        let (st, rt) = (Dt::bytes(su)?, Dt::bytes(ru)?);
        let mut spare = [0u8; 2];
        let (sp, rp) = apart(send, recv, &mut spare);
        // SAFETY: validate_v checked every block against its buffer, and
        // the counts and displacements are exact multiples of the units
        // (an empty buffer's stand-in is never touched: its counts are 0).
        let rc = unsafe {
            ffi::MPI_Alltoallv(
                sp,
                sc.as_ptr(),
                sd.as_ptr(),
                st.raw,
                rp,
                rc_.as_ptr(),
                rd.as_ptr(),
                rt.raw,
                self.raw,
            )
        };
        check("MPI_Alltoallv", rc)
    }

    fn alltoallw_bytes(
        &self,
        send: &[u8],
        send_layouts: &[Strided],
        recv: &mut [u8],
        recv_layouts: &[Strided],
        elem_size: usize,
    ) -> Result<()> {
        let (p, me) = (self.size, self.rank);
        let local = (|| {
            if send_layouts.len() != p || recv_layouts.len() != p {
                return Err(CommError::length(
                    "alltoallw layouts (one per rank)",
                    p,
                    send_layouts.len().min(recv_layouts.len()),
                ));
            }
            // MPI reads and writes through the layouts: they must fit.
            // (With an element size of 0 nothing is read or written.)
            if let (Some(ns), Some(nr)) = (
                send.len().checked_div(elem_size),
                recv.len().checked_div(elem_size),
            ) {
                for (r, l) in send_layouts.iter().enumerate() {
                    let what = format!("alltoallw send layout for rank {r}");
                    l.check_fits(ns, &what)?;
                }
                for (r, l) in recv_layouts.iter().enumerate() {
                    let what = format!("alltoallw receive layout for rank {r}");
                    l.check_fits(nr, &what)?;
                }
            }
            if recv_layouts[me].len() != send_layouts[me].len() {
                return Err(CommError::length(
                    format!("alltoallw block kept by rank {me} (elements)"),
                    recv_layouts[me].len(),
                    send_layouts[me].len(),
                ));
            }
            Ok(())
        })();
        let g = enter()?;
        // The datatypes are built before the checks are agreed: a rank whose
        // layout MPI cannot describe (a count past `c_int`, an extent past
        // `MPI_Aint`) then fails with its peers instead of leaving them in
        // `MPI_Alltoallw`.
        let built = local.and_then(|()| {
            Ok((
                layout_types(send_layouts, elem_size)?,
                layout_types(recv_layouts, elem_size)?,
            ))
        });
        let (local, types) = match built {
            Ok(t) => (Ok(()), Some(t)),
            Err(e) => (Err(e), None),
        };
        if self.checks {
            // Element counts as sent: an element size of 0 sends nothing.
            let elems = |l: &Strided| if elem_size == 0 { 0 } else { l.len() };
            let mine: Option<Vec<usize>> = local
                .is_ok()
                .then(|| send_layouts.iter().map(elems).collect());
            let got = self.exchange_counts(mine.as_deref(), &g)?;
            let local = local.and_then(|()| {
                match (0..p).find(|&r| got[r].is_some_and(|c| c != elems(&recv_layouts[r]))) {
                    Some(r) => Err(CommError::length(
                        format!(
                            "alltoallw: elements in the receive layout for rank {r} on rank {me} (rank {r} sends {})",
                            got[r].unwrap_or(0)
                        ),
                        got[r].unwrap_or(0),
                        elems(&recv_layouts[r]),
                    )),
                    None => Ok(()),
                }
            });
            self.agree("alltoallw", local, &g)?;
        } else {
            local?;
        }
        let ((_skeep, scounts, stypes), (_rkeep, rcounts, rtypes)) =
            types.expect("the datatypes exist where the local checks passed");
        let displs = vec![0 as c_int; p];
        let mut spare = [0u8; 2];
        let (sp, rp) = apart(send, recv, &mut spare);
        // SAFETY: each datatype was checked to stay inside its buffer
        // (check_fits above); the types live until after the call (an
        // empty buffer's stand-in is never touched: its counts are 0).
        let rc = unsafe {
            ffi::MPI_Alltoallw(
                sp,
                scounts.as_ptr(),
                displs.as_ptr(),
                stypes.as_ptr(),
                rp,
                rcounts.as_ptr(),
                displs.as_ptr(),
                rtypes.as_ptr(),
                self.raw,
            )
        };
        check("MPI_Alltoallw", rc)
    }

    fn allgatherv_bytes(
        &self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        let (p, me) = (self.size, self.rank);
        let local = (|| {
            validate_v("allgatherv receive", recv.len(), counts, displs, p)?;
            if counts[me] != send.len() {
                return Err(CommError::length(
                    format!("allgatherv count for rank {me}"),
                    counts[me],
                    send.len(),
                ));
            }
            let su = byte_unit(&[send.len()], "allgatherv send")?;
            let ru = byte_unit(&[counts, displs].concat(), "allgatherv receive")?;
            Ok((su, ru))
        })();
        let g = enter()?;
        let (su, ru) = if self.checks {
            let mine = [if local.is_ok() {
                send.len() as u64
            } else {
                u64::MAX
            }];
            let mut all = vec![0u64; p];
            // SAFETY: one u64 from each rank into `p` slots.
            let rc = unsafe {
                ffi::MPI_Allgather(
                    mine.as_ptr().cast::<c_void>(),
                    1,
                    u64_type(),
                    all.as_mut_ptr().cast::<c_void>(),
                    1,
                    u64_type(),
                    self.raw,
                )
            };
            check("MPI_Allgather", rc)?;
            let local = local.and_then(|units| {
                match (0..p).find(|&r| all[r] != u64::MAX && all[r] as usize != counts[r]) {
                    Some(r) => Err(CommError::length(
                        format!(
                            "allgatherv: counts[{r}] on rank {me} (rank {r} sends {} bytes)",
                            all[r]
                        ),
                        all[r] as usize,
                        counts[r],
                    )),
                    None => Ok(units),
                }
            });
            let units = local.as_ref().map_or((1, 1), |&u| u);
            self.agree("allgatherv", local.map(|_| ()), &g)?;
            units
        } else {
            local?
        };
        let rcounts: Vec<c_int> = counts.iter().map(|&c| (c / ru) as c_int).collect();
        let rdispls: Vec<c_int> = displs.iter().map(|&d| (d / ru) as c_int).collect();
        let (st, rt) = (Dt::bytes(su)?, Dt::bytes(ru)?);
        let mut spare = [0u8; 2];
        let (sp, rp) = apart(send, recv, &mut spare);
        // SAFETY: validate_v checked every block against `recv`; `send`
        // holds the count given; counts are exact multiples of the units
        // (an empty buffer's stand-in is never touched: its count is 0).
        let rc = unsafe {
            ffi::MPI_Allgatherv(
                sp,
                (send.len() / su) as c_int,
                st.raw,
                rp,
                rcounts.as_ptr(),
                rdispls.as_ptr(),
                rt.raw,
                self.raw,
            )
        };
        check("MPI_Allgatherv", rc)
    }

    fn broadcast_bytes(&self, buf: &mut [u8], root: usize) -> Result<()> {
        let g = enter()?;
        if self.checks {
            self.agree_values(
                "broadcast",
                &["buffer length", "root"],
                &[buf.len(), root],
                &g,
            )?;
        }
        validate_peer(root, self.size)?;
        for chunk in buf.chunks_mut(BCAST_CHUNK) {
            // SAFETY: `chunk` holds the count given (< 2^31 bytes).
            let rc = unsafe {
                ffi::MPI_Bcast(
                    chunk.as_mut_ptr().cast::<c_void>(),
                    chunk.len() as c_int,
                    byte_type(),
                    root as c_int,
                    self.raw,
                )
            };
            check("MPI_Bcast", rc)?;
        }
        Ok(())
    }

    fn allreduce_f64(&self, data: &mut [f64], op: ReduceOp) -> Result<()> {
        let g = enter()?;
        if self.checks {
            self.agree_values("allreduce", &["length"], &[data.len()], &g)?;
        }
        // SAFETY: predefined datatype handle from the rsmpi shim.
        let dt = unsafe { ffi::RSMPI_DOUBLE };
        self.allreduce_raw(data, dt, op, &g)
    }

    fn allreduce_i64(&self, data: &mut [i64], op: ReduceOp) -> Result<()> {
        let g = enter()?;
        if self.checks {
            self.agree_values("allreduce", &["length"], &[data.len()], &g)?;
        }
        // SAFETY: predefined datatype handle from the rsmpi shim.
        let dt = unsafe { ffi::RSMPI_INT64_T };
        self.allreduce_raw(data, dt, op, &g)
    }
}

/// Per-rank datatypes, counts (0 or 1) and raw handles for alltoallw;
/// the first element keeps the derived types alive.
type LayoutTypes = (Vec<Option<Dt>>, Vec<c_int>, Vec<ffi::MPI_Datatype>);

/// Builds the datatypes of [`Dt::strided`] for every layout (needs a [`Guard`]).
fn layout_types(ls: &[Strided], elem: usize) -> Result<LayoutTypes> {
    let dts = ls
        .iter()
        .map(|l| Dt::strided(l, elem))
        .collect::<Result<Vec<_>>>()?;
    let counts = dts.iter().map(|d| c_int::from(d.is_some())).collect();
    let raws = dts
        .iter()
        .map(|d| d.as_ref().map_or(byte_type(), |d| d.raw))
        .collect();
    Ok((dts, counts, raws))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_units_for_large_sizes() {
        assert_eq!(byte_unit(&[0, 5, c_int::MAX as usize], "t").unwrap(), 1);
        assert_eq!(byte_unit(&[], "t").unwrap(), 1);
        assert_eq!(byte_unit(&[0, (1 << 31) + 2], "t").unwrap(), 2);
        assert_eq!(byte_unit(&[1 << 40, 1 << 20], "t").unwrap(), 1 << 16);
        assert!(byte_unit(&[(1 << 31) + 1], "t").is_err());
        assert!(byte_unit(&[1 << 48, 8], "t").is_err());
    }

    #[test]
    fn not_initialised_is_an_error() {
        // No test in this binary initialises MPI.
        assert!(enter().is_err());
    }
}
