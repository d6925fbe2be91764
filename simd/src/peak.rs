//! The core's fused multiply-add peak, measured and checked against the
//! documented rate of the CPU family, and a non-temporal copy: the floors
//! that compute-bound and memory-bound kernels are timed against.
//!
//! [`fma_peak`] times independent chains of FMAs on the widest vectors the
//! CPU has, enough of them to keep both FMA pipes of current x86 cores
//! busy at the FMA latency, and few enough that every chain stays in a
//! register (a chain spilled to the stack adds a store and a reload to its
//! latency, and the loop then measures that instead of the FMA units).
//! Beside the wall-clock rate it counts time-stamp-counter ticks over the
//! same loop and sets the flops per tick against the flops per cycle
//! documented for the [`CpuFamily`] that CPUID names ([`FmaPeak::check`]).
//! The core clock itself cannot be read reliably (turbo, virtual machines),
//! so the check allows for a core clocked above the TSC's rate
//! ([`turbo_allowance`]) and for one clocked somewhat below it
//! ([`MIN_CLOCK_PER_TICK`]).

use crate::Isa;
use std::hint::black_box;
use std::time::Instant;

/// Independent accumulator chains of the AVX2 loop. Two FMA pipes at a
/// latency of 4 to 5 cycles (Zen 2 to 5, Haswell to Alder Lake) need 8 to
/// 10 chains in flight; 12 leave a margin and, with the two operands, use
/// 14 of the 16 `ymm` registers, so no chain is spilled.
pub const CHAINS_AVX2: usize = 12;

/// Independent accumulator chains of the AVX-512 loop: two 512-bit FMA
/// pipes at a latency of 4 (Skylake-SP to Sapphire Rapids, Zen 5) need 8;
/// 24 chains and the two operands use 26 of the 32 `zmm` registers.
pub const CHAINS_AVX512: usize = 24;

/// Independent chains of the portable loop (the AVX2 loop's count).
pub const CHAINS_PORTABLE: usize = CHAINS_AVX2;

/// The lowest core clock, in cycles per TSC tick, at which a reading still
/// counts as plausible: 0.75. The TSC ticks at the nominal (base) clock,
/// and a single busy core runs at or above it on the families of
/// [`CpuFamily::fma_rate`] unless it is throttled or shares its time
/// (Intel's lower AVX-512 clock levels, about 0.7 of the base clock, apply
/// with most cores busy). The factor is lenient on purpose: the probe keeps
/// the best of its passes, so a time-sliced virtual machine lowers the
/// reading only where every pass is interrupted, while a loop that does
/// not keep both FMA pipes busy reads little more than half the rate (16
/// chains spilled to the stack on Zen 3: about 9 flops a cycle).
pub const MIN_CLOCK_PER_TICK: f64 = 0.75;

/// The highest core clock, in cycles per TSC tick, assumed where CPUID does
/// not report the maximum clock (leaf `0x16`; AMD cores and many virtual
/// machines do not): 2.0. The single-core boost of server and desktop parts
/// of the families of [`CpuFamily::fma_rate`] stays below twice the base
/// clock (EPYC 7763 3.5 / 2.45 GHz = 1.43, EPYC 7713 3.675 / 2.0 = 1.84,
/// Xeon Platinum 8480+ 3.8 / 2.0 = 1.9, Ryzen 9 5950X 4.9 / 3.4 = 1.44).
pub const TURBO_ALLOWANCE: f64 = 2.0;

/// One measurement of the FMA peak, with the check of its reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FmaPeak {
    /// Billions of floating-point operations per second, two per FMA lane.
    pub gflops: f64,
    /// The instruction set of the loop: the widest this CPU has
    /// ([`Isa::detect`]).
    pub isa: Isa,
    /// Lanes per FMA.
    pub lanes: usize,
    /// Independent chains of the loop ([`CHAINS_AVX2`], [`CHAINS_AVX512`],
    /// [`CHAINS_PORTABLE`]).
    pub chains: usize,
    /// Flops per time-stamp-counter tick over the fastest pass; `None`
    /// where the target has no TSC.
    pub flops_per_tick: Option<f64>,
    /// The CPU family the reading is checked against.
    pub family: CpuFamily,
    /// The flops a core cycle documented for `family` on `isa`; `None`
    /// where the probe knows no figure (an unlisted family, the portable
    /// loop).
    pub expected: Option<FmaRate>,
    /// The core clock in cycles per TSC tick up to which a reading is
    /// plausible ([`turbo_allowance`]).
    pub turbo: f64,
    /// `flops_per_tick` against `expected` ([`Check::of`]).
    pub check: Check,
}

