//! Checkpoint files: a header that says what the file holds, the payload,
//! and a CRC-32C of both, written atomically. Reading checks everything
//! before returning anything, so a truncated or corrupted file, a file of
//! another application or of another shape is an error that says what is
//! wrong, never a wrong restart.
//!
//! # Format (version 1, little-endian)
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `PARNUMCK` |
//! | 4 | format version, `u32` (1) |
//! | 4 | header length `H` in bytes, from the magic to the end of the payload length, `u32` |
//! | 4 + a | application name: length `a`, `u32`, then UTF-8 |
//! | 4 + 8 d | shape: number of axes `d`, `u32`, then `d` times `u64` |
//! | 8 | step, `u64` |
//! | 8 | time, `f64` |
//! | 4 + ... | key/values: count, `u32`, then per entry key and value, each a `u32` length and UTF-8 |
//! | 8 | payload length `P` in bytes, `u64` |
//! | P | payload |
//! | 4 | CRC-32C of the `H + P` bytes before it, `u32` |
//!
//! The checks on reading, in order: the magic, the version, the header
//! fits in the file and parses, the file is exactly `H + P + 4` bytes, the
//! checksum, the application, the shape (and, for [`read_f64`], a payload
//! of one `f64` per cell).
//!
//! ```
//! use appkit::checkpoint::{self, Expected, Header};
//!
//! let dir = std::env::temp_dir().join(format!("appkit-ck-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("run_000010.chk");
//! let mut header = Header::new("demo", &[2, 3, 4], 10, 0.5);
//! header.meta.insert("dt".into(), "0.05".into());
//! let field: Vec<f64> = (0..24).map(|x| x as f64 / 3.0).collect();
//! checkpoint::write_f64(&path, &header, &field).unwrap();
//!
//! let (h, back) = checkpoint::read_f64(&path, &Expected { app: "demo", shape: &[2, 3, 4] }).unwrap();
//! assert_eq!((h.step, h.time, &h.meta["dt"]), (10, 0.5, &"0.05".to_string()));
//! assert_eq!(back, field);
//! let e = checkpoint::read_f64(&path, &Expected { app: "demo", shape: &[4, 3, 2] }).unwrap_err();
//! assert!(e.to_string().contains("[2, 3, 4]"));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::crc32c::Crc32c;
use crate::output::{atomic_write_with, OutputError};
use comm::{CommError, CommExt, Communicator, IndexBox};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The first eight bytes of every checkpoint.
pub const MAGIC: [u8; 8] = *b"PARNUMCK";
/// The format version this crate writes and reads.
pub const VERSION: u32 = 1;
/// Magic, version and header length.
const PREFIX: usize = 16;
/// The header of a file that has only the prefix and empty fields: name
/// length, axis count, step, time, entry count, payload length.
const MIN_HEADER: usize = PREFIX + 4 + 4 + 8 + 8 + 4 + 8;

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The file could not be read.
    #[error("cannot read checkpoint file {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// Writing failed (nothing was left under the file's name).
    #[error(transparent)]
    Write(#[from] OutputError),
    /// The file does not start with [`MAGIC`].
    #[error("{} is not a {app} checkpoint: it does not start with the magic {:?} ({len} bytes)", path.display(), String::from_utf8_lossy(&MAGIC))]
    NotACheckpoint {
        /// The file.
        path: PathBuf,
        /// The application that wanted to read it.
        app: String,
        /// The file's length.
        len: u64,
    },
    /// A format version this program does not read.
    #[error("checkpoint {} has format version {found}, this program reads version {supported}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The version read here.
        supported: u32,
    },
    /// The file is shorter or longer than its header says.
    #[error("checkpoint {} is {found} bytes, but its header says {expected} ({})", path.display(), if found < expected { "truncated" } else { "bytes after the end" })]
    Length {
        /// The file.
        path: PathBuf,
        /// Bytes the header announces (header, payload and checksum).
        expected: u64,
        /// Bytes in the file.
        found: u64,
    },
    /// The header does not parse (a length that points past its end, text
    /// that is not UTF-8, an impossible header length).
    #[error("checkpoint {} has a malformed header: {what}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// The checksum does not match: some byte of the file changed.
    #[error("checkpoint {} is corrupted: stored CRC-32C {stored:08x}, computed {computed:08x}", path.display())]
    Checksum {
        /// The file.
        path: PathBuf,
        /// The checksum in the file.
        stored: u32,
        /// The checksum of the file's content.
        computed: u32,
    },
    /// Written by another application.
    #[error("checkpoint {} was written by {found:?}, expected a {expected:?} checkpoint", path.display())]
    App {
        /// The file.
        path: PathBuf,
        /// The application reading it.
        expected: String,
        /// The application in the file.
        found: String,
    },
    /// A field of another shape.
    #[error("checkpoint {} holds a field of shape {found:?}, but the run expects {expected:?}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// The shape of the run.
        expected: Vec<usize>,
        /// The shape in the file.
        found: Vec<usize>,
    },
    /// The payload is not one value of the expected size per cell.
    #[error("checkpoint {} has a payload of {found} bytes, expected {expected} ({cells} cells of {bytes_per_cell} bytes)", path.display())]
    Payload {
        /// The file.
        path: PathBuf,
        /// Bytes expected.
        expected: u64,
        /// Bytes in the file.
        found: u64,
        /// Cells of the shape.
        cells: u64,
        /// Bytes per cell.
        bytes_per_cell: u64,
    },
    /// A rank's values do not fill its block.
    #[error("rank {rank}: the block {block:?} holds {expected} cells, got {got} values")]
    Block {
        /// The rank.
        rank: usize,
        /// Its block.
        block: IndexBox,
        /// Cells of the block.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// Other ranks failed in a collective checkpoint step (each reports its
    /// own error).
    #[error("checkpoint {}: rank(s) {ranks:?} failed", path.display())]
    Peers {
        /// The file.
        path: PathBuf,
        /// The ranks that failed.
        ranks: Vec<usize>,
    },
    /// A collective step failed.
    #[error(transparent)]
    Comm(#[from] CommError),
    /// A header field too large for the format (a name or value over 4 GiB).
    #[error("checkpoint header field {what} is too large for the format ({len} bytes)")]
    TooLarge {
        /// The field.
        what: String,
        /// Its length.
        len: usize,
    },
}

/// What a checkpoint says about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The application that wrote it.
    pub app: String,
    /// The global shape of the state.
    pub shape: Vec<usize>,
    /// The step number.
    pub step: u64,
    /// The simulated time.
    pub time: f64,
    /// Application key/values (parameters the restart should compare, a
    /// hash of the physics, ...), in key order.
    pub meta: BTreeMap<String, String>,
}

