//! The instruction sets of the parnum crates' CPU kernels.
//!
//! - [`Isa`]: the one name of an instruction set (`portable`, `avx2`,
//!   `avx512`) with run-time detection. `Avx2` means AVX2 with FMA and
//!   `Avx512` means AVX-512F with AVX2 and FMA, so a kernel chosen by name
//!   has every instruction its set promises.
//! - [`Avx2Token`] and [`Avx512Token`] (x86-64): proofs, obtainable only
//!   from detection (or an `unsafe` promise), that the CPU has the set.
//! - [`F64x4`] and [`F64x8`] (x86-64): vectors of doubles. Every way to
//!   build one takes a token, so a vector value proves its instructions
//!   exist and its methods are safe. Each arithmetic method is one IEEE
//!   operation per lane (`fma` rounds once), so a kernel written on them
//!   gives the bits of the same operations done one lane at a time.
//! - [`x86`]: the AVX-512 transposes that FFT and transform kernels share,
//!   on raw registers, for code inside `#[target_feature]` functions.
//! - [`prefetch_read`] and [`prefetch_write`]: cache hints, safe for any
//!   address.
//! - [`cache`]: the CPU's data-cache sizes as Linux reports them.
//! - [`peak`]: the core's fused multiply-add peak, measured and checked
//!   against the CPU family's documented rate, and a non-temporal copy
//!   (the floors that kernels are timed against).
//!
//! ```
//! use simd::Isa;
//!
//! let best = Isa::detect();
//! assert!(best.available());
//! assert_eq!("scalar".parse::<Isa>().unwrap(), Isa::Portable); // the old name
//! #[cfg(target_arch = "x86_64")]
//! if let Some(t) = simd::Avx2Token::detect() {
//!     let v = simd::F64x4::load(t, &[1.0, 2.0, 3.0, 4.0]);
//!     let w = v.fma(simd::F64x4::splat(t, 2.0), v); // 3 v, rounded once a lane
//!     assert_eq!(w.to_array(), [3.0, 6.0, 9.0, 12.0]);
//! }
//! ```

pub mod cache;
pub mod peak;
#[cfg(target_arch = "x86_64")]
pub mod x86;

#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2Token, Avx512Token, F64x4, F64x8};

/// The environment variable that caps the instruction set
/// [`Isa::detect`] returns.
pub const CAP_VAR: &str = "PARNUM_ISA";

/// An instruction set of the CPU kernels, ordered by vector width
/// (`Portable < Avx2 < Avx512`).
///
/// Every kernel of the parnum crates computes each value with the same
/// IEEE operations in the same order on every set, so the set changes the
/// speed only, never a bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Isa {
    /// Portable Rust (the compiler may vectorise it for the build's
    /// baseline target). `scalar` is read as this name too.
    #[cfg_attr(feature = "serde", serde(alias = "scalar"))]
    #[cfg_attr(feature = "clap", value(alias = "scalar"))]
    Portable,
    /// x86-64 with AVX2 and FMA: four doubles a vector.
    Avx2,
    /// x86-64 with AVX-512F, AVX2 and FMA: eight doubles a vector.
    Avx512,
}

impl Isa {
    /// Every set, narrowest vectors first.
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The widest set this build has and this CPU runs, at most the
    /// [`cap`](Isa::cap) where one is set: with `PARNUM_ISA=avx2` an
    /// AVX-512 CPU runs every kernel's AVX2 path (to measure another CPU
    /// family's path, say). The kernels give the same bits on every set,
    /// so a cap changes only the speed.
    pub fn detect() -> Isa {
        let hw = Isa::hardware();
        Isa::cap().map_or(hw, |c| c.min(hw))
    }

    /// The widest set this build has and this CPU runs, whatever the cap.
    pub fn hardware() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if Avx512Token::detect().is_some() {
                return Isa::Avx512;
            }
            if Avx2Token::detect().is_some() {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }

    /// The cap the environment variable [`CAP_VAR`] sets (`portable`,
    /// `scalar`, `avx2` or `avx512`), read once; `None` where it is unset
    /// or empty. A value that names no set is reported on standard error
    /// once (with the names it takes) and sets no cap.
    pub fn cap() -> Option<Isa> {
        static CAP: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
        *CAP.get_or_init(|| match std::env::var(CAP_VAR) {
            Ok(v) if !v.trim().is_empty() => match v.trim().parse::<Isa>() {
                Ok(i) => Some(i),
                Err(e) => {
                    eprintln!("{CAP_VAR}: {e}; no cap is set");
                    None
                }
            },
            _ => None,
        })
    }

    /// Whether this build has the set and this CPU runs it.
    pub fn available(self) -> bool {
        self <= Isa::detect()
    }

    /// Every set this build has and this CPU runs, narrowest first.
    pub fn available_all() -> impl Iterator<Item = Isa> {
        Isa::ALL.into_iter().filter(|i| i.available())
    }

    /// Doubles a vector: 1, 4 or 8.
    pub fn lanes(self) -> usize {
        match self {
            Isa::Portable => 1,
            Isa::Avx2 => 4,
            Isa::Avx512 => 8,
        }
    }

