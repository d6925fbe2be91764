//! [`StencilOptions`]: how the sweeps run, as data. No option changes a
//! bit of a result: every kernel, launch shape and pass computes each cell
//! with the same operations in the same order.

use crate::Kernel;
use serde::{Deserialize, Serialize};

/// Which CPU kernel runs the sweeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum CpuKernel {
    /// [`crate::policy::host_kernel`]'s choice: AVX-512 where the CPU has it, then
    /// AVX2, except at orders 8 and 10, AVX2 first; the portable loop where
    /// neither exists.
    #[default]
    Auto,
    /// The portable loop (`scalar` is read as this name too).
    #[serde(alias = "scalar")]
    #[cfg_attr(feature = "clap", value(alias = "scalar"))]
    Portable,
    /// Four cells a vector (x86-64 with AVX2).
    Avx2,
    /// Eight cells a vector (x86-64 with AVX-512F).
    Avx512,
}

impl CpuKernel {
    /// The kernel asked for by name, `None` for [`CpuKernel::Auto`].
    pub fn kernel(self) -> Option<Kernel> {
        match self {
            CpuKernel::Auto => None,
            CpuKernel::Portable => Some(Kernel::Portable),
            CpuKernel::Avx2 => Some(Kernel::Avx2),
            CpuKernel::Avx512 => Some(Kernel::Avx512),
        }
    }
}

/// How the device stencil reads the neighbours along the two fast axes
/// (the slow axis is always in registers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum GpuKernel {
    /// The fastest measured per order on an H200: `pairs` at orders 2, 4,
    /// 6, 8, 12 and 18, `shuffle` at 14 and 20, `cached` at 10 and 16.
    #[default]
    Auto,
    /// Through the caches, straight from device memory, one cell a thread.
    Cached,
    /// Through the caches, two cells a thread along the last axis with
    /// 16-byte loads (rows and planes of even padded length; `cached`
    /// otherwise).
    Pairs,
    /// Warps across the last axis, whose neighbours along it are exchanged
    /// between lanes by shuffles instead of loaded (blocks of 32 x 8).
    Shuffle,
    /// From a shared-memory tile of each plane (32 x 8 threads).
    Shared,
}

/// How the device stencil of a box that is its own periodic neighbour on
/// every axis (one rank, every axis at least the radius long) gets the
/// values across its faces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum PeriodicReads {
    /// The faster measured per order on an H200: `read` at orders 2 and
    /// 4, `copy` above.
    #[default]
    Auto,
    /// The stencil reads each neighbour across a face at its periodic image
    /// in the owned cells: no ghost is read and no exchange is needed.
    Read,
    /// The caller's halo exchange (periodic self-copies) fills the ghost
    /// layers before every sweep, as for several ranks.
    Copy,
}

/// The tuning of the sweeps on the host and on a device; the default
/// (every field `auto` or 0) is the measured policy ([`crate::policy`] on
/// the host, `device` with feature `cuda` on a GPU). Changes no bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StencilOptions {
    /// The CPU kernel.
    pub cpu: CpuKernel,
    /// Euler steps one pass over the box advances (temporal blocking: 1 to
    /// [`crate::policy::MAX_HOST_STEPS_PER_PASS`] on the host, 1 or 2 on a
    /// device; 0: the default, several where possible and measured
    /// faster).
    pub steps_per_pass: usize,
    /// Rows of axis 1 a tile of the host's multi-step pass holds (0: the
    /// widest whose rings fit [`crate::wavefront::budget`]).
    pub tile_rows: usize,
    /// The device kernel.
    pub gpu: GpuKernel,
    /// Cells each device thread updates along axis 0, keeping the 2r + 1
    /// values of that axis in registers (0: the kernel's default); with two
    /// steps a pass, the output planes a block marches (0: the chunk in
    /// 16..=64 that fills whole waves of blocks best).
    pub gpu_chunk: usize,
    /// Threads of a device block along the last axis: 32, 64, 128 or 256
    /// (the block has 256 threads; `shared` and `shuffle` always use 32;
    /// 0: the kernel's default).
    pub gpu_block: usize,
    /// How a self-periodic box's device stencil reads across its faces.
    pub gpu_periodic: PeriodicReads,
}

impl StencilOptions {
    /// Checks the values that have a fixed range (`gpu_block`).
    pub fn validate(&self) -> Result<(), String> {
        if !matches!(self.gpu_block, 0 | 32 | 64 | 128 | 256) {
            return Err(format!(
                "gpu_block = {} (valid: 32, 64, 128, 256, or 0 for the stencil's default)",
                self.gpu_block
            ));
        }
        Ok(())
    }
}