impl Header {
    /// A header without key/values.
    pub fn new(app: &str, shape: &[usize], step: u64, time: f64) -> Self {
        Header {
            app: app.to_string(),
            shape: shape.to_vec(),
            step,
            time,
            meta: BTreeMap::new(),
        }
    }

    /// Cells of the shape.
    pub fn cells(&self) -> u64 {
        self.shape.iter().map(|&s| s as u64).product()
    }

    /// The header bytes for a payload of `payload_len` bytes.
    fn encode(&self, payload_len: u64) -> Result<Vec<u8>, CheckpointError> {
        fn text(b: &mut Vec<u8>, what: &str, s: &str) -> Result<(), CheckpointError> {
            let len = u32::try_from(s.len()).map_err(|_| CheckpointError::TooLarge {
                what: what.to_string(),
                len: s.len(),
            })?;
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(s.as_bytes());
            Ok(())
        }
        let count = |what: &str, n: usize| {
            u32::try_from(n).map_err(|_| CheckpointError::TooLarge {
                what: what.to_string(),
                len: n,
            })
        };
        let mut b = Vec::with_capacity(128);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&[0; 4]); // header length, set below
        text(&mut b, "app", &self.app)?;
        b.extend_from_slice(&count("shape", self.shape.len())?.to_le_bytes());
        for &s in &self.shape {
            b.extend_from_slice(&(s as u64).to_le_bytes());
        }
        b.extend_from_slice(&self.step.to_le_bytes());
        b.extend_from_slice(&self.time.to_bits().to_le_bytes());
        b.extend_from_slice(&count("meta", self.meta.len())?.to_le_bytes());
        for (k, v) in &self.meta {
            text(&mut b, &format!("key {k:?}"), k)?;
            text(&mut b, &format!("value of {k:?}"), v)?;
        }
        b.extend_from_slice(&payload_len.to_le_bytes());
        let h = count("header", b.len())?;
        b[12..16].copy_from_slice(&h.to_le_bytes());
        Ok(b)
    }
}

