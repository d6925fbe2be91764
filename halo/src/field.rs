//! Fields with ghost layers, local regions, and the pack/unpack abstraction.

use crate::HaloError;
use comm::{Elem, IndexBox};

/// A box of **padded local** indices (ghost cells included, so the first
/// owned cell along axis `d` is at index `ghost[d]`), half-open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Region {
    /// First index per axis.
    pub lo: [usize; 3],
    /// One past the last index per axis.
    pub hi: [usize; 3],
}

impl Region {
    /// Extent per axis.
    pub fn shape(&self) -> [usize; 3] {
        [0, 1, 2].map(|d| self.hi[d].saturating_sub(self.lo[d]))
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    /// True when the region holds no cell.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when padded index `p` lies inside.
    pub fn contains(&self, p: [usize; 3]) -> bool {
        (0..3).all(|d| self.lo[d] <= p[d] && p[d] < self.hi[d])
    }
}

/// The shape of a field's storage: owned cells, allocated ghost width and
/// number of components.
///
/// **Memory layout.** Each component is one contiguous padded array of
/// `(n0 + 2 g0) x (n1 + 2 g1) x (n2 + 2 g2)` values, row-major with the
/// **last axis fastest**; components follow each other (structure of
/// arrays). The value of component `c` at padded index `(i, j, k)` is at
/// `c * padded_len + (i * p1 + j) * p2 + k` where `p = n + 2 g`. Owned cell
/// `(a, b, c)` of the rank's box has padded index `(a + g0, b + g1, c + g2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FieldLayout {
    /// Owned cells per axis.
    pub owned: [usize; 3],
    /// Allocated ghost layers per axis (on each side).
    pub ghost: [usize; 3],
    /// Number of components.
    pub components: usize,
}

impl FieldLayout {
    /// Padded extent per axis.
    #[inline]
    pub fn padded(&self) -> [usize; 3] {
        [0, 1, 2].map(|d| self.owned[d] + 2 * self.ghost[d])
    }

    /// Values per component (padded).
    #[inline]
    pub fn padded_len(&self) -> usize {
        self.padded().iter().product()
    }

    /// Strides in values of the three axes within one component.
    #[inline]
    pub fn strides(&self) -> [usize; 3] {
        let p = self.padded();
        [p[1] * p[2], p[2], 1]
    }

    /// Linear index of padded index `p` in component `c`.
    #[inline]
    pub fn index(&self, c: usize, p: [usize; 3]) -> usize {
        let s = self.strides();
        c * self.padded_len() + p[0] * s[0] + p[1] * s[1] + p[2]
    }

    /// The owned cells as a padded region.
    pub fn owned_region(&self) -> Region {
        Region {
            lo: self.ghost,
            hi: [0, 1, 2].map(|d| self.ghost[d] + self.owned[d]),
        }
    }
}

/// Storage that halo exchanges can read from and write into.
///
/// The exchange never touches memory directly: it asks the storage to pack a
/// region of one component into a contiguous buffer and to unpack a buffer
/// into a region. Host fields ([`Field`]) copy rows; a device field can
/// implement the same two calls with kernels and staging buffers without any
/// change to the topology or the exchange code.
///
/// The three transfers are fallible so that a device's failure reaches the
/// caller as an error ([`HaloError::Device`]); host fields never fail.
pub trait HaloData<T: Elem> {
    /// The storage's shape.
    fn layout(&self) -> FieldLayout;
    /// Copies `region` of component `comp` into `out` (row-major, last axis
    /// fastest); `out.len() == region.len()`.
    fn pack(&self, comp: usize, region: &Region, out: &mut [T]) -> Result<(), HaloError>;
    /// Copies `input` into `region` of component `comp`.
    fn unpack(&mut self, comp: usize, region: &Region, input: &[T]) -> Result<(), HaloError>;
    /// Copies the values of region `src` into region `dst` (same shape,
    /// disjoint) of component `comp`: the periodic self-neighbour copy.
    fn copy_region(&mut self, comp: usize, src: &Region, dst: &Region) -> Result<(), HaloError>;
    /// Every `(src, dst)` copy of `pairs` in component `comp`, where no
    /// destination overlaps a source or another destination (so the copies
    /// may run in any order, or at once). The exchange makes its periodic
    /// self-copies through this call; a device overrides it to copy every
    /// pair in one kernel.
    fn copy_regions(&mut self, comp: usize, pairs: &[(Region, Region)]) -> Result<(), HaloError> {
        for (src, dst) in pairs {
            self.copy_region(comp, src, dst)?;
        }
        Ok(())
    }
}

