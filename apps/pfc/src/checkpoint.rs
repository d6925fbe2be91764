//! PFC checkpoints: the global field `psi` in global row-major order (last
//! axis fastest), gathered on rank 0, so a run can restart on any rank
//! count. The file is an [`appkit::checkpoint`] (format version 1: header
//! with the application `pfc`, the shape, step and time, the key
//! `physics_hash`; little-endian `f64` payload; CRC-32C), so a truncated,
//! corrupted or foreign file, or one of another shape, is refused.
//! [`crate::Solver::write_checkpoint`] writes them through
//! [`appkit::checkpoint::write_distributed_f64`].

use crate::config::Config;
use anyhow::{bail, Result};
use appkit::checkpoint::{self as ck, Expected, Header};
use std::path::Path;

/// The application name in the header.
pub const APP: &str = "pfc";
/// The header key holding [`crate::config::Config::physics_hash`] (16 hex
/// digits).
const PHYSICS_HASH: &str = "physics_hash";

/// The content of a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Grid points per axis.
    pub shape: [usize; 3],
    /// Step number.
    pub step: u64,
    /// Time.
    pub time: f64,
    /// [`crate::config::Config::physics_hash`] of the writing run (`None`
    /// when the file does not carry one).
    pub physics_hash: Option<u64>,
    /// The global field, row-major.
    pub field: Vec<f64>,
}

/// The header of a checkpoint of `cfg`'s field at `step` and `time`.
pub fn header(cfg: &Config, step: u64, time: f64) -> Header {
    let mut header = Header::new(APP, &cfg.shape(), step, time);
    header.meta.insert(
        PHYSICS_HASH.to_string(),
        appkit::hash::hex(cfg.physics_hash()),
    );
    header
}

/// The magic of the format before appkit checkpoints (a 64-byte header
/// without checksum), recognised only to say so.
const OLD_MAGIC: &[u8; 8] = b"PFCCHK\0\0";

/// Reads the checkpoint at `path`, which must hold a PFC field of `shape`.
pub fn read(path: &Path, shape: [usize; 3]) -> Result<Checkpoint> {
    let mut start = [0u8; 8];
    let old = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut start))
        .is_ok()
        && &start == OLD_MAGIC;
    if old {
        bail!(
            "{} is a checkpoint in pfc's earlier format (magic PFCCHK, no checksum); this version reads checkpoint format {} (magic PARNUMCK): rerun from the start or with the earlier build",
            path.display(),
            ck::VERSION
        );
    }
    let (header, field) = ck::read_f64(
        path,
        &Expected {
            app: APP,
            shape: &shape,
        },
    )?;
    let physics_hash = header
        .meta
        .get(PHYSICS_HASH)
        .and_then(|h| u64::from_str_radix(h, 16).ok());
    Ok(Checkpoint {
        shape,
        step: header.step,
        time: header.time,
        physics_hash,
        field,
    })
}
