//! Configuration: TOML files into serde structs with unknown keys rejected,
//! per-axis values, and the parsers and override macro of the command line.
//!
//! The order every application follows is *defaults < configuration file <
//! command-line flags*: the struct's `Default`, then [`read_toml`], then
//! [`set_from!`](crate::set_from) for the flags that were given.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Default, Serialize, Deserialize)]
//! #[serde(deny_unknown_fields, default)]
//! struct Config {
//!     steps: usize,
//!     dt: f64,
//! }
//!
//! let c: Config = appkit::config::parse_toml("steps = 10\n").unwrap();
//! assert_eq!(c.steps, 10);
//! let e = appkit::config::parse_toml::<Config>("step = 10\n").unwrap_err();
//! assert!(e.to_string().contains("`step`"));
//! ```

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Why a configuration could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration file {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// The text is not valid TOML or does not fit the struct (a wrong type,
    /// or an unknown key where the struct denies unknown fields); the
    /// message names the key, the line and the column.
    #[error("invalid configuration {}: {message}", origin(path))]
    Parse {
        /// The file, `None` for text given directly.
        path: Option<PathBuf>,
        /// The TOML parser's message.
        message: String,
    },
    /// A key the struct does not have (found by comparing the keys of the
    /// text with those of the struct it produced).
    #[error("invalid configuration {}: unknown key `{key}`", origin(path))]
    UnknownKey {
        /// The file, `None` for text given directly.
        path: Option<PathBuf>,
        /// The key, dotted for keys inside tables (`output.vtkk`).
        key: String,
    },
}

fn origin(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!("file {}", p.display()),
        None => "text".to_string(),
    }
}

/// Reads the TOML file at `path` into `T`.
///
/// A wrong type, a malformed file or an unknown key is an error naming the
/// file and the key. Structs should carry `#[serde(deny_unknown_fields)]`,
/// which makes the TOML parser name the line and the column too; for a
/// struct that does not, the keys of the file are compared with those of the
/// value it produced, so an unknown key is still an error (keys reached only
/// through `#[serde(alias)]` or fields marked `skip_serializing` count as
/// unknown there).
pub fn read_toml<T: DeserializeOwned + Serialize>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    parse(&text, Some(path))
}

/// [`read_toml`] for a configuration whose keys were renamed: each
/// `(old, new)` pair of `renamed` (dotted names for keys in tables, such as
/// `output.vtk_every`) moves a value given under the old name to the new
/// one. Returns the configuration and one deprecation note per old name
/// used (for the caller to print). Giving both names is an error naming
/// both. A file without old names is read exactly as [`read_toml`] reads
/// it (its errors name the line).
pub fn read_toml_renamed<T: DeserializeOwned + Serialize>(
    path: &Path,
    renamed: &[(&str, &str)],
) -> Result<(T, Vec<String>), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let parse_error = |message: String| ConfigError::Parse {
        path: Some(path.to_path_buf()),
        message,
    };
    let mut table: toml::Table = match toml::from_str(&text) {
        Ok(t) => t,
        // Malformed TOML: the parser's own message with the line.
        Err(_) => return parse(&text, Some(path)).map(|v| (v, Vec::new())),
    };
    let mut notes = Vec::new();
    for (old, new) in renamed {
        let Some(value) = take_dotted(&mut table, old) else {
            continue;
        };
        if get_dotted(&table, new).is_some() {
            return Err(parse_error(format!(
                "both `{old}` and `{new}` are given; `{old}` is the old name of `{new}`: keep `{new}` only"
            )));
        }
        put_dotted(&mut table, new, value);
        notes.push(format!(
            "{}: the key `{old}` is deprecated; it is now `{new}`",
            path.display()
        ));
    }
    if notes.is_empty() {
        return parse(&text, Some(path)).map(|v| (v, notes));
    }
    let text = toml::to_string(&table).map_err(|e| parse_error(e.to_string()))?;
    parse(&text, Some(path)).map(|v| (v, notes))
}

fn take_dotted(t: &mut toml::Table, key: &str) -> Option<toml::Value> {
    match key.split_once('.') {
        None => t.remove(key),
        Some((head, rest)) => match t.get_mut(head) {
            Some(toml::Value::Table(inner)) => take_dotted(inner, rest),
            _ => None,
        },
    }
}

fn get_dotted<'a>(t: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    match key.split_once('.') {
        None => t.get(key),
        Some((head, rest)) => match t.get(head) {
            Some(toml::Value::Table(inner)) => get_dotted(inner, rest),
            _ => None,
        },
    }
}

