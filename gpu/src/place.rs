//! Which GPU each rank uses, and the memory check that every rank passes
//! before any of them allocates.
//!
//! [`place`] gives each rank a device ordinal: the one asked for (every
//! rank the same), or by default the rank's index among the ranks of its
//! machine modulo the machine's device count, so that ranks spread over
//! their machine's GPUs and several share one when there are more ranks
//! than GPUs. [`Placement::sharing`] counts the ranks of the machine on the
//! same ordinal, whose memory a check must add up.
//!
//! [`check_memory`] is collective: every rank measures its device's free
//! memory before any allocates (the agreement is the barrier; a rank
//! measuring late would otherwise see another's buffers already taken and
//! refuse by the timing), and all refuse together through
//! [`comm::agree`]: the lowest rank short of memory reports the bytes
//! needed and free, and every other rank the same message with that rank's
//! number.

use crate::cuda::{device_count, Device};
use crate::links::{node_ranks, LinkError};
use crate::GpuError;
use comm::{Agreed, CommError, Communicator};

/// Why a rank could not be placed on a device or its memory check failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlaceError {
    /// The communicator failed (a failed peer included).
    #[error(transparent)]
    Comm(#[from] CommError),
    /// The device call failed, or this rank's device has too little free
    /// memory ([`GpuError::OutOfMemory`]).
    #[error(transparent)]
    Device(#[from] GpuError),
    /// Another rank's device has too little free memory: that rank's
    /// error, as its message.
    #[error("rank {rank}: {message}")]
    Peer {
        /// The lowest rank whose device was short.
        rank: usize,
        /// Its error ([`GpuError::OutOfMemory`]'s message).
        message: String,
    },
}

impl From<LinkError> for PlaceError {
    fn from(e: LinkError) -> Self {
        match e {
            LinkError::Comm(c) => PlaceError::Comm(c),
            LinkError::Device(d) => PlaceError::Device(d),
            other => PlaceError::Device(GpuError::Invalid(other.to_string())),
        }
    }
}

/// The device of one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The device ordinal.
    pub ordinal: usize,
    /// The ranks of this machine (this one included) that use the same
    /// ordinal.
    pub sharing: usize,
}

impl Placement {
    /// Opens the device ([`GpuError::NoDevice`] for an ordinal past the
    /// device count).
    pub fn open(&self) -> Result<Device, GpuError> {
        Device::open(self.ordinal)
    }
}

/// This rank's device (collective): `device` for every rank, or by
/// default the rank's index among the ranks of its machine modulo the
/// device count.
pub fn place(comm: &dyn Communicator, device: Option<usize>) -> Result<Placement, PlaceError> {
    let count = device_count()?;
    let (local, on_node) = node_ranks(comm)?;
    Ok(placement(device, local, on_node, count))
}

fn placement(device: Option<usize>, local: usize, on_node: usize, count: usize) -> Placement {
    match device {
        Some(ordinal) => Placement {
            ordinal,
            sharing: on_node,
        },
        None => {
            let count = count.max(1);
            let ordinal = local % count;
            Placement {
                ordinal,
                sharing: (0..on_node).filter(|r| r % count == ordinal).count(),
            }
        }
    }
}

/// Checks, before anything is allocated, that `per_rank` bytes for each of
/// the [`Placement::sharing`] ranks on this rank's device are free
/// (collective; see the module documentation). `what` names what the bytes
/// hold in the error.
pub fn check_memory(
    comm: &dyn Communicator,
    dev: &Device,
    at: Placement,
    per_rank: u128,
    what: impl FnOnce() -> String,
) -> Result<(), PlaceError> {
    let (free, total) = dev.memory()?;
    let local = fits(at, per_rank, (free, total), what);
    comm::agree(comm, local).map_err(|e| match e {
        Agreed::Mine(e) => PlaceError::Device(e),
        Agreed::Other { rank, message } => PlaceError::Peer { rank, message },
        Agreed::Comm(c) => PlaceError::Comm(c),
    })
}

/// `Ok` where `per_rank` bytes for each rank sharing the device fit in
/// `free`, else the out-of-memory error that names them.
fn fits(
    at: Placement,
    per_rank: u128,
    (free, total): (usize, usize),
    what: impl FnOnce() -> String,
) -> Result<(), GpuError> {
    let need = per_rank.saturating_mul(at.sharing.max(1) as u128);
    if need <= free as u128 {
        return Ok(());
    }
    let sharing = if at.sharing > 1 {
        format!(" on each of {} ranks sharing the device", at.sharing)
    } else {
        String::new()
    };
    Err(GpuError::OutOfMemory {
        what: format!("{}{sharing}", what()),
        device: at.ordinal,
        bytes: usize::try_from(need).unwrap_or(usize::MAX),
        free,
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_of_every_rank_sharing_a_device_is_counted() {
        let at = |sharing| Placement {
            ordinal: 1,
            sharing,
        };
        let what = || "the grid".to_string();
        fits(at(1), 100, (100, 1000), what).unwrap();
        // Three ranks of 100 bytes each do not fit in 250.
        match fits(at(3), 100, (250, 1000), what) {
            Err(
                e @ GpuError::OutOfMemory {
                    bytes: 300,
                    device: 1,
                    free: 250,
                    ..
                },
            ) => {
                let m = e.to_string();
                assert!(
                    m.contains("the grid on each of 3 ranks sharing the device"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
        fits(at(2), 100, (200, 1000), what).unwrap();
    }

    #[test]
    fn ranks_spread_over_the_devices_of_their_machine() {
        // 5 ranks on a machine with 2 devices: 0, 2, 4 on device 0 and
        // 1, 3 on device 1.
        for local in 0..5 {
            let p = placement(None, local, 5, 2);
            assert_eq!(p.ordinal, local % 2);
            assert_eq!(p.sharing, if local % 2 == 0 { 3 } else { 2 });
        }
        // One device asked for: every rank of the machine shares it.
        assert_eq!(
            placement(Some(1), 3, 4, 2),
            Placement {
                ordinal: 1,
                sharing: 4
            }
        );
        // No device: ordinal 0 (opening it reports the missing device).
        assert_eq!(placement(None, 2, 3, 0).ordinal, 0);
    }
}
