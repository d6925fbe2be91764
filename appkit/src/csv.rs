//! Time series as CSV: the header once, then one row per call, each row
//! flushed so a run that stops leaves every row it reached. The column set
//! is fixed when the file is created; a row with another number of values
//! is an error. [`Series::append`] continues an existing file of the same
//! columns (a restarted run), dropping the rows its caller rejects.
//!
//! ```
//! use appkit::csv::{Series, FloatFormat};
//!
//! let dir = std::env::temp_dir().join(format!("appkit-csv-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let mut s = Series::create(&dir.join("energy.csv"), &["step", "time", "energy"], FloatFormat::Exp).unwrap();
//! s.row(&[3u64.into(), 0.25.into(), 1.5e-3.into()]).unwrap();
//! assert!(s.row(&[4u64.into()]).is_err());
//! let text = std::fs::read_to_string(dir.join("energy.csv")).unwrap();
//! assert_eq!(text, "step,time,energy\n3,2.5e-1,1.5e-3\n");
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Why a series could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CsvError {
    /// Creating or writing the file failed.
    #[error("cannot write {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// A row with another number of values than the header has columns.
    #[error("{}: a row needs {expected} values ({columns}), got {got}", path.display())]
    WrongRow {
        /// The file.
        path: PathBuf,
        /// Columns of the series.
        expected: usize,
        /// Values given.
        got: usize,
        /// The column names, comma-separated.
        columns: String,
    },
    /// An existing file whose header is not the series' columns.
    #[error("{} has the columns {found:?}, not {expected:?}: it holds another series", path.display())]
    HeaderMismatch {
        /// The file.
        path: PathBuf,
        /// The header line of the file.
        found: String,
        /// The column names of the series, comma-separated.
        expected: String,
    },
    /// A column name that would break the header (empty, or holding a
    /// comma, a quote or a line break).
    #[error("column name {name:?} is not allowed in a CSV header (empty, or holds a comma, quote or line break)")]
    BadColumn {
        /// The name given.
        name: String,
    },
}

/// How floating-point values are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FloatFormat {
    /// The shortest exponent form that reads back to the same bits
    /// (`{:e}`: `2.5e-1`).
    #[default]
    Exp,
    /// An exponent form with this many digits after the point
    /// (`{:.17e}` for 17: every double, 18 significant digits).
    ExpDigits(usize),
}

/// One value of a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// An integer (step numbers, counts), printed exactly.
    Int(i128),
    /// A float, printed in the series' [`FloatFormat`].
    Float(f64),
}

macro_rules! int_value {
    ($($t:ty),*) => { $( impl From<$t> for Value { fn from(v: $t) -> Self { Value::Int(v as i128) } } )* };
}
int_value!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

impl From<f32> for Value {
    fn from(v: f32) -> Self {
        Value::Float(f64::from(v))
    }
}

/// A CSV time series with a fixed set of columns.
#[derive(Debug)]
pub struct Series {
    path: PathBuf,
    columns: Vec<String>,
    format: FloatFormat,
    out: BufWriter<File>,
    line: String,
}

