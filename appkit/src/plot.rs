//! Line charts as PNG files, for time series such as the kinetic and
//! magnetic energies of a run against time, drawn here pixel by pixel: no
//! font files, no system libraries, only the `png` encoder.
//!
//! A [`Chart`] (title, axis labels, size in pixels, optional log-scale y
//! axis) renders any number of [`Series`] into an RGB image: a white
//! background, a black frame, about five "nice" ticks per axis (1, 2 or 5
//! times a power of ten; whole decades on a log axis) with numeric labels
//! and light grid lines, each series a 2-pixel line in its colour from
//! [`PALETTE`] (series `k` gets `PALETTE[k % PALETTE.len()]`), and a legend
//! naming the series (those with a non-empty name) in the corner of the
//! plot area that hides the fewest drawn points. The axes span the data,
//! widened to whole ticks.
//!
//! Points whose x or y is not finite are skipped, and on a log scale so are
//! points with y <= 0; a skipped point breaks the line (its neighbours are
//! not joined), and a point with no drawable neighbour is drawn as a dot.
//!
//! Text uses a built-in 5x7 bitmap font at an integer scale that grows with
//! the chart (1 below 500 pixels on the shorter side, 2 below 750, ...; the
//! title one step larger): ASCII letters and digits, space and
//! `. - + _ ( ) / , : = [ ] * ^ ? ' | < > % !`; any other character is drawn
//! as `?`. Text that does not fit is cut at the image's edge.
//!
//! ```
//! use appkit::plot::{Chart, Series};
//!
//! let t: Vec<f64> = (0..100).map(|i| 0.1 * i as f64).collect();
//! let kinetic: Vec<f64> = t.iter().map(|t| (-t).exp()).collect();
//! let magnetic: Vec<f64> = t.iter().map(|t| 1e-3 * (0.5 * t).exp()).collect();
//! let chart = Chart {
//!     log_y: true,
//!     ..Chart::new("energies", "time", "energy")
//! };
//! let png = chart
//!     .render(&[
//!         Series::new("kinetic", &t, &kinetic),
//!         Series::new("magnetic", &t, &magnetic),
//!     ])
//!     .unwrap();
//! assert_eq!(&png[1..4], b"PNG");
//! // chart.write(Path::new("out/energies.png"), &series) writes it atomically.
//! ```

use crate::output::{atomic_write, OutputError};
use std::path::Path;

/// The series colours (RGB), in order; series `k` is drawn in
/// `PALETTE[k % PALETTE.len()]`.
pub const PALETTE: [[u8; 3]; 8] = [
    [31, 119, 180],  // blue
    [214, 39, 40],   // red
    [44, 160, 44],   // green
    [255, 127, 14],  // orange
    [148, 103, 189], // purple
    [140, 86, 75],   // brown
    [227, 119, 194], // pink
    [23, 190, 207],  // cyan
];

/// The smallest chart width, in pixels.
pub const MIN_WIDTH: u32 = 200;
/// The smallest chart height, in pixels.
pub const MIN_HEIGHT: u32 = 150;
/// The largest chart width or height, in pixels.
pub const MAX_SIDE: u32 = 8192;

const WHITE: [u8; 3] = [255, 255, 255];
const BLACK: [u8; 3] = [0, 0, 0];
const GRID: [u8; 3] = [225, 225, 225];

/// Why a chart could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    /// A series with another number of x values than y values.
    #[error("plot series {series:?} has {x} x values but {y} y values")]
    Length {
        /// The series' name.
        series: String,
        /// Its x values.
        x: usize,
        /// Its y values.
        y: usize,
    },
    /// Not a single drawable point in any series.
    #[error("{}", if *log_y { "no point to plot: every x or y is non-finite or every y <= 0 (log scale)" } else { "no point to plot: every x or y is non-finite (or no series)" })]
    NoData {
        /// Whether the y axis is logarithmic (values <= 0 are skipped).
        log_y: bool,
    },
    /// A width or height too small to hold the frame, ticks and labels.
    #[error("chart {what} {value} px is too small to draw (minimum {min} px)")]
    TooSmall {
        /// `"width"` or `"height"`.
        what: &'static str,
        /// The value given.
        value: u32,
        /// The smallest allowed ([`MIN_WIDTH`] or [`MIN_HEIGHT`]).
        min: u32,
    },
    /// A width or height above [`MAX_SIDE`].
    #[error("chart {what} {value} px is too large (maximum {max} px)")]
    TooLarge {
        /// `"width"` or `"height"`.
        what: &'static str,
        /// The value given.
        value: u32,
        /// The largest allowed.
        max: u32,
    },
    /// The PNG encoder failed.
    #[error("cannot encode the chart as PNG: {reason}")]
    Encode {
        /// The encoder's message.
        reason: String,
    },
    /// Writing the file failed.
    #[error(transparent)]
    Output(#[from] OutputError),
}