/// The documented FMA throughput of a CPU family on one instruction set,
/// in flops a core cycle (two per FMA lane).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FmaRate {
    /// The rate of the family's parts with the most FMA units: the peak.
    pub max: f64,
    /// The rate of its parts with the fewest (equal to `max` where every
    /// part has the same units; half of it for the Xeon parts with one
    /// 512-bit FMA unit, or the hybrid parts' efficient cores).
    pub min: f64,
}

/// Whether a reading of [`fma_peak`] fits the family's documented rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Between [`MIN_CLOCK_PER_TICK`] times the family's lowest rate and
    /// the turbo allowance times its highest, per TSC tick.
    Plausible,
    /// Below: the loop did not keep the FMA pipes busy (chains spilled or
    /// too few for the latency), or the core was throttled or shared for
    /// every pass. Rates set against this reading are overstated.
    Low,
    /// Above: more flops than the family starts at the highest clock
    /// allowed, so the family was misread or the loop skipped work.
    High,
    /// No documented rate to check against (an unlisted family, the
    /// portable loop, or no TSC).
    Unknown,
}

impl Check {
    /// The check of `flops_per_tick` against `expected` with a clock of up
    /// to `turbo` cycles per tick.
    pub fn of(flops_per_tick: Option<f64>, expected: Option<FmaRate>, turbo: f64) -> Check {
        match (flops_per_tick, expected) {
            (Some(f), Some(r)) if f.is_finite() => {
                if f < MIN_CLOCK_PER_TICK * r.min {
                    Check::Low
                } else if f > turbo * r.max {
                    Check::High
                } else {
                    Check::Plausible
                }
            }
            _ => Check::Unknown,
        }
    }

    /// A short lowercase description: `plausible`, `below the family's
    /// rate`, `above the family's rate`, `unchecked`.
    pub fn describe(self) -> &'static str {
        match self {
            Check::Plausible => "plausible",
            Check::Low => "below the family's rate",
            Check::High => "above the family's rate",
            Check::Unknown => "unchecked",
        }
    }
}

impl FmaPeak {
    /// `gflops` as a share of this peak (1.0 is the peak), or `None` where
    /// `gflops` is above the peak (no kernel outruns the FMA units, so the
    /// probe read low and a share would be meaningless), or not a finite
    /// non-negative number, or the peak is not positive.
    pub fn share(&self, gflops: f64) -> Option<f64> {
        (gflops.is_finite() && gflops >= 0.0 && self.gflops > 0.0 && gflops <= self.gflops)
            .then(|| gflops / self.gflops)
    }

    /// `gflops` as a percentage of this peak with one decimal (`"73.4 %"`),
    /// or [`above`](FmaPeak::above) where [`share`](FmaPeak::share) is
    /// `None`.
    pub fn percent(&self, gflops: f64) -> String {
        match self.share(gflops) {
            Some(s) => format!("{:.1} %", 100.0 * s),
            None => self.above().to_string(),
        }
    }

    /// What a rate above this peak says: where the reading fits the CPU
    /// family ([`Check::Plausible`]), that the rate counts more flops than
    /// its kernel runs ([`ABOVE_COUNTED`]); otherwise that the probe may
    /// have read low ([`ABOVE_PEAK`]).
    pub fn above(&self) -> &'static str {
        if self.check == Check::Plausible {
            ABOVE_COUNTED
        } else {
            ABOVE_PEAK
        }
    }

    /// The family, the reading per TSC tick, the family's documented rate
    /// and the verdict in one line, e.g. `"AMD Zen 3, avx2: 19.4 flops/TSC
    /// tick, documented 16 a cycle (up to 32.0 a tick with turbo):
    /// plausible"`.
    pub fn summary(&self) -> String {
        let tick = self
            .flops_per_tick
            .map_or("no TSC".to_string(), |f| format!("{f:.1} flops/TSC tick"));
        let rate = match self.expected {
            Some(r) if r.min == r.max => format!(
                "documented {} a cycle (up to {:.1} a tick with turbo)",
                r.max,
                r.max * self.turbo
            ),
            Some(r) => format!(
                "documented {} to {} a cycle (up to {:.1} a tick with turbo)",
                r.min,
                r.max,
                r.max * self.turbo
            ),
            None => "no documented rate".to_string(),
        };
        format!(
            "{}, {}: {tick}, {rate}: {}",
            self.family.name,
            self.isa,
            self.check.describe()
        )
    }
}

