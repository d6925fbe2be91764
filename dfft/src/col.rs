//! 1D FFTs of power-of-two lengths on columns: the lines of a block lie
//! side by side (element `j` of line `c` at `j * stride + c`), and every
//! step of the transform works on whole rows of the block, so strided lines
//! need no gather, and the SIMD lanes hold neighbouring lines.
//!
//! The transform is a self-sorting (Stockham) decimation in time with
//! radices 16, 8, 4 and 2: each pass reads a row of every one of its `r`
//! inputs, multiplies by its twiddles, takes the length-`r` DFT and writes
//! `r` rows, so the output comes in natural order with no reordering pass.
//! The first pass reads the caller's rows and the last writes them (scaled
//! there); the passes between run in two buffers, [`CHUNK`] columns at a
//! time ([`PAGE_CHUNK`] for long lines), so that the strided rows are read
//! and written in runs of whole cache lines.
//!
//! Contiguous lines take the same passes with the vectors along each line
//! ([`ColFft::lines`], AVX-512F or AVX2): the passes but the last have at
//! least four rows a group next to each other in the line, and the last
//! pass (one row a group) takes four groups at a time with AVX-512F and
//! two with AVX2, their inputs transposed in registers. Elsewhere (the
//! portable code) contiguous lines are transposed into columns.
//!
//! Real lines ([`RealCol`]) are read as complex values in pairs,
//! transformed at half the length and untangled into the half spectrum
//! (and the reverse).
//!
//! Every column gets the same operations in the same order whichever
//! instruction set runs it (AVX-512F, AVX2 or scalar code) and however the
//! columns are grouped: products and sums are never fused, a complex
//! product is `(ar wr - ai wi, ai wr + ar wi)` everywhere, and a line is
//! transformed the same way whether it arrived as a column or was
//! transposed into one. So the bits of a line's transform depend only on
//! the line and its length.

use num_complex::Complex64;
use simd::Isa;

/// Contiguous lines transposed into columns together.
pub(crate) const WIDTH: usize = 8;

/// Columns a chunk of the transform takes together: its first pass reads
/// that many neighbouring values of each row (a run of whole cache lines
/// where the rows of a strided axis lie far apart), its last writes them.
pub(crate) const CHUNK: usize = 64;

/// Columns a chunk takes for lengths of [`LONG`] or more: a 4 KiB page of
/// each row, so that a pass over a field visits each of its pages once
/// instead of four times, hundreds of rows (pages) apart (likely a walk
/// of the page tables a visit once the field's pages outnumber the TLB's
/// entries; not measured). c2c 256^3 and 512^3 ran 6-20 % faster a
/// direction with it than with [`CHUNK`], 64^3 2-5 % slower, 128^3 the
/// same within the spread.
const PAGE_CHUNK: usize = 256;

/// The length from which chunks take [`PAGE_CHUNK`] columns.
const LONG: usize = 256;

/// Bytes the output rows of an out-of-place [`ColFft::columns`] span from
/// which its first pass asks for them (with intent to write) ahead of the
/// last, for chunks of [`CHUNK`] columns. Below it the output is likely in
/// a cache, and with chunks of a page the hardware's own prefetch does
/// better: without the request, c2c 64^3 backward 0.99-1.02 -> 0.93-0.94
/// ms, r2c 64^3 0.60 -> 0.56-0.58, c2c 256^3 0.131-0.133 -> 0.121-0.127 s,
/// c2c 512^3 1.66-1.67 -> 1.55-1.56 s; c2c 128^3 backward needs it
/// (9.7-10.3 against 10.6-11.0 ms without).
const PREFETCH_OUT_FROM: usize = 8 << 20;

/// Columns of the block that takes the columns left beside the aligned
/// vectors (at most three before them and three after).
const LEFT: usize = 8;

/// Row pitch (complex values) of the buffers for a chunk of `w` columns:
/// whole cache lines and one more, so that rows do not share cache sets.
fn pitch(w: usize) -> usize {
    w.next_multiple_of(4) + 4
}

/// Radices of a power-of-two length's passes, first to last: as few
/// passes as radices 16 and 8 allow (4 and 2 only for lengths 2, 4 and
/// 32).
fn radices(n: usize) -> Vec<usize> {
    let e = n.trailing_zeros() as usize;
    let (mut r, rest) = match (e, e % 3) {
        (1, _) => (vec![2], 0),
        (2, _) => (vec![4], 0),
        (5, _) => (vec![4], 3),
        (_, 0) => (vec![], e),
        (_, 1) => (vec![16], e - 4),
        _ => (vec![16, 16], e - 8),
    };
    r.extend(std::iter::repeat_n(8, rest / 3));
    r
}

/// A planned column transform of one power-of-two length and direction.
#[derive(Debug)]
pub(crate) struct ColFft {
    n: usize,
    forward: bool,
    /// (radix, `l`: the length transformed before the pass) per pass.
    passes: Vec<(usize, usize)>,
    /// Per pass, per `k < l`, per `v` in `1..r`: `[wr, wr, -wi, wi]` of
    /// `exp(-+ 2 pi i v k / (l r))`.
    tw: Vec<[f64; 4]>,
    /// Where each pass's twiddles start in `tw`.
    tw_at: Vec<usize>,
    /// The last pass's twiddles for the line form (see `new`).
    tw_lines: Vec<f64>,
    isa: Isa,
}

impl ColFft {
    /// The column transform of length `n` in one direction, or `None` where
    /// `n` is not a power of two of at least 2.
    pub(crate) fn new(n: usize, forward: bool) -> Option<ColFft> {
        if n < 2 || !n.is_power_of_two() {
            return None;
        }
        let mut passes = Vec::new();
        let mut tw = Vec::new();
        let mut tw_at = Vec::new();
        let mut l = 1;
        for r in radices(n) {
            tw_at.push(tw.len());
            let lr = l * r;
            for k in 0..l {
                for v in 1..r {
                    let (s, c) = twiddle(v * k, lr);
                    let s = if forward { -s } else { s };
                    tw.push([c, c, -s, s]);
                }
            }
            passes.push((r, l));
            l = lr;
        }
        // The last pass's twiddles for four neighbouring `k` at once: per
        // group of four and `v` in `1..r`, the real parts (each twice) and
        // the signed imaginary parts, as the line form's vectors hold them.
        let (r, l) = *passes.last().expect("n >= 2 has a pass");
        let mut tw_lines = Vec::new();
        if l >= 4 {
            for k0 in (0..l).step_by(4) {
                for v in 1..r {
                    let e = |k: usize| tw[tw_at[passes.len() - 1] + k * (r - 1) + v - 1];
                    for j in 0..4 {
                        tw_lines.extend([e(k0 + j)[0], e(k0 + j)[1]]);
                    }
                    for j in 0..4 {
                        tw_lines.extend([e(k0 + j)[2], e(k0 + j)[3]]);
                    }
                }
            }
        }
        Some(ColFft {
            n,
            forward,
            passes,
            tw,
            tw_at,
            tw_lines,
            isa: Isa::detect(),
        })
    }

    /// The same transform on a chosen instruction set (which must be
    /// present).
    #[cfg(test)]
    pub(crate) fn with_isa(n: usize, forward: bool, isa: Isa) -> ColFft {
        ColFft {
            isa,
            ..ColFft::new(n, forward).expect("power of two")
        }
    }

    /// Whether [`ColFft::lines`] runs with vectors along each line (else it
    /// transposes lines into columns): with AVX-512F or AVX2, for lengths
    /// of 32 or more, whose passes but the last have at least four rows a
    /// group and whose last pass has at least four groups.
    pub(crate) fn line_form(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if matches!(self.isa, Isa::Avx512 | Isa::Avx2) {
            return self.n >= 32;
        }
        false
    }

