//! The communicator trait, its request type, typed buffers and strided layouts.

use crate::error::{CommError, Result};
use num_complex::Complex64;

/// Largest tag available to callers. Tags above it are reserved for the
/// collectives a backend builds from point-to-point messages.
pub const MAX_USER_TAG: u32 = (1 << 24) - 1;

/// Reduction operators for [`Communicator::allreduce_f64`] and friends.
///
/// Floating-point `Sum` is not associative, so its bits may depend on the rank
/// count; use [`crate::exact::allreduce_exact_sum`] where the result must not.
/// Every backend returns the same bits on every rank of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// Element-wise minimum.
    Min,
    /// Element-wise maximum.
    Max,
    /// Element-wise sum (in rank order for the in-process backend).
    Sum,
}

/// A plain-data element type that can travel in messages.
///
/// # Safety
/// Implementors must have no padding and no invalid bit patterns, so that a
/// slice of them may be viewed as bytes and rebuilt from any bytes.
pub unsafe trait Elem: Copy + Send + Sync + 'static {}
// SAFETY: primitive numbers, every bit pattern valid, no padding.
unsafe impl Elem for u8 {}
// SAFETY: as above.
unsafe impl Elem for i32 {}
// SAFETY: as above.
unsafe impl Elem for u32 {}
// SAFETY: as above.
unsafe impl Elem for i64 {}
// SAFETY: as above.
unsafe impl Elem for u64 {}
// SAFETY: as above.
unsafe impl Elem for f32 {}
// SAFETY: as above.
unsafe impl Elem for f64 {}
// SAFETY: `Complex<f64>` is `#[repr(C)]` with two f64 fields, no padding.
unsafe impl Elem for Complex64 {}

/// The `len` bytes at `data` as a slice (an empty slice when `len` is 0,
/// whatever `data` is), for backends implementing `isend_raw`.
///
/// # Safety
/// `data` must be valid for reads of `len` bytes for the returned lifetime
/// when `len` is not 0.
pub(crate) unsafe fn raw_slice<'a>(data: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(data, len) }
}

/// Views a slice of elements as bytes.
pub fn as_bytes<T: Elem>(s: &[T]) -> &[u8] {
    // SAFETY: `Elem` guarantees plain data without padding.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// Views a mutable slice of elements as bytes.
pub fn as_bytes_mut<T: Elem>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: `Elem` guarantees every bit pattern is a valid `T`.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// A block of elements inside a buffer, described without packing: the
/// element `(h, i, j, k)` with `h < counts[0]`, `i < counts[1]`,
/// `j < counts[2]`, `k < counts[3]` sits at
/// `offset + h * strides[0] + i * strides[1] + j * strides[2] + k * strides[3]`
/// (all in elements). Elements travel in that order, `k` fastest.
///
/// Four levels hold a sub-box of a 3D array in any memory order, repeated
/// over a batch of fields (the outer level). This is what
/// [`Communicator::alltoallw_bytes`] exchanges (the A2AW transposition of a
/// strided sub-array, an MPI nested vector type, without user packing) and
/// what a [`Redistribution`](crate::Redistribution) moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Strided {
    /// Index of the first element.
    pub offset: usize,
    /// Number of elements along each of the four nested directions.
    pub counts: [usize; 4],
    /// Distance in elements between neighbours along each direction.
    pub strides: [usize; 4],
}

impl Strided {
    /// `len` contiguous elements starting at `offset`.
    pub fn contiguous(offset: usize, len: usize) -> Self {
        Strided {
            offset,
            counts: [1, 1, 1, len],
            strides: [0, 0, 0, 1],
        }
    }

    /// `count` blocks of `block_len` contiguous elements, `stride` apart.
    pub fn vector(offset: usize, count: usize, block_len: usize, stride: usize) -> Self {
        Strided {
            offset,
            counts: [1, 1, count, block_len],
            strides: [0, 0, stride, 1],
        }
    }

    /// Three nested directions (the outer, fourth one of length 1).
    pub fn nested(offset: usize, counts: [usize; 3], strides: [usize; 3]) -> Self {
        Strided {
            offset,
            counts: [1, counts[0], counts[1], counts[2]],
            strides: [0, strides[0], strides[1], strides[2]],
        }
    }