/// What [`FmaPeak::percent`] prints for a rate above a peak whose reading
/// is not [`Check::Plausible`].
pub const ABOVE_PEAK: &str = "above the probe's peak: probe unreliable";

/// What [`FmaPeak::percent`] prints for a rate above a plausible peak: no
/// kernel outruns the FMA units, so the rate's flop count is nominal (it
/// counts operations the kernel does not run).
pub const ABOVE_COUNTED: &str = "above the FMA peak: counts more flops than it runs";

/// The fastest of `passes` timed runs of the chains ([`FmaPeak::chains`])
/// of `iters` FMAs each on the widest vectors this CPU has, in GFLOP/s and
/// flops per TSC tick (the best pass: a peak), checked against the CPU
/// family's documented rate. A pass of 100 000 iterations takes about
/// 0.2 ms on a 3 GHz core with two 256-bit FMA pipes.
pub fn fma_peak(iters: usize, passes: usize) -> FmaPeak {
    let isa = Isa::detect();
    let (chains, f) = kernel(isa);
    black_box(f(iters.min(1000))); // warm up (clock ramp, page faults of the code)
    let (mut best, mut best_ticks) = (f64::INFINITY, u64::MAX);
    for _ in 0..passes.max(1) {
        let (t, c) = (Instant::now(), ticks());
        black_box(f(black_box(iters)));
        let (c1, dt) = (ticks(), t.elapsed().as_secs_f64());
        best = best.min(dt);
        if let (Some(c), Some(c1)) = (c, c1) {
            best_ticks = best_ticks.min(c1.wrapping_sub(c));
        }
    }
    let flops = (2 * isa.lanes() * chains * iters) as f64;
    let flops_per_tick =
        (best_ticks != u64::MAX && best_ticks > 0).then(|| flops / best_ticks as f64);
    let family = CpuFamily::detect();
    let expected = family.fma_rate(isa);
    let turbo = turbo_allowance();
    FmaPeak {
        gflops: flops / best / 1e9,
        isa,
        lanes: isa.lanes(),
        chains,
        flops_per_tick,
        family,
        expected,
        turbo,
        check: Check::of(flops_per_tick, expected, turbo),
    }
}

/// The chains and the loop of `isa` (the widest this CPU has).
fn kernel(isa: Isa) -> (usize, Box<dyn Fn(usize) -> f64>) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx512 => {
            if let Some(t) = crate::Avx512Token::detect() {
                return (CHAINS_AVX512, Box::new(move |n| x86::chains512(t, n)));
            }
        }
        Isa::Avx2 => {
            if let Some(t) = crate::Avx2Token::detect() {
                return (CHAINS_AVX2, Box::new(move |n| x86::chains256(t, n)));
            }
        }
        Isa::Portable => {}
    }
    let _ = isa;
    (CHAINS_PORTABLE, Box::new(chains1::<CHAINS_PORTABLE>))
}

/// The time-stamp counter, where the target has one.
fn ticks() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC is part of every x86-64 CPU and reads a counter
        // only (no memory, no preconditions).
        Some(unsafe { std::arch::x86_64::_rdtsc() })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// The core clock, in cycles per TSC tick, up to which [`fma_peak`] counts
/// a reading as plausible: [`TURBO_ALLOWANCE`], or 1.05 times the ratio of
/// the maximum to the base clock that CPUID leaf `0x16` reports where that
/// is higher (low-power Intel parts boost to more than twice their base).
pub fn turbo_allowance() -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // SAFETY: CPUID is part of every x86-64 CPU; leaf 0 gives the
        // highest standard leaf, and leaf 0x16 is read only where it is
        // listed.
        #[allow(unused_unsafe)] // `__cpuid` is a safe function in newer Rust
        let (base, max) = unsafe {
            if __cpuid(0).eax >= 0x16 {
                let l = __cpuid(0x16);
                (l.eax & 0xffff, l.ebx & 0xffff)
            } else {
                (0, 0)
            }
        };
        if base > 0 && max > base {
            return TURBO_ALLOWANCE.max(1.05 * max as f64 / base as f64);
        }
    }
    TURBO_ALLOWANCE
}

/// The CPU's vendor as CPUID names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// `AuthenticAMD`.
    Amd,
    /// `GenuineIntel`.
    Intel,
    /// Any other, or not an x86-64 CPU.
    Other,
}

