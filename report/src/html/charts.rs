//! The report's SVG charts, drawn with plotters' SVG backend. No
//! background is painted and text and axes use plain black, which the page's
//! stylesheet turns to the text colour, so one SVG serves the light, dark
//! and print styles; the data colours are chosen to read on both.

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use rrstore_store::label_stats::LabelPoint;

use super::data::ArenaMap;
use crate::ReportError;

/// One point of a kernel-time series: x, and the repetitions' spread (ms).
#[derive(Clone, Debug)]
pub struct TimePoint {
    pub x: f64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

/// The runs of one (image, device, backend).
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<TimePoint>,
}

/// A cell of the output matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    NotRun,
    /// Same output as the recording (or as its own image's run).
    Same,
    /// A different output: the n-th distinct one of this recording.
    Differs(usize),
    /// Crashed, timed out or failed: no output.
    Failed,
}

pub const SAME: RGBColor = RGBColor(0x2e, 0x9d, 0x4f);
pub const FAILED: RGBColor = RGBColor(0x61, 0x61, 0x61);
const DIFFERS: [RGBColor; 4] = [
    RGBColor(0xd3, 0x2f, 0x2f),
    RGBColor(0xef, 0x8a, 0x1a),
    RGBColor(0x8e, 0x44, 0xad),
    RGBColor(0xc2, 0x18, 0x5b),
];
/// Series colours, distinguishable on white and on near-black.
const SERIES: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xd4),
    RGBColor(0xe6, 0x6a, 0x00),
    RGBColor(0x2e, 0x9d, 0x4f),
    RGBColor(0xc6, 0x28, 0x28),
    RGBColor(0x8e, 0x44, 0xad),
    RGBColor(0x00, 0x97, 0xa7),
];
const GRID: RGBColor = RGBColor(0x99, 0x99, 0x99);

pub fn differs_color(n: usize) -> RGBColor {
    DIFFERS[n % DIFFERS.len()]
}

pub fn series_color(n: usize) -> RGBColor {
    SERIES[n % SERIES.len()]
}

fn err(chart: &str) -> impl Fn(String) -> ReportError + '_ {
    move |message| ReportError::Chart {
        chart: chart.to_string(),
        message,
    }
}

fn txt(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn font(size: u32) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(&BLACK)
}

/// A chart in the report's frame: its margin, `caption` and room for
/// the axis labels.
fn frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: &str,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.margin(12)
        .caption(caption, font(15))
        .x_label_area_size(40)
        .y_label_area_size(64);
    b
}

/// The report's axes and grid on a mesh: label sizes, a faint grid, black
/// axes (which the stylesheet recolours).
fn house_style<'m, 'a, 'b, X: Ranged, Y: Ranged, DB: DrawingBackend>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB> {
    mesh.label_style(font(11))
        .axis_desc_style(font(12))
        .bold_line_style(GRID.mix(0.35))
        .light_line_style(TRANSPARENT)
        .axis_style(BLACK)
}

fn draw_svg(
    name: &str,
    size: (u32, u32),
    f: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), String>,
) -> Result<String, ReportError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        f(&root).map_err(err(name))?;
        root.present().map_err(txt).map_err(err(name))?;
    }
    Ok(svg)
}