/// A host field of one or more components with ghost layers; see
/// [`FieldLayout`] for the memory layout.
///
/// On Linux the storage of a field of 4 MiB or more is offered to the
/// kernel for transparent huge pages (`madvise(MADV_HUGEPAGE)` on its whole
/// 2 MiB pages, before any of them is touched; [`Field::new`] and `clone`;
/// [`Field::with_pages`] can decline): a stencil sweep reads many planes of
/// a large field per row, one 4 KiB page each, and their address
/// translations miss the TLB. With huge pages an order-18 step of heat3d
/// at 256^3 on one core took 73.0-75.1 ms in four runs, against 84-101 ms
/// with 4 KiB pages (the time moving from run to run with where the pages
/// landed). Where huge pages are disabled
/// (`/sys/kernel/mm/transparent_hugepage/enabled` at `never`) the advice
/// changes nothing.
#[derive(Debug, PartialEq)]
pub struct Field<T = f64> {
    layout: FieldLayout,
    data: Vec<T>,
}

/// The pages a field's storage asks for (see [`Field`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pages {
    /// Transparent huge pages offered for storage of 4 MiB or more (on
    /// Linux): for fields swept many times.
    #[default]
    Huge,
    /// The allocator's pages, no advice: for a field used once or twice,
    /// where the cost of faulting in huge pages may not be won back. (On
    /// the 2-core virtual machine of the figures in [`Field`], a huge page
    /// took 17 ms to fault in where the guest had never touched that
    /// memory, as its host backed it then, and 0.25 ms once it had, against
    /// 0.8 ms for the same 2 MiB in small pages.)
    Small,
}

impl<T: Elem + Default> Field<T> {
    /// A zero-filled field ([`Pages::Huge`]).
    pub fn new(layout: FieldLayout) -> Self {
        Self::with_pages(layout, Pages::Huge)
    }

    /// A zero-filled field whose storage asks for `pages`.
    pub fn with_pages(layout: FieldLayout, pages: Pages) -> Self {
        let n = layout.padded_len() * layout.components;
        Field {
            layout,
            data: match pages {
                Pages::Huge => zeroed(n),
                Pages::Small => vec![T::default(); n],
            },
        }
    }
}

impl<T: Elem> Clone for Field<T> {
    fn clone(&self) -> Self {
        let mut data = zeroed(self.data.len());
        data.copy_from_slice(&self.data);
        Field {
            layout: self.layout,
            data,
        }
    }
}

/// `n` values of all-zero bytes (zero for every [`Elem`] type), their
/// whole 2 MiB pages offered for transparent huge pages when the storage
/// spans 4 MiB or more, as a [`Field`]'s storage is: for other large arrays
/// a sweep reads beside its fields (`Complex64` spectra too), and for
/// references timed against them on the same footing.
pub fn zeroed<T: Elem>(n: usize) -> Vec<T> {
    // A zeroed allocation (never a loop of stores: `vec![v; n]` writes
    // every value unless it knows `v`'s type to be zero bytes, and the
    // pages would be touched before the advice) this large usually comes
    // straight from the kernel (glibc maps it), not yet touched, so the
    // advice applies from the first write on; one served from memory the
    // allocator had touched before keeps its pages, and the advice changes
    // nothing.
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    if bytes == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<T>(n)
        .unwrap_or_else(|_| panic!("{n} values of {bytes} bytes do not fit the address space"));
    // SAFETY: `layout` has a non-zero size (checked above). `alloc_zeroed`
    // returns memory for `n` values of `T` from the global allocator with
    // `T`'s alignment, every byte zero, which is a valid `T` (`Elem`: no
    // padding, no invalid bit pattern); a null pointer is handed to
    // `handle_alloc_error`, which does not return. `Vec::from_raw_parts`
    // then owns exactly that allocation: capacity `n` gives back the same
    // size and alignment when it frees it, and all `n` values are
    // initialised.
    let v = unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut T;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(p, n, n)
    };
    advise_huge_pages(&v);
    v
}