/// A line chart: its texts, its y scale and its size. Set the fields
/// directly or start from [`Chart::new`]:
/// `Chart { log_y: true, ..Chart::new("energies", "time", "energy") }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chart {
    /// Drawn centred above the plot.
    pub title: String,
    /// Drawn centred below the x axis.
    pub x_label: String,
    /// Drawn upwards beside the y axis.
    pub y_label: String,
    /// A logarithmic y axis (ticks at powers of ten; points with y <= 0
    /// are skipped).
    pub log_y: bool,
    /// Pixels, [`MIN_WIDTH`] to [`MAX_SIDE`].
    pub width: u32,
    /// Pixels, [`MIN_HEIGHT`] to [`MAX_SIDE`].
    pub height: u32,
}

/// One named line of a chart: the points `(x[i], y[i])`, joined in the
/// order given.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// The legend entry (a series with an empty name has none).
    pub name: &'a str,
    /// The abscissae.
    pub x: &'a [f64],
    /// The ordinates, as many as `x`.
    pub y: &'a [f64],
}

impl<'a> Series<'a> {
    /// The series `name` of points `(x[i], y[i])`.
    pub fn new(name: &'a str, x: &'a [f64], y: &'a [f64]) -> Self {
        Series { name, x, y }
    }
}

impl Chart {
    /// An 800 x 500 chart with a linear y axis.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_y: false,
            width: 800,
            height: 500,
        }
    }

    /// The chart of `series` as the bytes of a PNG file (8-bit RGB).
    pub fn render(&self, series: &[Series<'_>]) -> Result<Vec<u8>, PlotError> {
        self.draw(series)?.encode()
    }

    /// Renders the chart ([`render`](Self::render)) and writes it to `path`
    /// atomically ([`atomic_write`]): nothing is written when the chart
    /// cannot be drawn.
    pub fn write(&self, path: &Path, series: &[Series<'_>]) -> Result<(), PlotError> {
        let bytes = self.render(series)?;
        atomic_write(path, &bytes)?;
        Ok(())
    }

    fn check_size(&self) -> Result<(), PlotError> {
        for (what, value, min) in [
            ("width", self.width, MIN_WIDTH),
            ("height", self.height, MIN_HEIGHT),
        ] {
            if value < min {
                return Err(PlotError::TooSmall { what, value, min });
            }
            if value > MAX_SIDE {
                return Err(PlotError::TooLarge {
                    what,
                    value,
                    max: MAX_SIDE,
                });
            }
        }
        Ok(())
    }

    /// Whether the point is drawn.
    fn drawable(&self, x: f64, y: f64) -> bool {
        x.is_finite() && y.is_finite() && (!self.log_y || y > 0.0)
    }

    /// y in axis units (its logarithm on a log scale).
    fn axis_y(&self, y: f64) -> f64 {
        if self.log_y {
            y.log10()
        } else {
            y
        }
    }

    fn draw(&self, series: &[Series<'_>]) -> Result<Canvas, PlotError> {
        self.check_size()?;
        for s in series {
            if s.x.len() != s.y.len() {
                return Err(PlotError::Length {
                    series: s.name.to_string(),
                    x: s.x.len(),
                    y: s.y.len(),
                });
            }
        }
        let mut xr = [f64::INFINITY, f64::NEG_INFINITY];
        let mut yr = xr;
        for s in series {
            for (&x, &y) in s.x.iter().zip(s.y) {
                if self.drawable(x, y) {
                    let y = self.axis_y(y);
                    xr = [xr[0].min(x), xr[1].max(x)];
                    yr = [yr[0].min(y), yr[1].max(y)];
                }
            }
        }
        if xr[0] > xr[1] {
            return Err(PlotError::NoData { log_y: self.log_y });
        }
        let xa = linear_axis(xr[0], xr[1]);
        let ya = if self.log_y {
            log_axis(yr[0], yr[1])
        } else {
            linear_axis(yr[0], yr[1])
        };

        let (w, h) = (i64::from(self.width), i64::from(self.height));
        let s = text_scale(w, h);
        let f = Frame::layout(self, s, &xa, &ya);
        let mut c = Canvas::new(w, h);

        // Grid, data, frame, ticks, texts, legend.
        for (v, _) in &xa.ticks {
            let x = f.x(&xa, *v);
            c.rect(x, f.top + 1, x, f.bottom - 1, GRID);
        }
        for (v, _) in &ya.ticks {
            let y = f.y(&ya, *v);
            c.rect(f.left + 1, y, f.right - 1, y, GRID);
        }
        let clip = [f.left + 1, f.top + 1, f.right - 1, f.bottom - 1];
        for (k, sr) in series.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            // The last drawn point of the current run and the run's length.
            let mut prev: Option<(i64, i64)> = None;
            let mut run = 0;
            for (&x, &y) in sr.x.iter().zip(sr.y) {
                if self.drawable(x, y) {
                    let p = (f.x(&xa, x), f.y(&ya, self.axis_y(y)));
                    if let Some(q) = prev {
                        c.line(q, p, colour, clip);
                    }
                    prev = Some(p);
                    run += 1;
                } else {
                    if let (1, Some(q)) = (run, prev) {
                        c.dot(q, colour, clip);
                    }
                    prev = None;
                    run = 0;
                }
            }
            if let (1, Some(q)) = (run, prev) {
                c.dot(q, colour, clip);
            }
        }
        c.outline(f.left, f.top, f.right, f.bottom, BLACK);
        let (tick, gap, glyph_h) = (4 * s, 2 * s, 7 * s);
        for (v, label) in &xa.ticks {
            let x = f.x(&xa, *v);
            c.rect(x, f.bottom + 1, x, f.bottom + tick, BLACK);
            let tw = text_width(label, s);
            c.text(x - tw / 2, f.bottom + tick + gap, label, s, BLACK, false);
        }
        for (v, label) in &ya.ticks {
            let y = f.y(&ya, *v);
            c.rect(f.left - tick, y, f.left - 1, y, BLACK);
            let tw = text_width(label, s);
            let x = f.left - tick - gap - tw;
            c.text(x, y - glyph_h / 2, label, s, BLACK, false);
        }
        let mid_x = (f.left + f.right) / 2;
        let mid_y = (f.top + f.bottom) / 2;
        let pad = 5 * s;
        let ts = s + 1;
        let tw = text_width(&self.title, ts);
        c.text((mid_x - tw / 2).max(0), pad, &self.title, ts, BLACK, false);
        let tw = text_width(&self.x_label, s);
        c.text(
            (mid_x - tw / 2).max(0),
            h - pad - glyph_h,
            &self.x_label,
            s,
            BLACK,
            false,
        );
        let tw = text_width(&self.y_label, s);
        c.text(
            pad,
            (mid_y + tw / 2).min(h - 1),
            &self.y_label,
            s,
            BLACK,
            true,
        );
        legend(&mut c, &f, s, series);
        Ok(c)
    }
}

/// The text scale of a `w` x `h` chart.
fn text_scale(w: i64, h: i64) -> i64 {
    (w.min(h) / 250).max(1)
}

/// Pixels between the frame and the ends of the axes' ranges, so that no
/// line lies on the frame.
fn inset(scale: i64) -> i64 {
    3 * scale
}

/// The frame of the plot area (pixel columns and rows of its lines) and
/// the map from axis units to pixels.
struct Frame {
    left: i64,
    top: i64,
    right: i64,
    bottom: i64,
    inset: i64,
}

impl Frame {
    fn layout(chart: &Chart, s: i64, xa: &Axis, ya: &Axis) -> Frame {
        let (w, h) = (i64::from(chart.width), i64::from(chart.height));
        let (pad, tick, gap, glyph_h) = (5 * s, 4 * s, 2 * s, 7 * s);
        let label_w = ya
            .ticks
            .iter()
            .map(|(_, l)| text_width(l, s))
            .max()
            .unwrap_or(0);
        let has = |t: &str| i64::from(!t.is_empty());
        // The top leaves room for half of the highest y tick label.
        let top = pad + has(&chart.title) * (7 * (s + 1) + pad) + glyph_h / 2 + s;
        let left = pad + has(&chart.y_label) * (glyph_h + pad) + label_w + gap + tick;
        let bottom = tick + gap + glyph_h + pad + has(&chart.x_label) * (glyph_h + pad);
        let last_x = xa.ticks.last().map_or(0, |(_, l)| text_width(l, s) / 2);
        let right = (2 * pad).max(last_x + pad);
        Frame {
            left: left.min(w / 2),
            top: top.min(h / 3),
            right: w - 1 - right.min(w / 4),
            bottom: h - 1 - bottom.min(h / 3),
            inset: inset(s),
        }
    }

    /// The fraction of `a`'s range at `v`, computed without overflow.
    fn fraction(a: &Axis, v: f64) -> f64 {
        (v / 2.0 - a.lo / 2.0) / (a.hi / 2.0 - a.lo / 2.0)
    }

    /// The pixel column of `v` on the x axis `a`.
    fn x(&self, a: &Axis, v: f64) -> i64 {
        let (lo, hi) = (self.left + self.inset, self.right - self.inset);
        lo + (Frame::fraction(a, v) * (hi - lo) as f64).round() as i64
    }

    /// The pixel row of `v` (in axis units) on the y axis `a`.
    fn y(&self, a: &Axis, v: f64) -> i64 {
        let (lo, hi) = (self.bottom - self.inset, self.top + self.inset);
        lo - (Frame::fraction(a, v) * (lo - hi) as f64).round() as i64
    }
}

/// Draws the legend in the corner of the plot area with the fewest data
/// pixels under it (top right, top left, bottom right, bottom left on a
/// tie).
fn legend(c: &mut Canvas, f: &Frame, s: i64, series: &[Series<'_>]) {
    let named: Vec<(usize, &str)> = series
        .iter()
        .enumerate()
        .filter(|(_, sr)| !sr.name.is_empty())
        .map(|(k, sr)| (k, sr.name))
        .collect();
    if named.is_empty() {
        return;
    }
    let (ip, sample, row) = (4 * s, 16 * s, 11 * s);
    let names_w = named
        .iter()
        .map(|(_, n)| text_width(n, s))
        .max()
        .unwrap_or(0);
    let bw = 2 * ip + sample + 4 * s + names_w;
    let bh = 2 * ip + named.len() as i64 * row - 4 * s;
    let m = 6 * s;
    let corners = [
        (f.right - m - bw, f.top + m),
        (f.left + m, f.top + m),
        (f.right - m - bw, f.bottom - m - bh),
        (f.left + m, f.bottom - m - bh),
    ];
    let data_under = |&(x, y): &(i64, i64)| {
        let mut n = 0usize;
        for yy in y.max(f.top + 1)..=(y + bh).min(f.bottom - 1) {
            for xx in x.max(f.left + 1)..=(x + bw).min(f.right - 1) {
                let p = c.get(xx, yy);
                n += usize::from(p != WHITE && p != GRID);
            }
        }
        n
    };
    let counts: Vec<usize> = corners.iter().map(data_under).collect();
    let best = (0..corners.len()).min_by_key(|&i| counts[i]).unwrap_or(0);
    let (x, y) = corners[best];
    c.rect(x, y, x + bw, y + bh, WHITE);
    c.outline(x, y, x + bw, y + bh, BLACK);
    for (i, (k, name)) in named.iter().enumerate() {
        let ty = y + ip + i as i64 * row;
        let ly = ty + 7 * s / 2 - 1;
        c.rect(
            x + ip,
            ly,
            x + ip + sample,
            ly + 1,
            PALETTE[k % PALETTE.len()],
        );
        c.text(x + ip + sample + 4 * s, ty, name, s, BLACK, false);
    }
}

/// An axis: its range in axis units (logarithms on a log axis) and its
/// ticks with their labels.
#[derive(Debug)]
struct Axis {
    lo: f64,
    hi: f64,
    ticks: Vec<(f64, String)>,
}

/// `10^e` with the fewest rounding errors.
fn pow10(e: i32) -> f64 {
    if e >= 0 {
        10f64.powi(e)
    } else {
        1.0 / 10f64.powi(-e)
    }
}

/// About five ticks at multiples of 1, 2 or 5 times a power of ten that
/// cover `min..=max`; the axis runs from the first tick to the last.
fn linear_axis(min: f64, max: f64) -> Axis {
    let (mut min, mut max) = (min, max);
    if min == max {
        // (Below 1e-300 a tenth could vanish: such a value is drawn as 0.)
        let d = if min.abs() < 1e-300 {
            1.0
        } else {
            0.1 * min.abs()
        };
        min -= d;
        max += d;
    }
    // Divided first: finite for any finite min and max.
    let raw = max / 5.0 - min / 5.0;
    let mut e = raw.log10().floor() as i32;
    let f = raw / pow10(e);
    let m = if f <= 1.0 + 1e-9 {
        1.0
    } else if f <= 2.0 + 1e-9 {
        2.0
    } else if f <= 5.0 + 1e-9 {
        5.0
    } else {
        e += 1;
        1.0
    };
    let step = m * pow10(e);
    let (a, b) = ((min / step).floor(), (max / step).ceil());
    let finite = (a * step).is_finite() && (b * step).is_finite();
    if !(step > 0.0 && finite && b > a && b - a <= 20.0) {
        // Beyond decimal ticks (near the ends of f64's range): the data's
        // own ends.
        return Axis {
            lo: min,
            hi: max,
            ticks: vec![(min, format!("{min:e}")), (max, format!("{max:e}"))],
        };
    }
    let ticks: Vec<f64> = (a as i64..=b as i64)
        .map(|i| {
            let t = i as f64 * step;
            if t.abs() < 1e-6 * step {
                0.0
            } else {
                t
            }
        })
        .collect();
    let labels = linear_labels(&ticks, e);
    Axis {
        lo: ticks[0],
        hi: ticks[ticks.len() - 1],
        ticks: ticks.into_iter().zip(labels).collect(),
    }
}

/// Labels for ticks `step = m 10^e` apart: fixed-point with the decimals
/// the step needs, or scientific (`2.5e-7`) with as many mantissa digits
/// when the largest tick is at least `1e5` or below `1e-3`.
fn linear_labels(ticks: &[f64], e: i32) -> Vec<String> {
    let big = ticks.iter().fold(0.0f64, |a, t| a.max(t.abs()));
    let emax = if big > 0.0 {
        big.log10().floor() as i32
    } else {
        0
    };
    if !(-3..5).contains(&emax) {
        let d = (emax - e).clamp(0, 17) as usize;
        ticks
            .iter()
            .map(|&t| {
                if t == 0.0 {
                    "0".to_string()
                } else {
                    format!("{t:.d$e}")
                }
            })
            .collect()
    } else {
        let d = (-e).clamp(0, 17) as usize;
        ticks.iter().map(|&t| format!("{t:.d$}")).collect()
    }
}

/// Ticks at whole decades covering `min..=max` (logarithms), every decade
/// or every k-th so that there are at most about seven.
fn log_axis(min: f64, max: f64) -> Axis {
    let (mut a, mut b) = (min.floor(), max.ceil());
    if a == b {
        a -= 1.0;
        b += 1.0;
    }
    let k = ((b - a) / 6.0).ceil().max(1.0);
    let (a, b) = ((a / k).floor() * k, (b / k).ceil() * k);
    let n = ((b - a) / k).round() as i64;
    let ticks = (0..=n)
        .map(|i| {
            let p = a + i as f64 * k;
            (p, decade_label(p as i32))
        })
        .collect();
    Axis {
        lo: a,
        hi: b,
        ticks,
    }
}

/// `10^p` as `0.001` to `10000`, else as `1e-7`, `1e12`.
fn decade_label(p: i32) -> String {
    match p {
        0..=4 => 10u32.pow(p as u32).to_string(),
        -3..=-1 => format!("{:.*}", (-p) as usize, pow10(p)),
        _ => format!("1e{p}"),
    }
}

/// An RGB image being drawn; coordinates outside it are ignored.
struct Canvas {
    w: i64,
    h: i64,
    px: Vec<u8>,
}

impl Canvas {
    fn new(w: i64, h: i64) -> Self {
        Canvas {
            w,
            h,
            px: vec![255; (3 * w * h) as usize],
        }
    }

    fn put(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if (0..self.w).contains(&x) && (0..self.h).contains(&y) {
            let i = (3 * (y * self.w + x)) as usize;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    fn get(&self, x: i64, y: i64) -> [u8; 3] {
        let i = (3 * (y * self.w + x)) as usize;
        [self.px[i], self.px[i + 1], self.px[i + 2]]
    }

    /// Fills the rectangle with corners `(x0, y0)` and `(x1, y1)`
    /// (inclusive).
    fn rect(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: [u8; 3]) {
        for y in y0.max(0)..=y1.min(self.h - 1) {
            for x in x0.max(0)..=x1.min(self.w - 1) {
                self.put(x, y, c);
            }
        }
    }

    /// A one-pixel rectangle outline.
    fn outline(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: [u8; 3]) {
        self.rect(x0, y0, x1, y0, c);
        self.rect(x0, y1, x1, y1, c);
        self.rect(x0, y0, x0, y1, c);
        self.rect(x1, y0, x1, y1, c);
    }

    /// A 2 x 2 block at `(x, y)` if it lies in `clip` (`[x0, y0, x1, y1]`).
    fn stamp(&mut self, x: i64, y: i64, c: [u8; 3], clip: [i64; 4]) {
        for (xx, yy) in [(x, y), (x + 1, y), (x, y + 1), (x + 1, y + 1)] {
            if (clip[0]..=clip[2]).contains(&xx) && (clip[1]..=clip[3]).contains(&yy) {
                self.put(xx, yy, c);
            }
        }
    }

    /// A 2-pixel-wide line from `a` to `b` (Bresenham's steps, each pixel
    /// a 2 x 2 block, so consecutive blocks touch).
    fn line(&mut self, a: (i64, i64), b: (i64, i64), c: [u8; 3], clip: [i64; 4]) {
        let (dx, dy) = ((b.0 - a.0).abs(), -(b.1 - a.1).abs());
        let (sx, sy) = ((b.0 - a.0).signum(), (b.1 - a.1).signum());
        let (mut x, mut y, mut err) = (a.0, a.1, dx + dy);
        loop {
            self.stamp(x, y, c, clip);
            if x == b.0 && y == b.1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// A lone point: a 3 x 3 block (2 x 2 blocks around it).
    fn dot(&mut self, p: (i64, i64), c: [u8; 3], clip: [i64; 4]) {
        self.stamp(p.0 - 1, p.1 - 1, c, clip);
        self.stamp(p.0, p.1, c, clip);
    }

    /// Draws `t` at scale `s`: left to right with its top-left corner at
    /// `(x, y)`, or, `vertical`, upwards with its bottom-left corner (the
    /// glyphs' tops facing left) at `(x, y)`.
    fn text(&mut self, x: i64, y: i64, t: &str, s: i64, c: [u8; 3], vertical: bool) {
        for (n, ch) in t.chars().enumerate() {
            let rows = glyph(ch);
            let u0 = 6 * s * n as i64;
            for (v, bits) in rows.iter().enumerate() {
                for col in 0..5 {
                    if (bits >> (4 - col)) & 1 == 0 {
                        continue;
                    }
                    let (u, v) = (u0 + col * s, v as i64 * s);
                    for du in 0..s {
                        for dv in 0..s {
                            if vertical {
                                self.put(x + v + dv, y - u - du, c);
                            } else {
                                self.put(x + u + du, y + v + dv, c);
                            }
                        }
                    }
                }
            }
        }
    }

    fn encode(&self) -> Result<Vec<u8>, PlotError> {
        let err = |e: png::EncodingError| PlotError::Encode {
            reason: e.to_string(),
        };
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, self.w as u32, self.h as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().map_err(err)?;
        w.write_image_data(&self.px).map_err(err)?;
        w.finish().map_err(err)?;
        Ok(out)
    }
}

/// The width in pixels of `t` at scale `s` (6 s per character, less the
/// last gap).
fn text_width(t: &str, s: i64) -> i64 {
    let n = t.chars().count() as i64;
    (6 * n - 1).max(0) * s
}

/// The rows of `c`'s 5x7 glyph, top first, bit 4 the leftmost column; `?`
/// for a character without one.
fn glyph(c: char) -> [u8; 7] {
    GLYPHS
        .iter()
        .find(|g| g.0 == c)
        .or_else(|| GLYPHS.iter().find(|g| g.0 == '?'))
        .map_or([0; 7], |g| g.1)
}

/// The built-in font: 5x7 glyphs, rows top first, bit 4 the leftmost
/// column.
const GLYPHS: &[(char, [u8; 7])] = &[
    (' ', [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]),
    ('0', [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E]),
    ('1', [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E]),
    ('2', [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F]),
    ('3', [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E]),
    ('4', [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02]),
    ('5', [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E]),
    ('6', [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E]),
    ('7', [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08]),
    ('8', [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E]),
    ('9', [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C]),
    ('A', [0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11]),
    ('B', [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E]),
    ('C', [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E]),
    ('D', [0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C]),
    ('E', [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F]),
    ('F', [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10]),
    ('G', [0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F]),
    ('H', [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11]),
    ('I', [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E]),
    ('J', [0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C]),
    ('K', [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11]),
    ('L', [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F]),
    ('M', [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11]),
    ('N', [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11]),
    ('O', [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E]),
    ('P', [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10]),
    ('Q', [0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D]),
    ('R', [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11]),
    ('S', [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E]),
    ('T', [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04]),
    ('U', [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E]),
    ('V', [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04]),
    ('W', [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A]),
    ('X', [0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11]),
    ('Y', [0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04]),
    ('Z', [0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F]),
    ('a', [0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F]),
    ('b', [0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E]),
    ('c', [0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E]),
    ('d', [0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F]),
    ('e', [0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E]),
    ('f', [0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08]),
    ('g', [0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E]),
    ('h', [0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11]),
    ('i', [0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E]),
    ('j', [0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C]),
    ('k', [0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12]),
    ('l', [0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E]),
    ('m', [0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11]),
    ('n', [0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11]),
    ('o', [0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E]),
    ('p', [0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10]),
    ('q', [0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01]),
    ('r', [0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10]),
    ('s', [0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E]),
    ('t', [0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06]),
    ('u', [0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D]),
    ('v', [0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04]),
    ('w', [0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A]),
    ('x', [0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11]),
    ('y', [0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E]),
    ('z', [0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F]),
    ('.', [0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C]),
    ('-', [0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00]),
    ('+', [0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00]),
    ('_', [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F]),
    ('(', [0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02]),
    (')', [0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08]),
    ('/', [0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00]),
    (',', [0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08]),
    (':', [0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00]),
    ('=', [0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00]),
    ('[', [0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E]),
    (']', [0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E]),
    ('*', [0x00, 0x04, 0x15, 0x0E, 0x15, 0x04, 0x00]),
    ('^', [0x04, 0x0A, 0x11, 0x00, 0x00, 0x00, 0x00]),
    ('?', [0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04]),
    ('\'', [0x0C, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00]),
    ('|', [0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04]),
    ('<', [0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02]),
    ('>', [0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08]),
    ('%', [0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03]),
    ('!', [0x04, 0x04, 0x04, 0x04, 0x00, 0x00, 0x04]),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::tmp;

    /// Decodes a PNG: width, height and the RGB pixels.
    fn decode(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    struct Image {
        w: usize,
        h: usize,
        px: Vec<u8>,
    }

    impl Image {
        fn new(bytes: &[u8]) -> Self {
            let (w, h, px) = decode(bytes);
            Image {
                w: w as usize,
                h: h as usize,
                px,
            }
        }

        fn at(&self, x: usize, y: usize) -> [u8; 3] {
            let i = 3 * (y * self.w + x);
            [self.px[i], self.px[i + 1], self.px[i + 2]]
        }

        /// The frame's left, top, right and bottom lines: the black rows
        /// and columns that cross more than half the image.
        fn frame(&self) -> [usize; 4] {
            let rows: Vec<usize> = (0..self.h)
                .filter(|&y| (0..self.w).filter(|&x| self.at(x, y) == BLACK).count() > self.w / 2)
                .collect();
            let cols: Vec<usize> = (0..self.w)
                .filter(|&x| (0..self.h).filter(|&y| self.at(x, y) == BLACK).count() > self.h / 2)
                .collect();
            assert_eq!((rows.len(), cols.len()), (2, 2), "{rows:?} {cols:?}");
            [cols[0], rows[0], cols[1], rows[1]]
        }

        /// The rows of column `x` strictly inside the frame that have colour `c`.
        fn rows_of(&self, x: usize, c: [u8; 3]) -> Vec<usize> {
            let [_, top, _, bottom] = self.frame();
            (top + 1..bottom).filter(|&y| self.at(x, y) == c).collect()
        }
    }

    fn mean(v: &[usize]) -> f64 {
        assert!(!v.is_empty());
        v.iter().sum::<usize>() as f64 / v.len() as f64
    }

    #[test]
    fn the_png_decodes_to_the_chart_size() {
        let x = [0.0, 1.0, 2.0];
        let y = [1.0, 3.0, 2.0];
        for (w, h) in [(800, 500), (MIN_WIDTH, MIN_HEIGHT), (1234, 777)] {
            let chart = Chart {
                width: w,
                height: h,
                ..Chart::new("t", "x", "y")
            };
            let (dw, dh, px) = decode(&chart.render(&[Series::new("s", &x, &y)]).unwrap());
            assert_eq!((dw, dh), (w, h));
            assert_eq!(px.len(), 3 * (w * h) as usize);
            // White background in the corners, the series' colour somewhere.
            assert_eq!(px[..3], WHITE);
            assert!(px.chunks(3).any(|p| p == PALETTE[0]));
        }
    }

    #[test]
    fn a_horizontal_line_lies_in_its_row() {
        // The diagonal fixes the y axis at 0..10 (ticks 0, 2, ..., 10).
        let x: Vec<f64> = (0..=10).map(f64::from).collect();
        let flat = vec![7.5; x.len()];
        let chart = Chart::new("rows", "time", "value");
        let bytes = chart
            .render(&[
                Series::new("diag", &[0.0, 10.0], &[0.0, 10.0]),
                Series::new("flat", &x, &flat),
            ])
            .unwrap();
        let img = Image::new(&bytes);
        let [left, top, right, bottom] = img.frame();
        let inset = inset(text_scale(800, 500)) as f64;
        let (y0, y1) = (bottom as f64 - inset, top as f64 + inset);
        let expected = y0 + 0.75 * (y1 - y0);
        let mid = (left + right) / 2;
        let rows = img.rows_of(mid, PALETTE[1]);
        assert!(!rows.is_empty());
        for r in &rows {
            assert!(
                (*r as f64 - expected).abs() <= 2.0,
                "row {r}, expected {expected}"
            );
        }
        // The diagonal passes the middle column at y = 5, half way up.
        let diag = img.rows_of(mid, PALETTE[0]);
        assert!(
            (mean(&diag) - (y0 + 0.5 * (y1 - y0))).abs() <= 2.0,
            "{diag:?}"
        );
        // And the lines are continuous: every column between the ends of
        // the flat line has its colour (the legend sits in a corner away
        // from the data, so it hides none of it).
        let x0 = left + inset as usize + 2;
        let x1 = right - inset as usize - 2;
        let missing: Vec<usize> = (x0..x1)
            .filter(|&x| img.rows_of(x, PALETTE[1]).is_empty())
            .collect();
        // The diagonal crosses it at x = 7.5 (a few columns).
        assert!(missing.len() <= 4, "{missing:?}");
    }

    #[test]
    fn a_log_scale_spaces_decades_equally() {
        let x = [0.0, 1.0, 2.0];
        let ys = [[1.0; 3], [10.0; 3], [100.0; 3]];
        let series: Vec<Series<'_>> = ys.iter().map(|y| Series::new("", &x, y)).collect();
        let rows = |log_y: bool| -> Vec<f64> {
            let chart = Chart {
                log_y,
                ..Chart::new("log", "t", "E")
            };
            let img = Image::new(&chart.render(&series).unwrap());
            let [left, _, right, _] = img.frame();
            (0..3)
                .map(|k| mean(&img.rows_of((left + right) / 2, PALETTE[k])))
                .collect()
        };
        let r = rows(true);
        assert!(r[0] > r[1] && r[1] > r[2], "{r:?}");
        let (d1, d2) = (r[0] - r[1], r[1] - r[2]);
        assert!((d1 - d2).abs() <= 1.0 && d1 > 50.0, "{r:?}");
        // On a linear axis 1 and 10 are nearly together.
        let r = rows(false);
        assert!((r[1] - r[2]) > 8.0 * (r[0] - r[1]), "{r:?}");
        // Zero and negative values are skipped on the log scale.
        let chart = Chart {
            log_y: true,
            ..Chart::new("log", "t", "E")
        };
        assert!(chart
            .render(&[Series::new("a", &x, &[0.0, -1.0, 5.0])])
            .is_ok());
        assert!(matches!(
            chart.render(&[Series::new("a", &x, &[0.0, -1.0, f64::NAN])]),
            Err(PlotError::NoData { log_y: true })
        ));
    }

    #[test]
    fn bad_inputs_are_errors() {
        let chart = Chart::new("t", "x", "y");
        let m = chart
            .render(&[Series::new("kinetic", &[1.0, 2.0, 3.0], &[1.0, 2.0])])
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("\"kinetic\"") && m.contains("3 x values but 2 y values"),
            "{m}"
        );
        let nan = [f64::NAN, f64::INFINITY];
        for series in [
            vec![],
            vec![Series::new("a", &nan, &[1.0, 2.0])],
            vec![Series::new("a", &[1.0, 2.0], &nan)],
            vec![Series::new("a", &[], &[])],
        ] {
            assert!(matches!(
                chart.render(&series),
                Err(PlotError::NoData { log_y: false })
            ));
        }
        let ok = [Series::new("a", &[1.0, 2.0], &[1.0, 2.0])];
        let small = Chart {
            width: 120,
            ..chart.clone()
        };
        let m = small.render(&ok).unwrap_err().to_string();
        assert!(m.contains("width 120") && m.contains("minimum 200"), "{m}");
        let small = Chart {
            height: 0,
            ..chart.clone()
        };
        let m = small.render(&ok).unwrap_err().to_string();
        assert!(m.contains("height 0") && m.contains("minimum 150"), "{m}");
        let big = Chart {
            width: MAX_SIDE + 1,
            ..chart.clone()
        };
        assert!(matches!(big.render(&ok), Err(PlotError::TooLarge { .. })));
    }

    #[test]
    fn non_finite_points_are_skipped_and_lone_points_are_dots() {
        let chart = Chart::new("gaps", "x", "y");
        let x = [0.0, 1.0, 2.0, 3.0, 4.0];
        let y = [1.0, f64::NAN, 2.0, f64::INFINITY, 1.0];
        let img = Image::new(&chart.render(&[Series::new("s", &x, &y)]).unwrap());
        // Three dots, no lines: few pixels of the series' colour outside
        // the legend's sample.
        let n = img.px.chunks(3).filter(|p| *p == PALETTE[0]).count();
        assert!(n > 0 && n < 3 * 9 + 2 * 16 * 2 * 2 + 1, "{n}");
    }

    #[test]
    fn ticks_are_nice_and_labels_short() {
        let a = linear_axis(0.0, 9.7);
        let labels: Vec<&str> = a.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["0", "2", "4", "6", "8", "10"]);
        assert_eq!((a.lo, a.hi), (0.0, 10.0));
        let a = linear_axis(-0.013, 0.021);
        let labels: Vec<&str> = a.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["-0.02", "-0.01", "0.00", "0.01", "0.02", "0.03"]);
        let a = linear_axis(0.0, 1.1e-5);
        let labels: Vec<&str> = a.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["0", "5.0e-6", "1.0e-5", "1.5e-5"]);
        let a = linear_axis(3.0, 3.0);
        assert!(a.lo < 3.0 && a.hi > 3.0 && a.ticks.len() >= 3);
        // Extremes do not loop or panic.
        let a = linear_axis(-f64::MAX, f64::MAX);
        assert!(a.ticks.len() >= 2 && a.lo < a.hi);
        let a = linear_axis(5e-324, 5e-324);
        assert!(a.ticks.len() >= 2 && a.lo < a.hi, "{a:?}");
        let a = log_axis(0.0, 2.0);
        let labels: Vec<&str> = a.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["1", "10", "100"]);
        let a = log_axis(-12.3, 1.5);
        let labels: Vec<&str> = a.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(
            labels,
            ["1e-15", "1e-12", "1e-9", "1e-6", "0.001", "1", "1000"]
        );
    }

    #[test]
    fn every_glyph_is_distinct_and_text_has_its_width() {
        for (i, a) in GLYPHS.iter().enumerate() {
            assert!(a.1.iter().all(|r| r < &32), "{:?}", a.0);
            for b in &GLYPHS[..i] {
                assert_ne!(a.0, b.0);
                assert!(a.1 != b.1, "{:?} and {:?}", a.0, b.0);
            }
        }
        assert_eq!(glyph('\u{3b1}'), glyph('?'));
        let mut c = Canvas::new(40, 10);
        c.text(1, 1, "2e-5", 1, BLACK, false);
        let cols: Vec<i64> = (0..40)
            .filter(|&x| (0..10).any(|y| c.get(x, y) == BLACK))
            .collect();
        assert_eq!(cols[0], 1);
        assert_eq!(*cols.last().unwrap(), text_width("2e-5", 1));
    }

    #[test]
    fn write_is_atomic_and_refuses_bad_input() {
        let dir = tmp("plot");
        let p = dir.join("energy.png");
        let chart = Chart::new("energy", "t", "E");
        let t = [0.0, 1.0];
        chart
            .write(&p, &[Series::new("kin", &t, &[1.0, 0.5])])
            .unwrap();
        let (w, h, _) = decode(&std::fs::read(&p).unwrap());
        assert_eq!((w, h), (800, 500));
        let q = dir.join("bad.png");
        assert!(chart.write(&q, &[Series::new("kin", &t, &[1.0])]).is_err());
        assert!(!q.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