/// Kernel time (ms) per replay, one series per (image, device, backend):
/// the median of the repetitions as a point on a line, their min..max as a
/// bar. Series names are long (device strings), so the legend is the
/// page's table under the chart, with the same colours.
pub fn kernel_times(kernel: &str, series: &[Series]) -> Result<String, ReportError> {
    let n = series.iter().map(|s| s.points.len()).sum::<usize>().max(1);
    let top = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.max))
        .fold(0.0f64, f64::max);
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };
    draw_svg(kernel, (760, 300), |root| {
        let mut chart = frame(root, &format!("kernel time: {kernel}"))
            .build_cartesian_2d(0.5f64..n as f64 + 0.5, 0f64..top)
            .map_err(txt)?;
        house_style(
            chart
                .configure_mesh()
                .x_desc("replay, oldest to newest")
                .y_desc("kernel time (ms)")
                .x_labels(n.min(12))
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| format!("{y:.3}")),
        )
        .draw()
        .map_err(txt)?;
        for (i, s) in series.iter().enumerate() {
            let c = series_color(i);
            chart
                .draw_series(s.points.iter().map(|p| {
                    ErrorBar::new_vertical(p.x, p.min, p.median, p.max, c.stroke_width(2), 8)
                }))
                .map_err(txt)?;
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().map(|p| (p.x, p.median)),
                    c.stroke_width(2),
                ))
                .map_err(txt)?;
            chart
                .draw_series(
                    s.points
                        .iter()
                        .map(|p| Circle::new((p.x, p.median), 4, c.filled())),
                )
                .map_err(txt)?;
        }
        Ok(())
    })
}

/// Recordings (rows) by images (columns, oldest first): which output each
/// run gave; `first` marks the first column that changed the row's output.
pub fn output_matrix(
    rows: &[String],
    cols: &[String],
    cells: &[Vec<Cell>],
    first: &[Option<usize>],
) -> Result<String, ReportError> {
    let (left, top, cw, ch) = (230i32, 110i32, 56i32, 30i32);
    let w = (left + cw * cols.len() as i32 + 20).max(420);
    let h = top + ch * rows.len() as i32 + 56;
    draw_svg("output changes", (w as u32, h as u32), |root| {
        let d = |e: Result<(), DrawingAreaErrorKind<std::io::Error>>| e.map_err(txt);
        for (j, c) in cols.iter().enumerate() {
            let x = left + cw * j as i32 + cw / 2;
            // Rotated column headers: image labels are long.
            let style = font(11)
                .transform(FontTransform::Rotate270)
                .pos(Pos::new(HPos::Left, VPos::Center));
            d(root.draw(&Text::new(c.clone(), (x, top - 6), style)))?;
        }
        for (i, r) in rows.iter().enumerate() {
            let y = top + ch * i as i32;
            let style = font(11).pos(Pos::new(HPos::Right, VPos::Center));
            d(root.draw(&Text::new(r.clone(), (left - 8, y + ch / 2), style)))?;
            for (j, cell) in cells[i].iter().enumerate() {
                let x = left + cw * j as i32;
                let rect = [(x + 2, y + 2), (x + cw - 2, y + ch - 2)];
                let (fill, mark) = match cell {
                    Cell::NotRun => (None, ""),
                    Cell::Same => (Some(SAME), "="),
                    Cell::Differs(n) => (Some(differs_color(*n)), "≠"),
                    Cell::Failed => (Some(FAILED), "✗"),
                };
                match fill {
                    Some(c) => d(root.draw(&Rectangle::new(rect, c.filled())))?,
                    None => d(root.draw(&Rectangle::new(rect, GRID.mix(0.5).stroke_width(1))))?,
                }
                if !mark.is_empty() {
                    let style = ("sans-serif", 14)
                        .into_font()
                        .color(&WHITE)
                        .pos(Pos::new(HPos::Center, VPos::Center));
                    d(root.draw(&Text::new(mark, (x + cw / 2, y + ch / 2), style)))?;
                }
                if first.get(i).copied().flatten() == Some(j) {
                    d(root.draw(&Rectangle::new(
                        [(x, y), (x + cw, y + ch)],
                        BLACK.stroke_width(3),
                    )))?;
                }
            }
        }
        let y = top + ch * rows.len() as i32 + 18;
        let legend: [(Option<RGBColor>, &str); 5] = [
            (Some(SAME), "= recorded output"),
            (Some(differs_color(0)), "≠ other output"),
            (Some(FAILED), "✗ no output"),
            (None, "not run"),
            (None, "▭ first change"),
        ];
        let mut x = 10;
        for (c, t) in legend {
            match (c, t.starts_with('▭')) {
                (Some(c), _) => {
                    d(root.draw(&Rectangle::new([(x, y - 7), (x + 14, y + 7)], c.filled())))?
                }
                (None, true) => d(root.draw(&Rectangle::new(
                    [(x, y - 7), (x + 14, y + 7)],
                    BLACK.stroke_width(3),
                )))?,
                (None, false) => d(root.draw(&Rectangle::new(
                    [(x, y - 7), (x + 14, y + 7)],
                    GRID.stroke_width(1),
                )))?,
            }
            let t = t.trim_start_matches('▭').trim();
            let style = font(11).pos(Pos::new(HPos::Left, VPos::Center));
            d(root.draw(&Text::new(t.to_string(), (x + 20, y), style)))?;
            x += 28 + 7 * t.chars().count() as i32;
        }
        Ok(())
    })
}

