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
//! instead of aborting. A receive whose message is shorter or longer than
//! the buffer fails with [`CommError::MessageTruncated`], as in the
//! in-process backend; a longer message only fills the buffer (the rest is
//! dropped by MPI), and `got` is the length the library reports (Open MPI:
//! the full message length).
//!
//! **Collective argument checks.** MPI trusts that every rank passes
//! matching counts to a collective; a mismatch silently corrupts data or
//! hangs. With checks on, each collective first exchanges the sizes (one
//! extra small collective: an alltoall of counts for alltoall(v/w), an
//! allgather for allgatherv, a broadcast for broadcast, an allreduce for
//! allreduce) and returns [`CommError::LengthMismatch`] on the rank that
//! sees the disagreement. Checks are on in debug builds and off in release
//! builds; `COMM_MPI_CHECKS=1` / `=0` overrides that at [`init`], and
//! [`MpiComm::set_checks`] per communicator (inherited by `split` and
//! [`MpiComm::cart_create`]).
//!
//! **Large messages.** MPI-3 counts are `int`. Byte counts and
//! displacements above `i32::MAX` are sent as units of up to 64 KiB (the
//! largest power of two dividing every count and displacement involved);
//! reductions and broadcasts are split into chunks. Only sizes that fit
//! none of these give [`CommError::Invalid`].
//!
//! **Requests.** [`Communicator::isend_bytes`] and
//! [`Communicator::irecv_bytes`] hand the caller's buffer to
//! `MPI_Isend`/`MPI_Irecv` without copying; the [`Request`] waits for the
//! transfer when dropped, which is what keeps the borrow sound. Do not
//! `std::mem::forget` an MPI request (or leak it through an `Rc` cycle):
//! the buffer would be released while MPI may still read or write it.
//! [`Communicator::wait_any`] polls `MPI_Test` over the pending requests in
//! turn (the trait's [`Request`] hides the raw handles, so `MPI_Waitany`
//! cannot be used); each test also drives MPI's progress engine.
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
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
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
/// Default of [`MpiComm::checks`] for new world handles.
static DEFAULT_CHECKS: AtomicBool = AtomicBool::new(cfg!(debug_assertions));

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

