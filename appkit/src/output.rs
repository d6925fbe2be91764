//! Output files that appear complete or not at all, JSON reports, and the
//! output folder.
//!
//! [`atomic_write_with`] writes into a temporary file in the destination's
//! folder (`.NAME.PID.N.tmp`, hidden, so a reader globbing for `*.vti` never
//! sees it), flushes it to disk, renames it over the destination (atomic on
//! POSIX file systems) and syncs the folder. If anything fails, including
//! the caller's writer, the temporary file is removed and the destination
//! is left as it was.

use comm::{CommError, Communicator, ReduceOp};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why an output could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// Writing, syncing or renaming failed.
    #[error("cannot write {}: {error}", path.display())]
    Io {
        /// The destination.
        path: PathBuf,
        /// The operating system's (or the writer's) error.
        error: std::io::Error,
    },
    /// The output folder could not be created (on rank 0; every rank
    /// reports it).
    #[error("cannot create output folder {}{}", path.display(), detail(reason))]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// The operating system's message, on the rank that tried.
        reason: Option<String>,
    },
    /// A value could not be serialised to JSON.
    #[error("cannot serialise {} as JSON: {error}", path.display())]
    Json {
        /// The destination.
        path: PathBuf,
        /// The serialiser's error.
        error: serde_json::Error,
    },
    /// A file that could not be written where it was asked for (checked
    /// before a run by [`check_file_target`]).
    #[error("{what} {}: {why}", path.display())]
    Target {
        /// The option or file the path came from (`--json`, say).
        what: String,
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A collective step failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

/// Checks, before a run, that a file can be written at `path` once it is
/// over: its folder exists and is a folder, `path` itself is not a folder,
/// and the folder takes a new file (a temporary one next to `path`, made
/// and removed again, as [`write_json`] writes through one: a folder
/// without write permission or on a read-only file system fails here, with
/// the operating system's reason); `what` names where the path came from in
/// the error.
pub fn check_file_target(what: &str, path: &Path) -> Result<(), OutputError> {
    let err = |why: String| OutputError::Target {
        what: what.to_string(),
        path: path.to_path_buf(),
        why,
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        let why = if parent.exists() {
            "is not a folder"
        } else {
            "does not exist (create it first)"
        };
        return Err(err(format!("the folder {} {why}", parent.display())));
    }
    if path.is_dir() {
        return Err(err("is a folder, not a file".into()));
    }
    let probe = temporary(path);
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(file) => {
            drop(file);
            // A probe left behind is harmless (a hidden temporary name).
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(err(format!(
            "cannot be written: the folder {} takes no new file ({e})",
            parent.display()
        ))),
    }
}

fn detail(reason: &Option<String>) -> String {
    reason
        .as_ref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default()
}

/// A temporary path next to `path`, unique within this process and across
/// processes.
fn temporary(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// Writes `path` through `write`, which gets a buffered writer on a
/// temporary file in the same folder: the file appears under `path`
/// complete (flushed and synced) or not at all, and no temporary file is
/// left when `write` or the file system fails.
pub fn atomic_write_with<F>(path: &Path, write: F) -> Result<(), OutputError>
where
    F: FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
{
    let tmp = temporary(path);
    let attempt = || -> std::io::Result<()> {
        let mut w = BufWriter::new(File::create(&tmp)?);
        write(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        sync_parent(path);
        Ok(())
    };
    attempt().map_err(|error| {
        let _ = std::fs::remove_file(&tmp);
        OutputError::Io {
            path: path.to_path_buf(),
            error,
        }
    })
}

/// Makes the rename durable by syncing the folder; file systems that
/// cannot sync a folder (an error on opening or syncing it) still have the
/// complete file, so such errors are not reported.
fn sync_parent(path: &Path) {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Writes `bytes` to `path` atomically ([`atomic_write_with`]).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    atomic_write_with(path, |w| w.write_all(bytes))
}

/// Writes `value` as pretty-printed JSON to `path` atomically.
pub fn write_json<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), OutputError> {
    let text = serde_json::to_string_pretty(value).map_err(|error| OutputError::Json {
        path: path.to_path_buf(),
        error,
    })?;
    atomic_write(path, text.as_bytes())
}

/// Tells every rank whether a step that only rank 0 took failed
/// (collective): `mine` is rank 0's error message (ignored elsewhere), and
/// every rank gets it back, so that all stop with rank 0's reason.
pub fn rank0_failure(
    comm: &dyn Communicator,
    mine: Option<String>,
) -> Result<Option<String>, CommError> {
    let mut reason = match mine {
        Some(m) if comm.rank() == 0 => m.into_bytes(),
        _ => Vec::new(),
    };
    let mut len = (reason.len() as u64).to_le_bytes();
    comm.broadcast_bytes(&mut len, 0)?;
    let len = u64::from_le_bytes(len) as usize;
    if len == 0 {
        return Ok(None);
    }
    reason.resize(len, 0);
    comm.broadcast_bytes(&mut reason, 0)?;
    Ok(Some(String::from_utf8_lossy(&reason).into_owned()))
}

/// Why [`rank0_result`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Rank0Error {
    /// Rank 0's step failed: its message, the same on every rank.
    #[error("{0}")]
    Failed(String),
    /// Telling the ranks failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

/// [`rank0_failure`] for a result (collective): every rank returns `Ok`
/// where rank 0's `result` is `Ok`, else rank 0's message (its error
/// formatted with `{:#}`, which gives an `anyhow` error's causes too);
/// `result` is ignored on the other ranks. A step that only rank 0 takes
/// (writing a row of a time series) then stops every rank with rank 0's
/// reason, instead of the others failing in their next collective call
/// (`comm::local::run` reports a peer failure there, MPI aborts the job)
/// or, where the caller keeps each rank's error and goes on, waiting there
/// until the deadlock limit.
pub fn rank0_result<E: std::fmt::Display>(
    comm: &dyn Communicator,
    result: Result<(), E>,
) -> Result<(), Rank0Error> {
    let mine = result.err().map(|e| format!("{e:#}"));
    match rank0_failure(comm, mine)? {
        Some(reason) => Err(Rank0Error::Failed(reason)),
        None => Ok(()),
    }
}

/// Creates the output folder `dir` (and its parents) on rank 0 and tells
/// every rank whether that worked (collective): either every rank returns
/// `Ok` with the folder in place, or every rank returns
/// [`OutputError::CreateDir`].
pub fn create_dir(comm: &dyn Communicator, dir: &Path) -> Result<(), OutputError> {
    let mut reason = None;
    let mut ok = [1i64];
    if comm.rank() == 0 {
        if let Err(e) = std::fs::create_dir_all(dir) {
            reason = Some(e.to_string());
            ok[0] = 0;
        }
    }
    comm.allreduce_i64(&mut ok, ReduceOp::Min)?;
    if ok[0] == 1 {
        Ok(())
    } else {
        Err(OutputError::CreateDir {
            path: dir.to_path_buf(),
            reason,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh folder under the system's temporary folder.
    pub(crate) fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("appkit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_whole_files_and_leaves_no_temporary() {
        let dir = tmp("atomic");
        let p = dir.join("a.vti");
        atomic_write(&p, b"first").unwrap();
        atomic_write(&p, b"second version").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second version");
        assert_eq!(entries(&dir), vec!["a.vti"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failing_writer_leaves_the_old_file_and_no_partial_one() {
        let dir = tmp("atomic-fail");
        let p = dir.join("field.chk");
        atomic_write(&p, b"good old content").unwrap();
        let e = atomic_write_with(&p, |w| {
            w.write_all(&[7u8; 100_000])?;
            Err(std::io::Error::other("disk quota reached in the writer"))
        })
        .unwrap_err();
        let m = e.to_string();
        assert!(m.contains("field.chk") && m.contains("disk quota"), "{m}");
        assert_eq!(std::fs::read(&p).unwrap(), b"good old content");
        assert_eq!(entries(&dir), vec!["field.chk"]);
        // A new file that fails never appears.
        let q = dir.join("new.vti");
        assert!(atomic_write_with(&q, |_| Err(std::io::Error::other("no"))).is_err());
        assert!(!q.exists());
        assert_eq!(entries(&dir), vec!["field.chk"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rank_0s_failure_reaches_every_rank() {
        let got = comm::local::run(3, |c| {
            let mine = Some(format!("rank {} failed", c.rank()));
            let none = rank0_failure(c, (c.rank() != 0).then(|| "not rank 0".to_string()))?;
            Ok::<_, CommError>((rank0_failure(c, mine)?, none))
        })
        .unwrap();
        for (r, (failed, none)) in got.iter().enumerate() {
            assert_eq!(failed.as_deref(), Some("rank 0 failed"), "rank {r}");
            assert_eq!(none, &None, "rank {r}: only rank 0's outcome counts");
        }
        let got = comm::local::run(3, |c| {
            let mine: Result<(), String> = Err(format!("rank {} failed", c.rank()));
            let failed = rank0_result(c, mine).map_err(|e| e.to_string());
            let others: Result<(), String> = match c.rank() {
                0 => Ok(()),
                r => Err(format!("rank {r} failed")),
            };
            let ok = rank0_result(c, others).map_err(|e| e.to_string());
            Ok::<_, CommError>((failed, ok))
        })
        .unwrap();
        for (r, (failed, ok)) in got.iter().enumerate() {
            assert_eq!(failed, &Err("rank 0 failed".to_string()), "rank {r}");
            assert_eq!(ok, &Ok(()), "rank {r}: only rank 0's outcome counts");
        }
    }

    #[test]
    fn file_targets_are_checked_before_a_run() {
        let dir = tmp("target");
        std::fs::write(dir.join("plain"), b"x").unwrap();
        check_file_target("--json", &dir.join("r.json")).unwrap();
        let mut bad = vec![
            (dir.join("missing/r.json"), "does not exist"),
            (dir.join("plain/r.json"), "is not a folder"),
            (dir.clone(), "is a folder, not a file"),
        ];
        // A folder that takes no new file, even for root: procfs.
        if cfg!(target_os = "linux") && Path::new("/proc/self").is_dir() {
            bad.push((
                PathBuf::from("/proc/r.json"),
                "cannot be written: the folder /proc",
            ));
        }
        for (p, why) in bad {
            let e = check_file_target("--json", &p).unwrap_err().to_string();
            assert!(e.starts_with("--json ") && e.contains(why), "{e}");
        }
        // The probe is removed: the folder holds what it held.
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["plain"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_folder_is_an_error_naming_the_file() {
        let p = std::env::temp_dir().join("appkit-no-such-folder/x/out.json");
        let m = write_json(&p, &[1, 2, 3]).unwrap_err().to_string();
        assert!(m.contains("out.json"), "{m}");
    }

    #[test]
    fn json_and_collective_folder() {
        let dir = tmp("json");
        let sub = dir.join("a/b");
        comm::local::run(3, |c| create_dir(c, &sub)).unwrap();
        assert!(sub.is_dir());
        write_json(&sub.join("r.json"), &serde_json::json!({"hash": "00ff"})).unwrap();
        let back: serde_json::Value =
            serde_json::from_slice(&std::fs::read(sub.join("r.json")).unwrap()).unwrap();
        assert_eq!(back["hash"], "00ff");
        // A file in the way: every rank gets the error.
        let blocked = dir.join("file");
        std::fs::write(&blocked, b"x").unwrap();
        let errs = comm::local::run(2, |c| {
            Ok::<_, String>(create_dir(c, &blocked.join("sub")).unwrap_err().to_string())
        })
        .unwrap();
        for m in errs {
            assert!(m.starts_with("cannot create output folder"), "{m}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