    /// The block repeated `count` times, `stride` elements apart (a batch of
    /// fields stored one after another), as the new outer direction.
    ///
    /// # Errors
    /// [`CommError::Invalid`] when the outer direction is in use already.
    pub fn repeated(self, count: usize, stride: usize) -> Result<Self> {
        if self.counts[0] > 1 {
            return Err(CommError::invalid(format!(
                "cannot repeat {self:?}: its outer direction is in use"
            )));
        }
        let mut r = self;
        r.counts[0] = count;
        r.strides[0] = stride;
        Ok(r)
    }

    /// Number of elements described.
    pub fn len(&self) -> usize {
        self.counts.iter().product()
    }

    /// True when no element is described.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One past the largest element index touched (0 when empty).
    pub fn extent(&self) -> usize {
        if self.is_empty() {
            return 0;
        }
        self.offset
            + (0..4)
                .map(|d| (self.counts[d] - 1) * self.strides[d])
                .sum::<usize>()
            + 1
    }

    /// Checks that the layout fits a buffer of `len` elements.
    pub fn check_fits(&self, len: usize, what: &str) -> Result<()> {
        if self.extent() > len {
            return Err(CommError::invalid(format!(
                "{what}: strided block {self:?} reaches element {} but the buffer holds {len}",
                self.extent() - 1
            )));
        }
        Ok(())
    }

    /// The same counts, stored contiguously in travel order from element 0
    /// (the layout of a packed message of this block).
    pub fn packed(&self) -> Strided {
        let [_, c1, c2, c3] = self.counts;
        Strided {
            offset: 0,
            counts: self.counts,
            strides: [c1 * c2 * c3, c2 * c3, c3, 1],
        }
    }

    /// Copies the described elements (of `elem` bytes each) out of `src`
    /// into the contiguous `dst`.
    ///
    /// # Panics
    /// When the block reaches past `src` or `dst` is shorter than the block.
    pub fn gather_bytes(&self, src: &[u8], elem: usize, dst: &mut [u8]) {
        copy_strided_bytes(src, self, dst, &self.packed(), elem);
    }

    /// Appends the described elements of `src` (elements of `elem` bytes)
    /// to `dst`: [`Strided::gather_bytes`] into a vector that grows by the
    /// block's length.
    pub fn gather_bytes_into(&self, src: &[u8], elem: usize, dst: &mut Vec<u8>) {
        let start = dst.len();
        dst.resize(start + self.len() * elem, 0);
        self.gather_bytes(src, elem, &mut dst[start..]);
    }

    /// Copies the contiguous `src` into the described elements of `dst`.
    ///
    /// # Panics
    /// When `src` is shorter than the block or the block reaches past `dst`.
    pub fn scatter_bytes(&self, src: &[u8], elem: usize, dst: &mut [u8]) {
        copy_strided_bytes(src, &self.packed(), dst, self, elem);
    }

    /// Copies the described elements out of `src` into the contiguous `dst`.
    ///
    /// # Panics
    /// When the block reaches past `src` or `dst` is shorter than the block.
    pub fn gather<T: Copy>(&self, src: &[T], dst: &mut [T]) {
        copy_same_shape(src, self, dst, &self.packed());
    }

    /// Copies the contiguous `src` into the described elements of `dst`.
    ///
    /// # Panics
    /// When `src` is shorter than the block or the block reaches past `dst`.
    pub fn scatter<T: Copy>(&self, src: &[T], dst: &mut [T]) {
        copy_same_shape(src, &self.packed(), dst, self);
    }

    /// Calls `f(element_offset, element_count)` for each maximal run of
    /// consecutive elements, in travel order.
    pub fn for_each_run(&self, mut f: impl FnMut(usize, usize)) {
        if self.is_empty() {
            return;
        }
        let [c0, c1, c2, c3] = self.counts;
        let [s0, s1, s2, s3] = self.strides;
        for h in 0..c0 {
            for i in 0..c1 {
                for j in 0..c2 {
                    let base = self.offset + h * s0 + i * s1 + j * s2;
                    if s3 == 1 {
                        f(base, c3);
                    } else {
                        for k in 0..c3 {
                            f(base + k * s3, 1);
                        }
                    }
                }
            }
        }
    }
}