fn put_dotted(t: &mut toml::Table, key: &str, value: toml::Value) {
    match key.split_once('.') {
        None => {
            t.insert(key.to_string(), value);
        }
        Some((head, rest)) => {
            let inner = t
                .entry(head.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let toml::Value::Table(inner) = inner {
                put_dotted(inner, rest, value);
            }
        }
    }
}

/// Parses TOML text into `T`, with the checks of [`read_toml`].
pub fn parse_toml<T: DeserializeOwned + Serialize>(text: &str) -> Result<T, ConfigError> {
    parse(text, None)
}

pub(crate) fn parse<T: DeserializeOwned + Serialize>(
    text: &str,
    path: Option<&Path>,
) -> Result<T, ConfigError> {
    let parse_error = |message: String| ConfigError::Parse {
        path: path.map(Path::to_path_buf),
        message: message.trim_end().to_string(),
    };
    let value: T = toml::from_str(text).map_err(|e| parse_error(e.to_string()))?;
    let given: toml::Table = toml::from_str(text).map_err(|e| parse_error(e.to_string()))?;
    // A struct that serialises to something other than a table (or fails
    // to serialise) offers no key set to compare with.
    if let Ok(toml::Value::Table(known)) = toml::Value::try_from(&value) {
        if let Some(key) = unknown_key(&given, &known, "") {
            return Err(ConfigError::UnknownKey {
                path: path.map(Path::to_path_buf),
                key,
            });
        }
    }
    Ok(value)
}

/// The first key of `given` (depth first, in the file's order) that `known`
/// lacks, dotted from the top.
fn unknown_key(given: &toml::Table, known: &toml::Table, prefix: &str) -> Option<String> {
    for (k, v) in given {
        let dotted = format!("{prefix}{k}");
        match (v, known.get(k)) {
            (_, None) => return Some(dotted),
            (toml::Value::Table(g), Some(toml::Value::Table(n))) => {
                if let Some(u) = unknown_key(g, n, &format!("{dotted}.")) {
                    return Some(u);
                }
            }
            _ => {}
        }
    }
    None
}

/// A configuration read from TOML: [`read_toml`] and [`parse_toml`] as
/// methods of every serde struct (`Config::from_file(path)`), so that an
/// application does not write them again.
///
/// ```
/// use appkit::config::TomlFile;
///
/// #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
/// #[serde(deny_unknown_fields, default)]
/// struct Config {
///     steps: usize,
/// }
///
/// assert_eq!(Config::from_toml("steps = 3\n").unwrap().steps, 3);
/// assert!(Config::from_toml("stepz = 3\n").is_err());
/// ```
pub trait TomlFile: Sized {
    /// Reads the TOML file at `path` ([`read_toml`]).
    fn from_file(path: &Path) -> Result<Self, ConfigError>;
    /// Parses TOML text ([`parse_toml`]).
    fn from_toml(text: &str) -> Result<Self, ConfigError>;
}

impl<T: DeserializeOwned + Serialize> TomlFile for T {
    fn from_file(path: &Path) -> Result<Self, ConfigError> {
        read_toml(path)
    }

    fn from_toml(text: &str) -> Result<Self, ConfigError> {
        parse_toml(text)
    }
}

/// One value for every axis, or one per axis: `n = 64` or `n = [64, 32, 16]`
/// in a TOML file.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PerAxis<T> {
    /// The same value on every axis.
    All(T),
    /// One value per axis.
    Each([T; 3]),
}

impl<T: Copy> PerAxis<T> {
    /// The three values.
    pub fn get(&self) -> [T; 3] {
        match *self {
            PerAxis::All(x) => [x; 3],
            PerAxis::Each(a) => a,
        }
    }
}

fn split_triple<T: std::str::FromStr + Copy>(s: &str) -> Option<[T; 3]> {
    let parts: Vec<T> = s
        .split(['x', 'X', ','])
        .map(|p| p.trim().parse::<T>())
        .collect::<Result<_, _>>()
        .ok()?;
    match parts[..] {
        [v] => Some([v; 3]),
        [a, b, c] => Some([a, b, c]),
        _ => None,
    }
}

/// Parses `N` or `AxBxC` (also `A,B,C`) into three non-negative integers:
/// the command-line form of per-axis sizes and process grids (a clap
/// `value_parser`).
pub fn parse_triple(s: &str) -> Result<[usize; 3], String> {
    split_triple::<usize>(s)
        .ok_or_else(|| format!("expected N or AxBxC with positive integers, got {s:?}"))
}

/// Parses `X` or `AxBxC` (also `A,B,C`) into three numbers: the
/// command-line form of per-axis lengths (a clap `value_parser`).
pub fn parse_triple_f64(s: &str) -> Result<[f64; 3], String> {
    split_triple::<f64>(s).ok_or_else(|| format!("expected X or AxBxC with numbers, got {s:?}"))
}