    /// Transforms contiguous lines (`dst.len()` a multiple of `n`), read
    /// from `src` (the same length) or, where it is `None`, from `dst`
    /// itself, into `dst`, each result times `scale`, with vectors along
    /// each line. Out of place, the first pass reads the input line where
    /// it lies and the last writes the output line, and the next line's
    /// input and output are asked for while one is transformed: one pass
    /// over memory, as a copy takes.
    ///
    /// # Panics
    /// If [`ColFft::line_form`] is false, `dst` is not whole lines, `src`
    /// is not as long as `dst`, or `scratch` is shorter than `2 n` plus 4.
    pub(crate) fn lines(
        &self,
        src: Option<&[Complex64]>,
        dst: &mut [Complex64],
        scale: f64,
        scratch: &mut [Complex64],
    ) {
        assert!(self.line_form(), "no line form here");
        let n = self.n;
        assert!(dst.len().is_multiple_of(n), "not whole lines");
        if let Some(s) = src {
            assert_eq!(s.len(), dst.len(), "input and output lengths differ");
        }
        assert!(scratch.len() >= 2 * n + 4, "scratch too short");
        let skip = crate::tile::to_line_boundary(scratch.as_ptr()).min(4);
        let (a, b) = scratch[skip..skip + 2 * n].split_at_mut(n);
        let q = dst.as_mut_ptr();
        let sq = src.map_or(q.cast_const(), <[Complex64]>::as_ptr);
        #[cfg(target_arch = "x86_64")]
        {
            let io = Chunk {
                src: (sq, 1),
                dst: (q, 1),
                scale,
                pitch: 1,
                a: a.as_mut_ptr(),
                b: b.as_mut_ptr(),
                ahead: false,
            };
            let count = dst.len() / n;
            // SAFETY: the `count` lines lie within `dst`, the buffers hold
            // `n` values each and overlap it not; the plan's instruction
            // set, AVX-512F or AVX2, is present (`line_form`).
            unsafe {
                match (self.isa, self.forward) {
                    (Isa::Avx512, true) => x86::lines512::<true>(self, &io, count),
                    (Isa::Avx512, false) => x86::lines512::<false>(self, &io, count),
                    (_, true) => x86::lines256::<true>(self, &io, count),
                    (_, false) => x86::lines256::<false>(self, &io, count),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (a, b, q, scale);
    }

    /// The instruction set the kernels run on.
    #[cfg(test)]
    pub(crate) fn isa(&self) -> Isa {
        self.isa
    }

    /// The length transformed.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// Columns a chunk of [`ColFft::columns`] takes at most.
    fn chunk_cols(&self) -> usize {
        if self.n >= LONG {
            PAGE_CHUNK
        } else {
            CHUNK
        }
    }

    /// Complex elements of scratch [`ColFft::columns`] needs: two buffers
    /// of `n` rows of a chunk, and slack to put them on a cache line (more
    /// than [`ColFft::lines`] needs).
    pub(crate) fn scratch_len(&self) -> usize {
        2 * self.n * pitch(self.chunk_cols()) + LEFT * self.n + 4
    }

    /// Transforms `cols` columns: element `j` of column `c` is
    /// `src[so + j * ss + c]` (or, without `src`, the same place in `dst`:
    /// in place), and element `j` of its transform times `scale` goes to
    /// `dst[d0 + j * ds + c]`.
    ///
    /// # Panics
    /// If a column runs past its slice, `cols` exceeds a row stride with
    /// more than one row (columns would overlap rows), or `scratch` is
    /// shorter than [`ColFft::scratch_len`].
    pub(crate) fn columns(
        &self,
        src: Option<(&[Complex64], usize, usize)>,
        (dst, d0, ds): (&mut [Complex64], usize, usize),
        cols: usize,
        scale: f64,
        scratch: &mut [Complex64],
    ) {
        let n = self.n;
        if cols == 0 {
            return;
        }
        let fits = |len: usize, o: usize, s: usize| o + (n - 1) * s + cols <= len && cols <= s;
        assert!(
            fits(dst.len(), d0, ds),
            "columns past the output or overlapping its rows"
        );
        if let Some((s, so, ss)) = src {
            assert!(
                fits(s.len(), so, ss),
                "columns past the input or overlapping its rows"
            );
        }
        assert!(scratch.len() >= self.scratch_len(), "scratch too short");
        let skip = crate::tile::to_line_boundary(scratch.as_ptr()).min(4);
        let bp = pitch(cols.min(self.chunk_cols()));
        let (bufs, rest) = scratch[skip..].split_at_mut(2 * n * bp);
        let (a, b) = bufs.split_at_mut(n * bp);
        let q = dst[d0..].as_mut_ptr();
        let (p, ss) = match src {
            Some((s, so, ss)) => (s[so..].as_ptr(), ss),
            None => (q.cast_const(), ds),
        };
        // Where every row starts at the same place in a cache line (strides
        // of whole lines) and the first column is not on a line boundary,
        // the AVX-512 vectors start at the first column that is: a vector
        // across two lines costs about twice one within a line. The
        // columns before it and those after the last whole vector go
        // together through a block of `LEFT` columns.
        let lead = match self.isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 if ds % 4 == 0 && cols >= LEFT => {
                crate::tile::to_line_boundary(q.cast_const())
            }
            _ => 0,
        };
        let end = if lead > 0 {
            lead + (cols - lead) / 4 * 4
        } else {
            cols
        };
        let span = ((n - 1) * ds + cols) * size_of::<Complex64>();
        let ahead = src.is_some() && self.chunk_cols() == CHUNK && span >= PREFETCH_OUT_FROM;
        let mut c0 = lead;
        while c0 < end {
            let w = self.chunk_cols().min(end - c0);
            let io = Chunk {
                src: (p.wrapping_add(c0), ss),
                dst: (q.wrapping_add(c0), ds),
                scale,
                pitch: bp,
                a: a.as_mut_ptr(),
                b: b.as_mut_ptr(),
                ahead,
            };
            // SAFETY: rows `j < n` of columns `c0..c0 + w` lie within the
            // slices (checked above: `c0 + w <= cols`); the input is the
            // output itself or a different slice (a shared borrow cannot
            // alias the unique one); the buffers hold `n` rows of
            // `bp >= w` values each, apart from both; and the kernel is
            // chosen for an instruction set that is present.
            unsafe { self.chunk(&io, w) };
            c0 += w;
        }
        if lead > 0 {
            let mut at = [0; LEFT];
            let k = lead + cols - end;
            for (a, c) in at.iter_mut().zip((0..lead).chain(end..cols)) {
                *a = c;
            }
            let left = &at[..k];
            let blk = &mut rest[..LEFT * n];
            for (j, row) in blk.chunks_exact_mut(LEFT).enumerate() {
                row.fill(Complex64::default());
                for (v, &c) in row.iter_mut().zip(left) {
                    *v = match src {
                        Some((s, so, ss)) => s[so + j * ss + c],
                        None => dst[d0 + j * ds + c],
                    };
                }
            }
            let io = Chunk {
                src: (blk.as_ptr(), LEFT),
                dst: (blk.as_mut_ptr(), LEFT),
                scale,
                pitch: bp,
                a: a.as_mut_ptr(),
                b: b.as_mut_ptr(),
                ahead: false,
            };
            // SAFETY: the block holds `n` rows of `LEFT` values, read and
            // written in place (one pass, or the first into a buffer and
            // the last back); the buffers hold `n` rows of `bp >=
            // pitch(LEFT)` values (`cols >= LEFT`), apart from the block.
            unsafe { self.chunk(&io, k.next_multiple_of(4)) };
            for (j, row) in blk.chunks_exact(LEFT).enumerate() {
                for (v, &c) in row.iter().zip(left) {
                    dst[d0 + j * ds + c] = *v;
                }
            }
        }
    }

    /// One chunk of `w <= self.chunk_cols()` columns.
    ///
    /// # Safety
    /// Rows `j < n` of columns `c < w` must be valid for reads in
    /// `io.src` and writes in `io.dst` (which is either `io.src` itself or
    /// does not overlap it), and the buffers for `n` rows of `io.pitch >=
    /// w` values each, overlapping nothing else.
    unsafe fn chunk(&self, io: &Chunk, w: usize) {
        let v = match self.isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                let v = w / 4 * 4;
                // SAFETY: the caller's contract; AVX-512F is present.
                unsafe {
                    if self.forward {
                        x86::avx512::<true>(self, io, 0, v);
                    } else {
                        x86::avx512::<false>(self, io, 0, v);
                    }
                }
                v
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                let v = w / 2 * 2;
                // SAFETY: the caller's contract; AVX2 is present.
                unsafe {
                    if self.forward {
                        x86::avx2::<true>(self, io, 0, v);
                    } else {
                        x86::avx2::<false>(self, io, 0, v);
                    }
                }
                v
            }
            // The portable loops (and every set on other targets).
            _ => 0,
        };
        // SAFETY: the caller's contract.
        unsafe {
            if self.forward {
                run::<Complex64, true>(self, io, v, w);
            } else {
                run::<Complex64, false>(self, io, v, w);
            }
        }
    }

    /// Transforms one line in place (the reference form of a column: the
    /// same operations as every other path).
    #[cfg(test)]
    pub(crate) fn line(&self, x: &mut [Complex64], scale: f64) {
        let mut s = vec![Complex64::default(); self.scratch_len()];
        self.columns(None, (x, 0, 1), 1, scale, &mut s);
    }
}

/// Real-to-complex and complex-to-real transforms of a power-of-two length
/// `n = 2 h >= 4` through the column transform of length `h`: a real line
/// read as `h` complex values `z_j = x_2j + i x_2j+1`, transformed, and
/// untangled into the `h + 1` values of the half spectrum (and the
/// reverse). The untangling is one scalar function per direction, so its
/// bits do not depend on where the lines came from either.
#[derive(Debug)]
pub(crate) struct RealCol {
    /// The forward and backward transforms of length `h`.
    pub(crate) fwd: ColFft,
    pub(crate) bwd: ColFft,
    /// `[wr, wr, -wi, wi]` of `exp(-2 pi i k / n)` and of its conjugate,
    /// `k <= h / 2`.
    w: Vec<[f64; 4]>,
    wb: Vec<[f64; 4]>,
    /// The same for four neighbouring `k` at once (`k = 1 + 4 g + j`,
    /// `j < 4`): the real parts (each twice) and the signed imaginary
    /// parts, as the vector untangling's registers hold them.
    w4: Vec<f64>,
    wb4: Vec<f64>,
    /// The instruction set of the vector untangling and tangling.
    isa: Isa,
    /// The `k` from which the scalar untangling and tangling take over
    /// from the vector ones (see [`vector_end`]). The untangling stops
    /// before the group that meets its mirror: it writes the field's
    /// lines, seldom on cache-line boundaries, where the four values left
    /// to the scalar code cost less than one more pair of vector stores
    /// across lines (r2c 64^3 forward, measured).
    vend_u: usize,
    vend_t: usize,
}

/// The `k` from which the scalar untangling of half length `h` takes over
/// from the vector one on `isa`: four at a time from `k = 1` while the
/// group ends below its mirrored group `h - k - 3 .. h - k`, or with
/// `to_middle` while it ends at `h / 2` or before. For `h >= 8` the latter
/// groups reach `h / 2` exactly, where the last one meets its mirror in one
/// value; the scalar code then does `k = h / 2` again (see
/// [`RealCol::scalar_from`]).
fn vector_end(h: usize, isa: Isa, to_middle: bool) -> usize {
    #[cfg(target_arch = "x86_64")]
    if let Some(w) = untangle_width(isa) {
        let mut k = 1;
        while if to_middle {
            k + w - 1 <= h / 2
        } else {
            2 * k + 2 * w - 2 < h
        } {
            k += w;
        }
        return k;
    }
    let _ = (h, isa, to_middle);
    1
}

