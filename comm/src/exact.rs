//! Exact, order-independent summation of `f64` values, rounded once.
//!
//! [`ExactSum`] is a *long accumulator*: a fixed-point integer that spans the
//! whole `f64` range, from the smallest subnormal (2^-1074) to beyond the
//! largest finite value (2^1024), with room to spare. Adding a double to it
//! is exact, so the accumulated value does not depend on the order of the
//! additions, on how the values are split among accumulators, or on how the
//! accumulators are merged. [`ExactSum::to_f64`] rounds the exact sum to the
//! nearest double (ties to even) once, at the end.
//!
//! Unlike Neal's superaccumulator (the `xsum` crate), the state can be
//! exported: [`ExactSum::encode`] writes it as [`ExactSum::WORDS`] integers
//! whose element-wise sum over up to 2^20 accumulators is the encoding of the
//! combined accumulator, so a distributed reduction is a single integer
//! allreduce ([`allreduce_exact`], [`allreduce_exact_sum`],
//! [`allreduce_exact_sums`]). The global sum then has the same bits for any
//! rank count and any distribution of the values.
//!
//! # Layout
//!
//! The value is `sum_k limb[k] * 2^(32 k - 1074)` over 67 limbs of type
//! `i64`. A double's 53-bit significand shifted into place covers at most
//! three consecutive limbs, each receiving a chunk below 2^32 in magnitude,
//! so about 2^31 additions fit before a limb could overflow; carries are
//! propagated every 2^30 additions and before the state is exported. After
//! carry propagation every limb but the top one lies in `0..2^32` and the
//! top limb (weight 2^1038) holds the signed remainder.
//!
//! [`ExactSum::add_slice`] first sums the raw significands into 4096 integer
//! bins, one per sign and exponent, and shifts the bins into the limbs
//! every 4096 values: a few integer operations and one memory update per
//! value, about as fast as a compensated (Neumaier) sum.
//!
//! # Special values and signed zero
//!
//! Infinities and NaNs are not added to the limbs but recorded as flags
//! (counts in the encoding): the sum is NaN if any NaN was added or both
//! infinities were; otherwise it is the infinity that was added, if any.
//! A finite exact sum whose magnitude rounds beyond [`f64::MAX`] gives
//! an infinity of its sign, as IEEE addition would.
//!
//! Signed zero follows IEEE 754 round-to-nearest: an exact sum of zero is
//! `+0.0`, except when at least one value was added and every value added
//! was `-0.0`, which gives `-0.0`. The sum of nothing is `+0.0`.
//!
//! ```
//! use comm::exact::{exact_sum, ExactSum};
//!
//! // Plain summation loses the 1.0 to cancellation; the exact sum does not.
//! let xs = [1e308, 1.0, -1e308];
//! assert_eq!(xs.iter().sum::<f64>(), 0.0);
//! assert_eq!(exact_sum(&xs), 1.0);
//!
//! // Accumulators merge exactly, through their encoding as well.
//! let (mut a, mut b) = (ExactSum::new(), ExactSum::new());
//! a.add_slice(&[0.1, 0.2]);
//! b.add(0.3);
//! let mut words = vec![0i64; ExactSum::WORDS];
//! let mut other = vec![0i64; ExactSum::WORDS];
//! a.encode(&mut words);
//! b.encode(&mut other);
//! for (w, o) in words.iter_mut().zip(&other) {
//!     *w += o;
//! }
//! a.merge(&b);
//! assert_eq!(ExactSum::decode(&words), a);
//! assert_eq!(a.to_f64(), 0.6); // where 0.1 + 0.2 + 0.3 gives 0.6000000000000001
//! ```

use crate::{CommError, Communicator, ReduceOp, Result};

/// Number of 32-bit-spaced limbs: bits 0..2098 of a double's scaled value
/// (2^-1074 .. 2^1024) live in limbs 0..=65, limb 66 is headroom.
const LIMBS: usize = 67;
/// Index of the signed top limb.
const TOP: usize = LIMBS - 1;
/// Mask of the low 32 bits.
const LOW32: i64 = 0xffff_ffff;
/// Mask of the fraction bits of a double.
const FRAC_MASK: u64 = (1 << 52) - 1;
/// The sign bit of a double.
const SIGN_BIT: u64 = 1 << 63;
/// Weight, in units of 2^-1074, of the highest bit a finite sum may have
/// and still round to a finite double: 2^1024 = 2^2098 units.
const OVERFLOW_BIT: u32 = 2098;

/// Number of additions (each adding less than 2^32 to a limb) after which
/// carries are propagated. Smaller under test so that the path is exercised.
const NORMALISE_AFTER: u64 = if cfg!(test) { 1 << 12 } else { 1 << 30 };
/// Number of independent copies of each exponent bin in `add_slice`, so that
/// consecutive values of the same exponent do not wait on each other.
const LANES: usize = 2;
/// Values per lane and block: the bins are `u64` sums of 53-bit
/// significands, so 2^11 of them cannot overflow.
const BIN_ADDS: usize = 1 << 11;
/// Values `add_slice` bins before flushing the bins into the limbs.
const BIN_BLOCK: usize = BIN_ADDS * LANES;
/// One bin per sign and biased exponent: the top 12 bits of a double.
const BINS: usize = 1 << 12;
/// Additions (in units of 2^32 per limb) a flush of the bins amounts to: a
/// limb receives one chunk below `LANES * 2^32` from each of the 96
/// exponents whose significands reach it, once per sign.
const FLUSH_UNITS: u64 = 2 * 96 * LANES as u64;
/// Slices shorter than this are added value by value (a flush has a fixed
/// cost of a few hundred operations per 32 exponents touched).
const BIN_MIN: usize = 256;
/// Bound on the top limb between operations (keeps merges from overflowing).
const TOP_BOUND: i64 = 1 << 60;
/// Bound on the top limb in an encoding, so that 2^20 encodings sum safely.
const TOP_BOUND_ENCODED: i64 = 1 << 42;
/// Largest number of encodings that may be summed.
const MAX_RANKS: usize = 1 << 20;