/// A value chosen by name, kept with the name as written: for types of
/// other crates that implement [`FromStr`](std::str::FromStr) but not serde
/// (a protocol or algorithm enum). In TOML and JSON it is the name as a
/// string; parsing goes through the type's own `FromStr`, so an unknown name
/// gets that type's error (which typically lists the valid names) and names
/// the type learns later work without a change here. It is also a clap value
/// type (`Option<ByName<T>>` fields take `--flag NAME`).
///
/// ```
/// use appkit::config::ByName;
///
/// let b: ByName<u8> = "7".parse().unwrap();
/// assert_eq!((*b.value(), b.name()), (7, "7"));
/// assert!("x".parse::<ByName<u8>>().unwrap_err().contains("\"x\""));
/// assert_eq!(ByName::from(7u8), b);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ByName<T> {
    name: String,
    value: T,
}

impl<T: std::fmt::Display> From<T> for ByName<T> {
    /// The value under the name its `Display` gives (for a type whose
    /// `FromStr` reads that name back, the same as parsing it).
    fn from(value: T) -> Self {
        ByName {
            name: value.to_string(),
            value,
        }
    }
}

impl<T> ByName<T> {
    /// The parsed value.
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The name as written.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl<T: std::str::FromStr> std::str::FromStr for ByName<T>
where
    T::Err: std::fmt::Display,
{
    type Err = String;

    /// Parses `name` with `T`'s `FromStr`; the error is `T`'s message,
    /// prefixed with the name when the message does not quote it.
    fn from_str(name: &str) -> Result<Self, String> {
        match name.parse::<T>() {
            Ok(value) => Ok(ByName {
                name: name.to_string(),
                value,
            }),
            Err(e) => {
                let m = e.to_string();
                Err(if m.contains(&format!("{name:?}")) {
                    m
                } else {
                    format!("invalid value {name:?}: {m}")
                })
            }
        }
    }
}

impl<T> std::fmt::Display for ByName<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl<T> Serialize for ByName<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name)
    }
}