    /// The lowercase name: `portable`, `avx2` or `avx512`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// `Ok(self)` where [`available`](Isa::available), else the error that
    /// names it and the widest set that is.
    pub fn require(self) -> Result<Isa, Unavailable> {
        if self.available() {
            Ok(self)
        } else {
            Err(Unavailable {
                isa: self,
                best: Isa::detect(),
            })
        }
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Isa {
    type Err = UnknownIsa;

    /// Reads `portable`, `avx2` or `avx512`, and `scalar` as `portable`.
    fn from_str(s: &str) -> Result<Isa, UnknownIsa> {
        match s {
            "scalar" => Ok(Isa::Portable),
            _ => Isa::ALL
                .into_iter()
                .find(|i| i.name() == s)
                .ok_or_else(|| UnknownIsa {
                    name: s.to_string(),
                }),
        }
    }
}

/// A name that is no [`Isa`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownIsa {
    /// The name given.
    pub name: String,
}

impl std::fmt::Display for UnknownIsa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown instruction set `{}`: expected portable (or scalar), avx2 or avx512",
            self.name
        )
    }
}

impl std::error::Error for UnknownIsa {}

/// An [`Isa`] that this build or this CPU lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable {
    /// The set asked for.
    pub isa: Isa,
    /// The widest set available.
    pub best: Isa,
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the {} instruction set is not available in this build on this CPU (the widest available is {})",
            self.isa, self.best
        )
    }
}

impl std::error::Error for Unavailable {}

/// Asks the CPU to fetch the cache line holding `p` into every cache
/// level, for reading. A hint only: it never faults and has no effect on
/// any value, whatever the address (it need not point into an allocation),
/// so it is safe. Nothing where the target has no such hint.
#[inline(always)]
pub fn prefetch_read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect and never faults;
    // SSE is part of every x86-64 target.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// As [`prefetch_read`], with the intent to write the line (where the CPU
/// has such a hint, the line comes in exclusive and a later store needs no
/// second request; elsewhere a plain prefetch).
#[inline(always)]
pub fn prefetch_write<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `prefetch_read`; CPUs without PREFETCHW treat the
    // hint as a no-op or a plain prefetch.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(p.cast())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_scalar_is_portable() {
        for i in Isa::ALL {
            assert_eq!(i.name().parse::<Isa>(), Ok(i));
            assert_eq!(i.to_string(), i.name());
        }
        assert_eq!("scalar".parse::<Isa>(), Ok(Isa::Portable));
        let e = "sse".parse::<Isa>().unwrap_err();
        assert_eq!(e.name, "sse");
        assert!(e
            .to_string()
            .contains("expected portable (or scalar), avx2 or avx512"));
    }

    #[test]
    fn detection_agrees_with_the_cpu_flags() {
        let best = Isa::detect();
        // Under a cap (PARNUM_ISA) the sets above it are not available.
        let capped = |i: Isa| Isa::cap().is_none_or(|c| i <= c);
        assert!(Isa::Portable.available());
        #[cfg(target_arch = "x86_64")]
        {
            let has = |f: &str| match f {
                "avx2" => std::arch::is_x86_feature_detected!("avx2"),
                "fma" => std::arch::is_x86_feature_detected!("fma"),
                "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
                _ => unreachable!(),
            };
            let avx2 = has("avx2") && has("fma");
            assert_eq!(Isa::Avx2.available(), avx2 && capped(Isa::Avx2));
            assert_eq!(
                Isa::Avx512.available(),
                avx2 && has("avx512f") && capped(Isa::Avx512)
            );
            assert_eq!(Avx2Token::detect().is_some(), avx2);
            assert_eq!(
                Avx512Token::detect().is_some(),
                Isa::hardware() == Isa::Avx512
            );
            assert_eq!(best, Isa::hardware().min(Isa::cap().unwrap_or(Isa::Avx512)));
        }
        assert_eq!(Isa::available_all().last(), Some(best));
        for i in Isa::ALL {
            assert_eq!(i.require().is_ok(), i.available());
            if let Err(e) = i.require() {
                assert_eq!(e.best, best);
                assert!(e.to_string().contains(i.name()));
            }
        }
    }

    #[test]
    fn order_is_vector_width() {
        let lanes: Vec<usize> = Isa::ALL.iter().map(|i| i.lanes()).collect();
        assert_eq!(lanes, [1, 4, 8]);
        assert!(Isa::Portable < Isa::Avx2 && Isa::Avx2 < Isa::Avx512);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_names() {
        #[derive(serde::Deserialize)]
        struct S {
            isa: Isa,
        }
        let s: S = serde_json_free("scalar");
        assert_eq!(s.isa, Isa::Portable);
        fn serde_json_free(name: &str) -> S {
            use serde::de::IntoDeserializer;
            use serde::Deserialize;
            let map: std::collections::BTreeMap<&str, &str> = [("isa", name)].into();
            S::deserialize(map.into_deserializer())
                .map_err(|e: serde::de::value::Error| e)
                .unwrap()
        }
        for i in Isa::ALL {
            assert_eq!(serde_json_free(i.name()).isa, i);
        }
    }

    #[test]
    fn prefetch_of_any_address_is_harmless() {
        let v = [1.0f64; 4];
        prefetch_read(v.as_ptr());
        prefetch_write(v.as_ptr());
        prefetch_read(std::ptr::null::<f64>());
        prefetch_write(usize::MAX as *const f64);
        assert_eq!(v, [1.0; 4]);
    }
}