/// Copies the elements of block `from` in `src` to the elements of block
/// `to` in `dst`, element for element in travel order (the blocks have the
/// same length).
pub(crate) fn copy_strided<T: Copy>(src: &[T], from: &Strided, dst: &mut [T], to: &Strided) {
    debug_assert_eq!(from.len(), to.len());
    if from.counts == to.counts {
        copy_same_shape(src, from, dst, to);
    } else {
        // Different shapes of the same length: merge the two sequences of runs.
        merge_runs(from, to, |a, b, n| {
            dst[b..b + n].copy_from_slice(&src[a..a + n]);
        });
    }
}

/// Edge of the square tiles in which [`copy_same_shape`] transposes.
const TILE: usize = 16;

/// Copies block `from` of `src` to block `to` of `dst`, blocks of the same
/// counts, element for element.
///
/// Rows (the innermost direction) contiguous on both sides are copied
/// whole. Where one side's rows are strided and that side is contiguous
/// along an outer direction instead (a transposition: a pencil of one
/// memory order into a pencil of another), the copy goes by square tiles of
/// that direction and the rows, `TILE` by `TILE` elements, so each cache
/// line read or written is used whole while it is in cache; element by
/// element, a transposition of a large block reads or writes a whole line
/// for every element.
///
/// # Panics
/// When a block reaches past its buffer.
fn copy_same_shape<T: Copy>(src: &[T], from: &Strided, dst: &mut [T], to: &Strided) {
    debug_assert_eq!(from.counts, to.counts);
    if from.is_empty() {
        return;
    }
    assert!(
        from.extent() <= src.len() && to.extent() <= dst.len(),
        "strided copy: block {from:?} of {} elements into block {to:?} of {}",
        src.len(),
        dst.len()
    );
    let c = from.counts;
    let (fs, ts) = (from.strides, to.strides);
    // A direction of count 1 is contiguous whatever its stride.
    let unit = |st: [usize; 4], d: usize| st[d] == 1 || c[d] == 1;
    if unit(fs, 3) && unit(ts, 3) {
        let n = c[3];
        for h in 0..c[0] {
            for i in 0..c[1] {
                for j in 0..c[2] {
                    let a = from.offset + h * fs[0] + i * fs[1] + j * fs[2];
                    let b = to.offset + h * ts[0] + i * ts[1] + j * ts[2];
                    dst[b..b + n].copy_from_slice(&src[a..a + n]);
                }
            }
        }
        return;
    }
    // The outer direction along which the side with strided rows is
    // contiguous: tiles of it and the rows keep both sides' lines in cache.
    let strided_side = if unit(ts, 3) { fs } else { ts };
    let partner = (0..3).rev().find(|&d| c[d] > 1 && strided_side[d] == 1);
    let d = partner.unwrap_or(2);
    let tile = if partner.is_some() { TILE } else { c[d].max(1) };
    let [o0, o1] = match d {
        0 => [1, 2],
        1 => [0, 2],
        _ => [0, 1],
    };
    for x in 0..c[o0] {
        for y in 0..c[o1] {
            let a0 = from.offset + x * fs[o0] + y * fs[o1];
            let b0 = to.offset + x * ts[o0] + y * ts[o1];
            for jb in (0..c[d]).step_by(tile) {
                let je = (jb + tile).min(c[d]);
                for kb in (0..c[3]).step_by(TILE) {
                    let ke = (kb + TILE).min(c[3]);
                    for j in jb..je {
                        let (a, b) = (a0 + j * fs[d], b0 + j * ts[d]);
                        for k in kb..ke {
                            dst[b + k * ts[3]] = src[a + k * fs[3]];
                        }
                    }
                }
            }
        }
    }
}