impl<'de, T: std::str::FromStr> Deserialize<'de> for ByName<T>
where
    T::Err: std::fmt::Display,
{
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// Sets each named field of the configuration `$dst` from the `Option`
/// field of the same name of the command line `$src` when it is `Some`:
/// the "flags override the file" step of every application.
///
/// ```
/// #[derive(Default)]
/// struct Config { steps: usize, dt: f64 }
/// struct Cli { steps: Option<usize>, dt: Option<f64> }
///
/// let mut c = Config { steps: 10, dt: 0.5 };
/// let cli = Cli { steps: Some(20), dt: None };
/// appkit::set_from!(c, cli; steps, dt);
/// assert_eq!((c.steps, c.dt), (20, 0.5));
/// ```
#[macro_export]
macro_rules! set_from {
    ($dst:expr, $src:expr; $($field:ident),+ $(,)?) => {
        $( if let Some(v) = $src.$field.clone() { $dst.$field = v; } )+
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Strict {
        n: PerAxis<usize>,
        dt: Option<f64>,
        out: Out,
    }

    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Out {
        vtk: bool,
        dir: Option<PathBuf>,
    }

    impl Default for Strict {
        fn default() -> Self {
            Strict {
                n: PerAxis::All(8),
                dt: None,
                out: Out::default(),
            }
        }
    }

    /// The same shape without `deny_unknown_fields`: serde alone would
    /// ignore a misspelt key.
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    #[serde(default)]
    struct Lax {
        steps: usize,
        dt: Option<f64>,
        out: LaxOut,
    }

    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    #[serde(default)]
    struct LaxOut {
        vtk: bool,
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("appkit-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn unknown_keys_name_the_key_the_line_and_the_file() {
        let dir = tmp("unknown");
        let p = dir.join("run.toml");
        std::fs::write(&p, "n = [4, 5, 6]\n[out]\nvtkk = true\n").unwrap();
        let e = read_toml::<Strict>(&p).unwrap_err();
        assert!(matches!(e, ConfigError::Parse { .. }), "{e:?}");
        let m = e.to_string();
        assert!(
            m.contains("run.toml") && m.contains("vtkk") && m.contains("line 3"),
            "{m}"
        );
        std::fs::write(&p, "n = [4, 5, 6]\ndt = 0.5\n[out]\nvtk = true\n").unwrap();
        let c: Strict = read_toml(&p).unwrap();
        assert_eq!(c.n.get(), [4, 5, 6]);
        assert_eq!(c.dt, Some(0.5));
        assert!(c.out.vtk);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_keys_are_caught_without_deny_unknown_fields() {
        let e = parse_toml::<Lax>("steps = 3\nstep = 4\n").unwrap_err();
        match &e {
            ConfigError::UnknownKey { key, path: None } => assert_eq!(key, "step"),
            other => panic!("{other:?}"),
        }
        let dir = tmp("lax");
        let p = dir.join("lax.toml");
        std::fs::write(&p, "[out]\nvtk = true\nvtk_every = 3\n").unwrap();
        let m = read_toml::<Lax>(&p).unwrap_err().to_string();
        assert!(
            m.contains("`out.vtk_every`") && m.contains("lax.toml"),
            "{m}"
        );
        // A key whose value is None in the result was not given, so every
        // given key is found again: this one is accepted.
        let c: Lax = parse_toml("dt = 0.25\n[out]\nvtk = true\n").unwrap();
        assert_eq!(c.dt, Some(0.25));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wrong_types_and_missing_files_are_named() {
        let m = parse_toml::<Strict>("n = \"big\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("invalid configuration text") && m.contains("line 1"),
            "{m}"
        );
        let m = read_toml::<Strict>(Path::new("/nonexistent/appkit.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("cannot read configuration file /nonexistent/appkit.toml"),
            "{m}"
        );
    }

    #[test]
    fn renamed_keys_are_read_under_their_new_names_with_a_note() {
        let dir = tmp("renamed");
        let p = dir.join("old.toml");
        let renamed = [("dt", "n"), ("out.dirr", "out.dir")];
        std::fs::write(&p, "dt = 4\n[out]\ndirr = \"x\"\n").unwrap();
        // Without the renames both keys are errors: the test can fail.
        assert!(read_toml::<Strict>(&p).is_err());
        let (c, notes): (Strict, _) = read_toml_renamed(&p, &renamed).unwrap();
        assert_eq!(c.n, PerAxis::All(4));
        assert_eq!(c.out.dir.as_deref(), Some(Path::new("x")));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].ends_with("the key `dt` is deprecated; it is now `n`"),
            "{notes:?}"
        );
        assert!(
            notes[1].contains("`out.dirr`") && notes[1].contains("`out.dir`"),
            "{notes:?}"
        );
        // Both names: an error naming both.
        std::fs::write(&p, "dt = 4\nn = 5\n").unwrap();
        let e = read_toml_renamed::<Strict>(&p, &renamed)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("both `dt` and `n`") && e.contains("old.toml"),
            "{e}"
        );
        // No old name: the plain reading, line numbers and all.
        std::fs::write(&p, "n = 4\nnn = 1\n").unwrap();
        let e = read_toml_renamed::<Strict>(&p, &renamed)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nn") && e.contains("line 2"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn triples() {
        assert_eq!(parse_triple("8"), Ok([8; 3]));
        assert_eq!(parse_triple("4x2X1"), Ok([4, 2, 1]));
        assert_eq!(parse_triple("4, 2, 1"), Ok([4, 2, 1]));
        for bad in ["4x2", "4x2x1x1", "", "ax2x1", "-1", "4xx2"] {
            let e = parse_triple(bad).unwrap_err();
            assert!(
                e.contains("AxBxC") && e.contains(&format!("{bad:?}")),
                "{e}"
            );
        }
        assert_eq!(parse_triple_f64("0.5"), Ok([0.5; 3]));
        assert_eq!(parse_triple_f64("1x2.5x3"), Ok([1.0, 2.5, 3.0]));
        assert!(parse_triple_f64("1x2").is_err());
    }

    #[test]
    fn by_name_round_trips_and_reports_the_parse_error() {
        #[derive(Debug, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct C {
            count: ByName<u32>,
        }
        let c: C = parse_toml("count = \"12\"\n").unwrap();
        assert_eq!((*c.count.value(), c.count.name()), (12, "12"));
        assert_eq!(c.count.to_string(), "12");
        let back = toml::to_string(&c).unwrap();
        assert_eq!(back.trim(), "count = \"12\"");
        let e = parse_toml::<C>("count = \"lots\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"lots\"") && e.contains("line 1"), "{e}");
        let e = "lots".parse::<ByName<u32>>().unwrap_err();
        assert!(e.contains("\"lots\"") && e.contains("invalid digit"), "{e}");
    }

    #[test]
    fn set_from_overrides_only_given_fields() {
        struct Cli {
            n: Option<PerAxis<usize>>,
            dt: Option<Option<f64>>,
        }
        let mut c = Strict::default();
        let cli = Cli {
            n: Some(PerAxis::Each([1, 2, 3])),
            dt: None,
        };
        crate::set_from!(c, cli; n, dt);
        assert_eq!(c.n.get(), [1, 2, 3]);
        assert_eq!(c.dt, None);
    }
}
