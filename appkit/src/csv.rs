//! Time series as CSV: the header once, then one row per call, each row
//! flushed so a run that stops leaves every row it reached. The column set
//! is fixed when the file is created; a row with another number of values
//! is an error.
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
use std::io::{BufWriter, Write};
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
        if let Some(bad) = columns
            .iter()
            .find(|c| c.is_empty() || c.contains([',', '"', '\n', '\r']))
        {
            return Err(CsvError::BadColumn {
                name: bad.to_string(),
            });
        }
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
}