/// What the reader expects to find.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// The application name.
    pub app: &'a str,
    /// The global shape.
    pub shape: &'a [usize],
}

/// A checkpoint as read: its header and raw payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The header.
    pub header: Header,
    /// The payload bytes.
    pub payload: Vec<u8>,
}

/// Writes `header` and a payload streamed by `payload` (which must write
/// exactly `payload_len` bytes) to `path` atomically.
fn write_streamed<F>(
    path: &Path,
    header: &Header,
    payload_len: u64,
    payload: F,
) -> Result<(), CheckpointError>
where
    F: FnOnce(&mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<()>,
{
    let head = header.encode(payload_len)?;
    atomic_write_with(path, |w| {
        let mut crc = Crc32c::new();
        crc.update(&head);
        w.write_all(&head)?;
        let mut written = 0u64;
        payload(&mut |bytes: &[u8]| {
            crc.update(bytes);
            written += bytes.len() as u64;
            w.write_all(bytes)
        })?;
        if written != payload_len {
            return Err(std::io::Error::other(format!(
                "the payload writer wrote {written} bytes, announced {payload_len}"
            )));
        }
        w.write_all(&crc.finish().to_le_bytes())
    })?;
    Ok(())
}

/// Writes `header` and the raw `payload` to `path` atomically.
pub fn write(path: &Path, header: &Header, payload: &[u8]) -> Result<(), CheckpointError> {
    write_streamed(path, header, payload.len() as u64, |out| out(payload))
}

/// Writes `header` and `values` as little-endian `f64` (the state in the
/// order the application chose, usually global row-major) to `path`
/// atomically.
pub fn write_f64(path: &Path, header: &Header, values: &[f64]) -> Result<(), CheckpointError> {
    write_streamed(path, header, 8 * values.len() as u64, |out| {
        let mut buf = Vec::with_capacity(8 * 8192);
        for chunk in values.chunks(8192) {
            buf.clear();
            for v in chunk {
                buf.extend_from_slice(&v.to_le_bytes());
            }
            out(&buf)?;
        }
        Ok(())
    })
}

/// The tag of the messages of [`gather_f64`].
pub const GATHER_TAG: u32 = 7301;

/// Copies `values` (row-major over `block`) into their places in `global`
/// (row-major over `shape`).
fn place(shape: [usize; 3], block: &IndexBox, values: &[f64], global: &mut [f64]) {
    let s = block.shape();
    if s[2] == 0 {
        return;
    }
    for (r, row) in values.chunks_exact(s[2]).enumerate() {
        let (i, j) = (block.lo[0] + r / s[1], block.lo[1] + r % s[1]);
        let o = (i * shape[1] + j) * shape[2] + block.lo[2];
        global[o..o + s[2]].copy_from_slice(row);
    }
}

/// Gathers a block-distributed field onto rank 0 in global row-major order
/// (last axis fastest), the order that makes a checkpoint independent of
/// the rank count (collective). Each rank gives its `block` of the global
/// `shape` and its values row-major over the block; rank 0 gets `Some`,
/// the others `None`. A rank whose values do not fill its block makes every
/// rank return an error.
pub fn gather_f64(
    comm: &dyn Communicator,
    shape: [usize; 3],
    block: &IndexBox,
    values: &[f64],
) -> Result<Option<Vec<f64>>, CheckpointError> {
    let (rank, size) = (comm.rank(), comm.size());
    let inside = (0..3).all(|d| block.lo[d] <= block.hi[d] && block.hi[d] <= shape[d]);
    let mine = if inside && values.len() == block.len() {
        Ok(())
    } else {
        Err(CheckpointError::Block {
            rank,
            block: *block,
            expected: block.len(),
            got: values.len(),
        })
    };
    let mut row = vec![u64::from(mine.is_ok())];
    row.extend(block.lo.iter().chain(&block.hi).map(|&x| x as u64));
    let mut all = vec![0u64; 7 * size];
    comm.allgather(&row, &mut all)?;
    mine?;
    let failed: Vec<usize> = (0..size).filter(|&r| all[7 * r] == 0).collect();
    if !failed.is_empty() {
        return Err(CheckpointError::Peers {
            path: PathBuf::new(),
            ranks: failed,
        });
    }
    if rank != 0 {
        comm.send(0, GATHER_TAG, values)?;
        return Ok(None);
    }
    let mut global = vec![0.0; shape.iter().product()];
    place(shape, block, values, &mut global);
    let mut buf = vec![];
    for r in 1..size {
        let v = &all[7 * r + 1..7 * r + 7];
        let b = IndexBox {
            lo: [v[0], v[1], v[2]].map(|x| x as usize),
            hi: [v[3], v[4], v[5]].map(|x| x as usize),
        };
        buf.resize(b.len(), 0.0);
        comm.recv(r, GATHER_TAG, &mut buf)?;
        place(shape, &b, &buf, &mut global);
    }
    Ok(Some(global))
}

/// Writes the checkpoint of a block-distributed field (collective): the
/// blocks are gathered onto rank 0 ([`gather_f64`]), which writes `header`
/// and the global field with [`write_f64`]. Every rank returns `Ok` once the
/// file is complete, or an error when any step failed on any rank. The
/// shape of `header` must be three-dimensional.
pub fn write_distributed_f64(
    comm: &dyn Communicator,
    path: &Path,
    header: &Header,
    block: &IndexBox,
    values: &[f64],
) -> Result<(), CheckpointError> {
    let shape: [usize; 3] =
        header
            .shape
            .as_slice()
            .try_into()
            .map_err(|_| CheckpointError::Malformed {
                path: path.to_path_buf(),
                what: format!(
                    "a distributed field needs a 3D shape, got {:?}",
                    header.shape
                ),
            })?;
    let written = match gather_f64(comm, shape, block, values) {
        Ok(Some(global)) => write_f64(path, header, &global),
        Ok(None) => Ok(()),
        Err(CheckpointError::Peers { ranks, .. }) => {
            return Err(CheckpointError::Peers {
                path: path.to_path_buf(),
                ranks,
            })
        }
        Err(e) => return Err(e),
    };
    let mut ok = [u64::from(written.is_ok())];
    comm.broadcast(&mut ok, 0)?;
    written?;
    if ok[0] == 0 {
        return Err(CheckpointError::Peers {
            path: path.to_path_buf(),
            ranks: vec![0],
        });
    }
    Ok(())
}

/// The part of a global row-major field of `shape` that `block` covers,
/// row-major over the block: what a rank takes from a checkpoint read with
/// [`read_f64`] to restart on any decomposition.
pub fn block_of(shape: [usize; 3], global: &[f64], block: &IndexBox) -> Vec<f64> {
    let s = block.shape();
    let mut out = Vec::with_capacity(block.len());
    for i in block.lo[0]..block.hi[0] {
        for j in block.lo[1]..block.hi[1] {
            let o = (i * shape[1] + j) * shape[2] + block.lo[2];
            out.extend_from_slice(&global[o..o + s[2]]);
        }
    }
    out
}

/// A bounds-checked reader over the header bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn malformed(&self, what: String) -> CheckpointError {
        CheckpointError::Malformed {
            path: self.path.to_path_buf(),
            what,
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], CheckpointError> {
        match self.at.checked_add(n) {
            Some(end) if end <= self.bytes.len() => {
                let s = &self.bytes[self.at..end];
                self.at = end;
                Ok(s)
            }
            _ => Err(self.malformed(format!(
                "{what} ({n} bytes at offset {}) runs past the header's end at {}",
                self.at,
                self.bytes.len()
            ))),
        }
    }

    fn u32(&mut self, what: &str) -> Result<u32, CheckpointError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, CheckpointError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(a))
    }

    fn text(&mut self, what: &str) -> Result<String, CheckpointError> {
        let n = self.u32(what)? as usize;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.malformed(format!("{what} is not UTF-8")))
    }
}

