//! The bench plot, `heat3d.png`: plotters' bitmap backend (pure Rust, PNG
//! through the `image` crate) with text drawn by `ab_glyph` from DejaVu Sans
//! embedded by the `dejavu` crate, so no system font library or font file
//! is needed.
//!
//! Four panels: (1) weak scaling, the per-phase median step time stacked
//! per rank count and mode; (2) weak efficiency t(1)/t(P) per mode;
//! (3) the order sweep, step and sweep time over the copy floor, with the
//! FD-2 goal; (4) the sweep's GFLOP/s as a percentage of the FMA peak
//! measured in the same run, with the 50 % ceiling of unfused arithmetic. [`draw`] returns the panels' titles, axes and series
//! names, which the bench also writes to `heat3d.json`.

use crate::bench::heat3d::{OrderRun, WeakRun, GOAL_RATIO, MODES};
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use serde_json::{json, Value};
use std::path::Path;

/// Phase names and colours of the stacked bars.
const PHASES: [(&str, RGBColor); 5] = [
    ("post", RGBColor(31, 119, 180)),
    ("interior", RGBColor(255, 127, 14)),
    ("wait", RGBColor(214, 39, 40)),
    ("shell", RGBColor(44, 160, 44)),
    ("update", RGBColor(148, 103, 189)),
];
/// Line colours of the two modes.
const MODE_COLORS: [RGBColor; 2] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40)];