/// A CPU's family and model as CPUID leaf 1 gives them (the display
/// family and model: the extended fields folded in), with the name of the
/// microarchitecture where [`CpuFamily::fma_rate`] knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuFamily {
    /// The vendor.
    pub vendor: Vendor,
    /// The display family (AMD Zen 3 and Zen 4: `0x19`; Intel cores: 6).
    pub family: u32,
    /// The display model.
    pub model: u32,
    /// Whether the CPU has AMX tiles (CPUID leaf 7): only Intel's Xeon
    /// parts from Sapphire Rapids on do, whatever model a hypervisor
    /// reports (one seen here reports 0xa7, a client model, for a Xeon
    /// with AMX and two 512-bit FMA units).
    pub amx: bool,
    /// The microarchitecture, e.g. `"AMD Zen 3"`, or `"unknown"`.
    pub name: &'static str,
}

impl CpuFamily {
    /// The family of the CPU this runs on (CPUID leaves 0 and 1); vendor
    /// [`Vendor::Other`], family and model 0 off x86-64.
    pub fn detect() -> CpuFamily {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::__cpuid;
            // SAFETY: CPUID is part of every x86-64 CPU; leaves 0 and 1
            // exist on all of them.
            #[allow(unused_unsafe)] // `__cpuid` is a safe function in newer Rust
            let (l0, l1) = unsafe { (__cpuid(0), __cpuid(1)) };
            let mut id = [0u8; 12];
            id[..4].copy_from_slice(&l0.ebx.to_le_bytes());
            id[4..8].copy_from_slice(&l0.edx.to_le_bytes());
            id[8..].copy_from_slice(&l0.ecx.to_le_bytes());
            let vendor = match &id {
                b"AuthenticAMD" => Vendor::Amd,
                b"GenuineIntel" => Vendor::Intel,
                _ => Vendor::Other,
            };
            let (family, model) = display_family_model(l1.eax);
            // SAFETY: as above; leaf 7 exists where leaf 0 says so.
            #[allow(unused_unsafe)]
            let amx = l0.eax >= 7
                && unsafe { std::arch::x86_64::__cpuid_count(7, 0) }.edx & (1 << 24) != 0;
            CpuFamily::with_amx(vendor, family, model, amx)
        }
        #[cfg(not(target_arch = "x86_64"))]
        CpuFamily::new(Vendor::Other, 0, 0)
    }

    /// The family of `vendor`, `family` and `model` (display values),
    /// without AMX, named where the probe knows it.
    pub fn new(vendor: Vendor, family: u32, model: u32) -> CpuFamily {
        CpuFamily::with_amx(vendor, family, model, false)
    }

    /// The same, with or without AMX tiles (an Intel CPU with them is a
    /// Xeon of Sapphire Rapids or later, whatever its model).
    pub fn with_amx(vendor: Vendor, family: u32, model: u32, amx: bool) -> CpuFamily {
        CpuFamily {
            vendor,
            family,
            model,
            amx,
            name: table(vendor, family, model, amx).map_or("unknown", |e| e.name),
        }
    }

    /// The documented double-precision FMA throughput of this family on
    /// `isa`, in flops a core cycle; `None` for an unlisted family, the
    /// portable loop, or a set the family lacks. From the vendors'
    /// optimisation manuals: two 256-bit FMA pipes (16 flops a cycle) on
    /// AMD Zen 2, 3, 4 and 5 and Intel Haswell to Raptor Lake's
    /// performance cores; two 128-bit pipes (8) on Zen and Zen+ and on
    /// Gracemont efficient cores; with AVX-512, one 512-bit FMA a cycle (16)
    /// on Zen 4 (on its 256-bit pipes) and Intel's client cores, two (32)
    /// on Xeon Scalable parts with two 512-bit units and on Zen 5
    /// desktop and server parts.
    pub fn fma_rate(&self, isa: Isa) -> Option<FmaRate> {
        let e = table(self.vendor, self.family, self.model, self.amx)?;
        let (min, max) = match isa {
            Isa::Portable => return None,
            Isa::Avx2 => e.avx2,
            Isa::Avx512 => e.avx512?,
        };
        Some(FmaRate { min, max })
    }
}

/// The display family and model of CPUID leaf 1's `eax`: the extended
/// family is added where the base family is `0xf`, the extended model is
/// the high nibble where the base family is 6 or `0xf`.
fn display_family_model(eax: u32) -> (u32, u32) {
    let base = (eax >> 8) & 0xf;
    let family = if base == 0xf {
        base + ((eax >> 20) & 0xff)
    } else {
        base
    };
    let model = if base == 6 || base == 0xf {
        (((eax >> 16) & 0xf) << 4) | ((eax >> 4) & 0xf)
    } else {
        (eax >> 4) & 0xf
    };
    (family, model)
}