/// The values the vector untangling and tangling take at a time on `isa`:
/// four with AVX-512F, two with AVX2; `None` for the portable code.
fn untangle_width(isa: Isa) -> Option<usize> {
    match isa {
        Isa::Avx512 => Some(4),
        Isa::Avx2 => Some(2),
        Isa::Portable => None,
    }
}

impl RealCol {
    /// The real transforms of length `n`, or `None` where `n` is not a
    /// power of two of at least 4.
    pub(crate) fn new(n: usize) -> Option<RealCol> {
        if n < 4 || !n.is_power_of_two() {
            return None;
        }
        let h = n / 2;
        let (mut w, mut wb) = (Vec::new(), Vec::new());
        for k in 0..=h / 2 {
            let (s, c) = twiddle(k, n);
            w.push([c, c, s, -s]);
            wb.push([c, c, -s, s]);
        }
        let pack = |t: &[[f64; 4]]| {
            let mut v = Vec::new();
            for g in (1..=h / 2).step_by(4) {
                let e = |j: usize| t.get(g + j).copied().unwrap_or([0.0; 4]);
                v.extend((0..4).flat_map(|j| [e(j)[0], e(j)[1]]));
                v.extend((0..4).flat_map(|j| [e(j)[2], e(j)[3]]));
            }
            v
        };
        let (w4, wb4) = (pack(&w), pack(&wb));
        let isa = Isa::detect();
        Some(RealCol {
            fwd: ColFft::new(h, true)?,
            bwd: ColFft::new(h, false)?,
            w,
            wb,
            w4,
            wb4,
            isa,
            vend_u: vector_end(h, isa, false),
            vend_t: vector_end(h, isa, true),
        })
    }

    /// The first `k > 0` the scalar tangling does: from `vend_t`, and `h /
    /// 2` in any case, whose value the vector code may have written with
    /// its mirror's formula (a group and its mirror share it).
    fn scalar_from(&self) -> usize {
        self.vend_t.min(self.half() / 2)
    }

    /// The same transforms with the untangling on a chosen instruction set
    /// (which must be present).
    #[cfg(test)]
    fn with_isa(n: usize, isa: Isa) -> RealCol {
        RealCol {
            isa,
            vend_u: vector_end(n / 2, isa, false),
            vend_t: vector_end(n / 2, isa, true),
            ..RealCol::new(n).expect("power of two")
        }
    }

    /// Half the real length.
    pub(crate) fn half(&self) -> usize {
        self.fwd.len()
    }

    /// The half spectrum `x` (`h + 1` values) of the real line whose
    /// values, read in pairs, gave the transform `z` (`h` values), each
    /// times `scale`.
    pub(crate) fn untangle(&self, z: &[Complex64], x: &mut [Complex64], scale: f64) {
        let h = self.half();
        let (z, x) = (&z[..h], &mut x[..=h]);
        let sc = |v: Complex64| if scale == 1.0 { v } else { v.scale(scale) };
        x[0] = sc(Complex64::new(z[0].re + z[0].im, 0.0));
        x[h] = sc(Complex64::new(z[0].re - z[0].im, 0.0));
        let k1 = self.vend_u;
        #[cfg(target_arch = "x86_64")]
        if k1 > 1 {
            // SAFETY: the set is present (`vector_end` > 1 only with one);
            // the groups `k .. k + w` and their mirrors lie within `z` and
            // `x` (`k + w - 1 < h - k - w + 1`), and `w4` holds their
            // twiddles.
            unsafe {
                if self.isa == Isa::Avx512 {
                    x86::untangle512(z, x, &self.w4, k1, scale)
                } else {
                    x86::untangle256(z, x, &self.w4, k1, scale)
                }
            };
        }
        for k in k1..=h / 2 {
            let j = h - k;
            let (a, b) = (z[k], z[j].conj());
            let e = Complex64::new((a.re + b.re) * 0.5, (a.im + b.im) * 0.5);
            let d = Complex64::new((a.re - b.re) * 0.5, (a.im - b.im) * 0.5);
            // -i d, times exp(-2 pi i k / n).
            // SAFETY (twiddle): `w` holds entry `k <= h / 2`.
            let t = unsafe { Complex64::new(d.im, -d.re).twiddle(&self.w[k]) };
            x[j] = sc(Complex64::new(e.re - t.re, -(e.im - t.im)));
            x[k] = sc(Complex64::new(e.re + t.re, e.im + t.im));
        }
    }

    /// The reverse of [`RealCol::untangle`] for the backward transform:
    /// from the half spectrum `x` (`h + 1` values; the imaginary parts of
    /// the first and last ignored) the `h` values whose unnormalised
    /// backward transform holds `n` times the real line in pairs.
    pub(crate) fn tangle(&self, x: &[Complex64], z: &mut [Complex64]) {
        let h = self.half();
        let (x, z) = (&x[..=h], &mut z[..h]);
        let at = |k: usize| {
            if k == 0 || k == h {
                Complex64::new(x[k].re, 0.0)
            } else {
                x[k]
            }
        };
        let k1 = self.vend_t;
        #[cfg(target_arch = "x86_64")]
        if k1 > 1 {
            // SAFETY: the set is present (`vector_end` > 1 only with one);
            // the groups `k .. k + w` and their mirrors lie within `x` and
            // `z` (`k + w - 1 <= h / 2 <= h - k - w + 1`), and `wb4` holds
            // their twiddles.
            unsafe {
                if self.isa == Isa::Avx512 {
                    x86::tangle512(x, z, &self.wb4, k1)
                } else {
                    x86::tangle256(x, z, &self.wb4, k1)
                }
            };
        }
        for k in std::iter::once(0).chain(self.scalar_from()..=h / 2) {
            let j = h - k;
            let (a, b) = (at(k), at(j).conj());
            let s = Complex64::new(a.re + b.re, a.im + b.im);
            let d = Complex64::new(a.re - b.re, a.im - b.im);
            // (a - b) exp(2 pi i k / n).
            // SAFETY (twiddle): `wb` holds entry `k <= h / 2`.
            let u = unsafe { d.twiddle(&self.wb[k]) };
            if k > 0 {
                z[j] = Complex64::new(s.re + u.im, u.re - s.im);
            }
            z[k] = Complex64::new(s.re - u.im, s.im + u.re);
        }
    }
}

/// `sin, cos` of `2 pi j / m`, from the first octant by exact reflections,
/// so that angles symmetric about either axis or the diagonal get values
/// exactly symmetric.
fn twiddle(j: usize, m: usize) -> (f64, f64) {
    // The angle is 2 pi a / (8 m).
    let mut a = 8 * (j % m);
    let full = 8 * m;
    let (mut neg_s, mut neg_c, mut swap) = (false, false, false);
    if a > full / 2 {
        a = full - a;
        neg_s = true;
    }
    if a > full / 4 {
        a = full / 2 - a;
        neg_c = true;
    }
    if a > full / 8 {
        a = full / 4 - a;
        swap = true;
    }
    let (s, c) = (2.0 * std::f64::consts::PI * a as f64 / full as f64).sin_cos();
    let (s, c) = if swap { (c, s) } else { (s, c) };
    (if neg_s { -s } else { s }, if neg_c { -c } else { c })
}

/// A chunk's caller rows (pointer to its first column, row stride) and
/// buffers.
struct Chunk {
    src: (*const Complex64, usize),
    dst: (*mut Complex64, usize),
    scale: f64,
    /// Row pitch of the buffers.
    pitch: usize,
    a: *mut Complex64,
    b: *mut Complex64,
    /// The first pass asks for the output rows the last will write (set
    /// only out of place, where they are other rows than the input's).
    ahead: bool,
}

/// Complex values in a vector register, with the operations of the
/// transform (each on every value alike).
trait Cv: Copy {
    const LANES: usize;
    unsafe fn load(p: *const Complex64) -> Self;
    unsafe fn store(self, p: *mut Complex64);
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    /// Times `-i` (forward) or `+i` (backward): exact.
    fn rot<const FWD: bool>(self) -> Self;
    fn scale(self, s: f64) -> Self;
    /// Times the twiddle `t = [wr, wr, -wi, wi]`:
    /// `(ar wr + ai (-wi), ai wr + ar wi)`.
    unsafe fn twiddle(self, t: *const [f64; 4]) -> Self;
}

impl Cv for Complex64 {
    const LANES: usize = 1;
    #[inline(always)]
    unsafe fn load(p: *const Complex64) -> Self {
        // SAFETY: the caller's contract.
        unsafe { p.read() }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut Complex64) {
        // SAFETY: the caller's contract.
        unsafe { p.write(self) }
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        Complex64::new(self.re + o.re, self.im + o.im)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        Complex64::new(self.re - o.re, self.im - o.im)
    }
    #[inline(always)]
    fn rot<const FWD: bool>(self) -> Self {
        if FWD {
            Complex64::new(self.im, -self.re)
        } else {
            Complex64::new(-self.im, self.re)
        }
    }
    #[inline(always)]
    fn scale(self, s: f64) -> Self {
        Complex64::new(self.re * s, self.im * s)
    }
    #[inline(always)]
    unsafe fn twiddle(self, t: *const [f64; 4]) -> Self {
        // SAFETY: the caller's contract.
        let t = unsafe { &*t };
        Complex64::new(
            self.re * t[0] + self.im * t[2],
            self.im * t[1] + self.re * t[3],
        )
    }
}

pub(crate) use simd::{prefetch_read as prefetch_r, prefetch_write as prefetch_w};

