//! Device runtime shared by the crates that own kernels (`halo`, `dfft`,
//! the applications).
//!
//! - [`Backend`]: `cpu`, `cuda` or `hip`, parsed from a command line or a
//!   configuration file, with [`Backend::compiled`] saying whether this build
//!   can run it and [`Backend::require`] turning a request for a backend the
//!   build lacks into an error that names the feature to build with.
//! - [`GpuError`]: every failure a device path reports, each naming what was
//!   asked and what is there (the device ordinal against the device count,
//!   the bytes asked against the bytes free, the compiler's log).
//! - `cuda` (feature `cuda`): `cuda::Device` (one CUDA context, two
//!   streams, a cache of kernels compiled at run time by NVRTC), device
//!   buffers with allocation checked against free memory, and
//!   `cuda::Mark` (events); `place`, which device each rank opens and the
//!   all-ranks check that the memory a run needs is free. The CUDA libraries are opened at run time
//!   (`cudarc` with dynamic loading), so the feature builds on a machine with
//!   no CUDA toolkit, and a machine without a driver gets
//!   [`GpuError::Library`] instead of a crash.
//! - `hip` (feature `hip`): the same for AMD GPUs through `hip-sys` (linked
//!   at build time against ROCm's `libamdhip64`): `hip::Device` (two
//!   streams, kernels compiled at run time by hiprtc with
//!   `-ffp-contract=off`, the flag that plays NVRTC's `--fmad=false`),
//!   `hip::DeviceBuffer` with allocation checked against free memory, and
//!   `hip::Mark` (events). A machine without an AMD GPU reports zero
//!   devices; `hip::compile_for` builds a kernel source for a named
//!   architecture (`gfx90a`) without one.
//!
//! Kernels are kept as CUDA C sources in the crates that own them and
//! compiled at run time for the device in hand: one source serves every
//! architecture (and, through HIP's run-time compiler, AMD devices), and a
//! kernel specialised on a run-time value (a stencil radius) is compiled
//! only when used. Every module is compiled with `--fmad=false`: the host
//! code never contracts `a * b + c` into a fused multiply-add (Rust does not
//! without being asked), so a kernel that performs the same operations in
//! the same order as the host code gives the same bits.
#![warn(missing_docs)]

use std::fmt;
use std::str::FromStr;

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "hip")]
pub mod hip;
#[cfg(feature = "cuda")]
pub mod links;
#[cfg(feature = "cuda")]
pub mod nccl;
#[cfg(feature = "cuda")]
pub mod place;

/// Where a computation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// Host cores.
    #[default]
    Cpu,
    /// NVIDIA GPUs through CUDA (feature `cuda`).
    Cuda,
    /// AMD GPUs through HIP (feature `hip`).
    Hip,
}

impl Backend {
    /// Every backend, in the order the help texts list them.
    pub const ALL: [Backend; 3] = [Backend::Cpu, Backend::Cuda, Backend::Hip];

    /// The name used on command lines and in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Hip => "hip",
        }
    }

    /// Whether this build can run the backend.
    pub fn compiled(self) -> bool {
        match self {
            Backend::Cpu => true,
            Backend::Cuda => cfg!(feature = "cuda"),
            Backend::Hip => cfg!(feature = "hip"),
        }
    }

    /// The backends this build can run.
    pub fn available() -> Vec<Backend> {
        Self::ALL.into_iter().filter(|b| b.compiled()).collect()
    }

    /// Whether an application runs on a GPU with this backend, given
    /// whether the application's own `cuda` feature is on (`cuda_built`:
    /// its `cfg!(feature = "cuda")`; the application's feature decides, not
    /// this crate's, which another crate of the same build may switch on).
    /// The applications run on CUDA only so far.
    ///
    /// # Errors
    /// [`GpuError::NotBuilt`] for `cuda` without the application's
    /// feature; [`GpuError::NotForApp`] for `hip`.
    pub fn on_device_for(self, app: &'static str, cuda_built: bool) -> Result<bool, GpuError> {
        match self {
            Backend::Cpu => Ok(false),
            Backend::Cuda if cuda_built => Ok(true),
            Backend::Cuda => Err(GpuError::NotBuilt {
                backend: "cuda",
                available: "cpu".into(),
            }),
            Backend::Hip => Err(GpuError::NotForApp {
                backend: "hip",
                app,
                available: if cuda_built { "cpu, cuda" } else { "cpu" }.into(),
            }),
        }
    }

    /// `Ok(self)` when this build can run the backend, otherwise
    /// [`GpuError::NotBuilt`] naming the cargo feature that adds it.
    pub fn require(self) -> Result<Backend, GpuError> {
        if self.compiled() {
            Ok(self)
        } else {
            Err(GpuError::NotBuilt {
                backend: self.name(),
                available: names(&Self::available()),
            })
        }
    }
}

