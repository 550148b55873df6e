//! `--plot` for text generation: two panels against the prompt length (log
//! scale): time to first token (ms, log) and decode tokens/s (log). One
//! series per backend; programs without a KV cache in a lighter shade of their
//! program's colour, the Python rows dashed. The decode panel also draws each
//! backend's ceiling, the measured read bandwidth over its weight bytes per
//! token, as a thin dotted line in its colour.

use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{GenRow, GenerationReport};

/// A backend's program and whether it is that program's window variant
/// (`NAME-nocache`, as the export names it), Python's row (`python-NAME`) as its counterpart.
fn program_of(backend: &str) -> (&str, bool) {
    let base = backend.strip_prefix("python-").unwrap_or(backend);
    match base.strip_suffix("-nocache") {
        Some(p) => (p, true),
        None => (base, false),
    }
}

/// Each program its colour (in the report's order), its window variant a lighter shade, Python's row dashed.
fn style(backend: &str, programs: &[&str]) -> (ShapeStyle, bool) {
    let (program, nocache) = program_of(backend);
    let palette = crate::bench::plot::colours(programs);
    let c = programs.iter().position(|p| *p == program).map_or(palette[0], |i| palette[i]);
    let color = if nocache { c.mix(0.45) } else { c.to_rgba() };
    (ShapeStyle { color, filled: false, stroke_width: 2 }, backend.starts_with("python-"))
}

fn panel(
    area: &DrawingArea<SVGBackend, Shift>,
    rows: &[GenRow],
    title: &str,
    y_desc: &str,
    value: impl Fn(&GenRow) -> f64,
    ceilings: &[(String, f64)],
    path: &Path,
) -> anyhow::Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    let points = |r: &&GenRow| value(r) > 0.0 && value(r).is_finite();
    let (xmin, xmax) = rows.iter().fold((f64::MAX, f64::MIN), |(a, b), r| (a.min(r.prompt_len as f64), b.max(r.prompt_len as f64)));
    let (ymin, ymax) = rows.iter().filter(points).fold((f64::MAX, f64::MIN), |(a, b), r| (a.min(value(r)), b.max(value(r))));
    anyhow::ensure!(ymin <= ymax, "no positive values to plot for {title}");
    let ymax = ceilings.iter().map(|c| c.1).filter(|c| c.is_finite()).fold(ymax, f64::max);
    let (xmin, xmax) = if xmin == xmax { (xmin / 2.0, xmax * 2.0) } else { (xmin / 1.2, xmax * 1.2) };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((xmin..xmax).log_scale(), ((ymin / 1.5)..(ymax * 8.0)).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("prompt length (tokens)")
        .y_desc(y_desc)
        .disable_x_mesh()
        .x_labels(0)
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(|e| err(&e))?;
    let mut lens: Vec<usize> = rows.iter().map(|r| r.prompt_len).collect();
    lens.sort_unstable();
    lens.dedup();
    for &len in &lens {
        let x = len as f64;
        chart.draw_series(LineSeries::new([(x, ymin / 1.5), (x, ymax * 8.0)], BLACK.mix(0.15))).map_err(|e| err(&e))?;
        chart
            .draw_series(std::iter::once(Text::new(format!("{len}"), (x, ymin / 1.5), ("sans-serif", 13).into_font().color(&BLACK))))
            .map_err(|e| err(&e))?;
    }
    let mut backends: Vec<&str> = Vec::new();
    for r in rows {
        if !backends.contains(&r.backend.as_str()) {
            backends.push(&r.backend);
        }
    }
    let mut programs: Vec<&str> = Vec::new();
    for b in &backends {
        if !programs.contains(&program_of(b).0) {
            programs.push(program_of(b).0);
        }
    }
    for backend in backends {
        let mut pts: Vec<(f64, f64)> = rows.iter().filter(|r| r.backend == backend).filter(points).map(|r| (r.prompt_len as f64, value(r))).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (s, dashed) = style(backend, &programs);
        if dashed {
            chart.draw_series(DashedLineSeries::new(pts.clone(), 8, 5, s)).map_err(|e| err(&e))?
        } else {
            chart.draw_series(LineSeries::new(pts.clone(), s)).map_err(|e| err(&e))?
        }
        .label(backend.to_string())
        .legend(move |(x, y)| {
            let (first, gap) = if dashed { (9, 15) } else { (24, 24) };
            EmptyElement::at((x, y)) + PathElement::new(vec![(0, 0), (first, 0)], s) + PathElement::new(vec![(gap, 0), (24, 0)], s)
        });
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, s.filled()))).map_err(|e| err(&e))?;
    }
    for (backend, ceiling) in ceilings.iter().filter(|c| c.1.is_finite() && c.1 > 0.0) {
        let (s, _) = style(backend.split(", ").next().unwrap_or(backend), &programs);
        let line = ShapeStyle { stroke_width: 1, ..s };
        chart.draw_series(DashedLineSeries::new([(xmin, *ceiling), (xmax, *ceiling)], 2, 4, line)).map_err(|e| err(&e))?;
        chart
            .draw_series(std::iter::once(Text::new(format!("{backend} ceiling"), (xmin * 1.05, *ceiling * 1.08), ("sans-serif", 10).into_font().color(&s.color))))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 11))
        .draw()
        .map_err(|e| err(&e))?;
    Ok(())
}