/// `exp(-+ i pi / 4) o = (o + rot(o)) / sqrt 2`.
#[inline(always)]
fn w8<V: Cv, const FWD: bool>(o: V) -> V {
    o.add(o.rot::<FWD>()).scale(std::f64::consts::FRAC_1_SQRT_2)
}

/// The twiddles `w16^1`, `w16^3`, `w16^9` of the radix-16 step as
/// `[wr, wr, -wi, wi]`, forward (`exp(-2 pi i j / 16)`) and backward.
static W16_FWD: [[f64; 4]; 3] = w16(true);
static W16_BWD: [[f64; 4]; 3] = w16(false);

const fn w16(fwd: bool) -> [[f64; 4]; 3] {
    // cos and sin of pi/8 and 3 pi/8, correctly rounded.
    const C1: f64 = 0.923_879_532_511_286_7;
    const S1: f64 = 0.382_683_432_365_089_8;
    // w^1 = (C1, -+S1), w^3 = (S1, -+C1), w^9 = (-C1, +-S1).
    let sg = if fwd { -1.0 } else { 1.0 };
    [
        [C1, C1, -sg * S1, sg * S1],
        [S1, S1, -sg * C1, sg * C1],
        [-C1, -C1, sg * S1, -sg * S1],
    ]
}

/// Length-`R` DFT (R = 2, 4, 8, 16) of `a`, forward (`exp(-2 pi i jk / R)`) or
/// backward.
#[inline(always)]
fn dft<V: Cv, const R: usize, const FWD: bool>(a: [V; R]) -> [V; R] {
    match R {
        2 => {
            let mut o = a;
            o[0] = a[0].add(a[1]);
            o[1] = a[0].sub(a[1]);
            o
        }
        4 => {
            let mut o = a;
            let b0 = a[0].add(a[2]);
            let b1 = a[0].sub(a[2]);
            let b2 = a[1].add(a[3]);
            let b3 = a[1].sub(a[3]).rot::<FWD>();
            o[0] = b0.add(b2);
            o[1] = b1.add(b3);
            o[2] = b0.sub(b2);
            o[3] = b1.sub(b3);
            o
        }
        16 => {
            // 16 = 4 x 4: DFTs of 4 over j1 for each j2 (inputs 4 j1 + j2),
            // twiddles w16^(j2 k1), DFTs of 4 over j2 for each k1 (outputs
            // k1 + 4 k2).
            let mut y = [[a[0]; 4]; 4];
            for (j2, yj) in y.iter_mut().enumerate() {
                *yj = dft::<V, 4, FWD>([a[j2], a[4 + j2], a[8 + j2], a[12 + j2]]);
            }
            let t = if FWD { &W16_FWD } else { &W16_BWD };
            // SAFETY (twiddle): the table entries are valid `[f64; 4]`.
            unsafe {
                y[1][1] = y[1][1].twiddle(&t[0]);
                y[1][2] = w8::<V, FWD>(y[1][2]);
                y[1][3] = y[1][3].twiddle(&t[1]);
                y[2][1] = w8::<V, FWD>(y[2][1]);
                y[2][2] = y[2][2].rot::<FWD>();
                y[2][3] = w8::<V, FWD>(y[2][3]).rot::<FWD>();
                y[3][1] = y[3][1].twiddle(&t[1]);
                y[3][2] = w8::<V, FWD>(y[3][2]).rot::<FWD>();
                y[3][3] = y[3][3].twiddle(&t[2]);
            }
            let mut o = a;
            for k1 in 0..4 {
                let x = dft::<V, 4, FWD>([y[0][k1], y[1][k1], y[2][k1], y[3][k1]]);
                for (k2, v) in x.into_iter().enumerate() {
                    o[k1 + 4 * k2] = v;
                }
            }
            o
        }
        _ => {
            let mut o = a;
            let b0 = a[0].add(a[4]);
            let b1 = a[0].sub(a[4]);
            let b2 = a[2].add(a[6]);
            let b3 = a[2].sub(a[6]).rot::<FWD>();
            let b4 = a[1].add(a[5]);
            let b5 = a[1].sub(a[5]);
            let b6 = a[3].add(a[7]);
            let b7 = a[3].sub(a[7]).rot::<FWD>();
            let e0 = b0.add(b2);
            let e2 = b0.sub(b2);
            let e1 = b1.add(b3);
            let e3 = b1.sub(b3);
            let o0 = b4.add(b6);
            let o2 = b4.sub(b6).rot::<FWD>();
            let o1 = b5.add(b7);
            let o3 = b5.sub(b7);
            // w8 o1 and w8^3 o3 = rot(w8 o3).
            let t1 = w8::<V, FWD>(o1);
            let t3 = w8::<V, FWD>(o3).rot::<FWD>();
            o[0] = e0.add(o0);
            o[1] = e1.add(t1);
            o[2] = e2.add(o2);
            o[3] = e3.add(t3);
            o[4] = e0.sub(o0);
            o[5] = e1.sub(t1);
            o[6] = e2.sub(o2);
            o[7] = e3.sub(t3);
            o
        }
    }
}

/// One Stockham pass of radix `R` over columns `c0..c1` (in steps of
/// `V::LANES`): `l` is the length transformed before it, rows `ss` apart
/// in `src` and `ds` apart in `dst`; the outputs are multiplied by `scale`
/// where `SCALED`.
///
/// # Safety
/// Rows `j < n` of the columns must be valid in `src` (reads) and `dst`
/// (writes); where they overlap, `src == dst` and the pass is the only
/// one (`l == 1`, `R == n`), whose groups read and write the same rows.
/// `tw` must hold the pass's `l (R - 1)` twiddles. `pf` (null for none)
/// is only prefetched, never accessed.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn pass<V: Cv, const R: usize, const FWD: bool, const SCALED: bool>(
    n: usize,
    l: usize,
    tw: *const [f64; 4],
    (src, ss): (*const Complex64, usize),
    (dst, ds): (*mut Complex64, usize),
    (c0, c1): (usize, usize),
    scale: f64,
    (pf, ps): (*const Complex64, usize),
) {
    let m = n / (l * R);
    let step = n / l;
    // Row offsets of a group's inputs and outputs from its first ones.
    let inp: [usize; R] = std::array::from_fn(|v| m * v * ss);
    let out: [usize; R] = std::array::from_fn(|q| l * m * q * ds);
    for k in 0..l {
        // SAFETY (all pointer arithmetic and accesses below): rows below
        // `n` of columns below `c1` (the caller's contract); `tw` holds
        // `l (R - 1)` entries.
        unsafe {
            let tk = tw.add(k * (R - 1));
            let mut sp = src.add(k * step * ss);
            let mut dp = dst.add(k * m * ds);
            for t in 0..m {
                let mut c = c0;
                while c < c1 {
                    let mut a: [V; R] = std::array::from_fn(|v| V::load(sp.add(inp[v] + c)));
                    if !pf.is_null() {
                        for v in 0..R {
                            let row = k * step + t + m * v;
                            prefetch_w(pf.wrapping_add(row * ps + c));
                        }
                    }
                    if k > 0 {
                        for (v, x) in a.iter_mut().enumerate().skip(1) {
                            *x = x.twiddle(tk.add(v - 1));
                        }
                    }
                    let b = dft::<V, R, FWD>(a);
                    for (q, y) in b.into_iter().enumerate() {
                        let y = if SCALED { y.scale(scale) } else { y };
                        y.store(dp.add(out[q] + c));
                    }
                    c += V::LANES;
                }
                sp = sp.add(ss);
                dp = dp.add(ds);
            }
        }
    }
}