/// [`copy_strided`] on raw bytes, for elements of `elem` bytes.
pub(crate) fn copy_strided_bytes(
    src: &[u8],
    from: &Strided,
    dst: &mut [u8],
    to: &Strided,
    elem: usize,
) {
    debug_assert_eq!(from.len(), to.len());
    /// The copy on elements of `N` bytes (any alignment).
    fn as_elems<const N: usize>(src: &[u8], from: &Strided, dst: &mut [u8], to: &Strided) {
        let s: &[[u8; N]] = {
            // SAFETY: `[u8; N]` has size `N` and alignment 1, so the first
            // `len / N * N` bytes of `src` are `len / N` arrays, borrowed
            // as `src` is.
            unsafe { std::slice::from_raw_parts(src.as_ptr().cast(), src.len() / N) }
        };
        let d: &mut [[u8; N]] = {
            // SAFETY: as above, for the unique borrow of `dst`.
            unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast(), dst.len() / N) }
        };
        copy_strided(s, from, d, to);
    }
    match elem {
        1 => copy_strided(src, from, dst, to),
        2 => as_elems::<2>(src, from, dst, to),
        4 => as_elems::<4>(src, from, dst, to),
        8 => as_elems::<8>(src, from, dst, to),
        16 => as_elems::<16>(src, from, dst, to),
        32 => as_elems::<32>(src, from, dst, to),
        _ => merge_runs(from, to, |a, b, n| {
            dst[b * elem..(b + n) * elem].copy_from_slice(&src[a * elem..(a + n) * elem]);
        }),
    }
}

/// Walks the runs of `from` and `to` (blocks of the same length) together
/// and calls `copy(from_offset, to_offset, count)` for each stretch that is
/// consecutive in both, in travel order.
fn merge_runs(from: &Strided, to: &Strided, mut copy: impl FnMut(usize, usize, usize)) {
    let (mut a, mut b) = (Runs::new(from), Runs::new(to));
    let (mut ra, mut rb) = (a.next(), b.next());
    while let (Some((ao, an)), Some((bo, bn))) = (ra, rb) {
        let n = an.min(bn);
        copy(ao, bo, n);
        ra = if an > n {
            Some((ao + n, an - n))
        } else {
            a.next()
        };
        rb = if bn > n {
            Some((bo + n, bn - n))
        } else {
            b.next()
        };
    }
}

/// The runs of consecutive elements of a [`Strided`] block, in travel order.
struct Runs<'a> {
    l: &'a Strided,
    row: usize,
    rows: usize,
    k: usize,
}

impl<'a> Runs<'a> {
    fn new(l: &'a Strided) -> Self {
        let rows = if l.is_empty() {
            0
        } else {
            l.counts[0] * l.counts[1] * l.counts[2]
        };
        Runs {
            l,
            row: 0,
            rows,
            k: 0,
        }
    }
}

impl Iterator for Runs<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        if self.row >= self.rows {
            return None;
        }
        let [_, c1, c2, c3] = self.l.counts;
        let [s0, s1, s2, s3] = self.l.strides;
        let (h, i, j) = (self.row / (c1 * c2), (self.row / c2) % c1, self.row % c2);
        let base = self.l.offset + h * s0 + i * s1 + j * s2;
        if s3 == 1 {
            self.row += 1;
            return Some((base, c3));
        }
        let run = (base + self.k * s3, 1);
        self.k += 1;
        if self.k == c3 {
            self.k = 0;
            self.row += 1;
        }
        Some(run)
    }
}

/// The state behind a [`Request`]; implemented by each backend.
pub trait RequestImpl: Send {
    /// Completes the request if possible without blocking; true when done.
    fn test(&mut self) -> Result<bool>;
    /// Blocks until the request completes.
    fn wait(&mut self) -> Result<()>;
    /// Called instead of [`wait`](Self::wait) when an incomplete request is
    /// dropped while its thread unwinds from a panic, where waiting could
    /// block on a peer that will never send. It must return only once the
    /// backend no longer touches the buffer, or end the process. The
    /// default waits.
    fn abandon(&mut self) {
        let _ = self.wait();
    }
}

