//! Checks of configuration values whose errors name the value, what was
//! received and what is allowed.
//!
//! ```
//! use appkit::validate;
//!
//! let e = validate::in_range_open_closed("cfl", 1.5, 0.0, 1.0).unwrap_err();
//! assert_eq!(e.to_string(), "cfl must be in (0, 1], got 1.5");
//! let e = validate::positive_per_axis("n", [8, 0, 8]).unwrap_err();
//! assert_eq!(e.to_string(), "n must be positive on every axis, got [8, 0, 8] (axis 1 is 0)");
//! ```

use std::fmt::Display;

/// A configuration value outside its valid range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    /// A named value and what it must be.
    #[error("{name} must be {expected}, got {got}")]
    Value {
        /// The key or flag.
        name: String,
        /// What is allowed, as a phrase ("positive and finite", "in (0, 1]").
        expected: String,
        /// The value received.
        got: String,
    },
    /// More ranks than cells.
    #[error("{ranks} ranks for {cells} cells: every rank needs at least one cell (use at most {cells} ranks)")]
    TooManyRanks {
        /// Ranks of the run.
        ranks: usize,
        /// Global cells.
        cells: usize,
    },
    /// A process grid whose product is not the rank count.
    #[error("grid {grid:?} holds {held} ranks but the run has {ranks}", held = grid.iter().product::<usize>())]
    GridSize {
        /// The grid given.
        grid: [usize; 3],
        /// Ranks of the run.
        ranks: usize,
    },
    /// Keys set away from their defaults that the run would not read, each
    /// as `key = value applies to ... (this run: ...)`.
    #[error(
        "{} would have no effect on this run: {}; leave {} at the default",
        if keys.len() == 1 { "this key" } else { "these keys" },
        keys.join("; "),
        if keys.len() == 1 { "it" } else { "them" }
    )]
    Unused {
        /// What each key applies to and what the run has instead.
        keys: Vec<String>,
    },
}

impl Invalid {
    /// `name must be expected, got got`.
    pub fn value(name: &str, expected: impl Display, got: impl Display) -> Self {
        Invalid::Value {
            name: name.to_string(),
            expected: expected.to_string(),
            got: got.to_string(),
        }
    }
}

/// An error listing `keys` (see [`Invalid::Unused`]) when there are any:
/// a setting the run would silently drop lets a user believe they ran what
/// they asked for.
///
/// ```
/// use appkit::validate;
///
/// assert!(validate::unused(vec![]).is_ok());
/// let e = validate::unused(vec!["seed = 2 applies to bodies = \"random\" (this run: bodies = \"sc\")".into()]);
/// assert_eq!(
///     e.unwrap_err().to_string(),
///     "this key would have no effect on this run: seed = 2 applies to bodies = \"random\" (this run: bodies = \"sc\"); leave it at the default"
/// );
/// ```
pub fn unused(keys: Vec<String>) -> Result<(), Invalid> {
    if keys.is_empty() {
        Ok(())
    } else {
        Err(Invalid::Unused { keys })
    }
}

/// `v > 0` and finite.
pub fn positive_finite(name: &str, v: f64) -> Result<(), Invalid> {
    if v > 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(Invalid::value(name, "positive and finite", v))
    }
}

/// `v` finite.
pub fn finite(name: &str, v: f64) -> Result<(), Invalid> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(Invalid::value(name, "finite", v))
    }
}

/// `v >= 0` (NaN fails).
pub fn non_negative(name: &str, v: f64) -> Result<(), Invalid> {
    if v >= 0.0 {
        Ok(())
    } else {
        Err(Invalid::value(name, "non-negative", v))
    }
}

/// `v >= min` for a count.
pub fn at_least(name: &str, v: usize, min: usize) -> Result<(), Invalid> {
    if v >= min {
        Ok(())
    } else {
        Err(Invalid::value(name, format!("at least {min}"), v))
    }
}

/// `lo < v <= hi`.
pub fn in_range_open_closed(name: &str, v: f64, lo: f64, hi: f64) -> Result<(), Invalid> {
    if v > lo && v <= hi {
        Ok(())
    } else {
        Err(Invalid::value(name, format!("in ({lo}, {hi}]"), v))
    }
}