/// One family of the table: its name and its FMA flops a cycle (fewest,
/// most) with AVX2 and, where it has AVX-512, with AVX-512.
struct Entry {
    name: &'static str,
    avx2: (f64, f64),
    avx512: Option<(f64, f64)>,
}

/// The families the probe knows.
fn table(vendor: Vendor, family: u32, model: u32, amx: bool) -> Option<Entry> {
    let e = |name, avx2, avx512| Some(Entry { name, avx2, avx512 });
    match (vendor, family, model) {
        (Vendor::Intel, 6, _) if amx => e(
            "Intel Xeon with AMX (Sapphire Rapids or later)",
            (16.0, 16.0),
            Some((16.0, 32.0)),
        ),
        (Vendor::Amd, 0x17, 0x00..=0x2f) => e("AMD Zen / Zen+", (8.0, 8.0), None),
        (Vendor::Amd, 0x17, _) => e("AMD Zen 2", (16.0, 16.0), None),
        (Vendor::Amd, 0x19, 0x10..=0x1f | 0x60..=0x7f | 0xa0..=0xaf) => {
            e("AMD Zen 4", (16.0, 16.0), Some((16.0, 16.0)))
        }
        (Vendor::Amd, 0x19, _) => e("AMD Zen 3", (16.0, 16.0), None),
        // Full 512-bit pipes on desktop and server parts, halves on mobile.
        (Vendor::Amd, 0x1a, _) => e("AMD Zen 5", (16.0, 16.0), Some((16.0, 32.0))),
        (Vendor::Intel, 6, 0x3c | 0x3f | 0x45 | 0x46) => e("Intel Haswell", (16.0, 16.0), None),
        (Vendor::Intel, 6, 0x3d | 0x47 | 0x4f | 0x56) => e("Intel Broadwell", (16.0, 16.0), None),
        (Vendor::Intel, 6, 0x4e | 0x5e | 0x8e | 0x9e | 0xa5 | 0xa6) => {
            e("Intel Skylake client", (16.0, 16.0), None)
        }
        (Vendor::Intel, 6, 0x55) => e(
            "Intel Skylake-SP / Cascade Lake",
            (16.0, 16.0),
            Some((16.0, 32.0)),
        ),
        (Vendor::Intel, 6, 0x7d | 0x7e | 0x8c | 0x8d | 0xa7) => e(
            "Intel Ice Lake / Tiger Lake client",
            (16.0, 16.0),
            Some((16.0, 16.0)),
        ),
        (Vendor::Intel, 6, 0x6a | 0x6c) => e("Intel Ice Lake-SP", (16.0, 16.0), Some((16.0, 32.0))),
        (Vendor::Intel, 6, 0x8f | 0xcf) => e(
            "Intel Sapphire / Emerald Rapids",
            (16.0, 16.0),
            Some((16.0, 32.0)),
        ),
        (Vendor::Intel, 6, 0xad | 0xae) => {
            e("Intel Granite Rapids", (16.0, 16.0), Some((16.0, 32.0)))
        }
        // Hybrid: the thread may run on an efficient core.
        (Vendor::Intel, 6, 0x97 | 0x9a | 0xaa | 0xac | 0xb7 | 0xba | 0xbd | 0xbf | 0xc5 | 0xc6) => {
            e("Intel hybrid (Alder Lake and later)", (8.0, 16.0), None)
        }
        _ => None,
    }
}

/// `K` scalar chains `a = a * b + c` from distinct starts (one rounding
/// each; without FMA hardware `mul_add` is a library call and the figure
/// is low); returns their sum.
fn chains1<const K: usize>(n: usize) -> f64 {
    let mut a: [f64; K] = std::array::from_fn(start);
    let (b, c) = (black_box(B), black_box(C));
    for _ in 0..n {
        for x in a.iter_mut() {
            *x = x.mul_add(b, c);
        }
    }
    a.iter().sum()
}

/// The multiplier of every chain: `a` stays near its fixed point 1.
const B: f64 = 0.999_999_9;
/// The addend of every chain.
const C: f64 = 1e-7;

/// The start of chain `k`: distinct, so that no two chains are the same
/// computation that a compiler could merge.
fn start(k: usize) -> f64 {
    1.0 + k as f64 * 0.001
}