// Between carry propagations a limb is a sum of at most NORMALISE_AFTER
// (`units`) terms below 2^32, and a merge adds two such sums: keep that
// below 2^63 (checked with the production value of NORMALISE_AFTER).
const _: () = assert!(2 * (1u128 << 30) * ((1 << 32) - 1) <= i64::MAX as u128);
// A flush (after a carry propagation if need be) fits the limit.
const _: () = assert!(FLUSH_UNITS < NORMALISE_AFTER);
// A bin receives at most BIN_ADDS significands below 2^53.
const _: () = assert!(BIN_ADDS as u128 * ((1u128 << 53) - 1) <= u64::MAX as u128);
// Encoded limbs below 2^32 (2^42 for the top one) summed 2^20 times fit i64.
const _: () = assert!((TOP_BOUND_ENCODED as u64) * (MAX_RANKS as u64) < (1u64 << 63));

/// Scratch exponent bins of `add_slice`, all zero between calls.
type Bins = [[u64; LANES]; BINS];

thread_local! {
    /// Per-thread bins (64 KiB), allocated on first use and kept zeroed.
    static SCRATCH: std::cell::RefCell<Vec<[u64; LANES]>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Flag bits for the non-finite inputs and the sign of zero.
const F_NAN: u8 = 1;
const F_POS_INF: u8 = 2;
const F_NEG_INF: u8 = 4;
/// Some `-0.0` was added and (canonically) nothing else was.
const F_NEG_ZERO: u8 = 8;
/// Some value other than `-0.0` was added.
const F_OTHER: u8 = 16;
/// All flags, in the order they are encoded after the limbs.
const FLAG_LIST: [u8; 5] = [F_NAN, F_POS_INF, F_NEG_INF, F_NEG_ZERO, F_OTHER];

/// An exact accumulator of `f64` values (a long fixed-point accumulator).
///
/// Additions are exact and the state is independent of their order; the
/// sum is rounded once, to nearest with ties to even, by [`to_f64`](Self::to_f64).
/// Accumulators [`merge`](Self::merge) exactly, and their state can be
/// exported as integers ([`encode`](Self::encode) /
/// [`decode`](Self::decode)) whose element-wise sum is the state of the
/// merged accumulator, which is what [`allreduce_exact`] uses.
///
/// Equality compares the represented state (the exact value and the
/// special-value flags), not the internal carry layout.
///
/// See the [module documentation](self) for the treatment of infinities,
/// NaN and signed zero.
#[derive(Clone, Debug)]
pub struct ExactSum {
    /// Value = sum of `limbs[k] * 2^(32k - 1074)`.
    limbs: [i64; LIMBS],
    /// Bound on `|limbs[k]| / 2^32` for `k < TOP`: the number of additions
    /// since the last carry propagation (plus one for the carried state).
    units: u64,
    /// `F_*` bits; `F_NEG_ZERO` is cleared whenever `F_OTHER` is set.
    flags: u8,
}

impl Default for ExactSum {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for ExactSum {
    fn eq(&self, other: &Self) -> bool {
        self.flags == other.flags && self.carried() == other.carried()
    }
}

/// Adds the finite double with bits `bits` into `limbs` (no carries).
///
/// The significand `m` (53 bits with the implicit one) of a value
/// `m * 2^(pos - 1074)` is shifted left by `pos % 32` and its three 32-bit
/// chunks go to limbs `pos / 32 ..= pos / 32 + 2`, negated for negative
/// values.
#[inline(always)]
fn deposit(limbs: &mut [i64; LIMBS], bits: u64) {
    let e = (bits >> 52) & 0x7ff;
    let normal = u64::from(e != 0);
    let m = (bits & FRAC_MASK) | (normal << 52);
    // pos = max(e, 1) - 1: the weight of the significand's lowest bit.
    let pos = e - normal;
    // pos <= 2046, so k <= 63 and k + 2 < LIMBS (the mask only tells the
    // compiler so).
    let k = ((pos >> 5) & 63) as usize;
    let w = u128::from(m) << (pos & 31);
    // neg = 0 for positive values, -1 for negative: (c ^ neg) - neg = ±c.
    let neg = (bits as i64) >> 63;
    let lo = (i64::from(w as u32) ^ neg) - neg;
    let mid = (i64::from((w >> 32) as u32) ^ neg) - neg;
    let hi = (i64::from((w >> 64) as u32) ^ neg) - neg;
    limbs[k] += lo;
    limbs[k + 1] += mid;
    limbs[k + 2] += hi;
}

/// True when `bits` is an infinity or a NaN.
#[inline(always)]
fn is_special(bits: u64) -> bool {
    bits & 0x7ff0_0000_0000_0000 == 0x7ff0_0000_0000_0000
}

/// The flag for a non-finite value.
fn special_flag(bits: u64) -> u8 {
    let x = f64::from_bits(bits);
    if x.is_nan() {
        F_NAN
    } else if x > 0.0 {
        F_POS_INF
    } else {
        F_NEG_INF
    }
}

/// Propagates carries through arbitrary limbs (exactly, in `i128`): limbs
/// `0..TOP` end in `0..2^32`, the top limb holds the signed rest, clamped
/// to `±TOP_BOUND` (reached only by sums beyond 2^1098, far outside the
/// `f64` range, where the result is an infinity of the same sign anyway).
fn propagate(limbs: &mut [i64; LIMBS]) {
    let mut carry: i128 = 0;
    for l in limbs[..TOP].iter_mut() {
        let v = i128::from(*l) + carry;
        *l = (v as i64) & LOW32;
        carry = v >> 32;
    }
    let top = i128::from(limbs[TOP]) + carry;
    limbs[TOP] = top.clamp(-i128::from(TOP_BOUND), i128::from(TOP_BOUND)) as i64;
}

impl ExactSum {
    /// Length of the encoded state ([`encode`](Self::encode) /
    /// [`decode`](Self::decode)): 67 limbs and 5 flag counts.
    pub const WORDS: usize = LIMBS + FLAG_LIST.len();

    /// An empty accumulator (its sum is `+0.0`).
    pub fn new() -> Self {
        ExactSum {
            limbs: [0; LIMBS],
            units: 0,
            flags: 0,
        }
    }

    /// Sets flags, keeping `F_NEG_ZERO` only while nothing else was added.
    #[inline]
    fn set_flags(&mut self, f: u8) {
        self.flags |= f;
        if self.flags & F_OTHER != 0 {
            self.flags &= !F_NEG_ZERO;
        }
    }

    /// Propagates carries so that the limbs are back in canonical form.
    fn normalise(&mut self) {
        propagate(&mut self.limbs);
        self.units = 1;
    }

    /// The limbs in canonical form, without touching `self`.
    fn carried(&self) -> [i64; LIMBS] {
        let mut l = self.limbs;
        propagate(&mut l);
        l
    }

    /// Adds one value, exactly.
    ///
    /// Infinities and NaNs are recorded, not added (see the
    /// [module documentation](self)).
    #[inline]
    pub fn add(&mut self, x: f64) {
        let bits = x.to_bits();
        if is_special(bits) {
            self.set_flags(special_flag(bits) | F_OTHER);
            return;
        }
        if self.units >= NORMALISE_AFTER {
            self.normalise();
        }
        deposit(&mut self.limbs, bits);
        self.units += 1;
        debug_assert!(self.units <= NORMALISE_AFTER);
        self.set_flags(if bits == SIGN_BIT {
            F_NEG_ZERO
        } else {
            F_OTHER
        });
    }

    /// Adds every value of `xs`, exactly; the same state as calling
    /// [`add`](Self::add) for each, but faster.
    ///
    /// Long slices are first summed into bins, one per sign and exponent
    /// (in a per-thread scratch buffer of 64 KiB), as plain integer sums of
    /// significands; every few thousand values the bins are shifted into
    /// the limbs. The hot loop is branch-free bit manipulation, a handful
    /// of integer operations and one memory update per value.
    pub fn add_slice(&mut self, xs: &[f64]) {
        if xs.len() < BIN_MIN {
            xs.iter().for_each(|&x| self.add(x));
            return;
        }
        let done = SCRATCH.try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => {
                if scratch.is_empty() {
                    scratch.resize(BINS, [0; LANES]);
                }
                let bins: &mut Bins = (&mut scratch[..]).try_into().expect("bins");
                self.add_binned(xs, bins);
                true
            }
            Err(_) => false,
        });
        if done != Ok(true) {
            // Thread-local storage torn down: the slow path, same result.
            xs.iter().for_each(|&x| self.add(x));
        }
    }

    /// `add_slice` through zeroed `bins`, which it leaves zeroed.
    fn add_binned(&mut self, xs: &[f64], bins: &mut Bins) {
        // OR of (bits ^ sign bit): zero exactly when every value is -0.0.
        let mut not_neg_zero = 0u64;
        for block in xs.chunks(BIN_BLOCK) {
            // Bit g set: some value of exponent 32 g .. 32 g + 31 was seen.
            let mut touched = 0u64;
            let mut bin = |x: f64, lane: usize| {
                let bits = x.to_bits();
                not_neg_zero |= bits ^ SIGN_BIT;
                let sign_exp = (bits >> 52) as usize;
                let e = (bits >> 52) & 0x7ff;
                // The implicit bit, for e != 0: bit 11 of e + 0x7ff.
                let m = (bits & FRAC_MASK) | (((e + 0x7ff) & 0x800) << 41);
                bins[sign_exp][lane] = bins[sign_exp][lane].wrapping_add(m);
                touched |= 1 << (e >> 5);
            };
            let groups = block.chunks_exact(LANES);
            // A short block has fewer than BIN_ADDS full groups, so the
            // remainder still fits in the first lanes.
            for (lane, &x) in groups.remainder().iter().enumerate() {
                bin(x, lane);
            }
            for group in groups {
                let group: &[f64; LANES] = group.try_into().expect("chunks_exact");
                for (lane, &x) in group.iter().enumerate() {
                    bin(x, lane);
                }
            }
            if self.flush(bins, touched) {
                // Infinities or NaNs landed in the exponent-2047 bins:
                // classify them (rare, so a second pass is fine).
                for &x in block {
                    let bits = x.to_bits();
                    if is_special(bits) {
                        self.set_flags(special_flag(bits));
                    }
                }
            }
        }
        self.set_flags(if not_neg_zero == 0 {
            F_NEG_ZERO
        } else {
            F_OTHER
        });
    }

    /// Shifts the bins of the exponent groups in `touched` into the limbs
    /// and zeroes them. Returns true if the bins of exponent 2047
    /// (infinities and NaNs) were non-zero; they are zeroed, not added.
    fn flush(&mut self, bins: &mut Bins, touched: u64) -> bool {
        if self.units + FLUSH_UNITS > NORMALISE_AFTER {
            self.normalise();
        }
        self.units += FLUSH_UNITS;
        debug_assert!(self.units <= NORMALISE_AFTER);
        let mut special = false;
        for s in [0x7ff, 0xfff] {
            special |= bins[s].iter().any(|&b| b != 0);
            bins[s] = [0; LANES];
        }
        let mut groups = touched;
        while groups != 0 {
            let g = u64::from(groups.trailing_zeros());
            groups &= groups - 1;
            for e in 32 * g..(32 * g + 32).min(0x7ff) {
                // As in `deposit`: the significands' lowest bit has weight
                // 2^(pos - 1074).
                let pos = e.max(1) - 1;
                let k = ((pos >> 5) & 63) as usize;
                let sh = pos & 31;
                let mut c = [0i64; 3];
                for (sign_exp, neg) in [(e as usize, 0i64), (e as usize | 0x800, -1i64)] {
                    for b in bins[sign_exp].iter_mut() {
                        let w = u128::from(*b) << sh;
                        *b = 0;
                        c[0] += (i64::from(w as u32) ^ neg) - neg;
                        c[1] += (i64::from((w >> 32) as u32) ^ neg) - neg;
                        c[2] += (i64::from((w >> 64) as u32) ^ neg) - neg;
                    }
                }
                self.limbs[k] += c[0];
                self.limbs[k + 1] += c[1];
                self.limbs[k + 2] += c[2];
            }
        }
        special
    }

    /// Adds the state of `other` into `self`, exactly.
    pub fn merge(&mut self, other: &ExactSum) {
        if self.units + other.units > NORMALISE_AFTER {
            self.normalise();
        }
        for (l, o) in self.limbs[..TOP].iter_mut().zip(&other.limbs[..TOP]) {
            *l += o;
        }
        // Both top limbs are within ±TOP_BOUND = 2^60: no overflow.
        self.limbs[TOP] = (self.limbs[TOP] + other.limbs[TOP]).clamp(-TOP_BOUND, TOP_BOUND);
        self.units += other.units;
        if self.units > NORMALISE_AFTER {
            self.normalise();
        }
        debug_assert!(self.units <= NORMALISE_AFTER);
        self.set_flags(other.flags);
    }

    /// The sum, correctly rounded to the nearest double (ties to even).
    ///
    /// NaN if a NaN, or both infinities, were added; otherwise the infinity
    /// added, if any; otherwise the exact sum rounded once, which is an
    /// infinity if its magnitude rounds beyond [`f64::MAX`]. An exact zero
    /// is `-0.0` only if every value added was `-0.0`.
    pub fn to_f64(&self) -> f64 {
        if self.flags & F_NAN != 0 || self.flags & (F_POS_INF | F_NEG_INF) == F_POS_INF | F_NEG_INF
        {
            return f64::NAN;
        }
        if self.flags & F_POS_INF != 0 {
            return f64::INFINITY;
        }
        if self.flags & F_NEG_INF != 0 {
            return f64::NEG_INFINITY;
        }
        let limbs = self.carried();
        let negative = limbs[TOP] < 0;
        // Two's complement words of 32 bits, the top limb taking two.
        let mut mag = [0u32; LIMBS + 1];
        for (m, &l) in mag.iter_mut().zip(&limbs[..TOP]) {
            *m = l as u32;
        }
        mag[TOP] = limbs[TOP] as u32;
        mag[TOP + 1] = (limbs[TOP] >> 32) as u32;
        if negative {
            // Magnitude = !x + 1.
            let mut carry = 1u64;
            for m in mag.iter_mut() {
                let v = u64::from(!*m) + carry;
                *m = v as u32;
                carry = v >> 32;
            }
        }
        let Some(w) = mag.iter().rposition(|&m| m != 0) else {
            return if self.flags == F_NEG_ZERO { -0.0 } else { 0.0 };
        };
        // Index (in units of 2^-1074) of the highest set bit.
        let p = 32 * w as u32 + 31 - mag[w].leading_zeros();
        let sign = if negative { SIGN_BIT } else { 0 };
        if p >= OVERFLOW_BIT {
            return f64::from_bits(sign | 0x7ff0_0000_0000_0000);
        }
        // Bits p-52..=p become the significand, `shift` bits are dropped.
        let shift = p.saturating_sub(52);
        // A window of four words whose top word holds bit p: bits from
        // 32 (w - 3) upwards, at least 96 of them below p.
        let word = |i: usize| -> u128 { i.checked_sub(3).map_or(0, |j| u128::from(mag[j])) };
        // word(i) = mag[i - 3], so word(w + 3 - j) = mag[w - j].
        let window = (word(w + 3) << 96) | (word(w + 2) << 64) | (word(w + 1) << 32) | word(w);
        let base = 32 * w as i64 - 96; // bit index of the window's lowest bit
        let bits = if shift == 0 {
            // Below 2^-1021: exactly representable (subnormal or the
            // smallest binade), and the significand is the value itself.
            (window >> (-base) as u32) as u64
        } else {
            let s = (i64::from(shift) - base) as u32; // >= 44
            let mant = (window >> s) as u64; // 53 bits, bit 52 set
            let round = (window >> (s - 1)) & 1 != 0;
            let sticky = window & ((1u128 << (s - 1)) - 1) != 0
                || mag[..w.saturating_sub(3)].iter().any(|&m| m != 0);
            // Exponent field shift + 1 (the implicit bit adds the one); a
            // carry out of the significand bumps the exponent, and past the
            // largest finite value yields the infinity's bits.
            let b = (u64::from(shift) << 52) + mant;
            b + u64::from(round && (sticky || mant & 1 != 0))
        };
        f64::from_bits(sign | bits)
    }

    /// Writes the state as [`WORDS`](Self::WORDS) integers into `out`.
    ///
    /// The limbs are carried (all but the top one in `0..2^32`, the top one
    /// within ±2^42), so the element-wise `i64` sum of the encodings of up
    /// to 2^20 accumulators cannot overflow and [`decode`](Self::decode)s to
    /// their merge. The last five words count NaNs, `+inf`, `-inf`, "only
    /// `-0.0` seen" and "something else seen" (0 or 1 each).
    ///
    /// # Panics
    /// If `out.len() != ExactSum::WORDS`.
    pub fn encode(&self, out: &mut [i64]) {
        assert_eq!(
            out.len(),
            Self::WORDS,
            "ExactSum::encode: the output must hold ExactSum::WORDS words"
        );
        let mut limbs = self.carried();
        limbs[TOP] = limbs[TOP].clamp(-TOP_BOUND_ENCODED, TOP_BOUND_ENCODED);
        out[..LIMBS].copy_from_slice(&limbs);
        for (o, f) in out[LIMBS..].iter_mut().zip(FLAG_LIST) {
            *o = i64::from(self.flags & f != 0);
        }
    }

    /// Rebuilds an accumulator from [`encode`](Self::encode)d words, or from
    /// the element-wise sum of the encodings of several accumulators (which
    /// gives their merge).
    ///
    /// # Panics
    /// If `words.len() != ExactSum::WORDS`.
    pub fn decode(words: &[i64]) -> Self {
        assert_eq!(
            words.len(),
            Self::WORDS,
            "ExactSum::decode: the input must hold ExactSum::WORDS words"
        );
        let mut acc = ExactSum::new();
        acc.limbs.copy_from_slice(&words[..LIMBS]);
        acc.normalise();
        let mut flags = 0;
        for (&w, f) in words[LIMBS..].iter().zip(FLAG_LIST) {
            if w != 0 {
                flags |= f;
            }
        }
        acc.set_flags(flags);
        acc
    }
}