/// `madvise(MADV_HUGEPAGE)` on the whole 2 MiB pages of `v`'s storage, if
/// it spans 4 MiB or more.
#[cfg(target_os = "linux")]
fn advise_huge_pages<T>(v: &[T]) {
    const HUGE: usize = 2 << 20;
    let bytes = std::mem::size_of_val(v);
    if bytes < 2 * HUGE {
        return;
    }
    let start = v.as_ptr() as usize;
    let (a, b) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
    if b > a {
        // SAFETY: `[a, b)` is page-aligned and lies inside `v`'s
        // allocation, which `v` keeps alive for the call. `MADV_HUGEPAGE`
        // changes only how the kernel backs those pages, never their
        // contents or access; its failure (e.g. a kernel without huge
        // pages) leaves them as they were, so the result is ignored.
        unsafe {
            libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages<T>(_: &[T]) {}

impl<T: Elem> Field<T> {
    /// The layout.
    pub fn layout(&self) -> FieldLayout {
        self.layout
    }

    /// All values, components one after another.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// All values, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// One component's padded array.
    pub fn component(&self, c: usize) -> &[T] {
        let n = self.layout.padded_len();
        &self.data[c * n..(c + 1) * n]
    }

    /// One component's padded array, mutable.
    pub fn component_mut(&mut self, c: usize) -> &mut [T] {
        let n = self.layout.padded_len();
        &mut self.data[c * n..(c + 1) * n]
    }

    /// Value of component `c` at padded index `p`.
    #[inline]
    pub fn get(&self, c: usize, p: [usize; 3]) -> T {
        self.data[self.layout.index(c, p)]
    }

    /// Sets component `c` at padded index `p`.
    #[inline]
    pub fn set(&mut self, c: usize, p: [usize; 3], v: T) {
        let i = self.layout.index(c, p);
        self.data[i] = v;
    }

    /// Sets every owned cell of component `c` from its global index,
    /// given the box this rank owns.
    pub fn fill_owned(&mut self, c: usize, owned: &IndexBox, mut f: impl FnMut([usize; 3]) -> T) {
        let g = self.layout.ghost;
        let r = self.layout.owned_region();
        let s = self.layout.strides();
        let comp = self.component_mut(c);
        // Row by row (the cells in the same order as cell by cell).
        for i in r.lo[0]..r.hi[0] {
            for j in r.lo[1]..r.hi[1] {
                let o = i * s[0] + j * s[1];
                let row = &mut comp[o + r.lo[2]..o + r.hi[2]];
                for (k, v) in (r.lo[2]..r.hi[2]).zip(row) {
                    *v = f([
                        i - g[0] + owned.lo[0],
                        j - g[1] + owned.lo[1],
                        k - g[2] + owned.lo[2],
                    ]);
                }
            }
        }
    }

    /// The owned cells of component `c`, row-major (last axis fastest).
    pub fn owned_values(&self, c: usize) -> Vec<T> {
        let r = self.layout.owned_region();
        let mut out = Vec::with_capacity(r.len());
        let comp = self.component(c);
        let s = self.layout.strides();
        for i in r.lo[0]..r.hi[0] {
            for j in r.lo[1]..r.hi[1] {
                let o = i * s[0] + j * s[1];
                out.extend_from_slice(&comp[o + r.lo[2]..o + r.hi[2]]);
            }
        }
        out
    }
}

/// The rows of `src` to those of `dst` in `data` (strides `s`), `W`
/// values each, or `w` each when `W` is 0: a length fixed at compile time
/// lets the compiler copy a short row without a call.
#[inline]
fn copy_rows<T: Copy, const W: usize>(
    data: &mut [T],
    s: [usize; 3],
    src: &Region,
    dst: &Region,
    w: usize,
) {
    let w = if W > 0 { W } else { w };
    for (i, di) in (src.lo[0]..src.hi[0]).zip(dst.lo[0]..) {
        for (j, dj) in (src.lo[1]..src.hi[1]).zip(dst.lo[1]..) {
            let a = i * s[0] + j * s[1] + src.lo[2];
            let b = di * s[0] + dj * s[1] + dst.lo[2];
            if a + w <= b {
                let (x, y) = data.split_at_mut(b);
                y[..w].copy_from_slice(&x[a..a + w]);
            } else if b + w <= a {
                let (x, y) = data.split_at_mut(a);
                x[b..b + w].copy_from_slice(&y[..w]);
            } else {
                data.copy_within(a..a + w, b);
            }
        }
    }
}

/// Rows `q` of `W` values (`w` when `W` is 0) at `from[q pitch..]` one
/// after another into `to`.
#[inline]
fn pack_rows<T: Copy, const W: usize>(from: &[T], pitch: usize, to: &mut [T], w: usize) {
    let w = if W > 0 { W } else { w };
    for (q, t) in to.chunks_exact_mut(w).enumerate() {
        t.copy_from_slice(&from[q * pitch..q * pitch + w]);
    }
}

/// The inverse of [`pack_rows`].
#[inline]
fn unpack_rows<T: Copy, const W: usize>(from: &[T], to: &mut [T], pitch: usize, w: usize) {
    let w = if W > 0 { W } else { w };
    for (q, f) in from.chunks_exact(w).enumerate() {
        to[q * pitch..q * pitch + w].copy_from_slice(f);
    }
}

impl<T: Elem> HaloData<T> for Field<T> {
    fn copy_region(&mut self, comp: usize, src: &Region, dst: &Region) -> Result<(), HaloError> {
        debug_assert_eq!(src.shape(), dst.shape());
        let s = self.layout.strides();
        let data = self.component_mut(comp);
        // Rows as short as a ghost layer (faces normal to the last axis)
        // are copied with a length known at compile time: a call to
        // `memmove` per row of a few values would take most of the time.
        macro_rules! rows {
            ($($w:literal)*) => {
                match src.hi[2] - src.lo[2] {
                    $($w => copy_rows::<T, $w>(data, s, src, dst, $w),)*
                    w => copy_rows::<T, 0>(data, s, src, dst, w),
                }
            };
        }
        rows!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
        Ok(())
    }

    fn layout(&self) -> FieldLayout {
        self.layout
    }

    fn pack(&self, comp: usize, region: &Region, out: &mut [T]) -> Result<(), HaloError> {
        if region.is_empty() {
            return Ok(());
        }
        let src = self.component(comp);
        let s = self.layout.strides();
        let w = region.hi[2] - region.lo[2];
        let mut p = 0;
        for i in region.lo[0]..region.hi[0] {
            let plane = i * s[0] + region.lo[2];
            if w == 1 {
                // Faces normal to the last axis: one value per row; a call
                // to memcpy per value would dominate.
                let rows = region.hi[1] - region.lo[1];
                for (q, j) in (region.lo[1]..region.hi[1]).enumerate() {
                    out[p + q] = src[plane + j * s[1]];
                }
                p += rows;
                continue;
            }
            let rows = region.hi[1] - region.lo[1];
            let (from, to) = (
                &src[plane + region.lo[1] * s[1]..],
                &mut out[p..p + rows * w],
            );
            // Short rows with a length known at compile time (see
            // `copy_region`).
            macro_rules! rows {
                ($($w:literal)*) => {
                    match w {
                        $($w => pack_rows::<T, $w>(from, s[1], to, $w),)*
                        _ => pack_rows::<T, 0>(from, s[1], to, w),
                    }
                };
            }
            rows!(2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
            p += rows * w;
        }
        Ok(())
    }

    fn unpack(&mut self, comp: usize, region: &Region, input: &[T]) -> Result<(), HaloError> {
        if region.is_empty() {
            return Ok(());
        }
        let s = self.layout.strides();
        let dst = self.component_mut(comp);
        let w = region.hi[2] - region.lo[2];
        let mut p = 0;
        for i in region.lo[0]..region.hi[0] {
            let plane = i * s[0] + region.lo[2];
            if w == 1 {
                let rows = region.hi[1] - region.lo[1];
                for (q, j) in (region.lo[1]..region.hi[1]).enumerate() {
                    dst[plane + j * s[1]] = input[p + q];
                }
                p += rows;
                continue;
            }
            let rows = region.hi[1] - region.lo[1];
            let (from, to) = (
                &input[p..p + rows * w],
                &mut dst[plane + region.lo[1] * s[1]..],
            );
            macro_rules! rows {
                ($($w:literal)*) => {
                    match w {
                        $($w => unpack_rows::<T, $w>(from, to, s[1], $w),)*
                        _ => unpack_rows::<T, 0>(from, to, s[1], w),
                    }
                };
            }
            rows!(2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
            p += rows * w;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex64;

    /// Kilobytes of `AnonHugePages` in the mapping of `/proc/self/smaps`
    /// holding `addr`.
    #[cfg(target_os = "linux")]
    fn huge_kib_at(addr: usize) -> usize {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut inside = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = first.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = (a..b).contains(&addr);
                    continue;
                }
            }
            if inside {
                if let Some(v) = line.strip_prefix("AnonHugePages:") {
                    let kib = v.trim().trim_end_matches("kB").trim();
                    return kib.parse().expect("a number of kB");
                }
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[test]
    fn zeroed_storage_is_zero_and_clones_copy() {
        let layout = FieldLayout {
            owned: [64, 64, 80],
            ghost: [2, 2, 2],
            components: 2,
        };
        let mut f: Field = Field::new(layout);
        assert!(f.as_slice().iter().all(|&v| v == 0.0));
        for (i, v) in f.as_mut_slice().iter_mut().enumerate() {
            *v = i as f64;
        }
        let g = f.clone();
        assert_eq!(g, f);
        assert_eq!(g.layout(), layout);
    }

    /// Where the kernel hands out transparent huge pages on request only
    /// (`madvise` mode, as on this project's machines), a large field gets
    /// them and a plain vector of the same size does not. Skipped in the
    /// `always` and `never` modes, where the advice cannot show.
    #[test]
    #[cfg(target_os = "linux")]
    fn large_fields_ask_for_huge_pages() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if !mode.contains("[madvise]") {
            eprintln!("transparent huge pages not in madvise mode ({mode:?}): skipped");
            return;
        }
        // 64 MiB of f64: above glibc's largest threshold for mapping an
        // allocation on its own (32 MiB), so both come fresh from the
        // kernel whatever the other tests allocated and freed before.
        let n = 64 << 20 >> 3;
        let mut plain = vec![0.0f64; n];
        let mut advised: Vec<f64> = zeroed(n);
        plain.iter_mut().for_each(|v| *v = 1.0);
        advised.iter_mut().for_each(|v| *v = 1.0);
        let plain_kib = huge_kib_at(plain.as_ptr() as usize + n * 4);
        let advised_kib = huge_kib_at(advised.as_ptr() as usize + n * 4);
        assert_eq!(plain_kib, 0, "a plain allocation got huge pages");
        // 64 MiB hold at least 31 whole 2 MiB pages; the kernel may fall
        // back to small pages where memory is fragmented, so one is asked
        // for.
        assert!(
            advised_kib >= 2048,
            "no huge page in an advised 64 MiB buffer ({advised_kib} kB)"
        );
        let small: Vec<f64> = zeroed(1000);
        assert!(small.iter().all(|&v| v == 0.0));
        assert!(zeroed::<f64>(0).is_empty());
        // Complex spectra too (a type `vec!` would have filled value by
        // value, touching every page before the advice).
        let mut spec: Vec<Complex64> = zeroed(n / 2);
        assert!(spec.iter().all(|v| v.re == 0.0 && v.im == 0.0));
        spec.iter_mut().for_each(|v| v.re = 1.0);
        let kib = huge_kib_at(spec.as_ptr() as usize + n * 4);
        assert!(
            kib >= 2048,
            "no huge page in an advised complex buffer ({kib} kB)"
        );
        // A field that declines the advice gets none either.
        let layout = FieldLayout {
            owned: [128, 256, 256],
            ghost: [0; 3],
            components: 1,
        };
        let mut once: Field = Field::with_pages(layout, Pages::Small);
        assert!(once.as_slice().iter().all(|&v| v == 0.0));
        once.as_mut_slice().iter_mut().for_each(|v| *v = 1.0);
        let mid = once.as_slice().as_ptr() as usize + n * 4;
        assert_eq!(huge_kib_at(mid), 0, "Pages::Small got huge pages");
    }
}