/// Reads and checks the checkpoint at `path`: see the module documentation
/// for the checks and their order.
pub fn read(path: &Path, expected: &Expected<'_>) -> Result<Checkpoint, CheckpointError> {
    read_checked(path, expected.app, Some(expected.shape))
}

/// Reads and checks the checkpoint at `path` as [`read`] does, except the
/// shape: for an application whose payload shape follows from header
/// keys (it checks the shape itself, naming what differs).
pub fn read_any_shape(path: &Path, app: &str) -> Result<Checkpoint, CheckpointError> {
    read_checked(path, app, None)
}

fn read_checked(
    path: &Path,
    expected_app: &str,
    expected_shape: Option<&[usize]>,
) -> Result<Checkpoint, CheckpointError> {
    let expected = Expected {
        app: expected_app,
        shape: expected_shape.unwrap_or(&[]),
    };
    let bytes = std::fs::read(path).map_err(|error| CheckpointError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let len = bytes.len() as u64;
    if bytes.len() < PREFIX || bytes[..8] != MAGIC {
        return Err(CheckpointError::NotACheckpoint {
            path: path.to_path_buf(),
            app: expected.app.to_string(),
            len,
        });
    }
    let mut c = Cursor {
        bytes: &bytes,
        at: 8,
        path,
    };
    let version = c.u32("version")?;
    if version != VERSION {
        return Err(CheckpointError::Version {
            path: path.to_path_buf(),
            found: version,
            supported: VERSION,
        });
    }
    let h = c.u32("header length")? as usize;
    if h < MIN_HEADER {
        return Err(c.malformed(format!(
            "header length {h} is below the minimum {MIN_HEADER}"
        )));
    }
    if h + 4 > bytes.len() {
        return Err(CheckpointError::Length {
            path: path.to_path_buf(),
            expected: h as u64 + 4,
            found: len,
        });
    }
    let mut c = Cursor {
        bytes: &bytes[..h],
        at: PREFIX,
        path,
    };
    let app = c.text("application name")?;
    let axes = c.u32("axis count")? as usize;
    let mut shape = Vec::with_capacity(axes.min(16));
    for d in 0..axes {
        let s = c.u64(&format!("extent of axis {d}"))?;
        shape.push(usize::try_from(s).map_err(|_| c.malformed(format!("extent {s} of axis {d}")))?);
    }
    let step = c.u64("step")?;
    let time = f64::from_bits(c.u64("time")?);
    let entries = c.u32("key/value count")? as usize;
    let mut meta = BTreeMap::new();
    for e in 0..entries {
        let k = c.text(&format!("key {e}"))?;
        let v = c.text(&format!("value {e}"))?;
        meta.insert(k, v);
    }
    let payload_len = c.u64("payload length")?;
    if c.at != h {
        return Err(c.malformed(format!(
            "the fields end at byte {}, the header length says {h}",
            c.at
        )));
    }
    let total = (h as u64)
        .checked_add(payload_len)
        .and_then(|x| x.checked_add(4));
    if total != Some(len) {
        return Err(CheckpointError::Length {
            path: path.to_path_buf(),
            expected: total.unwrap_or(u64::MAX),
            found: len,
        });
    }
    let body = bytes.len() - 4;
    let stored = u32::from_le_bytes([
        bytes[body],
        bytes[body + 1],
        bytes[body + 2],
        bytes[body + 3],
    ]);
    let mut crc = Crc32c::new();
    crc.update(&bytes[..body]);
    let computed = crc.finish();
    if stored != computed {
        return Err(CheckpointError::Checksum {
            path: path.to_path_buf(),
            stored,
            computed,
        });
    }
    if app != expected.app {
        return Err(CheckpointError::App {
            path: path.to_path_buf(),
            expected: expected.app.to_string(),
            found: app,
        });
    }
    if expected_shape.is_some() && shape != expected.shape {
        return Err(CheckpointError::Shape {
            path: path.to_path_buf(),
            expected: expected.shape.to_vec(),
            found: shape,
        });
    }
    let mut bytes = bytes;
    bytes.truncate(body);
    let payload = bytes.split_off(h);
    Ok(Checkpoint {
        header: Header {
            app,
            shape,
            step,
            time,
            meta,
        },
        payload,
    })
}

/// Reads a checkpoint written by [`write_f64`]: [`read`], then a payload of
/// exactly one `f64` per cell of the shape.
pub fn read_f64(
    path: &Path,
    expected: &Expected<'_>,
) -> Result<(Header, Vec<f64>), CheckpointError> {
    let ck = read(path, expected)?;
    let cells = ck.header.cells();
    let want = cells.checked_mul(8);
    if want != Some(ck.payload.len() as u64) {
        return Err(CheckpointError::Payload {
            path: path.to_path_buf(),
            expected: want.unwrap_or(u64::MAX),
            found: ck.payload.len() as u64,
            cells,
            bytes_per_cell: 8,
        });
    }
    let values = ck
        .payload
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .collect();
    Ok((ck.header, values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::tmp;

    fn sample() -> (Header, Vec<f64>) {
        let mut h = Header::new("pfc", &[3, 4, 5], 42, 21.5);
        h.meta
            .insert("physics_hash".into(), "0123456789abcdef".into());
        h.meta.insert("r".into(), "-0.25".into());
        let v = (0..60).map(|x| (x as f64).sin() * 1e-3).collect();
        (h, v)
    }

    const EXP: Expected<'static> = Expected {
        app: "pfc",
        shape: &[3, 4, 5],
    };

    #[test]
    fn any_shape_skips_only_the_shape_check() {
        let dir = tmp("ck-any");
        let p = dir.join("a.chk");
        let (h, v) = sample();
        write_f64(&p, &h, &v).unwrap();
        let ck = read_any_shape(&p, "pfc").unwrap();
        assert_eq!(ck.header, h);
        assert_eq!(ck.payload.len(), 8 * v.len());
        let wrong = Expected {
            app: "pfc",
            shape: &[5, 4, 3],
        };
        assert!(matches!(
            read(&p, &wrong),
            Err(CheckpointError::Shape { .. })
        ));
        assert!(matches!(
            read_any_shape(&p, "heat3d"),
            Err(CheckpointError::App { .. })
        ));
        let mut bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n - 9] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        assert!(matches!(
            read_any_shape(&p, "pfc"),
            Err(CheckpointError::Checksum { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn round_trip_keeps_every_bit() {
        let dir = tmp("ck-round");
        let p = dir.join("a.chk");
        let (h, mut v) = sample();
        v[7] = -0.0;
        v[8] = f64::MIN_POSITIVE / 4.0;
        v[9] = f64::NAN;
        write_f64(&p, &h, &v).unwrap();
        let (h2, v2) = read_f64(&p, &EXP).unwrap();
        assert_eq!(h2, h);
        assert!(v.iter().zip(&v2).all(|(a, b)| a.to_bits() == b.to_bits()));
        // Raw payloads too, and an empty one.
        let q = dir.join("b.chk");
        write(&q, &Header::new("dyn", &[0], 0, 0.0), &[]).unwrap();
        let ck = read(
            &q,
            &Expected {
                app: "dyn",
                shape: &[0],
            },
        )
        .unwrap();
        assert!(ck.payload.is_empty());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            2,
            "no temporary files"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_flipped_byte_is_an_error() {
        let dir = tmp("ck-flip");
        let p = dir.join("a.chk");
        let (h, v) = sample();
        write_f64(&p, &h, &v).unwrap();
        let good = std::fs::read(&p).unwrap();
        let q = dir.join("flipped.chk");
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x10;
            std::fs::write(&q, &b).unwrap();
            let e = read_f64(&q, &EXP);
            assert!(e.is_err(), "byte {i} flipped was accepted");
        }
        // In the payload and in the step: the checksum catches it.
        for i in [good.len() - 20, 16 + 4 + 3 + 4 + 3 * 8] {
            let mut b = good.clone();
            b[i] ^= 1;
            std::fs::write(&q, &b).unwrap();
            let e = read_f64(&q, &EXP).unwrap_err();
            assert!(
                matches!(e, CheckpointError::Checksum { .. }),
                "byte {i}: {e}"
            );
            assert!(e.to_string().contains("corrupted"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncated_and_extended_files_are_named_as_such() {
        let dir = tmp("ck-trunc");
        let p = dir.join("a.chk");
        let (h, v) = sample();
        write_f64(&p, &h, &v).unwrap();
        let good = std::fs::read(&p).unwrap();
        let q = dir.join("short.chk");
        for n in 0..good.len() {
            std::fs::write(&q, &good[..n]).unwrap();
            assert!(read_f64(&q, &EXP).is_err(), "{n} bytes accepted");
        }
        std::fs::write(&q, &good[..good.len() - 100]).unwrap();
        let e = read_f64(&q, &EXP).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, CheckpointError::Length { .. }), "{m}");
        assert!(
            m.contains(&format!("is {} bytes", good.len() - 100))
                && m.contains(&format!("says {}", good.len()))
                && m.contains("truncated"),
            "{m}"
        );
        let mut long = good.clone();
        long.extend_from_slice(b"xx");
        std::fs::write(&q, &long).unwrap();
        let m = read_f64(&q, &EXP).unwrap_err().to_string();
        assert!(m.contains("bytes after the end"), "{m}");
        std::fs::write(&q, b"hello").unwrap();
        let m = read_f64(&q, &EXP).unwrap_err().to_string();
        assert!(m.contains("is not a pfc checkpoint"), "{m}");
        let m = read_f64(&dir.join("missing.chk"), &EXP)
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("cannot read checkpoint file") && m.contains("missing.chk"),
            "{m}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn another_shape_app_version_or_payload_is_refused() {
        let dir = tmp("ck-other");
        let p = dir.join("a.chk");
        let (h, v) = sample();
        write_f64(&p, &h, &v).unwrap();
        let e = read_f64(
            &p,
            &Expected {
                app: "pfc",
                shape: &[5, 4, 3],
            },
        )
        .unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, CheckpointError::Shape { .. }), "{m}");
        assert!(m.contains("[3, 4, 5]") && m.contains("[5, 4, 3]"), "{m}");
        let e = read_f64(
            &p,
            &Expected {
                app: "dynamo",
                shape: &[3, 4, 5],
            },
        )
        .unwrap_err();
        assert!(matches!(e, CheckpointError::App { .. }), "{e}");
        assert!(e.to_string().contains("\"pfc\"") && e.to_string().contains("\"dynamo\""));
        // A payload that is not one f64 per cell.
        write(&p, &h, &[0u8; 12]).unwrap();
        let e = read_f64(&p, &EXP).unwrap_err();
        assert!(
            e.to_string().contains("expected 480 (60 cells of 8 bytes)"),
            "{e}"
        );
        assert_eq!(read(&p, &EXP).unwrap().payload, vec![0u8; 12]);
        // A future version (checksum fixed up so only the version differs).
        write_f64(&p, &h, &v).unwrap();
        let mut b = std::fs::read(&p).unwrap();
        b[8] = 2;
        let n = b.len() - 4;
        let crc = crate::crc32c::crc32c(&b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&p, &b).unwrap();
        let m = read_f64(&p, &EXP).unwrap_err().to_string();
        assert!(
            m.contains("version 2") && m.contains("reads version 1"),
            "{m}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn distributed_write_and_restart_on_other_decompositions() {
        let dir = tmp("ck-dist");
        let p = dir.join("d.chk");
        let shape = [5, 4, 3];
        let value = |i: usize, j: usize, k: usize| (100 * i + 10 * j + k) as f64;
        let blocks = |ranks: usize| -> Vec<IndexBox> {
            let grid = comm::ProcessGrid::for_shape(shape, ranks, [true; 3]).unwrap();
            let dec = comm::BlockDecomposition::new(shape, grid).unwrap();
            (0..ranks).map(|r| dec.box_of(r)).collect()
        };
        let fill = |b: &IndexBox| -> Vec<f64> {
            let mut v = vec![];
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    for k in b.lo[2]..b.hi[2] {
                        v.push(value(i, j, k));
                    }
                }
            }
            v
        };
        let header = Header::new("demo", &shape, 7, 0.7);
        let bs = blocks(3);
        comm::local::run(3, |c| {
            let b = bs[c.rank()];
            write_distributed_f64(c, &p, &header, &b, &fill(&b))
        })
        .unwrap();
        let (_, global) = read_f64(
            &p,
            &Expected {
                app: "demo",
                shape: &shape,
            },
        )
        .unwrap();
        assert_eq!(global, fill(&IndexBox::from_shape(shape)));
        for ranks in [1, 2, 4] {
            for b in blocks(ranks) {
                assert_eq!(block_of(shape, &global, &b), fill(&b));
            }
        }
        // A rank with a wrong block: every rank fails, nothing is written.
        let q = dir.join("bad.chk");
        let errs = comm::local::run(2, |c| {
            let b = blocks(2)[c.rank()];
            let mut v = fill(&b);
            if c.rank() == 1 {
                v.pop();
            }
            Ok::<_, String>(
                write_distributed_f64(c, &q, &header, &b, &v)
                    .unwrap_err()
                    .to_string(),
            )
        })
        .unwrap();
        assert!(errs[0].contains("rank(s) [1] failed"), "{}", errs[0]);
        assert!(errs[1].starts_with("rank 1: the block"), "{}", errs[1]);
        assert!(!q.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_keeps_the_previous_checkpoint() {
        let dir = tmp("ck-fail");
        let p = dir.join("a.chk");
        let (h, v) = sample();
        write_f64(&p, &h, &v).unwrap();
        let before = std::fs::read(&p).unwrap();
        // A payload writer that stops early is refused, and the file stays.
        let e = write_streamed(&p, &h, 100, |out| out(&[1, 2, 3])).unwrap_err();
        assert!(
            e.to_string().contains("wrote 3 bytes, announced 100"),
            "{e}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), before);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