/// The arena as a bar: argument buffers as labelled segments, differing
/// ranges marked in red (at least 2 px wide, so a 4-byte range shows).
pub fn arena_map(m: &ArenaMap) -> Result<String, ReportError> {
    let (w, left, right) = (760i32, 20i32, 20i32);
    let span = (w - left - right) as f64;
    let size = m.arena_size.max(1) as f64;
    let px = |off: u64| left + (off as f64 / size * span).round() as i32;
    draw_svg("arena map", (w as u32, 150), |root| {
        let d = |e: Result<(), DrawingAreaErrorKind<std::io::Error>>| e.map_err(txt);
        let (y0, y1) = (40, 90);
        d(root.draw(&Rectangle::new(
            [(left, y0), (w - right, y1)],
            GRID.mix(0.15).filled(),
        )))?;
        for (k, (arg, a, b)) in m.buffers.iter().enumerate() {
            let (x0, x1) = (px(*a), px(*b));
            d(root.draw(&Rectangle::new(
                [(x0, y0), (x1, y1)],
                series_color(k).mix(0.30).filled(),
            )))?;
            d(root.draw(&Rectangle::new([(x0, y0), (x1, y1)], GRID.stroke_width(1))))?;
            let style = font(11).pos(Pos::new(HPos::Left, VPos::Bottom));
            d(root.draw(&Text::new(
                format!("arg {arg} @ +{a:#x}"),
                (x0 + 3, y0 - 4),
                style,
            )))?;
        }
        for r in &m.largest {
            let x0 = px(r.offset);
            let x1 = px(r.offset + r.span).max(x0 + 2);
            d(root.draw(&Rectangle::new(
                [(x0, y0 - 2), (x1, y1 + 2)],
                differs_color(0).filled(),
            )))?;
        }
        for (k, r) in m.largest.iter().take(3).enumerate() {
            let x = px(r.offset);
            let inside = match r.arg {
                Some(a) => format!("arg {} +{:#x}", a.index, r.offset - a.offset),
                None => "below every argument".into(),
            };
            let style = font(11).pos(Pos::new(HPos::Left, VPos::Top));
            let tx = x.min(w - 230);
            d(root.draw(&Text::new(
                format!(
                    "{} B differ in {} B at +{:#x} ({inside})",
                    r.differing_bytes, r.span, r.offset
                ),
                (tx, y1 + 6 + 14 * k as i32),
                style,
            )))?;
        }
        let style = font(11).pos(Pos::new(HPos::Right, VPos::Top));
        d(root.draw(&Text::new(
            format!("{} B", m.arena_size),
            (w - right, 8),
            style,
        )))?;
        let style = font(11).pos(Pos::new(HPos::Left, VPos::Top));
        d(root.draw(&Text::new("0".to_string(), (left, 8), style)))
    })
}

