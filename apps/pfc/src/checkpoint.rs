//! Checkpoints: one file per run holding the global field in global
//! row-major order (last axis fastest), so a run can restart on any rank
//! count. Layout, little-endian:
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `PFCCHK\0\0` |
//! | 4 | version (1) |
//! | 4 | zero |
//! | 24 | shape, three `u64` |
//! | 8 | step, `u64` |
//! | 8 | time, `f64` |
//! | 8 | hash of the physics (shape, points per period, r, dt), `u64` |
//! | 8 N | the field, `f64` |

use anyhow::{bail, Context, Result};
use std::path::Path;

const MAGIC: &[u8; 8] = b"PFCCHK\0\0";
const VERSION: u32 = 1;
const HEADER: usize = 64;

/// The content of a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Grid points per axis.
    pub shape: [usize; 3],
    /// Step number.
    pub step: u64,
    /// Time.
    pub time: f64,
    /// [`crate::config::Config::physics_hash`] of the writing run.
    pub physics_hash: u64,
    /// The global field, row-major.
    pub field: Vec<f64>,
}

/// Writes `ck` to `path` atomically (temporary file and rename).
pub fn write(path: &Path, ck: &Checkpoint) -> Result<()> {
    let mut b = Vec::with_capacity(HEADER + 8 * ck.field.len());
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    for s in ck.shape {
        b.extend_from_slice(&(s as u64).to_le_bytes());
    }
    b.extend_from_slice(&ck.step.to_le_bytes());
    b.extend_from_slice(&ck.time.to_le_bytes());
    b.extend_from_slice(&ck.physics_hash.to_le_bytes());
    for v in &ck.field {
        b.extend_from_slice(&v.to_le_bytes());
    }
    heat3d::output::atomic_write(path, &b)
}

/// Reads the checkpoint at `path`, which must hold a field of `shape`.
pub fn read(path: &Path, shape: [usize; 3]) -> Result<Checkpoint> {
    let b = std::fs::read(path)
        .with_context(|| format!("cannot read checkpoint file {}", path.display()))?;
    let what = || format!("{} is not a PFC checkpoint", path.display());
    if b.len() < HEADER || &b[..8] != MAGIC {
        bail!("{}: bad magic or too short ({} bytes)", what(), b.len());
    }
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        bail!(
            "{}: version {version}, this program reads {VERSION}",
            what()
        );
    }
    let got = [u64_at(16), u64_at(24), u64_at(32)];
    let want = shape.map(|s| s as u64);
    if got != want {
        bail!(
            "checkpoint {} holds a field of shape {got:?}, but the configuration expects {want:?} (periods x points_per_period)",
            path.display()
        );
    }
    let n = shape.iter().product::<usize>();
    if b.len() != HEADER + 8 * n {
        bail!(
            "checkpoint {} is {} bytes, expected {} for shape {want:?} (truncated?)",
            path.display(),
            b.len(),
            HEADER + 8 * n
        );
    }
    Ok(Checkpoint {
        shape,
        step: u64_at(40),
        time: f64::from_bits(u64_at(48)),
        physics_hash: u64_at(56),
        field: b[HEADER..]
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect(),
    })
}
