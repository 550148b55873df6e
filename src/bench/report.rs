//! The bench's outputs: a table for humans, one JSON object, a CSV.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use super::{BenchReport, Row, WrapperOverhead, SHIM_LOOP};

/// The human table: one line per row, then loads and notes (wrapper overhead, heat warnings).
pub fn table(report: &BenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "machine: {}", report.machine.summary());
    let threads = if report.is_sweep() { format!("{} (sweep)", report.thread_sweep.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")) } else { report.threads.to_string() };
    let _ = writeln!(out, "threads: {}, warm-ups {}, up to {} runs or {} s per cell{}", threads, report.warmup, report.iters, report.max_seconds, if report.interrupted { " (INTERRUPTED: partial results)" } else { "" });
    // A thread sweep gets a threads column (llama-bench's `t`), rows by length then threads.
    let sweep = report.is_sweep();
    let thr = |t: Option<usize>| if sweep { format!("{:>4} ", t.map_or("-".to_string(), |t| t.to_string())) } else { String::new() };
    let _ = writeln!(out, "{:<22} {}{:>4} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>8}", "backend", if sweep { " thr " } else { "" }, "seq", "runs", "min ms", "p50 ms", "p90 ms", "p99 ms", "max ms", "mean ms", "tok/s", "GFLOP/s", "vs py");
    for r in &report.results {
        let ratio = r.ratio_vs_python.map(|x| format!("{x:.2}x")).unwrap_or_else(|| "-".to_string());
        let _ = writeln!(
            out,
            "{:<22} {}{:>4} {:>5} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.0} {:>7.2} {:>8}",
            r.backend, thr(r.threads), r.seq_len, r.runs, r.min_ms, r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms, r.mean_ms, r.tokens_per_s, r.gflops, ratio
        );
    }
    let _ = writeln!(out, "loads:");
    for l in &report.loads {
        let _ = writeln!(out, "  {:<22} {:>9.1} ms  rss {:>7.1} MB", l.backend, l.load_ms, l.rss_mb);
    }
    let _ = write!(out, "{}", notes(&report.results, &report.wrapper_overhead));
    out
}

/// What the measurements themselves say beyond the table: the wrapper's own
/// cost per call, and every cell during which the clock dropped or the
/// firmware flagged throttling (its numbers are suspect; let the Pi cool).
pub fn notes(rows: &[Row], wrapper: &[WrapperOverhead]) -> String {
    let mut out = String::new();
    // The wrapper's cost per call, measured inside each call (see WrapperOverhead).
    for w in wrapper {
        let _ = writeln!(
            out,
            "wrapper overhead at {} tokens (Rust call - shim's inner time, {} calls): median {:.1} us, p90 {:.1} us; alternated with {SHIM_LOOP}: median difference {:.1} us (noisier)",
            w.seq_len, w.calls, w.median_us, w.p90_us, w.paired_median_us
        );
    }
    for r in rows {
        if let (Some(start), Some(end)) = (&r.heat_start, &r.heat_end) {
            if let Some(why) = crate::heat::drift_warning(start, end) {
                let _ = writeln!(out, "WARNING: {} at {} tokens: {why} during the measurement", r.backend, r.seq_len);
            }
        }
    }
    match rows.iter().find_map(|r| r.heat_start.filter(|h| !h.is_unavailable())) {
        Some(h) => {
            let _ = writeln!(out, "heat at the first cell: {}", h.short());
        }
        None => out.push_str("heat: temperature, clock and throttling unavailable on this machine\n"),
    }
    out
}

pub fn write_json(report: &BenchReport, path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(report)? + "\n").with_context(|| format!("writing {}", path.display()))
}

/// The CSV: one line per JSON row, with that backend's load time and RSS and
/// the machine description repeated in the last columns.
pub fn csv(report: &BenchReport) -> String {
    let mut out = String::new();
    out.push_str("backend,seq_len,runs,min_ms,p50_ms,p90_ms,p99_ms,max_ms,mean_ms,tokens_per_s,gflops,ratio_vs_python,load_ms,rss_mb,cpu,cores,os,torch,executorch,threads\n");
    let m = &report.machine;
    let v = |k: &str| m.versions.get(k).cloned().unwrap_or_default();
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    for r in &report.results {
        let load_name = super::measured_backend(&r.backend);
        let load = report.loads.iter().find(|l| l.backend == load_name);
        let _ = writeln!(
            out,
            "{},{},{},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{:.3},{:.4},{},{},{},{},{},{},{},{},{}",
            r.backend,
            r.seq_len,
            r.runs,
            r.min_ms,
            r.p50_ms,
            r.p90_ms,
            r.p99_ms,
            r.max_ms,
            r.mean_ms,
            r.tokens_per_s,
            r.gflops,
            r.ratio_vs_python.map(|x| format!("{x:.4}")).unwrap_or_default(),
            load.map(|l| format!("{:.3}", l.load_ms)).unwrap_or_default(),
            load.map(|l| format!("{:.1}", l.rss_mb)).unwrap_or_default(),
            quote(&m.cpu),
            m.cores,
            quote(&m.os),
            v("torch"),
            v("executorch"),
            report.threads
        );
    }
    out
}

pub fn write_csv(report: &BenchReport, path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, csv(report)).with_context(|| format!("writing {}", path.display()))
}