/// A non-blocking send or receive in flight, as a backend hands it out.
///
/// A request does not borrow the buffer it moves: the `unsafe`
/// [`Communicator::isend_raw`] / [`Communicator::irecv_raw`] that create one
/// leave keeping the buffer alive to their caller. Safe code reaches
/// non-blocking transfers through [`scope`](crate::scope()), whose requests
/// cannot outlive their buffers, or through types that own both the buffers
/// and the requests (the `halo` exchanger).
///
/// Dropping a request that has not completed waits for it (and ignores its
/// error); call [`Request::wait`] or [`wait_all`] to see errors. While the
/// thread unwinds from a panic it is abandoned instead
/// ([`RequestImpl::abandon`]): the in-process backend drops it (its bytes
/// move only when the receiver tests or waits), the MPI backend ends the
/// job, which a panicking rank does anyway.
pub struct Request {
    inner: Inner,
}

/// A request's state: the in-process backend's receives are held inline
/// (no allocation per message); other backends' requests are boxed.
enum Inner {
    Done,
    Local(crate::local::RecvReq),
    Boxed(Box<dyn RequestImpl>),
}

impl Inner {
    fn as_impl(&mut self) -> Option<&mut dyn RequestImpl> {
        match self {
            Inner::Done => None,
            Inner::Local(r) => Some(r),
            Inner::Boxed(r) => Some(&mut **r),
        }
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("done", &self.is_done())
            .finish()
    }
}

impl Request {
    /// Wraps a backend request.
    pub fn new(inner: Box<dyn RequestImpl>) -> Self {
        Request {
            inner: Inner::Boxed(inner),
        }
    }

    /// An in-process receive, held without allocation.
    pub(crate) fn local(r: crate::local::RecvReq) -> Self {
        Request {
            inner: Inner::Local(r),
        }
    }

    /// A request that is already complete.
    pub fn completed() -> Self {
        Request { inner: Inner::Done }
    }

    /// True once the request has completed (after a successful test or wait).
    pub fn is_done(&self) -> bool {
        matches!(self.inner, Inner::Done)
    }

    /// Completes the request if that is possible without blocking.
    pub fn test(&mut self) -> Result<bool> {
        let Some(r) = self.inner.as_impl() else {
            return Ok(true);
        };
        match r.test() {
            Ok(false) => Ok(false),
            // A request that completed, or failed, is finished either way.
            done => {
                self.inner = Inner::Done;
                done
            }
        }
    }

    /// Blocks until the request completes.
    pub fn wait(&mut self) -> Result<()> {
        let res = match self.inner.as_impl() {
            Some(r) => r.wait(),
            None => return Ok(()),
        };
        self.inner = Inner::Done;
        res
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if let Some(r) = self.inner.as_impl() {
            if std::thread::panicking() {
                r.abandon();
            } else {
                let _ = r.wait();
            }
        }
    }
}

