//! `runlens eval --plot`: two bar charts side by side, one bar per column
//! (the reference on top): the top-1 agreement with the reference, and the
//! mean KL on a log scale; each bar in its runtime's colour, its value beside
//! it. Columns that failed are left out.

use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::report::{ColumnReport, EvalReport};

/// matplotlib's tab10 red, blue and orange, as `bench --plot` gives them out.
const EAGER: RGBColor = RGBColor(214, 39, 40);
const EXECUTORCH: RGBColor = RGBColor(31, 119, 180);
const LLAMA_CPP: RGBColor = RGBColor(255, 127, 14);

/// A column's colour, by its runtime's title (as the report writes it).
fn colour(runtime: &str) -> RGBColor {
    match runtime {
        "PyTorch eager" => EAGER,
        "ExecuTorch" => EXECUTORCH,
        "llama.cpp" => LLAMA_CPP,
        _ => RGBColor(127, 127, 127),
    }
}

/// A column's label: its name and bits.
fn label(c: &ColumnReport) -> String {
    let bits = c.bits.map(|b| format!("{b}-bit"));
    let about: Vec<String> = bits.into_iter().chain(c.reference.then(|| "reference".to_string())).collect();
    if about.is_empty() {
        c.name.clone()
    } else {
        format!("{} ({})", c.name, about.join(", "))
    }
}

/// Write the plot of `report` as SVG to `path`.
pub fn write_svg(report: &EvalReport, path: &Path) -> anyhow::Result<()> {
    // Bottom to top: the reference ends up on top.
    let rows: Vec<&ColumnReport> = report.columns.iter().filter(|c| c.error.is_none()).rev().collect();
    anyhow::ensure!(!rows.is_empty(), "no column was measured, so there is nothing to plot");
    let n = rows.len() as i32;
    let labels: Vec<String> = rows.iter().map(|c| label(c)).collect();
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    let height = 150 + 34 * rows.len() as u32;
    let root = SVGBackend::new(path, (1100, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let title = format!(
        "{} ({} weights) against {}: {} prompts × {} tokens — red PyTorch eager, blue ExecuTorch, orange llama.cpp",
        report.model, report.weights, report.reference, report.prompts, report.gen_tokens
    );
    let root = root.titled(&title, ("sans-serif", 15)).map_err(|e| err(&e))?;
    let (left, right) = root.split_horizontally(560);
    let name_of = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
        SegmentValue::Exact(_) | SegmentValue::Last => String::new(),
    };
    // Values beside their bars, centred on the bar's height.
    let font = ("sans-serif", 12).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));

    // Top-1 agreement, 0 to 1.
    let mut top1 = ChartBuilder::on(&left)
        .caption("top-1 agreement (teacher-forced)", ("sans-serif", 14))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(190)
        .build_cartesian_2d(0f64..1.12, (0..n - 1).into_segmented())
        .map_err(|e| err(&e))?;
    top1.configure_mesh()
        .disable_y_mesh()
        .y_labels(rows.len())
        .y_label_formatter(&name_of)
        .x_desc("fraction of positions where its likeliest token is the reference's")
        .x_label_formatter(&|x| if *x <= 1.0 { format!("{x:.1}") } else { String::new() })
        .draw()
        .map_err(|e| err(&e))?;
    for (i, c) in rows.iter().enumerate() {
        let i = i as i32;
        let value = c.top1_agreement.unwrap_or(0.0);
        let mut bar = Rectangle::new([(0.0, SegmentValue::Exact(i)), (value, SegmentValue::Exact(i + 1))], colour(&c.runtime).filled());
        bar.set_margin(5, 5, 0, 0);
        top1.draw_series(std::iter::once(bar)).map_err(|e| err(&e))?;
        let text = c.top1_agreement.map_or("–".to_string(), |v| format!("{v:.3}"));
        top1.draw_series(std::iter::once(Text::new(text, (value + 0.01, SegmentValue::CenterOf(i)), font.clone()))).map_err(|e| err(&e))?;
    }

    // Mean KL, log scale; the reference (0) and any exact 0 get a word instead of a bar.
    let positive: Vec<f64> = rows.iter().filter_map(|c| c.mean_kl).filter(|&v| v > 0.0).collect();
    let (lo, hi) = match (positive.iter().copied().reduce(f64::min), positive.iter().copied().reduce(f64::max)) {
        (Some(lo), Some(hi)) => (lo / 5.0, hi * 30.0),
        _ => (1e-12, 1.0),
    };
    let mut kl = ChartBuilder::on(&right)
        .caption("mean KL(p_ref || p_col), nats, log scale", ("sans-serif", 14))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(10)
        .build_cartesian_2d((lo..hi).log_scale(), (0..n - 1).into_segmented())
        .map_err(|e| err(&e))?;
    kl.configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .y_label_formatter(&|_| String::new())
        .x_desc("per position, over every prompt's teacher-forced positions")
        .x_label_formatter(&|x| format!("{x:.0e}"))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, c) in rows.iter().enumerate() {
        let i = i as i32;
        let text = match c.mean_kl {
            _ if c.reference => "reference".to_string(),
            Some(v) if v > 0.0 => {
                let mut bar = Rectangle::new([(lo, SegmentValue::Exact(i)), (v, SegmentValue::Exact(i + 1))], colour(&c.runtime).filled());
                bar.set_margin(5, 5, 0, 0);
                kl.draw_series(std::iter::once(bar)).map_err(|e| err(&e))?;
                format!("{v:.2e}")
            }
            Some(v) => format!("{v}"),
            None => "–".to_string(),
        };
        let at = c.mean_kl.filter(|&v| v > 0.0 && !c.reference).unwrap_or(lo);
        kl.draw_series(std::iter::once(Text::new(text, (at * 1.15, SegmentValue::CenterOf(i)), font.clone()))).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e)).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