/// The error class of an MPI error code.
fn error_class(code: c_int) -> c_int {
    let mut class = code;
    // SAFETY: plain query with a valid out-pointer.
    unsafe { ffi::MPI_Error_class(code, &mut class) };
    class
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
        for d in (0..3).rev() {
            let n = l.counts[d];
            if n == 1 {
                continue;
            }
            cur = if d == 2 && l.strides[2] == 1 {
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
    match std::env::var("COMM_MPI_CHECKS").as_deref() {
        Ok("0") | Ok("false") | Ok("off") => DEFAULT_CHECKS.store(false, Ordering::Relaxed),
        Ok("1") | Ok("true") | Ok("on") => DEFAULT_CHECKS.store(true, Ordering::Relaxed),
        _ => {}
    }
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
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMI_RANK",
        "PMIX_RANK",
        "MV2_COMM_WORLD_SIZE",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
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
            checks: DEFAULT_CHECKS.load(Ordering::Relaxed),
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
    /// passed matching sizes (see the [module documentation](self)).
    pub fn checks(&self) -> bool {
        self.checks
    }

    /// Turns the collective argument checks on or off for this
    /// communicator (and those later split from it). Every rank must
    /// choose the same setting.
    pub fn set_checks(&mut self, on: bool) {
        self.checks = on;
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
    /// `r`); returns what each rank sends to this one.
    fn exchange_counts(&self, mine: &[usize], _g: &Guard) -> Result<Vec<usize>> {
        let send: Vec<u64> = mine.iter().map(|&c| c as u64).collect();
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
        Ok(recv.into_iter().map(|c| c as usize).collect())
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

    /// Checked mode: every rank passed `len` elements to a reduction.
    fn check_reduce_len(&self, len: usize, g: &Guard) -> Result<()> {
        let mut v = [len as i64, -(len as i64)];
        // SAFETY: predefined datatype handle from the rsmpi shim.
        let dt = unsafe { ffi::RSMPI_INT64_T };
        self.allreduce_raw(&mut v, dt, ReduceOp::Max, g)?;
        let (max, min) = (v[0] as usize, (-v[1]) as usize);
        if min != len || max != len {
            return Err(CommError::length(
                format!(
                    "allreduce length on rank {} (other ranks pass {min}..={max})",
                    self.rank
                ),
                if min != len { min } else { max },
                len,
            ));
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

/// A send or receive started by `MPI_Isend` / `MPI_Irecv`.
struct MpiRequest<'a> {
    raw: ffi::MPI_Request,
    /// For receives: source, tag and buffer length, to check the count.
    recv: Option<(usize, u32, usize)>,
    /// The buffer MPI reads or writes stays borrowed while this lives.
    _buf: PhantomData<&'a mut [u8]>,
}

// SAFETY: as for `MpiComm`: the request handle names a process-wide object
// and every call goes through `enter()`; the request is used by one thread
// at a time (`&mut self`).
unsafe impl Send for MpiRequest<'_> {}

impl MpiRequest<'_> {
    fn done(&self) -> bool {
        self.raw == request_null()
    }

    /// Interprets the outcome of a completed MPI_Test / MPI_Wait.
    fn finish(&mut self, call: &'static str, rc: c_int, status: &ffi::MPI_Status) -> Result<()> {
        // A request that completed, or failed, is finished either way.
        self.raw = request_null();
        let Some((src, tag, expected)) = self.recv else {
            return check(call, rc);
        };
        let mut got: ffi::MPI_Count = 0;
        // SAFETY: a status filled by the completing call; byte datatype.
        let grc = unsafe { ffi::MPI_Get_elements_x(status, byte_type(), &mut got) };
        let got = if grc == SUCCESS && got >= 0 {
            Some(got as usize)
        } else {
            None
        };
        if rc != SUCCESS {
            if error_class(rc) == ffi::MPI_ERR_TRUNCATE as c_int {
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

impl RequestImpl for MpiRequest<'_> {
    fn test(&mut self) -> Result<bool> {
        if self.done() {
            return Ok(true);
        }
        let _g = enter()?;
        let mut flag: c_int = 0;
        let mut status = new_status();
        // SAFETY: a live request handle owned by `self`; valid out-pointers.
        let rc = unsafe { ffi::MPI_Test(&mut self.raw, &mut flag, &mut status) };
        if rc == SUCCESS && flag == 0 {
            return Ok(false);
        }
        self.finish("MPI_Test", rc, &status).map(|_| true)
    }

    fn wait(&mut self) -> Result<()> {
        if self.done() {
            return Ok(());
        }
        let _g = enter()?;
        let mut status = new_status();
        // SAFETY: a live request handle owned by `self`; valid out-pointer.
        let rc = unsafe { ffi::MPI_Wait(&mut self.raw, &mut status) };
        self.finish("MPI_Wait", rc, &status)
    }
}

impl Drop for MpiRequest<'_> {
    fn drop(&mut self) {
        // `Request` waits before dropping us, so this only runs when that
        // wait could not reach MPI. After finalisation nothing moves any
        // more; a request stranded on a thread MPI may not be called from
        // would leave MPI writing to a released buffer, so stop instead.
        if !self.done() {
            let _ = self.wait();
            if !self.done() && STATE.load(Ordering::Acquire) == STATE_LIVE {
                eprintln!("comm::mpi: an MPI request could not be completed before its buffer was released; aborting");
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

    fn isend_bytes<'a>(&'a self, dest: usize, tag: u32, data: &'a [u8]) -> Result<Request<'a>> {
        validate_peer(dest, self.size)?;
        self.check_tag(tag)?;
        let unit = byte_unit(&[data.len()], "isend")?;
        let _g = enter()?;
        let dt = Dt::bytes(unit)?;
        let mut raw = request_null();
        // SAFETY: `data` holds `len / unit` elements of `dt` and stays
        // borrowed (unmoved, unfreed) until the returned request completes:
        // `Request` waits on drop. `dt` may be freed once the send started.
        let rc = unsafe {
            ffi::MPI_Isend(
                data.as_ptr().cast::<c_void>(),
                (data.len() / unit) as c_int,
                dt.raw,
                dest as c_int,
                tag as c_int,
                self.raw,
                &mut raw,
            )
        };
        check("MPI_Isend", rc)?;
        Ok(Request::new(Box::new(MpiRequest {
            raw,
            recv: None,
            _buf: PhantomData,
        })))
    }

    fn irecv_bytes<'a>(&'a self, src: usize, tag: u32, buf: &'a mut [u8]) -> Result<Request<'a>> {
        validate_peer(src, self.size)?;
        self.check_tag(tag)?;
        let unit = byte_unit(&[buf.len()], "irecv")?;
        let _g = enter()?;
        let dt = Dt::bytes(unit)?;
        let mut raw = request_null();
        // SAFETY: `buf` holds `len / unit` elements of `dt`; it stays
        // mutably borrowed until the returned request completes (`Request`
        // waits on drop), so nothing else touches it meanwhile.
        let rc = unsafe {
            ffi::MPI_Irecv(
                buf.as_mut_ptr().cast::<c_void>(),
                (buf.len() / unit) as c_int,
                dt.raw,
                src as c_int,
                tag as c_int,
                self.raw,
                &mut raw,
            )
        };
        check("MPI_Irecv", rc)?;
        Ok(Request::new(Box::new(MpiRequest {
            raw,
            recv: Some((src, tag, buf.len())),
            _buf: PhantomData,
        })))
    }

    /// Polls the pending requests with `MPI_Test` in turn (yielding the
    /// thread between rounds after a short spin) until one completes.
    fn wait_any(&self, reqs: &mut [Request<'_>]) -> Result<Option<usize>> {
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
        let p = self.size;
        validate_v("alltoallv send", send.len(), send_counts, send_displs, p)?;
        validate_v("alltoallv receive", recv.len(), recv_counts, recv_displs, p)?;
        let me = self.rank;
        if send_counts[me] != recv_counts[me] {
            return Err(CommError::length(
                format!("alltoallv block kept by rank {me}"),
                recv_counts[me],
                send_counts[me],
            ));
        }
        let su = byte_unit(&[send_counts, send_displs].concat(), "alltoallv send")?;
        let ru = byte_unit(&[recv_counts, recv_displs].concat(), "alltoallv receive")?;
        let div = |v: &[usize], u: usize| v.iter().map(|&x| (x / u) as c_int).collect::<Vec<_>>();
        let (sc, sd, rc_, rd) = (
            div(send_counts, su),
            div(send_displs, su),
            div(recv_counts, ru),
            div(recv_displs, ru),
        );
        let g = enter()?;
        if self.checks {
            let got = self.exchange_counts(send_counts, &g)?;
            if let Some(r) = (0..p).find(|&r| got[r] != recv_counts[r]) {
                return Err(CommError::length(
                    format!(
                        "alltoallv: rank {r} sends {} bytes but recv_counts[{r}] on rank {me} is",
                        got[r]
                    ),
                    got[r],
                    recv_counts[r],
                ));
            }
        }
        let (st, rt) = (Dt::bytes(su)?, Dt::bytes(ru)?);
        // SAFETY: validate_v checked every block against its buffer, and
        // the counts and displacements are exact multiples of the units.
        let rc = unsafe {
            ffi::MPI_Alltoallv(
                send.as_ptr().cast::<c_void>(),
                sc.as_ptr(),
                sd.as_ptr(),
                st.raw,
                recv.as_mut_ptr().cast::<c_void>(),
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
        let p = self.size;
        if send_layouts.len() != p || recv_layouts.len() != p {
            return Err(CommError::length(
                "alltoallw layouts (one per rank)",
                p,
                send_layouts.len().min(recv_layouts.len()),
            ));
        }
        // MPI reads and writes through the layouts: they must fit.
        if elem_size > 0 {
            for (r, l) in send_layouts.iter().enumerate() {
                l.check_fits(
                    send.len() / elem_size,
                    &format!("alltoallw send layout for rank {r}"),
                )?;
            }
            for (r, l) in recv_layouts.iter().enumerate() {
                l.check_fits(
                    recv.len() / elem_size,
                    &format!("alltoallw receive layout for rank {r}"),
                )?;
            }
        }
        let me = self.rank;
        if recv_layouts[me].len() != send_layouts[me].len() {
            return Err(CommError::length(
                format!("alltoallw block kept by rank {me} (elements)"),
                recv_layouts[me].len(),
                send_layouts[me].len(),
            ));
        }
        let g = enter()?;
        if self.checks {
            let mine: Vec<usize> = send_layouts.iter().map(Strided::len).collect();
            let got = self.exchange_counts(&mine, &g)?;
            if let Some(r) = (0..p).find(|&r| got[r] != recv_layouts[r].len()) {
                return Err(CommError::length(
                    format!("alltoallw: rank {r} sends {} elements but the receive layout for it on rank {me} holds", got[r]),
                    got[r],
                    recv_layouts[r].len(),
                ));
            }
        }
        let (_skeep, scounts, stypes) = layout_types(send_layouts, elem_size)?;
        let (_rkeep, rcounts, rtypes) = layout_types(recv_layouts, elem_size)?;
        let displs = vec![0 as c_int; p];
        // SAFETY: each datatype was checked to stay inside its buffer
        // (check_fits above); the types live until after the call.
        let rc = unsafe {
            ffi::MPI_Alltoallw(
                send.as_ptr().cast::<c_void>(),
                scounts.as_ptr(),
                displs.as_ptr(),
                stypes.as_ptr(),
                recv.as_mut_ptr().cast::<c_void>(),
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
        let p = self.size;
        validate_v("allgatherv receive", recv.len(), counts, displs, p)?;
        let me = self.rank;
        if counts[me] != send.len() {
            return Err(CommError::length(
                format!("allgatherv count for rank {me}"),
                counts[me],
                send.len(),
            ));
        }
        let su = byte_unit(&[send.len()], "allgatherv send")?;
        let ru = byte_unit(&[counts, displs].concat(), "allgatherv receive")?;
        let rcounts: Vec<c_int> = counts.iter().map(|&c| (c / ru) as c_int).collect();
        let rdispls: Vec<c_int> = displs.iter().map(|&d| (d / ru) as c_int).collect();
        let _g = enter()?;
        if self.checks {
            let mine = [send.len() as u64];
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
            if let Some(r) = (0..p).find(|&r| all[r] as usize != counts[r]) {
                return Err(CommError::length(
                    format!(
                        "allgatherv: rank {r} sends {} bytes but counts[{r}] on rank {me} is",
                        all[r]
                    ),
                    all[r] as usize,
                    counts[r],
                ));
            }
        }
        let (st, rt) = (Dt::bytes(su)?, Dt::bytes(ru)?);
        // SAFETY: validate_v checked every block against `recv`; `send`
        // holds the count given; counts are exact multiples of the units.
        let rc = unsafe {
            ffi::MPI_Allgatherv(
                send.as_ptr().cast::<c_void>(),
                (send.len() / su) as c_int,
                st.raw,
                recv.as_mut_ptr().cast::<c_void>(),
                rcounts.as_ptr(),
                rdispls.as_ptr(),
                rt.raw,
                self.raw,
            )
        };
        check("MPI_Allgatherv", rc)
    }

    fn broadcast_bytes(&self, buf: &mut [u8], root: usize) -> Result<()> {
        validate_peer(root, self.size)?;
        let _g = enter()?;
        if self.checks {
            let mut len = [buf.len() as u64];
            // SAFETY: one u64 on every rank.
            let rc = unsafe {
                ffi::MPI_Bcast(
                    len.as_mut_ptr().cast::<c_void>(),
                    1,
                    u64_type(),
                    root as c_int,
                    self.raw,
                )
            };
            check("MPI_Bcast", rc)?;
            if len[0] as usize != buf.len() {
                return Err(CommError::length(
                    format!(
                        "broadcast buffer on rank {} (root {root} broadcasts {} bytes)",
                        self.rank, len[0]
                    ),
                    len[0] as usize,
                    buf.len(),
                ));
            }
        }
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
            self.check_reduce_len(data.len(), &g)?;
        }
        // SAFETY: predefined datatype handle from the rsmpi shim.
        let dt = unsafe { ffi::RSMPI_DOUBLE };
        self.allreduce_raw(data, dt, op, &g)
    }

    fn allreduce_i64(&self, data: &mut [i64], op: ReduceOp) -> Result<()> {
        let g = enter()?;
        if self.checks {
            self.check_reduce_len(data.len(), &g)?;
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
        assert_eq!(byte_unit(&[0, 3 << 31], "t").unwrap(), 2);
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