/// Waits for every request; returns the first error after trying them all.
pub fn wait_all(reqs: &mut [Request]) -> Result<()> {
    let mut first = None;
    for r in reqs.iter_mut() {
        if let Err(e) = r.wait() {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// A group of ranks that exchange messages: the one abstraction every
/// mechanism crate talks to.
///
/// Byte-level methods are the backend's job; typed wrappers live in
/// [`CommExt`], implemented for every communicator. All collectives must be
/// called by every rank of the communicator in the same order.
pub trait Communicator: Send {
    /// This rank, in `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Short name of the backend (`"in-process"`, `"mpi"`).
    fn backend(&self) -> &'static str;
    /// Blocks until every rank has entered.
    fn barrier(&self) -> Result<()>;
    /// Collective: ranks with the same `Some(color)` form a new communicator,
    /// ordered by `(key, old rank)`; `None` opts out and gets `None` back.
    fn split(&self, color: Option<u32>, key: usize) -> Result<Option<Box<dyn Communicator>>>;
    /// Starts sending the `len` bytes at `data` to `dest` with `tag`.
    ///
    /// Safe code sends through [`scope`](crate::scope()) or
    /// [`CommExt::send`].
    ///
    /// # Safety
    /// `data` must be valid for reads of `len` bytes (any non-null, even
    /// dangling, pointer when `len` is 0), and those bytes must not be
    /// written or freed until the returned request has completed: until
    /// [`Request::wait`] returns, [`Request::test`] returns `Ok(true)`,
    /// [`wait_any`](Self::wait_any) reports it, or it is dropped (dropping
    /// waits). Leaking the request (`std::mem::forget`, a reference cycle)
    /// and then releasing the bytes is undefined behaviour: the backend may
    /// still read them.
    unsafe fn isend_raw(
        &self,
        dest: usize,
        tag: u32,
        data: *const u8,
        len: usize,
    ) -> Result<Request>;
    /// Starts receiving exactly `len` bytes from `src` with `tag` into `buf`.
    ///
    /// Safe code receives through [`scope`](crate::scope()) or
    /// [`CommExt::recv`].
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes (any non-null pointer
    /// when `len` is 0), and nothing else may read, write or free them until
    /// the returned request has completed (as for
    /// [`isend_raw`](Self::isend_raw)). Leaking the request and then
    /// releasing or touching the bytes is undefined behaviour: the backend
    /// may still write them.
    unsafe fn irecv_raw(&self, src: usize, tag: u32, buf: *mut u8, len: usize) -> Result<Request>;
    /// Blocks until one not-yet-complete request completes and returns its
    /// index, or `None` when all are already complete.
    fn wait_any(&self, reqs: &mut [Request]) -> Result<Option<usize>>;
    /// A hint from a plan: this rank will from now on send up to `messages`
    /// messages of at most `bytes` bytes that may be in flight at once. A
    /// backend that buffers messages (the in-process one) sets that much
    /// aside now, so a warm exchange allocates nothing; the default does
    /// nothing.
    fn reserve_messages(&self, messages: usize, bytes: usize) {
        let _ = (messages, bytes);
    }
    /// Personalised all-to-all with per-rank byte counts and displacements.
    fn alltoallv_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut [u8],
        recv_counts: &[usize],
        recv_displs: &[usize],
    ) -> Result<()>;
    /// Strided all-to-all (A2AW): the block for rank `r` is read from `send`
    /// through `send_layouts[r]` and lands in `recv` through
    /// `recv_layouts[r]`; layouts count elements of `elem_size` bytes.
    fn alltoallw_bytes(
        &self,
        send: &[u8],
        send_layouts: &[Strided],
        recv: &mut [u8],
        recv_layouts: &[Strided],
        elem_size: usize,
    ) -> Result<()>;
    /// Gathers `send` from every rank into `recv` at `displs[r]` (`counts[r]`
    /// bytes from rank `r`) on every rank.
    fn allgatherv_bytes(
        &self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()>;
    /// Copies `buf` of `root` into `buf` of every rank.
    fn broadcast_bytes(&self, buf: &mut [u8], root: usize) -> Result<()>;
    /// Element-wise reduction of `data` over all ranks, in place.
    fn allreduce_f64(&self, data: &mut [f64], op: ReduceOp) -> Result<()>;
    /// Element-wise reduction of `data` over all ranks, in place.
    fn allreduce_i64(&self, data: &mut [i64], op: ReduceOp) -> Result<()>;
}

fn check_rank(rank: usize, size: usize) -> Result<()> {
    if rank >= size {
        return Err(CommError::InvalidRank { rank, size });
    }
    Ok(())
}

/// Validates a destination or source rank; for backends.
pub fn validate_peer(rank: usize, size: usize) -> Result<()> {
    check_rank(rank, size)
}

/// Validates a user tag; for backends.
pub fn validate_tag(tag: u32) -> Result<()> {
    if tag > MAX_USER_TAG {
        return Err(CommError::InvalidTag {
            tag,
            max: MAX_USER_TAG,
        });
    }
    Ok(())
}

/// Validates counts/displacements against a buffer; for backends.
pub fn validate_v(
    what: &str,
    len: usize,
    counts: &[usize],
    displs: &[usize],
    size: usize,
) -> Result<()> {
    if counts.len() != size {
        return Err(CommError::length(
            format!("{what} counts (one per rank)"),
            size,
            counts.len(),
        ));
    }
    if displs.len() != size {
        return Err(CommError::length(
            format!("{what} displacements (one per rank)"),
            size,
            displs.len(),
        ));
    }
    for r in 0..size {
        if displs[r] + counts[r] > len {
            return Err(CommError::invalid(format!(
                "{what}: block of rank {r} covers {}..{} but the buffer holds {len}",
                displs[r],
                displs[r] + counts[r]
            )));
        }
    }
    Ok(())
}

/// Typed convenience methods, available on every [`Communicator`]
/// (including `dyn Communicator`).
pub trait CommExt: Communicator {
    /// Blocking send of a typed slice.
    fn send<T: Elem>(&self, dest: usize, tag: u32, data: &[T]) -> Result<()> {
        let bytes = as_bytes(data);
        // SAFETY: `bytes` stays borrowed for this whole call, and the request
        // completes before it returns: waited here, or dropped (which
        // waits) when starting it failed half-way.
        unsafe { self.isend_raw(dest, tag, bytes.as_ptr(), bytes.len()) }?.wait()
    }
    /// Blocking receive into a typed slice (exactly its length).
    fn recv<T: Elem>(&self, src: usize, tag: u32, buf: &mut [T]) -> Result<()> {
        let bytes = as_bytes_mut(buf);
        // SAFETY: as in `send`; `bytes` is exclusively borrowed for this call.
        unsafe { self.irecv_raw(src, tag, bytes.as_mut_ptr(), bytes.len()) }?.wait()
    }
    /// All-to-all with `block` elements to and from every rank.
    fn alltoall<T: Elem>(&self, send: &[T], recv: &mut [T], block: usize) -> Result<()> {
        let p = self.size();
        if send.len() != p * block {
            return Err(CommError::length(
                "alltoall send buffer (size * block)",
                p * block,
                send.len(),
            ));
        }
        if recv.len() != p * block {
            return Err(CommError::length(
                "alltoall receive buffer (size * block)",
                p * block,
                recv.len(),
            ));
        }
        let es = std::mem::size_of::<T>();
        let counts = vec![block * es; p];
        let displs: Vec<usize> = (0..p).map(|r| r * block * es).collect();
        self.alltoallv_bytes(
            as_bytes(send),
            &counts,
            &displs,
            as_bytes_mut(recv),
            &counts,
            &displs,
        )
    }
    /// All-to-all with per-rank element counts and displacements.
    fn alltoallv<T: Elem>(
        &self,
        send: &[T],
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
        recv_displs: &[usize],
    ) -> Result<()> {
        let es = std::mem::size_of::<T>();
        let b = |v: &[usize]| v.iter().map(|x| x * es).collect::<Vec<_>>();
        self.alltoallv_bytes(
            as_bytes(send),
            &b(send_counts),
            &b(send_displs),
            as_bytes_mut(recv),
            &b(recv_counts),
            &b(recv_displs),
        )
    }
    /// Strided all-to-all (A2AW) of typed elements.
    fn alltoallw<T: Elem>(
        &self,
        send: &[T],
        send_layouts: &[Strided],
        recv: &mut [T],
        recv_layouts: &[Strided],
    ) -> Result<()> {
        let p = self.size();
        if send_layouts.len() != p {
            return Err(CommError::length(
                "alltoallw send layouts (one per rank)",
                p,
                send_layouts.len(),
            ));
        }
        if recv_layouts.len() != p {
            return Err(CommError::length(
                "alltoallw receive layouts (one per rank)",
                p,
                recv_layouts.len(),
            ));
        }
        // The message is built only on failure: a checked call allocates
        // nothing.
        for (r, l) in send_layouts.iter().enumerate() {
            if l.extent() > send.len() {
                l.check_fits(send.len(), &format!("alltoallw send layout for rank {r}"))?;
            }
        }
        for (r, l) in recv_layouts.iter().enumerate() {
            if l.extent() > recv.len() {
                l.check_fits(
                    recv.len(),
                    &format!("alltoallw receive layout for rank {r}"),
                )?;
            }
        }
        self.alltoallw_bytes(
            as_bytes(send),
            send_layouts,
            as_bytes_mut(recv),
            recv_layouts,
            std::mem::size_of::<T>(),
        )
    }
    /// Gathers one equal-sized block from every rank, in rank order.
    fn allgather<T: Elem>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let p = self.size();
        let n = send.len();
        if recv.len() != p * n {
            return Err(CommError::length(
                "allgather receive buffer (size * send length)",
                p * n,
                recv.len(),
            ));
        }
        let bytes = std::mem::size_of_val(send);
        let counts = vec![bytes; p];
        let displs: Vec<usize> = (0..p).map(|r| r * bytes).collect();
        self.allgatherv_bytes(as_bytes(send), as_bytes_mut(recv), &counts, &displs)
    }
    /// Gathers variable-sized blocks (element counts and displacements).
    fn allgatherv<T: Elem>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        let es = std::mem::size_of::<T>();
        let b = |v: &[usize]| v.iter().map(|x| x * es).collect::<Vec<_>>();
        self.allgatherv_bytes(as_bytes(send), as_bytes_mut(recv), &b(counts), &b(displs))
    }
    /// Gathers variable-sized blocks whose sizes are not known in advance;
    /// returns the concatenation in rank order and each rank's count.
    fn allgather_varying<T: Elem + Default>(&self, send: &[T]) -> Result<(Vec<T>, Vec<usize>)> {
        let p = self.size();
        let mut counts = vec![0u64; p];
        self.allgather(&[send.len() as u64], &mut counts)?;
        let counts: Vec<usize> = counts.into_iter().map(|c| c as usize).collect();
        let mut displs = vec![0; p];
        for r in 1..p {
            displs[r] = displs[r - 1] + counts[r - 1];
        }
        let mut out = vec![T::default(); counts.iter().sum()];
        self.allgatherv(send, &mut out, &counts, &displs)?;
        Ok((out, counts))
    }
    /// Broadcasts a typed buffer from `root`.
    fn broadcast<T: Elem>(&self, buf: &mut [T], root: usize) -> Result<()> {
        self.broadcast_bytes(as_bytes_mut(buf), root)
    }
    /// Reduces one value over all ranks.
    fn allreduce_scalar(&self, x: f64, op: ReduceOp) -> Result<f64> {
        let mut v = [x];
        self.allreduce_f64(&mut v, op)?;
        Ok(v[0])
    }
    /// Checks that every rank passed the same value; the error names the
    /// first rank that disagrees with rank 0.
    fn check_agree(&self, what: &str, values: &[i64]) -> Result<()> {
        let p = self.size();
        let n = values.len();
        let mut all = vec![0i64; n * p];
        self.allgather(values, &mut all)?;
        for r in 1..p {
            if all[r * n..(r + 1) * n] != all[..n] {
                return Err(CommError::invalid(format!(
                    "ranks disagree on {what}: rank 0 has {:?}, rank {r} has {:?}",
                    &all[..n],
                    &all[r * n..(r + 1) * n]
                )));
            }
        }
        Ok(())
    }
}

impl<C: Communicator + ?Sized> CommExt for C {}

#[cfg(test)]
mod strided_tests {
    use super::Strided;

    #[test]
    fn gather_into_appends_what_gather_copies() {
        // A 3 x 4 x 5 sub-box of a 6 x 7 x 9 array, and one with runs of one
        // element (the innermost stride 2), for elements of 8 and 16 bytes.
        for (l, elems) in [
            (Strided::nested(11, [3, 4, 5], [63, 9, 1]), 6 * 7 * 9),
            (Strided::nested(1, [2, 3, 4], [40, 10, 2]), 80),
        ] {
            for elem in [8, 16] {
                let src: Vec<u8> = (0..elems * elem).map(|i| (i * 7 % 251) as u8).collect();
                let mut want = vec![0u8; l.len() * elem];
                l.gather_bytes(&src, elem, &mut want);
                let mut got = vec![42u8, 43];
                l.gather_bytes_into(&src, elem, &mut got);
                assert_eq!(&got[..2], &[42, 43], "the vector's start is kept");
                assert_eq!(&got[2..], &want[..], "elem {elem}");
            }
        }
    }
}
