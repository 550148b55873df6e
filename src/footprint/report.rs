//! The rows of `runlens footprint`, its table, and the comparison it prints.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::{probe, Setup, Stack};
use crate::task::Embedding;

/// One stack's costs. Sizes in MB (10^6 bytes), memory in MiB, times in ms.
#[derive(Debug, Clone, Serialize)]
pub struct StackRow {
    pub name: String,
    pub title: String,
    pub command: String,
    pub ok: bool,
    pub error: Option<String>,
    /// The program file and every shared library the process mapped (after its first run).
    pub disk_mb: f64,
    pub libraries: usize,
    /// Whether libtorch (libtorch_cpu, libc10) was among them.
    pub libtorch_loaded: bool,
    /// VmRSS once tokenizer and model are loaded (imports included), before any run.
    pub rss_after_load_mb: f64,
    /// VmRSS after the first run.
    pub rss_after_run_mb: f64,
    /// VmHWM after the first run: the most it was resident.
    pub peak_rss_mb: f64,
    /// Process start to loaded (runtime start, imports, tokenizer, model).
    pub load_ms: f64,
    /// The first run of the text (tokenizing included), as seen by the parent.
    pub first_run_ms: f64,
    /// Process start to the first result: `load_ms + first_run_ms`.
    pub start_to_first_result_ms: f64,
    /// The first result against Python's reference embedding of the text, when reference.json has it.
    pub cosine_vs_reference: Option<f64>,
}

impl StackRow {
    fn failed(stack: &Stack, error: String) -> StackRow {
        StackRow {
            name: stack.name.to_string(),
            title: stack.title.to_string(),
            command: stack.command.display(),
            ok: false,
            error: Some(error),
            disk_mb: 0.0,
            libraries: 0,
            libtorch_loaded: false,
            rss_after_load_mb: 0.0,
            rss_after_run_mb: 0.0,
            peak_rss_mb: 0.0,
            load_ms: 0.0,
            first_run_ms: 0.0,
            start_to_first_result_ms: 0.0,
            cosine_vs_reference: None,
        }
    }
}

/// The JSON of `runlens footprint --json`.
#[derive(Debug, Serialize)]
pub struct FootprintReport {
    pub text: String,
    pub threads: usize,
    /// The command prefix the runlens rows ran under (an emulator), if any.
    pub wrapper: Option<String>,
    /// Each figure is the median of this many starts.
    pub repeat: usize,
    pub rows: Vec<StackRow>,
    /// The lite binary's resident memory after its first run over the full
    /// binary's, both running XNNPACK (the measured comparison).
    pub lite_vs_full_xnnpack_rss: Option<f64>,
}

/// Measure every stack `repeat` times (medians), one process at a time.
pub fn measure(setup: &Setup, reference: Option<&Embedding>, repeat: usize, timeout: Duration, mut progress: impl FnMut(&str)) -> FootprintReport {
    let mut rows = Vec::new();
    for stack in setup.stacks() {
        progress(stack.title);
        let mut runs = Vec::new();
        let mut error = None;
        for _ in 0..repeat.max(1) {
            match probe::measure(&stack.command, timeout) {
                Ok(m) => runs.push(m),
                Err(e) => {
                    error = Some(format!("{e:#}"));
                    break;
                }
            }
        }
        let row = match (error, runs.last()) {
            (Some(e), _) => StackRow::failed(&stack, e),
            (None, None) => StackRow::failed(&stack, "not measured".to_string()),
            (None, Some(last)) => {
                let med = |f: &dyn Fn(&probe::Measured) -> f64| median(runs.iter().map(f).collect());
                StackRow {
                    name: stack.name.to_string(),
                    title: stack.title.to_string(),
                    command: stack.command.display(),
                    ok: true,
                    error: None,
                    disk_mb: last.mapped.disk_mb(),
                    libraries: last.mapped.libraries.len(),
                    libtorch_loaded: last.mapped.has_libtorch(),
                    rss_after_load_mb: med(&|m| m.after_load.rss_mb),
                    rss_after_run_mb: med(&|m| m.after_run.rss_mb),
                    peak_rss_mb: med(&|m| m.after_run.peak_mb),
                    load_ms: med(&|m| m.load_ms),
                    first_run_ms: med(&|m| m.first_run_ms),
                    start_to_first_result_ms: med(&|m| m.start_to_first_result_ms()),
                    cosine_vs_reference: reference.map(|r| Embedding(last.result.embedding.clone()).cosine(r)),
                }
            }
        };
        rows.push(row);
    }
    let rss = |name: &str| rows.iter().find(|r| r.name == name && r.ok).map(|r| r.rss_after_run_mb);
    let lite_vs_full_xnnpack_rss = match (rss("runlens-lite-xnnpack"), rss("runlens-xnnpack")) {
        (Some(lite), Some(full)) if full > 0.0 => Some(lite / full),
        _ => None,
    };
    FootprintReport {
        text: setup.text.clone(),
        threads: setup.threads,
        wrapper: (!setup.wrapper.is_empty()).then(|| setup.wrapper.join(" ")),
        repeat: repeat.max(1),
        rows,
        lite_vs_full_xnnpack_rss,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

impl FootprintReport {
    /// The table for people, then the comparison the issue asks for.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "text {:?}, {} threads{}{}", self.text, self.threads,
            self.wrapper.as_ref().map(|w| format!(", runlens rows under `{w}`")).unwrap_or_default(),
            if self.repeat > 1 { format!(", medians of {} starts", self.repeat) } else { String::new() });
        let _ = writeln!(
            out,
            "{:<38} {:>9} {:>5} {:>8} {:>10} {:>9} {:>9} {:>9} {:>12}  cos vs ref",
            "stack", "disk MB", "libs", "libtorch", "RSS load", "RSS run", "load ms", "run ms", "start→result"
        );
        for r in &self.rows {
            if !r.ok {
                let _ = writeln!(out, "{:<38} error: {}", r.title, r.error.as_deref().unwrap_or("?"));
                continue;
            }
            let _ = writeln!(
                out,
                "{:<38} {:>9.1} {:>5} {:>8} {:>10.1} {:>9.1} {:>9.0} {:>9.1} {:>12.0}  {}",
                r.title,
                r.disk_mb,
                r.libraries,
                if r.libtorch_loaded { "yes" } else { "no" },
                r.rss_after_load_mb,
                r.rss_after_run_mb,
                r.load_ms,
                r.first_run_ms,
                r.start_to_first_result_ms,
                r.cosine_vs_reference.map(|c| format!("{c:.6}")).unwrap_or_else(|| "-".into())
            );
        }
        out.push_str("disk: the program file and every shared library mapped (MB); RSS in MiB (VmRSS after load / after the first run)\n");
        if let Some(ratio) = self.lite_vs_full_xnnpack_rss {
            let _ = writeln!(out, "lite vs full, same XNNPACK run: resident memory {ratio:.2}x ({})", if ratio < 1.0 { "lite is smaller" } else { "lite is NOT smaller" });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0]), 4.0);
        assert_eq!(median(vec![]), 0.0);
    }
}