/// A line of the order panel: name, colour, value of a run.
type Series = (&'static str, RGBColor, fn(&OrderRun) -> f64);

fn phase(t: &crate::util::Timings, i: usize) -> f64 {
    [t.post, t.interior, t.wait, t.shell, t.update][i]
}

/// Draws the plot to `path` (1500 x 560 PNG) and returns the panels' labels.
pub fn draw(path: &Path, title: &str, weak: &[WeakRun], orders: &[OrderRun]) -> Result<Vec<Value>> {
    register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| anyhow!("the embedded DejaVu Sans font is invalid"))?;
    let root = BitMapBackend::new(path, (2000, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(title, ("sans-serif", 22))?;
    let panels = body.split_evenly((1, 4));
    let mut labels = vec![];

    // (1) Stacked per-phase bars: groups of ranks, one bar per mode.
    let bars: Vec<(f64, &WeakRun)> = weak
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let group = i / MODES.len();
            let m = MODES.iter().position(|&x| x == w.mode).unwrap_or(0);
            (group as f64 * 2.6 + m as f64 * 1.1 + 0.3, w)
        })
        .collect();
    let x_max = bars.last().map_or(1.0, |b| b.0 + 1.3);
    let y_max = weak
        .iter()
        .map(|w| {
            (0..5)
                .map(|i| phase(&w.timings, i))
                .sum::<f64>()
                .max(w.timings.step)
        })
        .fold(0.0, f64::max)
        * 1e3
        * 1.35;
    let mut c = ChartBuilder::on(&panels[0])
        .caption(
            "weak scaling: median step (ms) by phase",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(46)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max.max(1e-3))?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_label_formatter(&|_| String::new())
        .y_desc("ms per step")
        .label_style(("sans-serif", 13))
        .draw()?;
    for (i, (name, color)) in PHASES.iter().enumerate() {
        let rects: Vec<_> = bars
            .iter()
            .map(|&(x, w)| {
                let lo: f64 = (0..i).map(|k| phase(&w.timings, k)).sum::<f64>() * 1e3;
                let hi = lo + phase(&w.timings, i) * 1e3;
                Rectangle::new([(x, lo), (x + 1.0, hi)], color.filled())
            })
            .collect();
        let color = *color;
        c.draw_series(rects)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    // The median of the whole step (not the sum of the phase medians).
    c.draw_series(bars.iter().map(|&(x, w)| {
        let y = w.timings.step * 1e3;
        PathElement::new(vec![(x - 0.1, y), (x + 1.1, y)], BLACK.stroke_width(3))
    }))?
    .label("median step")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], BLACK.stroke_width(3)));
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    for &(x, w) in &bars {
        let (px, py) = c.backend_coord(&(x + 0.5, 0.0));
        let short = if w.mode == "blocking" { "blk" } else { "ovl" };
        let style = ("sans-serif", 13).into_font().color(&BLACK).pos(
            plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            ),
        );
        root.draw_text(short, &style, (px, py + 4))?;
        if w.mode == MODES[0] {
            let (gx, _) = c.backend_coord(&(x + 1.05, 0.0));
            root.draw_text(&format!("{} rank(s)", w.ranks), &style, (gx, py + 22))?;
        }
    }
    labels.push(json!({
        "panel": 1,
        "title": "weak scaling: median step (ms) by phase",
        "x": "ranks (grid stacks the bricks), bar per mode: blk = blocking, ovl = overlap",
        "y": "ms per step (stacked phases of the slowest rank's medians)",
        "series": PHASES.iter().map(|p| p.0).chain(["median step (black bar)"]).collect::<Vec<_>>(),
    }));

    // (2) Weak efficiency.
    let r_max = weak.iter().map(|w| w.ranks).max().unwrap_or(1) as i32;
    let mut c = ChartBuilder::on(&panels[1])
        .caption("weak efficiency t(1)/t(P)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(46)
        .y_label_area_size(56)
        .build_cartesian_2d(0..r_max + 1, 0.0..1.2)?;
    c.configure_mesh()
        .x_desc("ranks")
        .y_desc("efficiency")
        .label_style(("sans-serif", 13))
        .draw()?;
    for (m, mode) in MODES.iter().enumerate() {
        let pts: Vec<(i32, f64)> = weak
            .iter()
            .filter(|w| w.mode == *mode)
            .map(|w| (w.ranks as i32, w.efficiency))
            .collect();
        let color = MODE_COLORS[m];
        c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(*mode)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        // Hollow large circles for blocking, small dots for overlap: the two
        // often coincide.
        let (size, fill) = if m == 0 { (7, false) } else { (4, true) };
        c.draw_series(pts.iter().map(|&p| {
            Circle::new(
                p,
                size,
                ShapeStyle {
                    color: color.to_rgba(),
                    filled: fill,
                    stroke_width: 2,
                },
            )
        }))?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    labels.push(json!({
        "panel": 2,
        "title": "weak efficiency t(1)/t(P)",
        "x": "ranks",
        "y": "efficiency",
        "series": MODES,
    }));

    // (3) Order sweep against the copy floor.
    let top = orders
        .iter()
        .map(|o| o.ratio.max(o.sweep_ratio))
        .fold(GOAL_RATIO, f64::max)
        * 1.15;
    let mut c = ChartBuilder::on(&panels[2])
        .caption("order sweep: time / copy floor", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(46)
        .y_label_area_size(56)
        .build_cartesian_2d(0..22i32, 0.0..top)?;
    c.configure_mesh()
        .x_desc("FD order")
        .y_desc("ratio to the copy floor (padded array)")
        .label_style(("sans-serif", 13))
        .draw()?;
    let series: [Series; 2] = [
        ("step / floor", MODE_COLORS[0], |o| o.ratio),
        ("sweep / floor", RGBColor(44, 160, 44), |o| o.sweep_ratio),
    ];
    for (name, color, f) in series {
        let pts: Vec<(i32, f64)> = orders.iter().map(|o| (o.order as i32, f(o))).collect();
        c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        c.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    let goal = MODE_COLORS[1];
    c.draw_series(LineSeries::new(
        vec![(0, GOAL_RATIO), (22, GOAL_RATIO)],
        goal.stroke_width(1),
    ))?
    .label(format!("goal FD-2 <= {GOAL_RATIO}x"))
    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], goal.stroke_width(1)));
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    labels.push(json!({
        "panel": 3,
        "title": "order sweep: time / copy floor",
        "x": "FD order",
        "y": "ratio to the copy floor over the same padded array",
        "series": ["step / floor", "sweep / floor", format!("goal FD-2 <= {GOAL_RATIO}x")],
    }));

    // (4) The sweep's arithmetic rate against the core's FMA peak; without
    // fused multiply-adds (the kernels never fuse, for the bits) half the
    // peak is the ceiling.
    let mut c = ChartBuilder::on(&panels[3])
        .caption("order sweep: % of the FMA peak", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(46)
        .y_label_area_size(56)
        .build_cartesian_2d(0..22i32, 0.0..100.0)?;
    c.configure_mesh()
        .x_desc("FD order")
        .y_desc("sweep GFLOP/s / FMA peak (%)")
        .label_style(("sans-serif", 13))
        .draw()?;
    let color = MODE_COLORS[0];
    // An order whose rate is above the probe's peak has no share to draw.
    let pts: Vec<(i32, f64)> = orders
        .iter()
        .filter_map(|o| Some((o.order as i32, 100.0 * o.peak_fraction?)))
        .collect();
    c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
        .label("sweep")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
    c.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    let ceiling = MODE_COLORS[1];
    c.draw_series(LineSeries::new(
        vec![(0, 50.0), (22, 50.0)],
        ceiling.stroke_width(1),
    ))?
    .label("ceiling without FMA (50 %)")
    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], ceiling.stroke_width(1)));
    // The same operations with their data in the L1 (AVX-512 only).
    let l1: Vec<(i32, f64)> = orders
        .iter()
        .filter_map(|o| {
            let (c, f) = (o.l1_terms_gflops?, o.peak_fraction?);
            // `peak_fraction / gflops` is one over the run's FMA peak.
            (o.gflops > 0.0).then(|| (o.order as i32, 100.0 * c * f / o.gflops))
        })
        .collect();
    if !l1.is_empty() {
        let color = RGBColor(44, 160, 44);
        c.draw_series(LineSeries::new(l1.clone(), color.stroke_width(2)))?
            .label("its operations in the L1")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        c.draw_series(
            l1.iter()
                .map(|&p| TriangleMarker::new(p, 5, color.filled())),
        )?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    labels.push(json!({
        "panel": 4,
        "title": "order sweep: % of the FMA peak",
        "x": "FD order",
        "y": "sweep GFLOP/s over the FMA peak measured in the same run (%)",
        "series": ["sweep", "ceiling without FMA (50 %)", "its operations in the L1"],
    }));

    root.present()?;
    Ok(labels)
}