/// `lo <= v <= hi`.
pub fn in_range(name: &str, v: f64, lo: f64, hi: f64) -> Result<(), Invalid> {
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(Invalid::value(name, format!("in [{lo}, {hi}]"), v))
    }
}

/// `v` is one of `allowed`.
pub fn one_of<T: PartialEq + std::fmt::Debug>(
    name: &str,
    v: T,
    allowed: &[T],
) -> Result<(), Invalid> {
    if allowed.contains(&v) {
        Ok(())
    } else {
        Err(Invalid::value(
            name,
            format!("one of {allowed:?}"),
            format!("{v:?}"),
        ))
    }
}

/// Every component positive (sizes, counts per axis).
pub fn positive_per_axis(name: &str, v: [usize; 3]) -> Result<(), Invalid> {
    match (0..3).find(|&d| v[d] == 0) {
        None => Ok(()),
        Some(d) => Err(Invalid::value(
            name,
            "positive on every axis",
            format!("{v:?} (axis {d} is 0)"),
        )),
    }
}

/// Every component positive and finite (lengths per axis).
pub fn positive_finite_per_axis(name: &str, v: [f64; 3]) -> Result<(), Invalid> {
    match (0..3).find(|&d| !(v[d] > 0.0 && v[d].is_finite())) {
        None => Ok(()),
        Some(d) => Err(Invalid::value(
            name,
            "positive and finite on every axis",
            format!("{} on axis {d}", v[d]),
        )),
    }
}

/// At least one rank and at most one rank per cell; when `grid` is given,
/// its product equals `ranks`.
pub fn ranks_for(ranks: usize, cells: usize, grid: Option<[usize; 3]>) -> Result<(), Invalid> {
    at_least("ranks", ranks, 1)?;
    if ranks > cells {
        return Err(Invalid::TooManyRanks { ranks, cells });
    }
    match grid {
        Some(g) if g.iter().product::<usize>() != ranks => {
            Err(Invalid::GridSize { grid: g, ranks })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_value_and_range() {
        let m = |r: Result<(), Invalid>| r.unwrap_err().to_string();
        assert_eq!(
            m(positive_finite("dt", 0.0)),
            "dt must be positive and finite, got 0"
        );
        assert_eq!(
            m(positive_finite("dt", f64::INFINITY)),
            "dt must be positive and finite, got inf"
        );
        assert_eq!(m(finite("r", f64::NAN)), "r must be finite, got NaN");
        assert_eq!(
            m(non_negative("radius", -1.5)),
            "radius must be non-negative, got -1.5"
        );
        assert_eq!(
            m(at_least("steps", 0, 1)),
            "steps must be at least 1, got 0"
        );
        assert_eq!(
            m(in_range("theta", 2.0, 0.0, 1.0)),
            "theta must be in [0, 1], got 2"
        );
        assert_eq!(
            m(in_range_open_closed("cfl", 0.0, 0.0, 1.0)),
            "cfl must be in (0, 1], got 0"
        );
        assert_eq!(
            m(one_of("order", 7, &[2, 4, 6])),
            "order must be one of [2, 4, 6], got 7"
        );
        assert_eq!(
            m(positive_finite_per_axis("length", [1.0, 0.0, 1.0])),
            "length must be positive and finite on every axis, got 0 on axis 1"
        );
        assert_eq!(
            m(ranks_for(4, 1, None)),
            "4 ranks for 1 cells: every rank needs at least one cell (use at most 1 ranks)"
        );
        assert_eq!(
            m(ranks_for(2, 64, Some([1, 1, 3]))),
            "grid [1, 1, 3] holds 3 ranks but the run has 2"
        );
        assert_eq!(m(ranks_for(0, 64, None)), "ranks must be at least 1, got 0");
    }

    #[test]
    fn valid_values_pass() {
        positive_finite("dt", 1e-300).unwrap();
        in_range_open_closed("cfl", 1.0, 0.0, 1.0).unwrap();
        in_range("theta", 0.0, 0.0, 1.0).unwrap();
        positive_per_axis("n", [1, 2, 3]).unwrap();
        ranks_for(3, 3, Some([3, 1, 1])).unwrap();
        assert!(non_negative("x", f64::NAN).is_err());
        assert!(in_range("x", f64::NAN, 0.0, 1.0).is_err());
    }
}
