//! `--plot`: median latency against sequence length per backend, both axes
//! log scale, the Python rows dashed in their Rust counterpart's colour.

use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::prelude::*;

use super::BenchReport;

fn colour(backend: &str) -> RGBColor {
    let base = backend.strip_prefix("python-").unwrap_or(backend);
    match base {
        "eager" => RGBColor(214, 39, 40),
        "portable" => RGBColor(31, 119, 180),
        "xnnpack" => RGBColor(44, 160, 44),
        "xnnpack-int8" => RGBColor(255, 127, 14),
        "xnnpack-static" => RGBColor(140, 86, 75),
        _ => RGBColor(148, 103, 189),
    }
}

/// Write the plot as SVG to `path`.
pub fn write_svg(report: &BenchReport, path: &Path) -> anyhow::Result<()> {
    let rows = &report.results;
    anyhow::ensure!(!rows.is_empty(), "nothing was measured, so there is nothing to plot");
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
    let caption = format!("all-MiniLM-L6-v2, median latency, {} threads — {}", report.threads, report.machine.cpu);
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        // Headroom above the slowest series, where the legend (upper left) goes.
        .build_cartesian_2d((xmin..xmax).log_scale(), ((ymin / 1.5)..(ymax * 12.0)).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("sequence length (tokens)")
        .y_desc("median latency (ms, log)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(|e| err(&e))?;

    for backend in backends {
        let mut points: Vec<(f64, f64)> = rows.iter().filter(|r| r.backend == backend).map(|r| (r.seq_len as f64, r.p50_ms)).collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let c = colour(backend);
        let style = ShapeStyle { color: c.to_rgba(), filled: false, stroke_width: 2 };
        let dashed = backend.starts_with("python-");
        let label = backend.to_string();
        if dashed {
            chart.draw_series(DashedLineSeries::new(points.clone(), 8, 5, style)).map_err(|e| err(&e))?
        } else {
            chart.draw_series(LineSeries::new(points.clone(), style)).map_err(|e| err(&e))?
        }
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
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