impl Series {
    /// Creates (or truncates) `path` and writes the header.
    pub fn create(path: &Path, columns: &[&str], format: FloatFormat) -> Result<Self, CsvError> {
        check_columns(columns)?;
        let io = |error| CsvError::Io {
            path: path.to_path_buf(),
            error,
        };
        let out = BufWriter::new(File::create(path).map_err(io)?);
        let mut s = Series {
            path: path.to_path_buf(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            format,
            out,
            line: String::new(),
        };
        let header = s.columns.join(",");
        s.write_line(&header)?;
        Ok(s)
    }

    /// Continues the series in `path`: new rows go after the kept rows of
    /// the file. When `path` does not exist or is empty, this is
    /// [`Series::create`]. Otherwise its first line must be the header of
    /// `columns` ([`CsvError::HeaderMismatch`], and the file is left as it
    /// is); `keep` then sees each complete row in order, split at the
    /// commas, and the file is cut before the first row it rejects. An
    /// incomplete last line (a row cut short by a run that stopped while
    /// writing it) is removed too.
    pub fn append(
        path: &Path,
        columns: &[&str],
        format: FloatFormat,
        mut keep: impl FnMut(&[&str]) -> bool,
    ) -> Result<Self, CsvError> {
        check_columns(columns)?;
        let io = |error| CsvError::Io {
            path: path.to_path_buf(),
            error,
        };
        let mut file = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Self::create(path, columns, format)
            }
            Err(e) => return Err(io(e)),
        };
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(io)?;
        if text.is_empty() {
            drop(file);
            return Self::create(path, columns, format);
        }
        let expected = columns.join(",");
        let header_end = text.iter().position(|&b| b == b'\n');
        let header = &text[..header_end.unwrap_or(text.len())];
        let header = header.strip_suffix(b"\r").unwrap_or(header);
        if header != expected.as_bytes() {
            return Err(CsvError::HeaderMismatch {
                path: path.to_path_buf(),
                found: String::from_utf8_lossy(header).into_owned(),
                expected,
            });
        }
        // Byte length to keep; a header without its line break gets one.
        let mut cut = match header_end {
            Some(e) => e + 1,
            None => text.len(),
        };
        while let Some(n) = text[cut..].iter().position(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(&text[cut..cut + n]);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            let fields: Vec<&str> = line.split(',').collect();
            if !keep(&fields) {
                break;
            }
            cut += n + 1;
        }
        file.set_len(cut as u64).map_err(io)?;
        file.seek(SeekFrom::End(0)).map_err(io)?;
        let mut s = Series {
            path: path.to_path_buf(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            format,
            out: BufWriter::new(file),
            line: String::new(),
        };
        if header_end.is_none() {
            s.out.write_all(b"\n").map_err(io)?;
            s.out.flush().map_err(io)?;
        }
        Ok(s)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The column names.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Appends one row and flushes it; `values` must have one value per
    /// column.
    pub fn row(&mut self, values: &[Value]) -> Result<(), CsvError> {
        if values.len() != self.columns.len() {
            return Err(CsvError::WrongRow {
                path: self.path.clone(),
                expected: self.columns.len(),
                got: values.len(),
                columns: self.columns.join(","),
            });
        }
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            use std::fmt::Write as _;
            // Writing into a String cannot fail.
            let _ = match (*v, self.format) {
                (Value::Int(x), _) => write!(line, "{x}"),
                (Value::Float(x), FloatFormat::Exp) => write!(line, "{x:e}"),
                (Value::Float(x), FloatFormat::ExpDigits(d)) => write!(line, "{x:.d$e}"),
            };
        }
        let r = self.write_line(&line);
        self.line = line;
        r
    }

    fn write_line(&mut self, line: &str) -> Result<(), CsvError> {
        let path = &self.path;
        let io = |error| CsvError::Io {
            path: path.clone(),
            error,
        };
        self.out.write_all(line.as_bytes()).map_err(io)?;
        self.out.write_all(b"\n").map_err(io)?;
        self.out.flush().map_err(io)
    }
}