/// Stored (compressed, deduplicated) bytes of each label's recordings over
/// import time, and their logical size as hollow points.
pub fn label_growth(points: &[LabelPoint]) -> Result<String, ReportError> {
    let mut labels: Vec<&str> = points.iter().map(|p| p.label.as_str()).collect();
    labels.dedup();
    let (t0, t1) = points
        .iter()
        .fold((i64::MAX, i64::MIN), |(a, b), p| (a.min(p.at), b.max(p.at)));
    let (t0, t1) = if t0 >= t1 {
        (t0 - 3600, t0 + 3600)
    } else {
        (t0, t1)
    };
    let pad = ((t1 - t0) / 20).max(1);
    let max = points
        .iter()
        .map(|p| p.logical_bytes.max(p.stored_bytes))
        .max()
        .unwrap_or(1);
    let (unit, div) = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        .into_iter()
        .find(|(_, d)| max >= 4 * d)
        .unwrap_or(("B", 1));
    let top = (max as f64 / div as f64 * 1.3).max(1.0);
    draw_svg("store size by label", (760, 300), |root| {
        let mut chart = frame(root, "store size by label (solid: stored, hollow: logical)")
            .build_cartesian_2d((t0 - pad) as f64..(t1 + pad) as f64, 0f64..top)
            .map_err(txt)?;
        house_style(
            chart
                .configure_mesh()
                .x_desc("import time (UTC)")
                .y_desc(unit)
                .x_labels(5)
                .x_label_formatter(&|t| {
                    crate::time::iso_datetime(*t as i64).replace('T', " ")[..16].to_string()
                })
                .y_label_formatter(&|y| format!("{y:.0}")),
        )
        .draw()
        .map_err(txt)?;
        for (i, l) in labels.iter().enumerate() {
            let c = series_color(i);
            let pts: Vec<&LabelPoint> = points.iter().filter(|p| p.label == *l).collect();
            let kib = |b: u64| b as f64 / div as f64;
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.at as f64, kib(p.stored_bytes))),
                    c.stroke_width(2),
                ))
                .map_err(txt)?
                .label(l.to_string())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
            chart
                .draw_series(
                    pts.iter()
                        .map(|p| Circle::new((p.at as f64, kib(p.stored_bytes)), 4, c.filled())),
                )
                .map_err(txt)?;
            chart
                .draw_series(pts.iter().map(|p| {
                    Circle::new((p.at as f64, kib(p.logical_bytes)), 5, c.stroke_width(2))
                }))
                .map_err(txt)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(GRID.mix(0.12))
            .border_style(GRID)
            .label_font(font(11))
            .draw()
            .map_err(txt)
    })
}

/// Dedup and compression ratio of each label (its latest point), as bars.
pub fn label_ratios(latest: &[&LabelPoint]) -> Result<String, ReportError> {
    let n = latest.len().max(1);
    let top = latest
        .iter()
        .map(|p| p.dedup_ratio().max(p.compression_ratio()))
        .fold(1.0f64, f64::max)
        * 1.25;
    // Two segments per label: its dedup bar, then its compression bar.
    let name = |j: usize| {
        latest.get(j / 2).map_or(String::new(), |p| {
            format!("{}: {}", p.label, ["dedup", "compression"][j % 2])
        })
    };
    draw_svg("ratios by label", (760, 260), |root| {
        let mut chart = frame(
            root,
            "dedup (logical / unique) and compression (unique / stored) by label",
        )
        .build_cartesian_2d((0..2 * n).into_segmented(), 0f64..top)
        .map_err(txt)?;
        house_style(
            chart
                .configure_mesh()
                .disable_x_mesh()
                .y_desc("ratio (x)")
                .x_labels(2 * n)
                .x_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(j) => name(*j),
                    _ => String::new(),
                })
                .y_label_formatter(&|y| format!("{y:.1}")),
        )
        .draw()
        .map_err(txt)?;
        chart
            .draw_series(latest.iter().enumerate().flat_map(|(i, p)| {
                [(0, p.dedup_ratio()), (1, p.compression_ratio())].map(|(k, v)| {
                    let j = 2 * i + k;
                    let mut bar = Rectangle::new(
                        [
                            (SegmentValue::Exact(j), 0.0),
                            (SegmentValue::Exact(j + 1), v),
                        ],
                        series_color(k).filled(),
                    );
                    bar.set_margin(0, 0, 10, 10);
                    bar
                })
            }))
            .map_err(txt)?;
        Ok(())
    })
}
