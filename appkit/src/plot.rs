//! Line charts as PNG files, for time series such as the kinetic and
//! magnetic energies of a run against time, drawn with `plotters` (its
//! bitmap backend, pure Rust) and text set in DejaVu Sans embedded by the
//! `dejavu` crate: no font files, no system libraries. It is the plotting
//! stack of the whole workspace (xtask's benchmark charts use the same).
//!
//! A [`Chart`] (title, axis labels, size in pixels, optional log-scale y
//! axis) renders any number of [`Series`] into an RGB image: a white
//! background, a framed plot area with labelled ticks and light grid
//! lines, each series a 2-pixel line in its colour from [`PALETTE`]
//! (series `k` gets `PALETTE[k % PALETTE.len()]`), and a legend naming the
//! series (those with a non-empty name) in the corner of the plot area that
//! holds the fewest points. The x axis spans the data; the y axis spans it
//! with a twentieth of its range added at each end, or, on a log scale,
//! whole decades around it.
//!
//! Points whose x or y is not finite are skipped, and on a log scale so are
//! points with y <= 0; a skipped point breaks the line (its neighbours are
//! not joined), and a point with no drawable neighbour is drawn as a dot.
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
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::ops::Range;
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

const GRID: RGBColor = RGBColor(225, 225, 225);

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
    /// Drawing failed (the plotting library's message).
    #[error("cannot draw the chart: {reason}")]
    Draw {
        /// The message.
        reason: String,
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
    /// A logarithmic y axis (points with y <= 0 are skipped).
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

/// A drawn chart: the RGB pixels, and where the plot area and its y axis
/// ended up (read by the tests, which check pixels against them).
#[cfg_attr(not(test), allow(dead_code))]
struct Drawn {
    rgb: Vec<u8>,
    /// Pixel columns and rows of the plot area.
    area: (Range<i32>, Range<i32>),
    /// The y axis' value range (in its own units, not its logarithm).
    y: Range<f64>,
}

fn draw_error(e: impl std::fmt::Display) -> PlotError {
    PlotError::Draw {
        reason: e.to_string(),
    }
}

/// The runs of consecutive drawable points of every series.
type Runs = Vec<Vec<Vec<(f64, f64)>>>;

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
        let d = self.draw(series)?;
        encode(self.width, self.height, &d.rgb)
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

    /// The runs of drawable points, and the ranges of the axes.
    fn layout(&self, series: &[Series<'_>]) -> Result<(Runs, Range<f64>, Range<f64>), PlotError> {
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
        let mut runs: Runs = Vec::with_capacity(series.len());
        let (mut xr, mut yr) = (
            [f64::INFINITY, f64::NEG_INFINITY],
            [f64::INFINITY, f64::NEG_INFINITY],
        );
        for s in series {
            let mut mine: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
            for (&x, &y) in s.x.iter().zip(s.y) {
                if self.drawable(x, y) {
                    xr = [xr[0].min(x), xr[1].max(x)];
                    yr = [yr[0].min(y), yr[1].max(y)];
                    mine.last_mut().expect("a run").push((x, y));
                } else if !mine.last().expect("a run").is_empty() {
                    mine.push(Vec::new());
                }
            }
            mine.retain(|r| !r.is_empty());
            runs.push(mine);
        }
        if xr[0] > xr[1] {
            return Err(PlotError::NoData { log_y: self.log_y });
        }
        let x = if xr[0] < xr[1] {
            xr[0]..xr[1]
        } else {
            let w = (xr[0].abs() * 0.1).max(0.5);
            xr[0] - w..xr[0] + w
        };
        let y = if self.log_y {
            let (lo, hi) = (yr[0].log10().floor(), yr[1].log10().ceil());
            let hi = if hi > lo { hi } else { lo + 1.0 };
            10f64.powf(lo)..10f64.powf(hi)
        } else if yr[0] < yr[1] {
            let pad = (yr[1] - yr[0]) / 20.0;
            yr[0] - pad..yr[1] + pad
        } else {
            let w = (yr[0].abs() * 0.1).max(0.5);
            yr[0] - w..yr[0] + w
        };
        Ok((runs, x, y))
    }

    /// The legend's corner: the one whose quarter of the plot holds the
    /// fewest points.
    fn legend_corner(&self, runs: &Runs, x: &Range<f64>, y: &Range<f64>) -> SeriesLabelPosition {
        let fy = |v: f64| {
            if self.log_y {
                (v.log10() - y.start.log10()) / (y.end.log10() - y.start.log10())
            } else {
                (v - y.start) / (y.end - y.start)
            }
        };
        let mut count = [0usize; 4]; // upper right, upper left, lower right, lower left
        for (px, py) in runs.iter().flatten().flatten() {
            let u = (px - x.start) / (x.end - x.start);
            let v = fy(*py);
            let (right, left, up, down) = (u > 0.55, u < 0.45, v > 0.55, v < 0.45);
            count[0] += usize::from(right && up);
            count[1] += usize::from(left && up);
            count[2] += usize::from(right && down);
            count[3] += usize::from(left && down);
        }
        let best = (0..4).min_by_key(|&i| count[i]).unwrap_or(0);
        [
            SeriesLabelPosition::UpperRight,
            SeriesLabelPosition::UpperLeft,
            SeriesLabelPosition::LowerRight,
            SeriesLabelPosition::LowerLeft,
        ][best]
            .clone()
    }

    fn draw(&self, series: &[Series<'_>]) -> Result<Drawn, PlotError> {
        let (runs, xr, yr) = self.layout(series)?;
        register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| draw_error("the embedded DejaVu Sans font is invalid"))?;
        let (w, h) = (self.width, self.height);
        let side = w.min(h);
        let text = (side / 40).max(11);
        let title = (side / 28).max(14);
        let corner = self.legend_corner(&runs, &xr, &yr);
        let mut rgb = vec![255u8; 3 * w as usize * h as usize];
        let area;
        {
            let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
            root.fill(&WHITE).map_err(draw_error)?;
            let mut b = ChartBuilder::on(&root);
            b.caption(&self.title, ("sans-serif", title))
                .margin(side / 40 + 4)
                .x_label_area_size(text * 3)
                .y_label_area_size(text * 5);
            macro_rules! body {
                ($chart:expr) => {{
                    let mut c = $chart;
                    c.configure_mesh()
                        .x_desc(&self.x_label)
                        .y_desc(&self.y_label)
                        .label_style(("sans-serif", text))
                        .axis_desc_style(("sans-serif", text))
                        .light_line_style(WHITE)
                        .bold_line_style(GRID)
                        .draw()
                        .map_err(draw_error)?;
                    for (k, (s, mine)) in series.iter().zip(&runs).enumerate() {
                        let [r, g, bl] = PALETTE[k % PALETTE.len()];
                        let colour = RGBColor(r, g, bl);
                        let mut labelled = s.name.is_empty();
                        for run in mine {
                            let anno = if run.len() == 1 {
                                c.draw_series(std::iter::once(Circle::new(
                                    run[0],
                                    2,
                                    colour.filled(),
                                )))
                                .map_err(draw_error)?
                            } else {
                                c.draw_series(LineSeries::new(
                                    run.iter().copied(),
                                    colour.stroke_width(2),
                                ))
                                .map_err(draw_error)?
                            };
                            if !labelled {
                                anno.label(s.name).legend(move |(x, y)| {
                                    PathElement::new(
                                        vec![(x, y), (x + 20, y)],
                                        colour.stroke_width(2),
                                    )
                                });
                                labelled = true;
                            }
                        }
                    }
                    if series.iter().any(|s| !s.name.is_empty()) {
                        c.configure_series_labels()
                            .position(corner)
                            .label_font(("sans-serif", text))
                            .background_style(WHITE.mix(0.85))
                            .border_style(BLACK)
                            .draw()
                            .map_err(draw_error)?;
                    }
                    c.plotting_area().get_pixel_range()
                }};
            }
            area = if self.log_y {
                body!(b
                    .build_cartesian_2d(xr.clone(), yr.clone().log_scale())
                    .map_err(draw_error)?)
            } else {
                body!(b
                    .build_cartesian_2d(xr.clone(), yr.clone())
                    .map_err(draw_error)?)
            };
            root.present().map_err(draw_error)?;
        }
        Ok(Drawn { rgb, area, y: yr })
    }
}

/// The PNG file of an RGB image.
fn encode(width: u32, height: u32, rgb: &[u8]) -> Result<Vec<u8>, PlotError> {
    let err = |e: png::EncodingError| PlotError::Encode {
        reason: e.to_string(),
    };
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, width, height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().map_err(err)?;
        w.write_image_data(rgb).map_err(err)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::tmp;

    fn decode(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let dec = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut r = dec.read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size()];
        let info = r.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        assert_eq!(info.color_type, png::ColorType::Rgb);
        (info.width, info.height, buf)
    }

    /// The rows of column `x` that hold `colour`.
    fn rows_of(d: &Drawn, width: u32, x: i32, colour: [u8; 3]) -> Vec<i32> {
        let h = d.rgb.len() as i32 / (3 * width as i32);
        (0..h)
            .filter(|&y| {
                let i = 3 * (y as usize * width as usize + x as usize);
                d.rgb[i..i + 3] == colour
            })
            .collect()
    }

    fn mean(v: &[i32]) -> f64 {
        assert!(!v.is_empty());
        v.iter().map(|&r| f64::from(r)).sum::<f64>() / v.len() as f64
    }

    /// The pixel row of value `v` on a linear y axis.
    fn row(d: &Drawn, v: f64) -> f64 {
        let (_, rows) = &d.area;
        let t = (v - d.y.start) / (d.y.end - d.y.start);
        f64::from(rows.end - 1) - t * f64::from(rows.end - 1 - rows.start)
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
            // White background in the corner, the series' colour somewhere.
            assert_eq!(px[..3], [255, 255, 255]);
            assert!(px.chunks(3).any(|p| p == PALETTE[0]));
        }
    }

    #[test]
    fn a_horizontal_line_lies_in_its_row() {
        let x: Vec<f64> = (0..=10).map(f64::from).collect();
        let flat = vec![7.5; x.len()];
        let chart = Chart::new("rows", "time", "value");
        let series = [
            Series::new("diag", &[0.0, 10.0], &[0.0, 10.0]),
            Series::new("flat", &x, &flat),
        ];
        let d = chart.draw(&series).unwrap();
        // The y axis spans the data and a twentieth of it at each end.
        assert_eq!((d.y.start, d.y.end), (-0.5, 10.5));
        let (cols, _) = d.area.clone();
        let mid = (cols.start + cols.end) / 2;
        let rows = rows_of(&d, chart.width, mid, PALETTE[1]);
        assert!(!rows.is_empty());
        for r in &rows {
            assert!(
                (f64::from(*r) - row(&d, 7.5)).abs() <= 2.0,
                "row {r}, expected {}",
                row(&d, 7.5)
            );
        }
        // The diagonal passes the middle column at y = 5.
        let diag = rows_of(&d, chart.width, mid, PALETTE[0]);
        assert!((mean(&diag) - row(&d, 5.0)).abs() <= 2.0, "{diag:?}");
        // The flat line is continuous from end to end but where the
        // diagonal crosses it (x = 7.5): the legend sits in a corner away
        // from it.
        let missing: Vec<i32> = (cols.start + 2..cols.end - 2)
            .filter(|&x| rows_of(&d, chart.width, x, PALETTE[1]).is_empty())
            .collect();
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
            let d = chart.draw(&series).unwrap();
            let (cols, _) = d.area.clone();
            (0..3)
                .map(|k| {
                    mean(&rows_of(
                        &d,
                        chart.width,
                        (cols.start + cols.end) / 2,
                        PALETTE[k],
                    ))
                })
                .collect()
        };
        let r = rows(true);
        assert!(r[0] > r[1] && r[1] > r[2], "{r:?}");
        let (d1, d2) = (r[0] - r[1], r[1] - r[2]);
        assert!((d1 - d2).abs() <= 1.5 && d1 > 50.0, "{r:?}");
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
        // One point: an axis of some width around it, not an empty range.
        assert!(chart.render(&[Series::new("a", &[3.0], &[3.0])]).is_ok());
    }

    #[test]
    fn non_finite_points_are_skipped_and_lone_points_are_dots() {
        let chart = Chart::new("gaps", "x", "y");
        let x = [0.0, 1.0, 2.0, 3.0, 4.0];
        let y = [1.0, f64::NAN, 2.0, f64::INFINITY, 1.0];
        let (runs, _, _) = chart.layout(&[Series::new("s", &x, &y)]).unwrap();
        assert_eq!(
            runs[0],
            [vec![(0.0, 1.0)], vec![(2.0, 2.0)], vec![(4.0, 1.0)]]
        );
        // Three dots and the legend's sample, no lines.
        let d = chart.draw(&[Series::new("s", &x, &y)]).unwrap();
        let n = d.rgb.chunks(3).filter(|p| *p == PALETTE[0]).count();
        assert!(n > 0 && n < 3 * 25 + 2 * 22, "{n}");
        // Joined: many more.
        let d = chart
            .draw(&[Series::new("s", &x, &[1.0, 1.5, 2.0, 1.5, 1.0])])
            .unwrap();
        let joined = d.rgb.chunks(3).filter(|p| *p == PALETTE[0]).count();
        assert!(joined > 4 * n, "{joined} against {n}");
    }

    #[test]
    fn the_legend_avoids_the_data() {
        let chart = Chart::new("legend", "x", "y");
        // Data in the upper right quarter only: not that corner.
        let x: Vec<f64> = (0..20).map(f64::from).collect();
        let y: Vec<f64> = x
            .iter()
            .map(|v| if *v > 12.0 { 10.0 } else { 0.0 })
            .collect();
        let (runs, xr, yr) = chart.layout(&[Series::new("a", &x, &y)]).unwrap();
        let c = chart.legend_corner(&runs, &xr, &yr);
        assert!(!matches!(c, SeriesLabelPosition::UpperRight), "{c:?}");
    }

    /// Writes the chart of the module's example to `APPKIT_PLOT_SAMPLE`
    /// when that is set (to look at it); otherwise only renders it.
    #[test]
    fn the_example_chart_renders() {
        let t: Vec<f64> = (0..200).map(|i| 0.05 * i as f64).collect();
        let kinetic: Vec<f64> = t.iter().map(|t| 50.0 * (-t).exp() + 1.0).collect();
        let magnetic: Vec<f64> = t.iter().map(|t| 1e-3 * (0.8 * t).exp()).collect();
        let chart = Chart {
            log_y: true,
            ..Chart::new("energies", "time", "energy")
        };
        let series = [
            Series::new("kinetic", &t, &kinetic),
            Series::new("magnetic", &t, &magnetic),
        ];
        match std::env::var_os("APPKIT_PLOT_SAMPLE") {
            Some(p) => chart.write(Path::new(&p), &series).unwrap(),
            None => assert!(chart.render(&series).unwrap().len() > 1000),
        }
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