/// Opens the time series `path` on rank 0 and tells every rank whether
/// that worked (collective): a new file ([`Series::create`]), or, with
/// `from = Some(step)` (a restarted run), the file continued
/// ([`Series::append`]) with the rows up to that step kept and those after
/// it dropped, the step being each row's first column (a row whose first
/// column is not a step is kept as it is). `kept` sees every kept row, on
/// rank 0. Rank 0 gets the series, the other ranks `None`; when rank 0
/// cannot open it, every rank returns rank 0's reason, which names the
/// file.
pub fn open_series(
    comm: &dyn comm::Communicator,
    path: &Path,
    columns: &[&str],
    format: FloatFormat,
    from: Option<u64>,
    mut kept: impl FnMut(&[&str]),
) -> Result<Option<Series>, crate::output::Rank0Error> {
    let opened = if comm.rank() == 0 {
        match from {
            None => Series::create(path, columns, format)
                .map_err(|e| format!("creating the time series {}: {e}", path.display())),
            Some(from) => Series::append(path, columns, format, |fields| {
                match fields.first().and_then(|f| f.parse::<u64>().ok()) {
                    Some(step) if step > from => false,
                    _ => {
                        kept(fields);
                        true
                    }
                }
            })
            .map_err(|e| {
                format!(
                    "continuing the time series {}: {e} (restart into another output folder, or move the file away)",
                    path.display()
                )
            }),
        }
        .map(Some)
    } else {
        Ok(None)
    };
    let (series, outcome) = match opened {
        Ok(s) => (s, Ok(())),
        Err(e) => (None, Err(e)),
    };
    crate::output::rank0_result(comm, outcome)?;
    Ok(series)
}