/// The exact sum of `xs`, correctly rounded once (see [`ExactSum`]).
pub fn exact_sum(xs: &[f64]) -> f64 {
    let mut acc = ExactSum::new();
    acc.add_slice(xs);
    acc.to_f64()
}

/// Global exact sum of the local values over all ranks: same bits for any
/// rank count and any distribution of the values (collective).
///
/// Equal to [`exact_sum`] of the concatenation of every rank's `local`, on
/// every rank. Costs one `i64` allreduce of [`ExactSum::WORDS`] words.
///
/// # Errors
/// The communicator's errors; [`CommError::Invalid`] for more than 2^20
/// ranks.
pub fn allreduce_exact_sum(comm: &(impl Communicator + ?Sized), local: &[f64]) -> Result<f64> {
    let mut acc = ExactSum::new();
    acc.add_slice(local);
    Ok(allreduce_exact(comm, &acc)?.to_f64())
}

/// The merge of every rank's accumulator, returned on every rank
/// (collective; one `i64` allreduce of [`ExactSum::WORDS`] words).
///
/// # Errors
/// The communicator's errors; [`CommError::Invalid`] for more than 2^20
/// ranks.
pub fn allreduce_exact(comm: &(impl Communicator + ?Sized), acc: &ExactSum) -> Result<ExactSum> {
    let mut words = [0i64; ExactSum::WORDS];
    acc.encode(&mut words);
    reduce_words(comm, &mut words)?;
    Ok(ExactSum::decode(&words))
}