/// `dst = src` (the shorter length) with stores that bypass the caches (no
/// read of the destination's lines before they are written): with the
/// library copy, the floor a sweep's bytes are timed against.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
pub fn copy_streaming(dst: &mut [f64], src: &[f64]) {
    use std::arch::x86_64::{_mm_loadu_pd, _mm_sfence, _mm_stream_pd};
    let n = dst.len().min(src.len());
    let mut i = 0;
    // One value first if the destination is not 16-byte aligned.
    if n > 0 && !(dst.as_ptr() as usize).is_multiple_of(16) {
        dst[0] = src[0];
        i = 1;
    }
    // SAFETY: SSE2 is part of every x86-64 target; `i + 1 < n` keeps both
    // two-value accesses inside the slices, `dst[i]` is 16-byte aligned
    // (f64 slices are 8-byte aligned and the first odd value was copied
    // above), as `_mm_stream_pd` requires, and the fence orders the
    // non-temporal stores before anything that follows.
    unsafe {
        while i + 1 < n {
            let v = _mm_loadu_pd(src.as_ptr().add(i));
            _mm_stream_pd(dst.as_mut_ptr().add(i), v);
            i += 2;
        }
        _mm_sfence();
    }
    if i < n {
        dst[i] = src[i];
    }
}

/// `dst = src` (the shorter length); without x86-64's streaming stores,
/// the library copy.
#[cfg(not(target_arch = "x86_64"))]
pub fn copy_streaming(dst: &mut [f64], src: &[f64]) {
    let n = dst.len().min(src.len());
    dst[..n].copy_from_slice(&src[..n]);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{start, B, C, CHAINS_AVX2, CHAINS_AVX512};
    use crate::{Avx2Token, Avx512Token};
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// [`CHAINS_AVX2`] chains of `n` 256-bit FMAs, chain `k` from
    /// `start(k)` in every lane; returns the sum of every lane.
    pub(super) fn chains256(_: Avx2Token, n: usize) -> f64 {
        /// The loop. The chains are an array that the compiler keeps in
        /// one register each: `objdump -d` of a build shows the loop as
        /// `vfmadd213pd` on 12 `ymm` registers (unrolled twice), a counter
        /// and a branch, without a load or a store.
        #[target_feature(enable = "avx2,fma")]
        fn run(n: usize) -> f64 {
            let b = _mm256_set1_pd(black_box(B));
            let c = _mm256_set1_pd(black_box(C));
            let mut a: [__m256d; CHAINS_AVX2] = std::array::from_fn(|k| _mm256_set1_pd(start(k)));
            for _ in 0..n {
                for x in a.iter_mut() {
                    *x = _mm256_fmadd_pd(*x, b, c);
                }
            }
            let s = a
                .iter()
                .fold(_mm256_setzero_pd(), |s, x| _mm256_add_pd(s, *x));
            let mut out = [0.0; 4];
            // SAFETY: `out` holds four doubles (any alignment for storeu).
            unsafe { _mm256_storeu_pd(out.as_mut_ptr(), s) };
            out.iter().sum()
        }
        // SAFETY: `run` needs AVX2 and FMA, which the token proves.
        unsafe { run(n) }
    }

    /// [`CHAINS_AVX512`] chains of `n` 512-bit FMAs, chain `k` from
    /// `start(k)` in every lane; returns the sum of every lane.
    pub(super) fn chains512(_: Avx512Token, n: usize) -> f64 {
        /// The loop, as in [`chains256`]: `vfmadd213pd` on 24 `zmm`
        /// registers, a counter and a branch.
        #[target_feature(enable = "avx512f,avx2,fma")]
        fn run(n: usize) -> f64 {
            let b = _mm512_set1_pd(black_box(B));
            let c = _mm512_set1_pd(black_box(C));
            let mut a: [__m512d; CHAINS_AVX512] = std::array::from_fn(|k| _mm512_set1_pd(start(k)));
            for _ in 0..n {
                for x in a.iter_mut() {
                    *x = _mm512_fmadd_pd(*x, b, c);
                }
            }
            let s = a
                .iter()
                .fold(_mm512_setzero_pd(), |s, x| _mm512_add_pd(s, *x));
            let mut out = [0.0; 8];
            // SAFETY: `out` holds eight doubles (any alignment for storeu).
            unsafe { _mm512_storeu_pd(out.as_mut_ptr(), s) };
            out.iter().sum()
        }
        // SAFETY: `run` needs AVX-512F, AVX2 and FMA, which the token
        // proves.
        unsafe { run(n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_measured_on_the_widest_vectors() {
        let p = fma_peak(20_000, 3);
        assert!(p.gflops.is_finite() && p.gflops > 0.0);
        assert_eq!(p.isa, Isa::detect());
        assert_eq!(p.lanes, p.isa.lanes());
        let chains = match p.isa {
            Isa::Portable => CHAINS_PORTABLE,
            Isa::Avx2 => CHAINS_AVX2,
            Isa::Avx512 => CHAINS_AVX512,
        };
        assert_eq!(p.chains, chains);
        assert_eq!(p.family, CpuFamily::detect());
        assert_eq!(p.expected, p.family.fma_rate(p.isa));
        assert_eq!(p.check, Check::of(p.flops_per_tick, p.expected, p.turbo));
        #[cfg(target_arch = "x86_64")]
        assert!(
            p.flops_per_tick.is_some_and(|f| f.is_finite() && f > 0.0),
            "{p:?}"
        );
    }

    /// The reading on this CPU lies within the documented bounds of its
    /// family: at most the family's peak a cycle times the turbo
    /// allowance a TSC tick, at least [`MIN_CLOCK_PER_TICK`] times its
    /// lowest rate. A loop that spills its chains or has too few for the
    /// FMA latency reads about two thirds of the lower bound and fails
    /// here (16 spilled chains on Zen 3: 9 to 11 flops a tick against
    /// 12). A few milliseconds: 10 passes of 200 000 iterations, the best
    /// kept, so a time-shared core fails the lower bound only where every
    /// pass is interrupted (with both cores of a 2-core machine busy
    /// elsewhere the reading stays above 16 a tick).
    #[test]
    fn the_reading_fits_the_documented_rate_of_the_family() {
        let p = fma_peak(200_000, 10);
        eprintln!("{p:?}\n{}", p.summary());
        let (Some(f), Some(r)) = (p.flops_per_tick, p.expected) else {
            assert_eq!(p.check, Check::Unknown);
            return;
        };
        assert!(f <= p.turbo * r.max, "{}", p.summary());
        assert!(f >= MIN_CLOCK_PER_TICK * r.min, "{}", p.summary());
        assert_eq!(p.check, Check::Plausible);
    }

    #[test]
    fn the_check_bounds_the_reading_per_tick() {
        let zen3 = Some(FmaRate {
            min: 16.0,
            max: 16.0,
        });
        let of = |f| Check::of(Some(f), zen3, 2.0);
        assert_eq!(of(21.0), Check::Plausible);
        assert_eq!(of(12.0), Check::Plausible);
        assert_eq!(of(32.0), Check::Plausible);
        // The 16-chain loop that spilled read 9 flops a tick on Zen 3.
        assert_eq!(of(9.0), Check::Low);
        assert_eq!(of(11.9), Check::Low);
        assert_eq!(of(32.1), Check::High);
        assert_eq!(Check::of(Some(f64::NAN), zen3, 2.0), Check::Unknown);
        assert_eq!(Check::of(None, zen3, 2.0), Check::Unknown);
        assert_eq!(Check::of(Some(20.0), None, 2.0), Check::Unknown);
        // A range: the lower bound is of the fewest units, the upper of
        // the most.
        let skx = Some(FmaRate {
            min: 16.0,
            max: 32.0,
        });
        assert_eq!(Check::of(Some(12.5), skx, 2.0), Check::Plausible);
        assert_eq!(Check::of(Some(64.0), skx, 2.0), Check::Plausible);
        assert_eq!(Check::of(Some(64.5), skx, 2.0), Check::High);
    }

    #[test]
    fn the_share_refuses_rates_above_the_peak() {
        let mut p = fma_peak(1000, 1);
        p.gflops = 24.1;
        assert_eq!(p.share(12.05), Some(0.5));
        assert_eq!(p.share(24.1), Some(1.0));
        assert_eq!(p.share(0.0), Some(0.0));
        // The SHT benchmark's Legendre rate against the spilled probe.
        assert_eq!(p.share(35.8), None);
        assert_eq!(p.share(f64::NAN), None);
        assert_eq!(p.share(-1.0), None);
        assert_eq!(p.percent(12.05), "50.0 %");
        p.check = Check::Low;
        assert_eq!(p.percent(35.8), ABOVE_PEAK);
        p.check = Check::Plausible;
        assert_eq!(p.percent(35.8), ABOVE_COUNTED);
        p.gflops = 0.0;
        assert_eq!(p.share(0.0), None);
    }

    #[test]
    fn families_and_rates_follow_cpuid() {
        // CPUID leaf 1 `eax` of an EPYC 7763 (Zen 3), a Xeon Platinum 8380
        // (Ice Lake-SP) and a Core i7-4770 (Haswell).
        assert_eq!(display_family_model(0x00a0_0f11), (0x19, 0x01));
        assert_eq!(display_family_model(0x0006_06a6), (6, 0x6a));
        assert_eq!(display_family_model(0x0003_06c3), (6, 0x3c));
        let rate = |v, f, m, isa| {
            CpuFamily::new(v, f, m)
                .fma_rate(isa)
                .map(|r| (r.min, r.max))
        };
        assert_eq!(rate(Vendor::Amd, 0x19, 0x01, Isa::Avx2), Some((16.0, 16.0)));
        assert_eq!(CpuFamily::new(Vendor::Amd, 0x19, 0x01).name, "AMD Zen 3");
        assert_eq!(CpuFamily::new(Vendor::Amd, 0x19, 0x11).name, "AMD Zen 4");
        assert_eq!(
            rate(Vendor::Amd, 0x19, 0x61, Isa::Avx512),
            Some((16.0, 16.0))
        );
        assert_eq!(rate(Vendor::Amd, 0x19, 0x21, Isa::Avx512), None);
        assert_eq!(rate(Vendor::Amd, 0x17, 0x01, Isa::Avx2), Some((8.0, 8.0)));
        assert_eq!(rate(Vendor::Amd, 0x17, 0x31, Isa::Avx2), Some((16.0, 16.0)));
        assert_eq!(
            rate(Vendor::Intel, 6, 0x55, Isa::Avx512),
            Some((16.0, 32.0))
        );
        assert_eq!(
            rate(Vendor::Intel, 6, 0x8c, Isa::Avx512),
            Some((16.0, 16.0))
        );
        assert_eq!(rate(Vendor::Intel, 6, 0x3c, Isa::Avx2), Some((16.0, 16.0)));
        assert_eq!(rate(Vendor::Intel, 6, 0x97, Isa::Avx2), Some((8.0, 16.0)));
        assert_eq!(rate(Vendor::Amd, 0x19, 0x01, Isa::Portable), None);
        assert_eq!(rate(Vendor::Other, 0x19, 0x01, Isa::Avx2), None);
        assert_eq!(CpuFamily::new(Vendor::Intel, 0x13, 0x01).name, "unknown");
        // AMX makes an Intel core a Xeon with two 512-bit units, whatever
        // model it reports (a client model here, as a hypervisor did).
        let amx = CpuFamily::with_amx(Vendor::Intel, 6, 0xa7, true);
        assert_eq!(amx.name, "Intel Xeon with AMX (Sapphire Rapids or later)");
        let r = amx.fma_rate(Isa::Avx512).map(|r| (r.min, r.max));
        assert_eq!(r, Some((16.0, 32.0)));
        assert_eq!(
            CpuFamily::with_amx(Vendor::Amd, 0x19, 0x01, true).name,
            "AMD Zen 3"
        );
        assert!(turbo_allowance() >= TURBO_ALLOWANCE);
    }

    #[test]
    fn every_chain_computes_the_scalar_chains() {
        // The vector chains are the scalar chains lane by lane (the same
        // FMAs from the same starts), so their sums are the scalar sum
        // times the lanes, up to the order of the final additions.
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(t) = crate::Avx2Token::detect() {
                let (v, one) = (x86::chains256(t, 1000), chains1::<CHAINS_AVX2>(1000));
                assert!((v - 4.0 * one).abs() <= 1e-12 * v.abs(), "{v} {one}");
            }
            if let Some(t) = crate::Avx512Token::detect() {
                let (v, one) = (x86::chains512(t, 1000), chains1::<CHAINS_AVX512>(1000));
                assert!((v - 8.0 * one).abs() <= 1e-12 * v.abs(), "{v} {one}");
            }
        }
        let one = chains1::<CHAINS_PORTABLE>(1000);
        assert!(one.is_finite() && one > 0.0);
    }

    #[test]
    fn the_non_temporal_copy_copies_every_value() {
        // Every alignment of the destination and odd and even lengths.
        let src: Vec<f64> = (0..37).map(|i| i as f64 + 0.5).collect();
        for off in 0..2 {
            for n in [0, 1, 2, 3, 30, 31] {
                let mut buf = vec![-1.0; n + 2];
                copy_streaming(&mut buf[off..off + n], &src[..n]);
                assert_eq!(&buf[off..off + n], &src[..n], "offset {off}, length {n}");
                assert!(buf[..off].iter().chain(&buf[off + n..]).all(|&v| v == -1.0));
            }
        }
    }
}