fn check_columns(columns: &[&str]) -> Result<(), CsvError> {
    match columns
        .iter()
        .find(|c| c.is_empty() || c.contains([',', '"', '\n', '\r']))
    {
        Some(bad) => Err(CsvError::BadColumn {
            name: bad.to_string(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::tmp;

    #[test]
    fn header_rows_and_formats() {
        let dir = tmp("csv");
        let p = dir.join("d.csv");
        let mut s = Series::create(&p, &["step", "time", "mean"], FloatFormat::Exp).unwrap();
        s.row(&[0usize.into(), 0.0.into(), 1.0.into()]).unwrap();
        // Each row is on disk as soon as row() returns (no drop needed).
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "step,time,mean\n0,0e0,1e0\n"
        );
        s.row(&[20u64.into(), 1.2207e-4.into(), (-0.1).into()])
            .unwrap();
        let p2 = dir.join("e.csv");
        let mut t = Series::create(&p2, &["step", "f"], FloatFormat::ExpDigits(17)).unwrap();
        t.row(&[(-3i64).into(), 0.1.into()]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "step,time,mean\n0,0e0,1e0\n20,1.2207e-4,-1e-1\n"
        );
        assert_eq!(
            std::fs::read_to_string(&p2).unwrap(),
            "step,f\n-3,1.00000000000000006e-1\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_wrong_row_is_an_error_and_writes_nothing() {
        let dir = tmp("csv-wrong");
        let p = dir.join("d.csv");
        let mut s = Series::create(&p, &["step", "energy"], FloatFormat::Exp).unwrap();
        let e = s.row(&[1u64.into(), 2.0.into(), 3.0.into()]).unwrap_err();
        assert!(
            matches!(
                e,
                CsvError::WrongRow {
                    expected: 2,
                    got: 3,
                    ..
                }
            ),
            "{e:?}"
        );
        let m = e.to_string();
        assert!(m.contains("needs 2 values (step,energy), got 3"), "{m}");
        assert!(s.row(&[]).is_err());
        s.row(&[1u64.into(), 2.0.into()]).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "step,energy\n1,2e0\n");
        assert_eq!(s.columns(), ["step", "energy"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_columns_and_folders() {
        let dir = tmp("csv-bad");
        for bad in ["", "a,b", "say \"hi\"", "x\ny"] {
            let e =
                Series::create(&dir.join("x.csv"), &["step", bad], FloatFormat::Exp).unwrap_err();
            assert!(matches!(e, CsvError::BadColumn { .. }), "{e:?}");
        }
        let e = Series::create(&dir.join("no/such/x.csv"), &["a"], FloatFormat::Exp).unwrap_err();
        assert!(e.to_string().contains("x.csv"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn append_continues_a_series_of_the_same_columns() {
        let dir = tmp("csv-append");
        let p = dir.join("d.csv");
        // No file yet: created with the header.
        let mut s = Series::append(&p, &["step", "e"], FloatFormat::Exp, |_| true).unwrap();
        for k in 0..4u64 {
            s.row(&[k.into(), (k as f64).into()]).unwrap();
        }
        drop(s);
        let before = "step,e\n0,0e0\n1,1e0\n2,2e0\n3,3e0\n";
        assert_eq!(std::fs::read_to_string(&p).unwrap(), before);
        // Another header: refused, the file untouched.
        let e = Series::append(&p, &["step", "f"], FloatFormat::Exp, |_| true).unwrap_err();
        assert!(matches!(e, CsvError::HeaderMismatch { .. }), "{e:?}");
        let m = e.to_string();
        assert!(
            m.contains("d.csv") && m.contains("step,e") && m.contains("step,f"),
            "{m}"
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), before);
        // Keep the rows up to step 1, then continue.
        let mut seen = Vec::new();
        let mut s = Series::append(&p, &["step", "e"], FloatFormat::Exp, |f| {
            seen.push(f.join("|"));
            f[0].parse::<u64>().unwrap() <= 1
        })
        .unwrap();
        assert_eq!(seen, ["0|0e0", "1|1e0", "2|2e0"]);
        s.row(&[2u64.into(), 5.0.into()]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "step,e\n0,0e0\n1,1e0\n2,5e0\n"
        );
        drop(s);
        // An incomplete last line is removed; every complete row is kept.
        std::fs::write(&p, "step,e\n0,0e0\n1,1e").unwrap();
        let mut s = Series::append(&p, &["step", "e"], FloatFormat::Exp, |_| true).unwrap();
        s.row(&[1u64.into(), 1.0.into()]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "step,e\n0,0e0\n1,1e0\n"
        );
        // A header without its line break, and an empty file.
        std::fs::write(&p, "step,e").unwrap();
        let mut s = Series::append(&p, &["step", "e"], FloatFormat::Exp, |_| true).unwrap();
        s.row(&[0u64.into(), 0.0.into()]).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "step,e\n0,0e0\n");
        std::fs::write(&p, "").unwrap();
        let mut s = Series::append(&p, &["step", "e"], FloatFormat::Exp, |_| true).unwrap();
        s.row(&[0u64.into(), 0.0.into()]).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "step,e\n0,0e0\n");
        let e = Series::append(&p, &["a,b"], FloatFormat::Exp, |_| true).unwrap_err();
        assert!(matches!(e, CsvError::BadColumn { .. }), "{e:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_series_opened_on_rank_0_continues_after_the_restart_step() {
        let dir = crate::output::tests::tmp("csv-open");
        let p = dir.join("s.csv");
        let cols = ["step", "x"];
        comm::local::run(2, |c| {
            let mut s = open_series(c, &p, &cols, FloatFormat::Exp, None, |_| {})?;
            assert_eq!(s.is_some(), c.rank() == 0);
            if let Some(s) = &mut s {
                for i in 0..5u64 {
                    s.row(&[i.into(), (i as f64 * 0.5).into()]).unwrap();
                }
            }
            Ok::<_, crate::output::Rank0Error>(())
        })
        .unwrap();
        let seen = comm::local::run(2, |c| {
            let mut seen = Vec::new();
            let s = open_series(c, &p, &cols, FloatFormat::Exp, Some(2), |f| {
                seen.push(f[0].to_string())
            })?;
            drop(s);
            Ok::<_, crate::output::Rank0Error>(seen)
        })
        .unwrap();
        assert_eq!(seen[0], ["0", "1", "2"]);
        assert!(seen[1].is_empty(), "only rank 0 reads the file");
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        // Another header: every rank stops with rank 0's reason.
        let errs = comm::local::run(2, |c| {
            Ok::<_, String>(
                open_series(c, &p, &["step", "y"], FloatFormat::Exp, Some(1), |_| {})
                    .unwrap_err()
                    .to_string(),
            )
        })
        .unwrap();
        for m in errs {
            assert!(
                m.starts_with("continuing the time series") && m.contains("s.csv"),
                "{m}"
            );
        }
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text, "left as it was");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
