//! `--plot`: median latency against sequence length per backend, both axes
//! log scale, the Python rows dashed in their Rust counterpart's colour. A
//! thread sweep (`--threads 1,2,3,4`) plots latency against threads instead,
//! one line per backend and length.

use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::prelude::*;

use super::{BenchReport, Row};

/// Ten distinct colours (matplotlib's tab10), given out in turn.
const PALETTE: [RGBColor; 10] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(127, 127, 127),
    RGBColor(148, 103, 189),
];

/// A colour per series, by the order the report lists its backends: each
/// backend its own, whatever it is called; a Python row (`python-NAME`) and
/// a sweep's rows (`NAME 8 tok`) in their backend's colour.
pub(crate) fn colours(series: &[&str]) -> Vec<RGBColor> {
    let base = |s: &str| {
        let s = s.strip_prefix("python-").unwrap_or(s);
        s.split(' ').next().unwrap_or(s).to_string()
    };
    let mut bases: Vec<String> = Vec::new();
    for s in series {
        if !bases.contains(&base(s)) {
            bases.push(base(s));
        }
    }
    series.iter().map(|s| PALETTE[bases.iter().position(|b| *b == base(s)).unwrap_or(0) % PALETTE.len()]).collect()
}

/// Write the plot as SVG to `path`.
pub fn write_svg(report: &BenchReport, path: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(!report.results.is_empty(), "nothing was measured, so there is nothing to plot");
    let sweep = report.is_sweep();
    // In a sweep, x is the thread count and each backend and length is a series.
    let rows: Vec<Row> = if sweep {
        report
            .results
            .iter()
            .map(|r| Row { backend: format!("{} {} tok", r.backend, r.seq_len), seq_len: r.threads.unwrap_or(report.threads), ..r.clone() })
            .collect()
    } else {
        report.results.clone()
    };
    let rows = &rows;
    let mut backends: Vec<&str> = Vec::new();
    for r in rows {
        if !backends.contains(&r.backend.as_str()) {
            backends.push(&r.backend);
        }
    }
    let (xmin, xmax) = rows.iter().fold((f64::MAX, f64::MIN), |(a, b), r| (a.min(r.seq_len as f64), b.max(r.seq_len as f64)));
    let (ymin, ymax) = rows.iter().fold((f64::MAX, f64::MIN), |(a, b), r| (a.min(r.p50_ms), b.max(r.p50_ms)));
    let (xmin, xmax) = if xmin == xmax { (xmin / 2.0, xmax * 2.0) } else { (xmin / 1.2, xmax * 1.2) };
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());

    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let threads = if sweep { report.thread_sweep.iter().map(usize::to_string).collect::<Vec<_>>().join(", ") } else { report.threads.to_string() };
    let caption = format!("all-MiniLM-L6-v2, median latency, {threads} threads — {}", report.machine.cpu);
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        // Headroom above the slowest series, where the legend (upper left) goes.
        .build_cartesian_2d((xmin..xmax).log_scale(), ((ymin / 1.5)..(ymax * 12.0)).log_scale())
        .map_err(|e| err(&e))?;
    // The x axis is labelled at the measured lengths only (log scale's own key
    // points would be 10, 20, ... 100, missing 8 and 128).
    chart
        .configure_mesh()
        .x_desc(if sweep { "threads" } else { "sequence length (tokens)" })
        .y_desc("median latency (ms, log)")
        .disable_x_mesh()
        .x_labels(0)
        .x_label_formatter(&|_| String::new())
        .light_line_style(WHITE.mix(0.0))
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(|e| err(&e))?;
    let mut lens: Vec<usize> = rows.iter().map(|r| r.seq_len).collect();
    lens.sort_unstable();
    lens.dedup();
    let (y_bottom, y_top) = (ymin / 1.5, ymax * 12.0);
    let grid = BLACK.mix(0.15);
    for &len in &lens {
        let x = len as f64;
        chart.draw_series(LineSeries::new([(x, y_bottom), (x, y_top)], grid)).map_err(|e| err(&e))?;
        chart
            .draw_series(std::iter::once(Text::new(format!("{len}"), (x, y_bottom), ("sans-serif", 13).into_font().color(&BLACK))))
            .map_err(|e| err(&e))?;
    }

    let palette = colours(&backends);
    for (backend, c) in backends.into_iter().zip(palette) {
        let mut points: Vec<(f64, f64)> = rows.iter().filter(|r| r.backend == backend).map(|r| (r.seq_len as f64, r.p50_ms)).collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let style = ShapeStyle { color: c.to_rgba(), filled: false, stroke_width: 2 };
        let dashed = backend.starts_with("python-");
        let label = backend.to_string();
        if dashed {
            chart.draw_series(DashedLineSeries::new(points.clone(), 8, 5, style)).map_err(|e| err(&e))?
        } else {
            chart.draw_series(LineSeries::new(points.clone(), style)).map_err(|e| err(&e))?
        }
        .label(label)
        .legend(move |(x, y)| {
            // Dashed in the legend too: two short strokes for the Python rows.
            let (first, gap) = if dashed { (9, 15) } else { (24, 24) };
            EmptyElement::at((x, y)) + PathElement::new(vec![(0, 0), (first, 0)], style) + PathElement::new(vec![(gap, 0), (24, 0)], style)
        });
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, c.filled()))).map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e)).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed bench (assets/bench.json) plots with one x label per measured
    /// length and a dashed legend entry (two strokes) for each Python series.
    #[test]
    fn a_generation_bench_draws_each_backend_in_its_own_colour() {
        let names = ["eager", "eager-int8", "eager-int4", "portable", "portable-nocache", "xnnpack", "xnnpack-nocache", "xnnpack-int8", "xnnpack-8da4w"];
        let mut series = names.to_vec();
        series.push("python-xnnpack-8da4w");
        let given = colours(&series);
        for (i, c) in given[..names.len()].iter().enumerate() {
            assert!(given[..i].iter().all(|d| d != c), "{} shares a colour", names[i]);
        }
        assert_eq!(given[names.len()], given[names.len() - 1], "Python's row in its counterpart's colour");
        // A sweep's rows of one backend share its colour; the next backend gets another.
        let sweep = colours(&["xnnpack 8 tok", "xnnpack 128 tok", "a-program-of-mine 8 tok"]);
        assert_eq!(sweep[0], sweep[1]);
        assert_ne!(sweep[1], sweep[2]);
    }

    #[test]
    fn the_committed_bench_plots_with_its_lengths_and_dashed_python_legend() {
        let json = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/bench.json")).unwrap();
        let report: BenchReport = serde_json::from_str(&json).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.svg");
        write_svg(&report, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let texts: Vec<&str> = svg.split("<text").skip(1).filter_map(|t| t.split('>').nth(1)?.split('<').next()).map(str::trim).collect();
        let mut lens: Vec<String> = report.results.iter().map(|r| r.seq_len.to_string()).collect();
        lens.dedup();
        for len in &lens {
            assert!(texts.contains(&len.as_str()), "no x label {len}: {texts:?}");
        }
        assert!(!texts.iter().any(|t| t.contains('.') && t.parse::<f64>().is_ok()), "a stray axis label: {texts:?}");
        for r in report.results.iter().filter(|r| r.backend.starts_with("python-")) {
            assert!(texts.contains(&r.backend.as_str()), "legend lacks {}", r.backend);
        }
        // Legend strokes (horizontal two-point lines): one of 24 px per Rust series,
        // two of 9 px per Python series.
        let strokes: Vec<i64> = svg
            .split("<polyline")
            .skip(1)
            .filter_map(|p| {
                let pts: Vec<(i64, i64)> = p.split("points=\"").nth(1)?.split('"').next()?.split_whitespace()
                    .filter_map(|xy| { let (x, y) = xy.split_once(',')?; Some((x.parse().ok()?, y.parse().ok()?)) })
                    .collect();
                match pts[..] {
                    [(x1, y1), (x2, y2)] if y1 == y2 => Some(x2 - x1),
                    _ => None,
                }
            })
            .collect();
        let series: std::collections::BTreeSet<&str> = report.results.iter().map(|r| r.backend.as_str()).collect();
        let python = series.iter().filter(|b| b.starts_with("python-")).count();
        assert!(python > 0);
        assert_eq!(strokes.iter().filter(|&&l| l == 9).count(), 2 * python, "dashed legend entries: {strokes:?}");
        assert_eq!(strokes.iter().filter(|&&l| l == 24).count(), series.len() - python, "solid legend entries: {strokes:?}");
    }
}
