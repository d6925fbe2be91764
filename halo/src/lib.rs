//! Halo (ghost-cell) exchange on Cartesian block decompositions.
//!
//! - [`Topology`]: built once, collectively, from the rank's box in a
//!   [`comm::BlockDecomposition`], the allocated ghost width and the
//!   communicated width per axis ([`HaloSpec`]), the [`Neighborhood`] (faces,
//!   or faces + edges + corners) and the grid's periodicity. Validated at
//!   build time on every rank with the same result.
//! - [`Field`]: one or more components with ghost layers (layout documented
//!   on [`FieldLayout`]).
//! - [`Exchanger`]: buffers for a fixed set of fields; [`Exchanger::post`]
//!   packs, sends and posts receives, [`Pending::finish`] waits and unpacks
//!   each message as it arrives. Several fields travel in one message per
//!   neighbour; a periodic neighbour that is the rank itself is copied
//!   locally.
//! - [`Topology::interior`] and [`Topology::shell`]: the cells a stencil of a
//!   given radius can update while the exchange is in flight, and the rest.
//! - [`HaloData`]: the pack/unpack interface the exchange goes through, so a
//!   device-resident field can pack on the device without touching the
//!   topology or exchange code.
//! - `DeviceField` and `DeviceExchanger` (feature `cuda`): fields in GPU
//!   memory, and their exchange, device to device between the ranks of
//!   one machine (over `gpu::links`: in-process, or MPI processes through
//!   CUDA IPC) or host-staged across machines.
//! - [`kernels`]: the CUDA C sources those fields compile at run time, in
//!   every build, so that they can be checked without a GPU (feature `hip`:
//!   a test builds them for AMD GPUs).
//!
//! ```
//! use comm::{local, BlockDecomposition, ProcessGrid};
//! use halo::{Exchanger, Field, HaloSpec, Neighborhood, Topology};
//!
//! local::run(4, |comm| {
//!     let grid = ProcessGrid::for_shape([16, 16, 16], comm.size(), [true; 3])?;
//!     let dec = BlockDecomposition::new([16, 16, 16], grid)?;
//!     let topo = Topology::new(comm, &dec, HaloSpec::uniform(2, Neighborhood::Faces))?;
//!     let mut u = Field::<f64>::new(topo.layout(1));
//!     u.fill_owned(0, &topo.owned(), |[i, j, k]| (i + 16 * j + 256 * k) as f64);
//!     let mut ex = Exchanger::new(&topo, 1, 0)?;
//!     // Overlap: post, work on the interior, finish, then the shell.
//!     let pending = ex.post(comm, &mut [&mut u])?;
//!     let interior = topo.interior([2; 3]);
//!     let _ = (interior, u.get(0, interior.lo)); // ... read u here ...
//!     pending.finish(&mut [&mut u])?;
//!     // The ghost cell left of the owned box holds the periodic neighbour's value.
//!     let b = topo.owned();
//!     let g = [b.lo[0], b.lo[1], (b.lo[2] + 16 - 1) % 16];
//!     assert_eq!(u.get(0, [2, 2, 1]), (g[0] + 16 * g[1] + 256 * g[2]) as f64);
//!     Ok::<_, halo::HaloError>(())
//! })
//! .unwrap();
//! ```
#![warn(missing_docs)]

#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod direct;
mod exchange;
mod field;
pub mod kernels;
#[cfg(feature = "cuda")]
mod nccl;
mod topology;

#[cfg(feature = "cuda")]
pub use device::{DeviceElem, DeviceField, DeviceRegion};
#[cfg(feature = "cuda")]
pub use direct::{DeviceExchanger, DevicePending, Transport};
pub use exchange::{ExchangeStats, Exchanger, Pending, MAX_CHANNEL};
pub use field::{zeroed, Field, FieldLayout, HaloData, Pages, Region};
pub use topology::{HaloSpec, Neighbor, Neighborhood, Topology};

/// What building a topology or running an exchange can report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HaloError {
    /// A communication error (including a failed peer).
    #[error(transparent)]
    Comm(#[from] comm::CommError),
    /// The communicated width exceeds the allocated ghost width.
    #[error("communicated width {width} on axis {axis} exceeds the allocated ghost width {ghost} (valid: 0..={ghost})")]
    WidthAboveGhost {
        /// The axis.
        axis: usize,
        /// Communicated width.
        width: usize,
        /// Allocated ghost width.
        ghost: usize,
    },
    /// A rank's box is thinner than the width its neighbours need from it.
    #[error("rank {rank} owns {extent} cells on axis {axis}, fewer than the communicated width {width}; use a width of at most {extent} or fewer ranks on that axis")]
    WidthAboveExtent {
        /// The thin rank.
        rank: usize,
        /// The axis.
        axis: usize,
        /// Its extent.
        extent: usize,
        /// The communicated width.
        width: usize,
    },
    /// Ranks passed different specifications.
    #[error("rank {rank} disagrees with rank 0 on the halo topology: {detail}")]
    Disagree {
        /// The first rank that differs from rank 0.
        rank: usize,
        /// What differs.
        detail: String,
    },
    /// A device-resident field failed to pack, unpack or copy (the device
    /// error's text).
    #[error("device transfer failed: {0}")]
    Device(String),
    /// Any other invalid argument.
    #[error("{0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests;