/// Every pass of `plan` over columns `c0..c1` of a chunk (a multiple of
/// `V::LANES` wide).
///
/// # Safety
/// As [`ColFft::chunk`], with the instruction set of `V` present.
#[inline(always)]
unsafe fn run<V: Cv, const FWD: bool>(plan: &ColFft, io: &Chunk, c0: usize, c1: usize) {
    if c0 >= c1 {
        return;
    }
    let np = plan.passes.len();
    let scale = (io.scale != 1.0).then_some(io.scale);
    let bufs = [io.a, io.b];
    for (i, &(r, l)) in plan.passes.iter().enumerate() {
        // Where asked to (out of place), the first pass asks for the
        // output's lines its rows will be written to (the last pass writes
        // them).
        let pf = if i == 0 && np > 1 && io.ahead {
            (io.dst.0.cast_const(), io.dst.1)
        } else {
            (std::ptr::null(), 0)
        };
        let src: (*const Complex64, usize) = if i == 0 {
            io.src
        } else {
            (bufs[(i - 1) % 2], io.pitch)
        };
        let (dst, s) = if i + 1 == np {
            (io.dst, scale)
        } else {
            ((bufs[i % 2], io.pitch), None)
        };
        // SAFETY: `tw_at[i]` starts the pass's `l (r - 1)` twiddles; the
        // rows and buffers as the caller guarantees; an in-place pass
        // (caller rows to caller rows) happens only when it is the only
        // one.
        unsafe {
            let tw = plan.tw.as_ptr().add(plan.tw_at[i]);
            let n = plan.n;
            let cols = (c0, c1);
            match (r, s) {
                (2, None) => pass::<V, 2, FWD, false>(n, l, tw, src, dst, cols, 1.0, pf),
                (2, Some(s)) => pass::<V, 2, FWD, true>(n, l, tw, src, dst, cols, s, pf),
                (4, None) => pass::<V, 4, FWD, false>(n, l, tw, src, dst, cols, 1.0, pf),
                (4, Some(s)) => pass::<V, 4, FWD, true>(n, l, tw, src, dst, cols, s, pf),
                (8, None) => pass::<V, 8, FWD, false>(n, l, tw, src, dst, cols, 1.0, pf),
                (8, Some(s)) => pass::<V, 8, FWD, true>(n, l, tw, src, dst, cols, s, pf),
                (_, None) => pass::<V, 16, FWD, false>(n, l, tw, src, dst, cols, 1.0, pf),
                (_, Some(s)) => pass::<V, 16, FWD, true>(n, l, tw, src, dst, cols, s, pf),
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{run, Chunk, ColFft, Cv};
    use num_complex::Complex64;
    use std::arch::x86_64::*;

    /// Four complex values (real and imaginary parts interleaved).
    #[derive(Clone, Copy)]
    pub(super) struct Z(__m512d);

    /// Two complex values.
    #[derive(Clone, Copy)]
    pub(super) struct Y(__m256d);

    // SAFETY (all intrinsics below): a `Z` or `Y` is made only by the
    // unsafe `load` or inside the functions below that carry the matching
    // target feature, and neither type leaves this module's kernels, so
    // their operations run only where the instruction set is present.
    impl Cv for Z {
        const LANES: usize = 4;
        #[inline(always)]
        unsafe fn load(p: *const Complex64) -> Self {
            unsafe { Z(_mm512_loadu_pd(p.cast())) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut Complex64) {
            unsafe { _mm512_storeu_pd(p.cast(), self.0) }
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            unsafe { Z(_mm512_add_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            unsafe { Z(_mm512_sub_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn rot<const FWD: bool>(self) -> Self {
            unsafe {
                let s = _mm512_permute_pd::<0x55>(self.0);
                // Forward: (im, -re), the sign on the odd lanes; backward:
                // (-im, re), on the even ones.
                let m = if FWD {
                    _mm512_set_epi64(i64::MIN, 0, i64::MIN, 0, i64::MIN, 0, i64::MIN, 0)
                } else {
                    _mm512_set_epi64(0, i64::MIN, 0, i64::MIN, 0, i64::MIN, 0, i64::MIN)
                };
                Z(_mm512_castsi512_pd(_mm512_xor_si512(
                    _mm512_castpd_si512(s),
                    m,
                )))
            }
        }
        #[inline(always)]
        fn scale(self, s: f64) -> Self {
            unsafe { Z(_mm512_mul_pd(self.0, _mm512_set1_pd(s))) }
        }
        #[inline(always)]
        unsafe fn twiddle(self, t: *const [f64; 4]) -> Self {
            unsafe {
                let t = t.cast::<f64>();
                let wr = _mm512_set1_pd(*t);
                let wi = _mm512_castps_pd(_mm512_broadcast_f32x4(_mm_castpd_ps(_mm_loadu_pd(
                    t.add(2),
                ))));
                let sw = _mm512_permute_pd::<0x55>(self.0);
                Z(_mm512_add_pd(
                    _mm512_mul_pd(self.0, wr),
                    _mm512_mul_pd(sw, wi),
                ))
            }
        }
    }

    impl Cv for Y {
        const LANES: usize = 2;
        #[inline(always)]
        unsafe fn load(p: *const Complex64) -> Self {
            unsafe { Y(_mm256_loadu_pd(p.cast())) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut Complex64) {
            unsafe { _mm256_storeu_pd(p.cast(), self.0) }
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            unsafe { Y(_mm256_add_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            unsafe { Y(_mm256_sub_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn rot<const FWD: bool>(self) -> Self {
            unsafe {
                let s = _mm256_permute_pd::<0b0101>(self.0);
                let m = if FWD {
                    _mm256_set_pd(-0.0, 0.0, -0.0, 0.0)
                } else {
                    _mm256_set_pd(0.0, -0.0, 0.0, -0.0)
                };
                Y(_mm256_xor_pd(s, m))
            }
        }
        #[inline(always)]
        fn scale(self, s: f64) -> Self {
            unsafe { Y(_mm256_mul_pd(self.0, _mm256_set1_pd(s))) }
        }
        #[inline(always)]
        unsafe fn twiddle(self, t: *const [f64; 4]) -> Self {
            unsafe {
                let t = t.cast::<f64>();
                let wr = _mm256_set1_pd(*t);
                let wi = _mm_loadu_pd(t.add(2));
                let wi = _mm256_set_m128d(wi, wi);
                let sw = _mm256_permute_pd::<0b0101>(self.0);
                Y(_mm256_add_pd(
                    _mm256_mul_pd(self.0, wr),
                    _mm256_mul_pd(sw, wi),
                ))
            }
        }
    }

    /// Reverses the four complex values of a register.
    #[inline(always)]
    fn rev(a: __m512d) -> __m512d {
        // SAFETY: inside the AVX-512F functions below.
        unsafe { _mm512_shuffle_f64x2::<0x1B>(a, a) }
    }

    /// Negates the imaginary parts.
    #[inline(always)]
    fn conj(a: __m512d) -> __m512d {
        // SAFETY: inside the AVX-512F functions below.
        unsafe {
            let m = _mm512_set_epi64(i64::MIN, 0, i64::MIN, 0, i64::MIN, 0, i64::MIN, 0);
            _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(a), m))
        }
    }

    /// [`super::RealCol::untangle`] for `k` in `1..k1`, four at a time,
    /// each value with the scalar code's operations.
    ///
    /// # Safety
    /// AVX-512F present; for every group `k .. k + 4` below `k1`, `k + 3 <
    /// h - k - 3`; `w4` the packed twiddles of those groups.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn untangle512(
        z: &[Complex64],
        x: &mut [Complex64],
        w4: &[f64],
        k1: usize,
        scale: f64,
    ) {
        let h = z.len();
        let (zp, xp) = (z.as_ptr(), x.as_mut_ptr());
        let half = _mm512_set1_pd(0.5);
        let s = _mm512_set1_pd(scale);
        let mut k = 1;
        while k < k1 {
            // SAFETY: values `k .. k + 4` and `h - k - 3 .. h - k + 1` of
            // `z` (`h` long) and `x` (`h + 1` long), and the group's 16
            // packed twiddles (the caller's contract).
            unsafe {
                let a = _mm512_loadu_pd(zp.add(k).cast());
                let b = conj(rev(_mm512_loadu_pd(zp.add(h - k - 3).cast())));
                let e = _mm512_mul_pd(_mm512_add_pd(a, b), half);
                let d = Z(_mm512_mul_pd(_mm512_sub_pd(a, b), half));
                let o = d.rot::<true>().0;
                let tw = w4.as_ptr().add((k - 1) / 4 * 16);
                let (wr, wi) = (_mm512_loadu_pd(tw), _mm512_loadu_pd(tw.add(8)));
                let sw = _mm512_permute_pd::<0x55>(o);
                let t = _mm512_add_pd(_mm512_mul_pd(o, wr), _mm512_mul_pd(sw, wi));
                let mut xk = _mm512_add_pd(e, t);
                let mut xj = conj(_mm512_sub_pd(e, t));
                if scale != 1.0 {
                    xk = _mm512_mul_pd(xk, s);
                    xj = _mm512_mul_pd(xj, s);
                }
                _mm512_storeu_pd(xp.add(k).cast(), xk);
                _mm512_storeu_pd(xp.add(h - k - 3).cast(), rev(xj));
            }
            k += 4;
        }
    }

    /// [`super::RealCol::tangle`] for `k` in `1..k1`, four at a time, each
    /// value with the scalar code's operations.
    ///
    /// # Safety
    /// As [`untangle512`], with `x` `h + 1` long and `z` `h` long, except
    /// that the groups need only `k + 3 <= h / 2`: the last may share value
    /// `h / 2` with its mirror, which then holds the mirror's formula.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tangle512(x: &[Complex64], z: &mut [Complex64], wb4: &[f64], k1: usize) {
        let h = z.len();
        let (xp, zp) = (x.as_ptr(), z.as_mut_ptr());
        let mut k = 1;
        while k < k1 {
            // SAFETY: as in `untangle512`.
            unsafe {
                let a = _mm512_loadu_pd(xp.add(k).cast());
                let b = conj(rev(_mm512_loadu_pd(xp.add(h - k - 3).cast())));
                let s = _mm512_add_pd(a, b);
                let d = _mm512_sub_pd(a, b);
                let tw = wb4.as_ptr().add((k - 1) / 4 * 16);
                let (wr, wi) = (_mm512_loadu_pd(tw), _mm512_loadu_pd(tw.add(8)));
                let sw = _mm512_permute_pd::<0x55>(d);
                let u = _mm512_add_pd(_mm512_mul_pd(d, wr), _mm512_mul_pd(sw, wi));
                // z_k = s + i u; z_j = conj(s) + (u.im, u.re).
                let zk = _mm512_add_pd(s, Z(u).rot::<false>().0);
                let zj = _mm512_add_pd(conj(s), _mm512_permute_pd::<0x55>(u));
                _mm512_storeu_pd(zp.add(k).cast(), zk);
                _mm512_storeu_pd(zp.add(h - k - 3).cast(), rev(zj));
            }
            k += 4;
        }
    }

    /// Swaps the two complex values of a register.
    #[inline(always)]
    fn rev2(a: __m256d) -> __m256d {
        // SAFETY: inside the AVX2 functions below.
        unsafe { _mm256_permute2f128_pd::<0x01>(a, a) }
    }

    /// Negates the imaginary parts.
    #[inline(always)]
    fn conj2(a: __m256d) -> __m256d {
        // SAFETY: inside the AVX2 functions below.
        unsafe { _mm256_xor_pd(a, _mm256_set_pd(-0.0, 0.0, -0.0, 0.0)) }
    }

    /// [`untangle512`] two at a time with AVX2, each value with the scalar
    /// code's operations; the twiddles from the same packing (half of a
    /// group of four).
    ///
    /// # Safety
    /// AVX2 present; for every group `k .. k + 2` below `k1` (`k` odd),
    /// `k + 1 < h - k - 1`; `w4` the packed twiddles of those groups.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn untangle256(
        z: &[Complex64],
        x: &mut [Complex64],
        w4: &[f64],
        k1: usize,
        scale: f64,
    ) {
        let h = z.len();
        let (zp, xp) = (z.as_ptr(), x.as_mut_ptr());
        let half = _mm256_set1_pd(0.5);
        let s = _mm256_set1_pd(scale);
        let mut k = 1;
        while k < k1 {
            // SAFETY: values `k .. k + 2` and `h - k - 1 .. h - k + 1` of
            // `z` (`h` long) and `x` (`h + 1` long), and the group's packed
            // twiddles (the caller's contract).
            unsafe {
                let a = _mm256_loadu_pd(zp.add(k).cast());
                let b = conj2(rev2(_mm256_loadu_pd(zp.add(h - k - 1).cast())));
                let e = _mm256_mul_pd(_mm256_add_pd(a, b), half);
                let d = Y(_mm256_mul_pd(_mm256_sub_pd(a, b), half));
                let o = d.rot::<true>().0;
                let tw = w4.as_ptr().add((k - 1) / 4 * 16 + (k - 1) % 4 * 2);
                let (wr, wi) = (_mm256_loadu_pd(tw), _mm256_loadu_pd(tw.add(8)));
                let sw = _mm256_permute_pd::<0b0101>(o);
                let t = _mm256_add_pd(_mm256_mul_pd(o, wr), _mm256_mul_pd(sw, wi));
                let mut xk = _mm256_add_pd(e, t);
                let mut xj = conj2(_mm256_sub_pd(e, t));
                if scale != 1.0 {
                    xk = _mm256_mul_pd(xk, s);
                    xj = _mm256_mul_pd(xj, s);
                }
                _mm256_storeu_pd(xp.add(k).cast(), xk);
                _mm256_storeu_pd(xp.add(h - k - 1).cast(), rev2(xj));
            }
            k += 2;
        }
    }

    /// [`tangle512`] two at a time with AVX2, each value with the scalar
    /// code's operations.
    ///
    /// # Safety
    /// As [`untangle256`], with `x` `h + 1` long and `z` `h` long, except
    /// that the groups need only `k + 1 <= h / 2`: the last may share value
    /// `h / 2` with its mirror, which then holds the mirror's formula.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn tangle256(x: &[Complex64], z: &mut [Complex64], wb4: &[f64], k1: usize) {
        let h = z.len();
        let (xp, zp) = (x.as_ptr(), z.as_mut_ptr());
        let mut k = 1;
        while k < k1 {
            // SAFETY: as in `untangle256`.
            unsafe {
                let a = _mm256_loadu_pd(xp.add(k).cast());
                let b = conj2(rev2(_mm256_loadu_pd(xp.add(h - k - 1).cast())));
                let s = _mm256_add_pd(a, b);
                let d = _mm256_sub_pd(a, b);
                let tw = wb4.as_ptr().add((k - 1) / 4 * 16 + (k - 1) % 4 * 2);
                let (wr, wi) = (_mm256_loadu_pd(tw), _mm256_loadu_pd(tw.add(8)));
                let sw = _mm256_permute_pd::<0b0101>(d);
                let u = _mm256_add_pd(_mm256_mul_pd(d, wr), _mm256_mul_pd(sw, wi));
                // z_k = s + i u; z_j = conj(s) + (u.im, u.re).
                let zk = _mm256_add_pd(s, Y(u).rot::<false>().0);
                let zj = _mm256_add_pd(conj2(s), _mm256_permute_pd::<0b0101>(u));
                _mm256_storeu_pd(zp.add(k).cast(), zk);
                _mm256_storeu_pd(zp.add(h - k - 1).cast(), rev2(zj));
            }
            k += 2;
        }
    }

    /// `[x(j, v)]_j` for `v < 4`: the 4 x 4 transpose of the complex
    /// values of `z` (row `j` of the input is `z[j]`).
    #[inline(always)]
    fn transpose(z: [__m512d; 4]) -> [__m512d; 4] {
        // SAFETY: called only from `lines512`'s kernels (AVX-512F).
        unsafe { simd::x86::transpose_pairs4(z) }
    }

    /// A pass of the line form with at least `C::LANES` rows a group:
    /// vectors along `t`, the rows of a group next to each other in the
    /// line.
    ///
    /// # Safety
    /// `src` and `dst` valid for `n` values (the same line, or apart); `tw`
    /// the pass's twiddles; `m = n / (l R)` a multiple of `C::LANES`; the
    /// instruction set of `C` present.
    #[inline(always)]
    unsafe fn pass_t<C: Cv, const R: usize, const FWD: bool>(
        n: usize,
        l: usize,
        tw: *const [f64; 4],
        src: *const Complex64,
        dst: *mut Complex64,
    ) {
        let m = n / (l * R);
        let step = n / l;
        for k in 0..l {
            // SAFETY: groups `k < l` of rows below `n` of the caller's
            // lines and the pass's twiddles (the caller's contract).
            unsafe {
                let tk = tw.add(k * (R - 1));
                let sp = src.add(k * step);
                let dp = dst.add(k * m);
                let mut t = 0;
                while t < m {
                    let mut a: [C; R] = std::array::from_fn(|v| C::load(sp.add(t + m * v)));
                    if k > 0 {
                        for (v, x) in a.iter_mut().enumerate().skip(1) {
                            *x = x.twiddle(tk.add(v - 1));
                        }
                    }
                    let b = super::dft::<C, R, FWD>(a);
                    for (q, y) in b.into_iter().enumerate() {
                        y.store(dp.add(t + l * m * q));
                    }
                    t += C::LANES;
                }
            }
        }
    }

    /// The last pass of the line form (one row a group, `l = n / R`
    /// groups): vectors along `k`, four groups' inputs transposed from the
    /// `4 R` values they occupy; the twiddles from `tw_lines`; the group
    /// `k = 0` left untwiddled, as in the column form.
    ///
    /// # Safety
    /// `src` and `dst` valid for `n` values and apart; `twl` the line
    /// form's twiddles of a pass with `l >= 4` groups.
    #[inline(always)]
    unsafe fn pass_k<const R: usize, const FWD: bool, const SCALED: bool>(
        n: usize,
        twl: *const f64,
        src: *const Complex64,
        dst: *mut Complex64,
        scale: f64,
    ) {
        let l = n / R;
        let mut k0 = 0;
        while k0 < l {
            // SAFETY: values `4 R` from `k0 R < n` of the source line, the
            // output's `k0 + l q + 3 < n`, and the line form's twiddles of
            // group `k0 / 4` (the caller's contract).
            unsafe {
                let sp = src.add(k0 * R);
                let mut a = [Z(_mm512_setzero_pd()); R];
                for h in 0..R / 4 {
                    let z = std::array::from_fn(|j| _mm512_loadu_pd(sp.add(j * R + 4 * h).cast()));
                    for (v, x) in transpose(z).into_iter().enumerate() {
                        a[4 * h + v] = Z(x);
                    }
                }
                let tg = twl.add((k0 / 4) * (R - 1) * 16);
                for (v, x) in a.iter_mut().enumerate().skip(1) {
                    let wr = _mm512_loadu_pd(tg.add((v - 1) * 16));
                    let wi = _mm512_loadu_pd(tg.add((v - 1) * 16 + 8));
                    let sw = _mm512_permute_pd::<0x55>(x.0);
                    let t = _mm512_add_pd(_mm512_mul_pd(x.0, wr), _mm512_mul_pd(sw, wi));
                    // Lane pair 0 of the first group is k = 0: untwiddled.
                    *x = if k0 == 0 {
                        Z(_mm512_mask_blend_pd(0b11, t, x.0))
                    } else {
                        Z(t)
                    };
                }
                let b = super::dft::<Z, R, FWD>(a);
                for (q, y) in b.into_iter().enumerate() {
                    let y = if SCALED { y.scale(scale) } else { y };
                    y.store(dst.add(k0 + l * q));
                }
            }
            k0 += 4;
        }
    }

    /// The line form's last pass on vectors of this type: [`pass_k`] with
    /// AVX-512F, [`pass_k2`] with AVX2.
    trait LastPass: Cv {
        /// # Safety
        /// As [`pass_k`].
        unsafe fn last<const R: usize, const FWD: bool, const SCALED: bool>(
            n: usize,
            twl: *const f64,
            src: *const Complex64,
            dst: *mut Complex64,
            scale: f64,
        );
    }

    impl LastPass for Z {
        #[inline(always)]
        unsafe fn last<const R: usize, const FWD: bool, const SCALED: bool>(
            n: usize,
            twl: *const f64,
            src: *const Complex64,
            dst: *mut Complex64,
            scale: f64,
        ) {
            // SAFETY: the caller's contract.
            unsafe { pass_k::<R, FWD, SCALED>(n, twl, src, dst, scale) }
        }
    }

    impl LastPass for Y {
        #[inline(always)]
        unsafe fn last<const R: usize, const FWD: bool, const SCALED: bool>(
            n: usize,
            twl: *const f64,
            src: *const Complex64,
            dst: *mut Complex64,
            scale: f64,
        ) {
            // SAFETY: the caller's contract.
            unsafe { pass_k2::<R, FWD, SCALED>(n, twl, src, dst, scale) }
        }
    }

    /// Every pass of `plan` on `count` contiguous lines, in the line form
    /// on vectors `C`: line `i` from `io.src.0 + i n` to `io.dst.0 + i n`.
    ///
    /// # Safety
    /// The instruction set of `C` present; the lines valid for reads at
    /// `io.src.0` and writes at `io.dst.0` (the same lines or apart),
    /// `io.a`/`io.b` for `n` values each, apart from all.
    #[inline(always)]
    unsafe fn lines_on<C: LastPass, const FWD: bool>(plan: &ColFft, io: &Chunk, count: usize) {
        let n = plan.n;
        let np = plan.passes.len();
        let scale = (io.scale != 1.0).then_some(io.scale);
        let bufs = [io.a, io.b];
        let twl = plan.tw_lines.as_ptr();
        // Out of place, the lines are likely cold: ask for the next one's
        // input, and its output with intent to write, a line ahead (a
        // measured optimum with AVX-512F: two lines ahead or the input
        // alone were slower).
        let ahead = io.src.0 != io.dst.0.cast_const();
        for line in 0..count {
            if ahead && line + 1 < count {
                for c in (0..n).step_by(4) {
                    super::prefetch_r(io.src.0.wrapping_add((line + 1) * n + c));
                    super::prefetch_w(io.dst.0.wrapping_add((line + 1) * n + c));
                }
            }
            for (i, &(r, l)) in plan.passes.iter().enumerate() {
                let src = if i == 0 {
                    io.src.0.wrapping_add(line * n)
                } else {
                    bufs[(i - 1) % 2].cast_const()
                };
                // SAFETY: line `line < count` and the buffers as the caller
                // guarantees; `tw_at[i]` starts the pass's twiddles, and a
                // plan in the line form (length 32 or more: radices 4, 8
                // and 16, every pass but the last with at least four rows a
                // group) has `tw_lines` for its last pass.
                unsafe {
                    if i + 1 < np {
                        let tw = plan.tw.as_ptr().add(plan.tw_at[i]);
                        let dst = bufs[i % 2];
                        match r {
                            4 => pass_t::<C, 4, FWD>(n, l, tw, src, dst),
                            8 => pass_t::<C, 8, FWD>(n, l, tw, src, dst),
                            _ => pass_t::<C, 16, FWD>(n, l, tw, src, dst),
                        }
                    } else {
                        let dst = io.dst.0.wrapping_add(line * n);
                        match (r, scale) {
                            (8, None) => C::last::<8, FWD, false>(n, twl, src, dst, 1.0),
                            (8, Some(s)) => C::last::<8, FWD, true>(n, twl, src, dst, s),
                            (_, None) => C::last::<16, FWD, false>(n, twl, src, dst, 1.0),
                            (_, Some(s)) => C::last::<16, FWD, true>(n, twl, src, dst, s),
                        }
                    }
                }
            }
        }
    }

    /// [`lines_on`] with AVX-512F vectors (four complex values).
    ///
    /// # Safety
    /// As [`lines_on`]; AVX-512F present.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn lines512<const FWD: bool>(plan: &ColFft, io: &Chunk, count: usize) {
        // SAFETY: the caller's contract, and the feature is enabled here.
        unsafe { lines_on::<Z, FWD>(plan, io, count) }
    }

    /// [`lines_on`] with AVX2 vectors (two complex values).
    ///
    /// # Safety
    /// As [`lines_on`]; AVX2 present.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn lines256<const FWD: bool>(plan: &ColFft, io: &Chunk, count: usize) {
        // SAFETY: the caller's contract, and the feature is enabled here.
        unsafe { lines_on::<Y, FWD>(plan, io, count) }
    }

    /// The last pass of the line form with AVX2 (one row a group, `l = n /
    /// R` groups): vectors along `k`, two groups' inputs transposed from the
    /// `2 R` values they occupy; the twiddles from `tw_lines` (the half of
    /// a group of four that the pair is); the group `k = 0` left
    /// untwiddled, as in the column form.
    ///
    /// # Safety
    /// `src` and `dst` valid for `n` values and apart; `twl` the line
    /// form's twiddles of a pass with `l >= 4` groups; AVX2 present.
    #[inline(always)]
    unsafe fn pass_k2<const R: usize, const FWD: bool, const SCALED: bool>(
        n: usize,
        twl: *const f64,
        src: *const Complex64,
        dst: *mut Complex64,
        scale: f64,
    ) {
        let l = n / R;
        let mut k0 = 0;
        while k0 < l {
            // SAFETY: values `2 R` from `k0 R < n` of the source line, the
            // output's `k0 + l q + 1 < n`, and the line form's twiddles of
            // group `k0 / 4` (the caller's contract).
            unsafe {
                let sp = src.add(k0 * R);
                let mut a = [Y(_mm256_setzero_pd()); R];
                for h in 0..R / 2 {
                    let z0 = _mm256_loadu_pd(sp.add(2 * h).cast());
                    let z1 = _mm256_loadu_pd(sp.add(R + 2 * h).cast());
                    a[2 * h] = Y(_mm256_permute2f128_pd::<0x20>(z0, z1));
                    a[2 * h + 1] = Y(_mm256_permute2f128_pd::<0x31>(z0, z1));
                }
                let tg = twl.add((k0 / 4) * (R - 1) * 16 + (k0 % 4) * 2);
                for (v, x) in a.iter_mut().enumerate().skip(1) {
                    let wr = _mm256_loadu_pd(tg.add((v - 1) * 16));
                    let wi = _mm256_loadu_pd(tg.add((v - 1) * 16 + 8));
                    let sw = _mm256_permute_pd::<0b0101>(x.0);
                    let t = _mm256_add_pd(_mm256_mul_pd(x.0, wr), _mm256_mul_pd(sw, wi));
                    // The first pair's first group is k = 0: untwiddled.
                    *x = if k0 == 0 {
                        Y(_mm256_blend_pd::<0b0011>(t, x.0))
                    } else {
                        Y(t)
                    };
                }
                let b = super::dft::<Y, R, FWD>(a);
                for (q, y) in b.into_iter().enumerate() {
                    let y = if SCALED { y.scale(scale) } else { y };
                    y.store(dst.add(k0 + l * q));
                }
            }
            k0 += 2;
        }
    }

    /// # Safety
    /// As [`super::run`]; AVX-512F must be present.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512<const FWD: bool>(plan: &ColFft, io: &Chunk, c0: usize, c1: usize) {
        // SAFETY: the caller's contract, and the feature is enabled here.
        unsafe { run::<Z, FWD>(plan, io, c0, c1) }
    }

    /// # Safety
    /// As [`super::run`]; AVX2 must be present.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn avx2<const FWD: bool>(plan: &ColFft, io: &Chunk, c0: usize, c1: usize) {
        // SAFETY: the caller's contract, and the feature is enabled here.
        unsafe { run::<Y, FWD>(plan, io, c0, c1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustfft::FftPlanner;

    fn bits(v: &[Complex64]) -> Vec<(u64, u64)> {
        v.iter().map(|c| (c.re.to_bits(), c.im.to_bits())).collect()
    }

    fn signal(n: usize, seed: usize) -> Vec<Complex64> {
        (0..n)
            .map(|i| {
                let x = ((i * 7919 + seed * 104729) % 1009) as f64 / 1009.0 - 0.5;
                let y = ((i * 6151 + seed * 15485863) % 997) as f64 / 997.0 - 0.5;
                Complex64::new(x, y)
            })
            .collect()
    }

    #[test]
    fn lines_match_rustfft_to_rounding() {
        for e in 1..=12 {
            let n = 1usize << e;
            for fwd in [true, false] {
                let plan = ColFft::new(n, fwd).expect("power of two");
                let x = signal(n, e);
                let mut ours = x.clone();
                plan.line(&mut ours, 1.0);
                let mut reference = x.clone();
                let mut p = FftPlanner::<f64>::new();
                let r = if fwd {
                    p.plan_fft_forward(n)
                } else {
                    p.plan_fft_inverse(n)
                };
                r.process(&mut reference);
                let norm = reference.iter().map(|v| v.norm()).fold(0.0, f64::max);
                let err = ours
                    .iter()
                    .zip(&reference)
                    .map(|(a, b)| (a - b).norm())
                    .fold(0.0, f64::max);
                // A few units of rounding per pass, log2 n passes.
                assert!(
                    err <= 4.0 * f64::EPSILON * e as f64 * norm,
                    "n {n} fwd {fwd}: {err:e} against {norm}"
                );
            }
        }
    }

    #[test]
    fn columns_at_every_place_in_a_cache_line_have_the_bits_of_their_lines() {
        // Rows a whole number of cache lines apart whose first column sits
        // 0 to 3 values past a line boundary (the AVX-512 path then starts
        // its vectors on the boundary and takes the columns beside them
        // through a block), in place and out of place from an input at
        // another place in its line.
        // (n = 256 takes chunks of a page of each row: 300 columns are a
        // whole chunk and part of one.)
        for n in [4, 64, 128, 256] {
            for fwd in [true, false] {
                let plan = ColFft::new(n, fwd).expect("power of two");
                let mut scratch = vec![Complex64::default(); plan.scratch_len()];
                for cols in [8usize, 13, 64, 70, 131, 300] {
                    let stride = cols.next_multiple_of(4) + 4;
                    let len = 8 + (n - 1) * stride + cols;
                    let data = signal(len, n + cols);
                    for shift in 0..4 {
                        let mut got = data.clone();
                        let off = crate::tile::to_line_boundary(got.as_ptr()) + shift;
                        plan.columns(None, (&mut got, off, stride), cols, 0.25, &mut scratch);
                        let mut out = vec![Complex64::new(f64::NAN, 0.0); len];
                        let d0 = crate::tile::to_line_boundary(out.as_ptr()) + shift;
                        let s0 = (off + 1) % 8;
                        plan.columns(
                            Some((&data, s0, stride)),
                            (&mut out, d0, stride),
                            cols,
                            0.25,
                            &mut scratch,
                        );
                        for c in 0..cols {
                            let at = |o: usize, j: usize| o + j * stride + c;
                            let mut line: Vec<Complex64> =
                                (0..n).map(|j| data[at(off, j)]).collect();
                            plan.line(&mut line, 0.25);
                            let mut from: Vec<Complex64> =
                                (0..n).map(|j| data[at(s0, j)]).collect();
                            plan.line(&mut from, 0.25);
                            for j in 0..n {
                                let what =
                                    format!("n {n} cols {cols} shift {shift} col {c} row {j}");
                                assert_eq!(bits(&[got[at(off, j)]]), bits(&[line[j]]), "{what}");
                                assert_eq!(bits(&[out[at(d0, j)]]), bits(&[from[j]]), "{what}");
                            }
                        }
                        for (i, (a, b)) in data.iter().zip(&got).enumerate() {
                            let inside =
                                i >= off && (i - off) / stride < n && (i - off) % stride < cols;
                            if !inside {
                                assert_eq!(a, b, "value {i} outside the columns changed");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_column_has_the_bits_of_its_line() {
        // Widths that leave vector chunks and scalar tails, strides with
        // room between rows, offsets off any alignment.
        for n in [2, 4, 8, 16, 32, 64, 128, 256, 512, 2048] {
            for fwd in [true, false] {
                let plan = ColFft::new(n, fwd).expect("power of two");
                let mut scratch = vec![Complex64::default(); plan.scratch_len() + 3];
                for (cols, stride, off) in
                    [(1, 1, 0), (3, 5, 1), (8, 8, 0), (13, 17, 2), (21, 24, 3)]
                {
                    let len = off + (n - 1) * stride + cols + 2;
                    let data = signal(len, n + cols);
                    let mut got = data.clone();
                    plan.columns(None, (&mut got, off, stride), cols, 0.25, &mut scratch[1..]);
                    // Out of place: the same bits, the input untouched.
                    let mut out = vec![Complex64::default(); len];
                    plan.columns(
                        Some((&data, off, stride)),
                        (&mut out, off, stride),
                        cols,
                        0.25,
                        &mut scratch[1..],
                    );
                    for j in 0..n {
                        for c in 0..cols {
                            let (a, b) = (got[off + j * stride + c], out[off + j * stride + c]);
                            assert_eq!(
                                (a.re.to_bits(), a.im.to_bits()),
                                (b.re.to_bits(), b.im.to_bits())
                            );
                        }
                    }
                    for c in 0..cols {
                        let mut line: Vec<Complex64> =
                            (0..n).map(|j| data[off + j * stride + c]).collect();
                        plan.line(&mut line, 0.25);
                        for j in 0..n {
                            let g = got[off + j * stride + c];
                            assert_eq!(
                                (g.re.to_bits(), g.im.to_bits()),
                                (line[j].re.to_bits(), line[j].im.to_bits()),
                                "n {n} cols {cols} column {c} row {j}"
                            );
                        }
                    }
                    // Nothing outside the columns moved.
                    for (i, (a, b)) in data.iter().zip(&got).enumerate() {
                        let inside =
                            i >= off && (i - off) / stride < n && (i - off) % stride < cols;
                        if !inside {
                            assert_eq!(a, b, "value {i} outside the columns changed");
                        }
                    }
                }
            }
        }
    }

    /// The instruction sets this machine has.
    fn isas() -> Vec<Isa> {
        Isa::available_all().collect()
    }

    #[test]
    fn every_instruction_set_gives_the_same_bits() {
        for n in [2, 4, 8, 16, 32, 64, 128, 256, 1024] {
            for fwd in [true, false] {
                let (cols, stride) = (37, 41);
                let data = signal((n - 1) * stride + cols, n);
                let mut want = None;
                for isa in isas() {
                    let plan = ColFft::with_isa(n, fwd, isa);
                    let mut scratch = vec![Complex64::default(); plan.scratch_len()];
                    let mut got = data.clone();
                    plan.columns(None, (&mut got, 0, stride), cols, 0.5, &mut scratch);
                    match &want {
                        None => want = Some(bits(&got)),
                        Some(w) => assert_eq!(&bits(&got), w, "n {n} fwd {fwd} {isa:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn the_line_form_has_the_bits_of_the_column_form_in_and_out_of_place() {
        let mut ran = 0;
        for e in 5..=12 {
            let n = 1usize << e;
            for fwd in [true, false] {
                // The portable column form: the bits every path must give.
                let reference = ColFft::with_isa(n, fwd, Isa::Portable);
                for isa in isas() {
                    let plan = ColFft::with_isa(n, fwd, isa);
                    if !plan.line_form() {
                        continue;
                    }
                    ran += 1;
                    let count = 3;
                    let data = signal(n * count, e);
                    let mut scratch = vec![Complex64::default(); 2 * n + 5];
                    let mut got = data.clone();
                    plan.lines(None, &mut got, 0.5, &mut scratch[1..]);
                    // Out of place, into an output that is not the input.
                    let mut out = vec![Complex64::new(f64::NAN, 0.0); n * count];
                    plan.lines(Some(&data), &mut out, 0.5, &mut scratch[1..]);
                    for (i, l) in data.chunks_exact(n).enumerate() {
                        let mut want = l.to_vec();
                        reference.line(&mut want, 0.5);
                        assert_eq!(
                            bits(&got[i * n..][..n]),
                            bits(&want),
                            "n {n} fwd {fwd} {isa:?} line {i}"
                        );
                        assert_eq!(
                            bits(&out[i * n..][..n]),
                            bits(&want),
                            "n {n} fwd {fwd} {isa:?} line {i} out of place"
                        );
                    }
                }
            }
        }
        if ran == 0 {
            // The line form exists only with AVX2 or AVX-512F.
            eprintln!("no AVX2 here: no line form to compare (skipped)");
        }
    }

    #[test]
    fn the_untangling_has_the_same_bits_on_every_instruction_set() {
        for e in 2..=10 {
            let n = 1usize << e;
            let h = n / 2;
            let mut z = signal(h, e);
            let mut x = signal(h + 1, e + 20);
            // Middle values for which the two formulas for `k = h / 2` (its
            // own and its mirror's, equal in exact arithmetic) differ in
            // the sign of a zero: a real one for the untangling, one with a
            // real part of -0 for the tangling.
            z[h / 2].im = 0.0;
            x[h / 2].re = -0.0;
            let mut want: Option<(Vec<Complex64>, Vec<Complex64>)> = None;
            for isa in isas() {
                let plan = RealCol::with_isa(n, isa);
                let mut xs = vec![Complex64::default(); h + 1];
                plan.untangle(&z, &mut xs, 0.25);
                let mut zs = vec![Complex64::default(); h];
                plan.tangle(&x, &mut zs);
                match &want {
                    None => want = Some((xs, zs)),
                    Some((wx, wz)) => {
                        assert_eq!(bits(&xs), bits(wx), "untangle n {n} {isa:?}");
                        assert_eq!(bits(&zs), bits(wz), "tangle n {n} {isa:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn real_lines_match_realfft_to_rounding() {
        for e in 2..=12 {
            let n = 1usize << e;
            let plan = RealCol::new(n).expect("power of two");
            let h = n / 2;
            let x: Vec<f64> = signal(n, e).iter().map(|c| c.re).collect();
            // Forward.
            let mut z: Vec<Complex64> = x.chunks(2).map(|p| Complex64::new(p[0], p[1])).collect();
            plan.fwd.line(&mut z, 1.0);
            let mut ours = vec![Complex64::default(); h + 1];
            plan.untangle(&z, &mut ours, 1.0);
            let mut rp = realfft::RealFftPlanner::<f64>::new();
            let (f, b) = (rp.plan_fft_forward(n), rp.plan_fft_inverse(n));
            let mut reference = f.make_output_vec();
            f.process(&mut x.clone(), &mut reference).unwrap();
            let norm = reference.iter().map(|v| v.norm()).fold(0.0, f64::max);
            let err = ours
                .iter()
                .zip(&reference)
                .map(|(a, b)| (a - b).norm())
                .fold(0.0, f64::max);
            // A few units of rounding per pass, log2 n passes and the untangling.
            assert!(
                err <= 4.0 * f64::EPSILON * (e + 1) as f64 * norm,
                "forward n {n}: {err:e}"
            );
            // Backward, unnormalised: n times the line.
            let mut zb = vec![Complex64::default(); h];
            plan.tangle(&reference, &mut zb);
            plan.bwd.line(&mut zb, 1.0);
            let back: Vec<f64> = zb.iter().flat_map(|v| [v.re, v.im]).collect();
            let mut want = b.make_output_vec();
            b.process(&mut reference.clone(), &mut want).unwrap();
            let scale = want.iter().map(|v| v.abs()).fold(0.0, f64::max);
            let err = back
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(
                err <= 4.0 * f64::EPSILON * (e + 1) as f64 * scale,
                "backward n {n}: {err:e}"
            );
        }
    }

    #[test]
    fn symmetric_twiddles_are_exactly_symmetric() {
        for m in [8, 16, 64, 1024] {
            for j in 0..m {
                let (s, c) = twiddle(j, m);
                let (s2, c2) = twiddle(m - j, m);
                assert!(s == -s2 && c == c2, "{j}/{m}");
                // The direct reference rounds its argument (up to 2 pi)
                // first: an error of about 2 pi eps = 1.4e-15 at most.
                let (sr, cr) = (2.0 * std::f64::consts::PI * j as f64 / m as f64).sin_cos();
                assert!(
                    (s - sr).abs() < 1.5e-15 && (c - cr).abs() < 1.5e-15,
                    "{j}/{m}"
                );
            }
        }
    }
}