fn names(b: &[Backend]) -> String {
    b.iter().map(|b| b.name()).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = GpuError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|b| b.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| GpuError::UnknownBackend(s.to_string()))
    }
}

/// What a device path can report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// A backend name that is not one of [`Backend::ALL`].
    #[error("unknown backend {0:?} (valid: cpu, cuda, hip)")]
    UnknownBackend(String),
    /// The backend was asked for but this build does not contain it.
    #[error("backend {backend} was asked for, but this build has no `{backend}` feature (backends in this build: {available}); rebuild with `--features {backend}`")]
    NotBuilt {
        /// The backend asked for.
        backend: &'static str,
        /// The backends this build has.
        available: String,
    },
    /// The backend exists but this application does not run on it.
    #[error("backend {backend} is not available to {app} (valid: {available})")]
    NotForApp {
        /// The backend asked for.
        backend: &'static str,
        /// The application.
        app: &'static str,
        /// The backends the application has in this build.
        available: String,
    },
    /// A run-time library (the driver, NVRTC, cuFFT, NCCL) could not be
    /// opened.
    #[error("the {what} library could not be loaded ({detail}); is the GPU driver installed and on the loader's path?")]
    Library {
        /// Which library.
        what: &'static str,
        /// What the loader said or which names were tried.
        detail: String,
    },
    /// The device ordinal asked for does not exist.
    #[error("device {asked} was asked for, but {count} device(s) are present (valid: {})", valid_range(*count))]
    NoDevice {
        /// The ordinal asked for.
        asked: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// An allocation larger than the device's free memory.
    #[error("out of device memory: {what} needs {} but device {device} has {} free of {}", mib(*bytes), mib(*free), mib(*total))]
    OutOfMemory {
        /// What was being allocated.
        what: String,
        /// The device ordinal.
        device: usize,
        /// Bytes asked for.
        bytes: usize,
        /// Bytes free before the allocation.
        free: usize,
        /// The device's memory.
        total: usize,
    },
    /// The run-time compiler rejected a kernel source.
    #[error("compiling kernel module {module} failed:\n{log}")]
    Compile {
        /// The module's name.
        module: String,
        /// The compiler's log.
        log: String,
    },
    /// A driver or library call failed.
    #[error("{call} failed: {detail}")]
    Driver {
        /// What was called.
        call: String,
        /// The error the driver returned.
        detail: String,
    },
    /// Any other invalid argument.
    #[error("{0}")]
    Invalid(String),
}

fn valid_range(count: usize) -> String {
    if count == 0 {
        "none".into()
    } else {
        format!("0..={}", count - 1)
    }
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_round_trip() {
        for b in Backend::ALL {
            assert_eq!(b.name().parse::<Backend>().unwrap(), b);
        }
        assert_eq!(" CUDA ".parse::<Backend>().unwrap(), Backend::Cuda);
        let e = "opencl".parse::<Backend>().unwrap_err().to_string();
        assert!(
            e.contains("\"opencl\"") && e.contains("cpu, cuda, hip"),
            "{e}"
        );
    }

    #[test]
    fn missing_backend_names_the_feature() {
        assert_eq!(Backend::Cpu.require().unwrap(), Backend::Cpu);
        if !cfg!(feature = "cuda") {
            let e = Backend::Cuda.require().unwrap_err().to_string();
            assert!(e.contains("--features cuda") && e.contains("cpu"), "{e}");
        }
        if !cfg!(feature = "hip") {
            let e = Backend::Hip.require().unwrap_err().to_string();
            assert!(e.contains("--features hip"), "{e}");
        } else {
            assert_eq!(Backend::Hip.require().unwrap(), Backend::Hip);
        }
    }

    #[test]
    fn errors_name_what_was_asked_and_what_is_there() {
        let e = GpuError::NoDevice { asked: 3, count: 1 }.to_string();
        assert!(e.contains("device 3") && e.contains("0..=0"), "{e}");
        let e = GpuError::NoDevice { asked: 0, count: 0 }.to_string();
        assert!(e.contains("none"), "{e}");
        let e = GpuError::OutOfMemory {
            what: "field u".into(),
            device: 0,
            bytes: 3 << 30,
            free: 1 << 30,
            total: 2 << 30,
        }
        .to_string();
        assert!(
            e.contains("3072.0 MiB") && e.contains("1024.0 MiB free"),
            "{e}"
        );
    }
}