/// Several global exact sums in one reduction: element `i` of the result is
/// the rounded merge of every rank's `locals[i]` (collective; every rank
/// must pass the same number of accumulators). Costs one `i64` allreduce
/// of `locals.len() * ExactSum::WORDS` words.
///
/// # Errors
/// The communicator's errors; [`CommError::Invalid`] for more than 2^20
/// ranks.
pub fn allreduce_exact_sums(
    comm: &(impl Communicator + ?Sized),
    locals: &[ExactSum],
) -> Result<Vec<f64>> {
    let mut words = vec![0i64; locals.len() * ExactSum::WORDS];
    for (acc, out) in locals.iter().zip(words.chunks_exact_mut(ExactSum::WORDS)) {
        acc.encode(out);
    }
    reduce_words(comm, &mut words)?;
    Ok(words
        .chunks_exact(ExactSum::WORDS)
        .map(|w| ExactSum::decode(w).to_f64())
        .collect())
}

/// Sums encodings over all ranks.
fn reduce_words(comm: &(impl Communicator + ?Sized), words: &mut [i64]) -> Result<()> {
    if comm.size() > MAX_RANKS {
        return Err(CommError::invalid(format!(
            "exact reduction over {} ranks: the encoding supports at most {MAX_RANKS}",
            comm.size()
        )));
    }
    comm.allreduce_i64(words, ReduceOp::Sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use xsum::{Xsum, XsumAuto, XsumLarge};

    /// Deterministic generator for test data.
    struct SplitMix(u64);
    impl SplitMix {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        /// A finite double with a random exponent in `lo..hi` (biased) and
        /// random sign and fraction.
        fn double(&mut self, lo: u64, hi: u64) -> f64 {
            let e = lo + self.below(hi - lo);
            let bits = (self.next() & (SIGN_BIT | FRAC_MASK)) | (e << 52);
            f64::from_bits(bits)
        }
        fn shuffle<T>(&mut self, v: &mut [T]) {
            for i in (1..v.len()).rev() {
                v.swap(i, self.below(i as u64 + 1) as usize);
            }
        }
    }

    /// xsum 0.1.6 of `xs`, checking its two variants against each other.
    fn xsum_of(xs: &[f64]) -> f64 {
        let mut a = XsumAuto::new();
        a.add_list(xs);
        let s = a.sum();
        let mut l = XsumLarge::new();
        l.add_list(xs);
        assert_eq!(
            l.sum().to_bits(),
            s.to_bits(),
            "xsum variants disagree on {xs:?}"
        );
        s
    }

    /// The reference sum. xsum 0.1.6 misrounds some negative sums (its
    /// negative branch lacks the "extra bits 0x / even low bit" exits of
    /// Neal's C code, so -1 - 2^-53 gives -(1 + 2^-52)); its positive branch
    /// is faithful, so negative sums are taken as -xsum(-xs).
    fn reference(xs: &[f64]) -> f64 {
        let s = xsum_of(xs);
        if s < 0.0 {
            let neg: Vec<f64> = xs.iter().map(|x| -x).collect();
            -xsum_of(&neg)
        } else {
            s
        }
    }

    #[test]
    fn reference_rounds_negative_ties_to_even() {
        // -1 - 2^-53 lies halfway between -1 and -(1 + 2^-52): IEEE addition
        // and the reference give the even -1 (raw xsum 0.1.6 does not).
        let xs = [-1.0, -p2(-53)];
        assert_eq!(xs[0] + xs[1], -1.0);
        assert_eq!(reference(&xs), -1.0);
        assert_eq!(exact_sum(&xs), -1.0);
    }

    /// Same value, and same bits unless zero (xsum's zero signs differ).
    fn same(got: f64, want: f64) -> bool {
        got.to_bits() == want.to_bits() || (got == 0.0 && want == 0.0)
    }

    #[track_caller]
    fn check(xs: &[f64]) -> f64 {
        let got = exact_sum(xs);
        let want = reference(xs);
        assert!(
            same(got, want),
            "exact {got:e} ({:#x}) vs xsum {want:e} ({:#x})",
            got.to_bits(),
            want.to_bits()
        );
        // The one-at-a-time path gives the same state.
        let mut one = ExactSum::new();
        for &x in xs {
            one.add(x);
        }
        let mut slice = ExactSum::new();
        slice.add_slice(xs);
        assert_eq!(one, slice);
        assert_eq!(one.to_f64().to_bits(), got.to_bits());
        got
    }

    fn p2(e: i32) -> f64 {
        if e >= -1022 {
            f64::from_bits(((e + 1023) as u64) << 52)
        } else {
            f64::from_bits(1u64 << (e + 1074))
        }
    }

    #[test]
    fn cancellation() {
        assert_eq!(check(&[1e308, 1.0, -1e308]), 1.0);
        assert_eq!(check(&[1e308, 1e308, -1e308]), 1e308);
        assert_eq!(
            check(&[f64::MAX, f64::MAX, -f64::MAX, -f64::MAX, 5e-324]),
            5e-324
        );
        assert_eq!(check(&[1.0, 1e100, 1.0, -1e100]), 2.0);
        assert_eq!(check(&[0.1, 0.2, -0.3]), p2(-55));
        check(&[0.1, 0.2, 0.3]);
        let mut g = SplitMix(1);
        let mut xs: Vec<f64> = (0..500).map(|_| g.double(1000, 1100)).collect();
        let neg: Vec<f64> = xs.iter().map(|x| -x).collect();
        xs.extend(neg);
        xs.push(3.5);
        g.shuffle(&mut xs);
        assert_eq!(check(&xs), 3.5);
    }

    #[test]
    fn wide_exponent_range() {
        let tiny = f64::from_bits(1);
        assert_eq!(check(&[1e300, tiny, -1e300, tiny, tiny]), 3.0 * tiny);
        let mut g = SplitMix(2);
        for _ in 0..50 {
            let mut xs: Vec<f64> = (0..200).map(|_| g.double(0, 3)).collect(); // subnormals and the smallest normals
            xs.extend((0..50).map(|_| g.double(2000, 2047)));
            xs.extend((0..50).map(|_| g.double(1000, 1050)));
            g.shuffle(&mut xs);
            check(&xs);
            // Only tiny values: the result is subnormal or just normal.
            check(
                &xs.iter()
                    .copied()
                    .filter(|x| x.abs() < 1e-300)
                    .collect::<Vec<_>>(),
            );
        }
        // Subnormal and boundary results.
        assert_eq!(check(&[p2(-1022), -tiny]), f64::from_bits((1 << 52) - 1));
        assert_eq!(check(&[1.0, -1.0, tiny]), tiny);
        assert_eq!(check(&[f64::MIN_POSITIVE, f64::MIN_POSITIVE]), p2(-1021));
        assert_eq!(check(&[-tiny, -tiny]), -2.0 * tiny);
    }

    #[test]
    fn random_exponents() {
        let mut g = SplitMix(3);
        for round in 0..200 {
            let n = 1 + g.below(if round % 10 == 0 { 5000 } else { 300 }) as usize;
            let (lo, width) = (g.below(2046), 1 + g.below(200));
            let hi = (lo + width).min(2047);
            let xs: Vec<f64> = (0..n).map(|_| g.double(lo, hi)).collect();
            check(&xs);
        }
        // All finite exponents at once.
        let xs: Vec<f64> = (0..20_000).map(|_| g.double(0, 2047)).collect();
        check(&xs);
    }

    #[test]
    fn ties_round_to_even() {
        let u = p2(-53); // half an ulp of 1.0
        assert_eq!(check(&[1.0, u]), 1.0);
        assert_eq!(check(&[1.0 + 2.0 * u, u]), 1.0 + 4.0 * u);
        assert_eq!(check(&[-1.0, -u]), -1.0);
        assert_eq!(check(&[-(1.0 + 2.0 * u), -u]), -(1.0 + 4.0 * u));
        // Just above and just below the tie, the difference far down.
        let tiny = f64::from_bits(1);
        assert_eq!(check(&[1.0, u, tiny]), 1.0 + 2.0 * u);
        assert_eq!(check(&[1.0, u, -tiny]), 1.0);
        assert_eq!(check(&[1.0 + 2.0 * u, u, -tiny]), 1.0 + 2.0 * u);
        // A tie made of many pieces spread over limbs.
        assert_eq!(check(&[p2(100), p2(46), p2(46), p2(20), -p2(20)]), p2(100));
        assert_eq!(check(&[p2(100) + p2(48), p2(46), p2(46)]), p2(100) + p2(49));
        // Random ties: a + half ulp(a), with even and odd significands.
        let mut g = SplitMix(4);
        for _ in 0..500 {
            let a = g.double(60, 1980);
            let half = f64::from_bits(a.to_bits() & !FRAC_MASK & !SIGN_BIT) * p2(-53);
            let h = if a < 0.0 { -half } else { half };
            let (lo_part, hi_part) = (h * p2(-30), h - h * p2(-30));
            let xs = [a, hi_part, lo_part];
            let got = check(&xs);
            let even = if a.to_bits() & 1 == 0 {
                a
            } else {
                f64::from_bits(a.to_bits() + 1)
            };
            assert_eq!(got, even, "{a:e} + {h:e}");
        }
    }

    #[test]
    fn near_overflow() {
        let max = f64::MAX;
        let half_ulp = p2(970);
        assert_eq!(check(&[max, max, -max]), max);
        assert_eq!(check(&[max, half_ulp]), f64::INFINITY); // tie, max is odd
        assert_eq!(check(&[max, half_ulp, -p2(-1074)]), max);
        assert_eq!(check(&[max, p2(969)]), max);
        assert_eq!(check(&[-max, -half_ulp]), f64::NEG_INFINITY);
        assert_eq!(check(&[max, max]), f64::INFINITY);
        assert_eq!(check(&[-max, -max, -max]), f64::NEG_INFINITY);
        assert_eq!(check(&[max, max, max, -max, -max]), max);
        let mut g = SplitMix(5);
        for _ in 0..100 {
            let xs: Vec<f64> = (0..100).map(|_| g.double(2040, 2047)).collect();
            check(&xs);
        }
        // Overflowing partial sums undone later, in a long input.
        let mut xs = vec![max; 3000];
        xs.extend(vec![-max; 2999]);
        xs.push(1.0);
        assert_eq!(check(&xs), max);
    }

    #[test]
    fn specials() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        assert_eq!(exact_sum(&[1.0, inf]), inf);
        assert_eq!(exact_sum(&[1.0, -inf, -inf]), -inf);
        assert!(exact_sum(&[inf, -inf]).is_nan());
        assert!(exact_sum(&[1.0, nan]).is_nan());
        assert!(exact_sum(&[nan, inf]).is_nan());
        assert_eq!(exact_sum(&[inf, -f64::MAX, -f64::MAX]), inf);
        assert_eq!(exact_sum(&[-inf, f64::MAX, f64::MAX]), -inf);
        // In a long slice, through add, merge and encode/decode.
        let mut xs = vec![1.0; 1000];
        xs[500] = -inf;
        assert_eq!(exact_sum(&xs), -inf);
        let mut a = ExactSum::new();
        a.add_slice(&xs);
        let mut b = ExactSum::new();
        b.add(inf);
        assert_eq!(b.to_f64(), inf);
        let mut words = [0i64; ExactSum::WORDS];
        let mut wb = [0i64; ExactSum::WORDS];
        a.encode(&mut words);
        b.encode(&mut wb);
        assert_eq!(ExactSum::decode(&words).to_f64(), -inf);
        for (w, v) in words.iter_mut().zip(wb) {
            *w += v;
        }
        assert!(ExactSum::decode(&words).to_f64().is_nan());
        a.merge(&b);
        assert!(a.to_f64().is_nan());
        let mut c = ExactSum::new();
        c.add(nan);
        c.add(1.0);
        assert!(c.to_f64().is_nan());
        // Long slices (the binned path), specials anywhere, of either kind.
        for len in [BIN_MIN, BIN_BLOCK - 1, BIN_BLOCK, 3 * BIN_BLOCK + 1] {
            for at in [0, len / 2, len - 1] {
                for (special, want) in [(inf, inf), (-inf, -inf), (nan, nan), (-nan, nan)] {
                    let mut xs = vec![f64::MAX; len];
                    xs[at] = special;
                    let got = exact_sum(&xs);
                    assert_eq!(got.to_bits(), want.to_bits(), "{special} at {at} of {len}");
                    xs[len - 1 - at] = -special;
                    let both = exact_sum(&xs);
                    assert!(
                        both.is_nan() || (at == len - 1 - at && both == -special),
                        "{both}"
                    );
                }
            }
        }
    }

    #[test]
    fn signed_zero() {
        let z = |xs: &[f64]| exact_sum(xs).to_bits();
        let (p, n) = (0.0f64.to_bits(), (-0.0f64).to_bits());
        assert_eq!(z(&[]), p);
        assert_eq!(z(&[-0.0]), n);
        assert_eq!(z(&[-0.0; 300]), n);
        assert_eq!(z(&[-0.0, 0.0]), p);
        assert_eq!(z(&[0.0, -0.0]), p);
        assert_eq!(z(&[1.0, -1.0]), p);
        assert_eq!(z(&[-1.0, 1.0, -0.0]), p);
        assert_eq!(ExactSum::new().to_f64().to_bits(), p);
        // Merging and encoding keep the rule.
        let mut a = ExactSum::new();
        a.add(-0.0);
        let mut b = ExactSum::new();
        b.add_slice(&[-0.0, -0.0]);
        assert_eq!(a, b);
        let mut m = a.clone();
        m.merge(&b);
        m.merge(&ExactSum::new());
        assert_eq!(m.to_f64().to_bits(), n);
        let mut w = [0i64; ExactSum::WORDS];
        m.encode(&mut w);
        assert_eq!(ExactSum::decode(&w).to_f64().to_bits(), n);
        let mut c = ExactSum::new();
        c.add_slice(&[3.0, -3.0]);
        m.merge(&c);
        assert_eq!(m.to_f64().to_bits(), p);
        // add and add_slice agree on mixed zeros.
        let mut d = ExactSum::new();
        d.add(-0.0);
        d.add(0.0);
        let mut e = ExactSum::new();
        e.add_slice(&[-0.0, 0.0]);
        assert_eq!(d, e);
    }

    fn values(seed: u64, n: usize) -> Vec<f64> {
        let mut g = SplitMix(seed);
        (0..n)
            .map(|i| match i % 4 {
                0 => g.double(900, 1150),
                1 => g.double(0, 2047),
                2 => g.double(1020, 1026),
                _ => -g.double(1020, 1026),
            })
            .collect()
    }

    #[test]
    fn order_and_split_independence() {
        let mut g = SplitMix(6);
        let xs = values(7, 10_000);
        let want = check(&xs);
        for _ in 0..5 {
            let mut ys = xs.clone();
            g.shuffle(&mut ys);
            assert_eq!(exact_sum(&ys).to_bits(), want.to_bits());
            // Split among k accumulators (some by add, some by add_slice),
            // merged, and summed through their encodings.
            let k = 1 + g.below(9) as usize;
            let mut accs = vec![ExactSum::new(); k];
            let mut start = 0;
            for (i, acc) in accs.iter_mut().enumerate() {
                let end = if i + 1 == k {
                    ys.len()
                } else {
                    start + g.below((ys.len() - start) as u64 + 1) as usize
                };
                if i % 2 == 0 {
                    acc.add_slice(&ys[start..end]);
                } else {
                    ys[start..end].iter().for_each(|&x| acc.add(x));
                }
                start = end;
            }
            let mut merged = ExactSum::new();
            let mut words = vec![0i64; ExactSum::WORDS];
            let mut one = vec![0i64; ExactSum::WORDS];
            for acc in &accs {
                merged.merge(acc);
                acc.encode(&mut one);
                for (w, o) in words.iter_mut().zip(&one) {
                    *w += o;
                }
            }
            assert_eq!(merged.to_f64().to_bits(), want.to_bits());
            let decoded = ExactSum::decode(&words);
            assert_eq!(decoded, merged);
            assert_eq!(decoded.to_f64().to_bits(), want.to_bits());
            // Round trip of a single encoding.
            merged.encode(&mut one);
            assert_eq!(ExactSum::decode(&one), merged);
        }
    }

    #[test]
    fn encoding_sums_do_not_overflow() {
        // Encoded limbs stay within the bounds that make 2^20-fold sums safe.
        let mut g = SplitMix(8);
        let xs: Vec<f64> = (0..3000)
            .map(|i| g.double(if i % 2 == 0 { 0 } else { 1800 }, 1900))
            .collect();
        let mut acc = ExactSum::new();
        acc.add_slice(&xs);
        let mut w = [0i64; ExactSum::WORDS];
        acc.encode(&mut w);
        assert!(w[..TOP].iter().all(|&l| (0..1 << 32).contains(&l)));
        assert!(w[TOP].abs() <= TOP_BOUND_ENCODED);
        assert!(w[LIMBS..].iter().all(|&f| f == 0 || f == 1));
        // 2^20 copies of this encoding decode to 2^20 times the sum, which
        // rounds to 2^20 times the rounded sum (a power-of-two scaling).
        let scaled: Vec<i64> = w
            .iter()
            .map(|&x| x.checked_mul(MAX_RANKS as i64).unwrap())
            .collect();
        let s = acc.to_f64();
        assert!(s.is_finite() && s.abs() < 1e290);
        assert_eq!(ExactSum::decode(&scaled).to_f64(), s * MAX_RANKS as f64);
        // Full bins: the largest significand, BIN_ADDS times per lane, in
        // one exponent bin of each sign.
        // (xsum's debug build overflows here; n copies of x sum to x * n,
        // a single correctly rounded product.)
        for x in [2.0 - p2(-52), -(2.0 - p2(-52)), 1.0 - p2(-53), f64::MAX] {
            let n = 3 * BIN_BLOCK + 7;
            let xs = vec![x; n];
            assert_eq!(exact_sum(&xs), x * n as f64);
            let mut one = ExactSum::new();
            xs.iter().for_each(|&v| one.add(v));
            assert_eq!(one.to_f64(), x * n as f64);
            let mut mixed = xs.clone();
            mixed.extend(vec![-x; n - 1]);
            assert_eq!(exact_sum(&mixed), x);
        }
        // Sums far beyond the f64 range (using the top limb) cancel exactly,
        // also through encodings.
        let mut big = ExactSum::new();
        for _ in 0..10 {
            big.add_slice(&vec![f64::MAX; 10_000]);
        }
        big.add(1.5);
        let mut neg = ExactSum::new();
        neg.add_slice(&vec![-f64::MAX; 100_000]);
        assert_eq!(
            (big.to_f64(), neg.to_f64()),
            (f64::INFINITY, f64::NEG_INFINITY)
        );
        let (mut wb, mut wn) = ([0i64; ExactSum::WORDS], [0i64; ExactSum::WORDS]);
        big.encode(&mut wb);
        neg.encode(&mut wn);
        assert!(wb[TOP] > 0 && wn[TOP] < 0);
        let sum: Vec<i64> = wb.iter().zip(&wn).map(|(a, b)| a + b).collect();
        assert_eq!(ExactSum::decode(&sum).to_f64(), 1.5);
        big.merge(&neg);
        assert_eq!(big.to_f64(), 1.5);
        // The largest possible encoding, summed 2^20 times, still decodes.
        let mut worst = [LOW32; ExactSum::WORDS];
        worst[TOP] = TOP_BOUND_ENCODED;
        worst[LIMBS..].fill(0);
        let scaled: Vec<i64> = worst
            .iter()
            .map(|&x| x.checked_mul(MAX_RANKS as i64).unwrap())
            .collect();
        assert_eq!(ExactSum::decode(&scaled).to_f64(), f64::INFINITY);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn matches_xsum(
            xs in prop::collection::vec(
                prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
                0..300,
            ),
            scale in -60i32..60,
        ) {
            check(&xs);
            // Scaled copies bring exponents closer together (more carries
            // and cancellation), with the original values mixed in.
            let mut ys: Vec<f64> = xs.iter().map(|x| x * p2(scale) - x * p2(scale / 2)).filter(|x| x.is_finite()).collect();
            ys.extend(xs.iter().take(10));
            check(&ys);
        }
    }

    fn distributed(values: &[f64], ranks: usize, round_robin: bool) -> Vec<f64> {
        crate::local::run(ranks, |c| {
            let (r, p) = (c.rank(), c.size());
            let mine: Vec<f64> = if round_robin {
                values.iter().skip(r).step_by(p).copied().collect()
            } else {
                let chunk = values.len().div_ceil(p);
                values.chunks(chunk).nth(r).unwrap_or(&[]).to_vec()
            };
            allreduce_exact_sum(c, &mine)
        })
        .unwrap()
    }

    #[test]
    fn allreduce_any_rank_count() {
        let xs = values(9, 10_000);
        let want = exact_sum(&xs);
        let naive: f64 = xs.iter().sum();
        assert_ne!(naive.to_bits(), want.to_bits(), "data too easy");
        for ranks in [1, 2, 3, 4, 7] {
            for round_robin in [false, true] {
                let got = distributed(&xs, ranks, round_robin);
                assert_eq!(got.len(), ranks);
                for g in got {
                    assert_eq!(
                        g.to_bits(),
                        want.to_bits(),
                        "{ranks} ranks, round robin {round_robin}"
                    );
                }
            }
        }
        // Several sums in one reduction, and the combined accumulator.
        let out = crate::local::run(3, |c| {
            let r = c.rank();
            let mut accs = [ExactSum::new(), ExactSum::new(), ExactSum::new()];
            accs[0].add_slice(&xs[r * 1000..(r + 1) * 1000]);
            accs[1].add(if r == 1 { f64::INFINITY } else { 1.0 });
            if r == 2 {
                accs[2].add(-0.0);
            }
            let sums = allreduce_exact_sums(c, &accs)?;
            assert!(allreduce_exact_sums(c, &[])?.is_empty());
            let all = allreduce_exact(c, &accs[0])?;
            Ok::<_, CommError>((sums, all))
        })
        .unwrap();
        let mut first = ExactSum::new();
        first.add_slice(&xs[..3000]);
        for (sums, all) in out {
            assert_eq!(sums[0].to_bits(), exact_sum(&xs[..3000]).to_bits());
            assert_eq!(sums[1], f64::INFINITY);
            assert_eq!(sums[2].to_bits(), (-0.0f64).to_bits());
            assert_eq!(all, first);
        }
    }
}