/// Each runlens backend's decode ceiling: read bandwidth / weight bytes per token.
/// Backends whose ceilings are within 2% of each other (the same weights, stored
/// alike) share one line, labelled with all their names.
fn ceilings(report: &GenerationReport) -> Vec<(String, f64)> {
    let Some(gbps) = report.machine.memory_read_gbps else { return Vec::new() };
    let mut out: Vec<(Vec<String>, f64)> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for r in report.results.iter().filter(|r| !r.backend.starts_with("python-")) {
        let Some(bytes) = r.weight_bytes_per_token.filter(|b| *b > 0) else { continue };
        if !seen.insert(r.backend.as_str()) {
            continue;
        }
        let ceiling = gbps * 1e9 / bytes as f64;
        // Weights that fit in the last-level cache are read from it: the line is no wall for them.
        let name = if r.weights_in_llc == Some(true) { format!("{} (in LLC)", r.backend) } else { r.backend.clone() };
        match out.iter_mut().find(|(_, c)| (ceiling / *c - 1.0).abs() < 0.02) {
            Some((names, _)) => names.push(name),
            None => out.push((vec![name], ceiling)),
        }
    }
    out.into_iter().map(|(names, c)| (names.join(", "), c)).collect()
}

/// Write the plot as SVG to `path`.
pub fn write_svg(report: &GenerationReport, path: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(!report.results.is_empty(), "nothing was measured, so there is nothing to plot");
    let root = SVGBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("drawing {}: {e}", path.display()))?;
    let caption = format!("{}, {} new tokens, {} threads ({}) — {}", report.model, report.gen_tokens, report.threads, super::weights_short(&report.weights), report.machine.cpu);
    let root = root.titled(&caption, ("sans-serif", 18)).map_err(|e| anyhow!("drawing {}: {e}", path.display()))?;
    let (left, right) = root.split_horizontally(600);
    panel(&left, &report.results, "time to first token", "median TTFT (ms, log)", |r| r.ttft_ms, &[], path)?;
    let title = match report.machine.memory_read_gbps {
        Some(g) => format!("decode speed; dotted: {g:.1} GB/s over the weight bytes a token"),
        None => "decode speed".to_string(),
    };
    panel(&right, &report.results, &title, "median decode tokens/s (log)", |r| r.decode_tokens_per_s, &ceilings(report), path)?;
    root.present().map_err(|e| anyhow!("drawing {}: {e}", path.display())).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_panels_label_every_series_and_length() {
        let rows: Vec<GenRow> = ["eager", "xnnpack", "xnnpack-nocache", "python-xnnpack"]
            .iter()
            .flat_map(|b| [8usize, 32].map(|n| super::super::row(b, None, n, 32, &[n as f64 / 4.0], &[100.0 / n as f64]).unwrap()))
            .collect();
        let report = GenerationReport {
            machine: crate::bench::machine::Machine::probe(None),
            model: "tiny-gpt2".into(),
            weights: super::super::weights_note("random"),
            threads: 2,
            command: "runlens bench".into(),
            gen_tokens: 32,
            warmup: 1,
            iters: 3,
            max_seconds: 3.0,
            python_iters: Some(3),
            interrupted: false,
            results: rows,
            loads: vec![],
            skipped: vec![],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gen.svg");
        write_svg(&report, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let texts: Vec<&str> = svg.split("<text").skip(1).filter_map(|t| t.split('>').nth(1)?.split('<').next()).map(str::trim).collect();
        for text in ["time to first token", "decode speed", "xnnpack-nocache", "python-xnnpack", "8", "32"] {
            assert!(texts.contains(&text), "{text} missing: {texts:?}");
        }
        assert_eq!(texts.iter().filter(|t| **t == "python-xnnpack").count(), 2, "a legend entry in each panel");
        assert_eq!(texts.iter().filter(|t| **t == "32").count(), 2, "the lengths label both x axes");
        assert!(!texts.iter().any(|t| t.contains("ceiling")), "no bandwidth measured: no ceilings");
    }

    #[test]
    fn the_decode_panel_draws_each_backends_ceiling() {
        let mut rows: Vec<GenRow> =
            ["eager", "xnnpack", "python-xnnpack"].iter().map(|b| super::super::row(b, None, 8, 32, &[2.0], &[100.0]).unwrap()).collect();
        let bytes = std::collections::BTreeMap::from([("eager".to_string(), 500_000_000u64), ("xnnpack".to_string(), 250_000_000)]);
        super::super::fill_bandwidth(&mut rows, &bytes, Some(20.0), None);
        let mut machine = crate::bench::machine::Machine::probe(None);
        machine.memory_read_gbps = Some(20.0);
        let report = GenerationReport {
            machine,
            model: "m".into(),
            weights: String::new(),
            threads: 2,
            command: String::new(),
            gen_tokens: 32,
            warmup: 0,
            iters: 1,
            max_seconds: 1.0,
            python_iters: None,
            interrupted: false,
            results: rows,
            loads: vec![],
            skipped: vec![],
        };
        assert_eq!(ceilings(&report), vec![("eager".to_string(), 40.0), ("xnnpack".to_string(), 80.0)]);
        // The same bytes a token: one line for both.
        let mut same = report.clone();
        for r in same.results.iter_mut() {
            r.weight_bytes_per_token = Some(500_000_000);
        }
        assert_eq!(ceilings(&same), vec![("eager, xnnpack".to_string(), 40.0)]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gen.svg");
        write_svg(&report, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("eager ceiling") && svg.contains("xnnpack ceiling"), "{svg}");
        assert!(!svg.contains("python-xnnpack ceiling"));
    }
}
