//! `runlens bench` on a text-generation model, in the manner of llama-bench:
//! for every backend and prompt length, prompt processing (`ppN`: prompt
//! tokens/s = N / time to first token) and token generation (`tgG @N`: decode
//! tokens/s over G new tokens after an N-token prompt), with the Python
//! counterparts of [`python`] (transformers `generate`; a `_load_for_executorch`
//! loop on the same programs) from the same run, speed ratios, the KV cache's
//! speed-up, and the [`plot`].
//!
//! Generation never stops early here: the end-of-text id is ignored and a
//! prompt length that leaves no room for the new tokens is skipped (and listed).

pub mod plot;
pub mod python;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::{machine::Machine, Budget, LoadRow};
use crate::backend::{self, BackendSpec, CacheKind};
use crate::task::generation::{Detokenizer, GenerateOptions};
use crate::model::ModelDir;

/// What the figures are worth, from the manifest's kind of weights
/// (`Manifest::weights_kind`): timings depend on the shapes only, a quantization
/// error is worth something on trained weights only.
pub fn weights_note(kind: &str) -> String {
    match kind {
        "random" => "random weights (tests/python/tiny_checkpoint.py): the timings depend on the shapes only (layers, width, vocabulary, lengths)".to_string(),
        "real" => "real (trained) weights".to_string(),
        other => format!("weights: {other} (timings depend on the shapes only)"),
    }
}

/// The plot's short form of a report's `weights`.
pub fn weights_short(note: &str) -> &'static str {
    if note.starts_with("random") {
        "random weights"
    } else if note.starts_with("real") {
        "real weights"
    } else {
        "weights as the manifest says"
    }
}

/// One backend at one prompt length: medians over the timed generations.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GenRow {
    /// A backend name (`eager`, `portable`, `xnnpack-nocache`, ...), or `python-` and the same name.
    pub backend: String,
    /// `static` (a KV cache), `none` (the window recomputed per token), or null when unknown.
    pub cache: Option<String>,
    pub prompt_len: usize,
    pub gen_tokens: usize,
    /// Timed generations.
    pub runs: usize,
    /// Time to first token (prefill and its argmax), median and range, ms.
    pub ttft_ms: f64,
    pub ttft_min_ms: f64,
    pub ttft_max_ms: f64,
    /// prompt_len / median TTFT.
    pub prompt_tokens_per_s: f64,
    /// (gen_tokens - 1) / the time from the first new token to the last: median and range.
    pub decode_tokens_per_s: f64,
    pub decode_min: f64,
    pub decode_max: f64,
    /// Python's median TTFT over this row's (> 1: runlens gets the first token out sooner).
    pub ttft_speedup_vs_python: Option<f64>,
    /// This row's median decode tokens/s over Python's (> 1: runlens decodes faster).
    pub decode_speedup_vs_python: Option<f64>,
    /// The bytes of weights one decode step reads (`bench::weights`; a Python row: its runlens counterpart's).
    #[serde(default)]
    pub weight_bytes_per_token: Option<u64>,
    /// weight_bytes_per_token x decode tokens/s, GB/s.
    #[serde(default)]
    pub achieved_gbps: Option<f64>,
    /// achieved_gbps over the machine's measured read bandwidth (`machine.memory_read_gbps`).
    /// Where `weights_in_llc`, the step reads its weights from the cache, not memory: the
    /// fraction says how fast the cache serves them and may pass 100%; it is no wall figure.
    #[serde(default)]
    pub fraction_of_read_bandwidth: Option<f64>,
    /// Whether the weights a decode step reads (`weight_bytes_per_token`) fit in the
    /// machine's last-level cache (`machine.memory_read.llc_bytes`); null when either is unknown.
    #[serde(default)]
    pub weights_in_llc: Option<bool>,
    /// The bytes of KV cache a timed decode step reads, on average: the keys and values of
    /// every layer at the filled length, prompt_len + gen_tokens / 2 positions (the steps
    /// fill prompt_len + 1 to prompt_len + gen_tokens - 1), from `config.json`'s geometry and
    /// the element size the backend keeps; null without a cache.
    #[serde(default)]
    pub cache_bytes_per_token: Option<u64>,
    /// The cache's extra bytes over the step's extra time, GB/s, from this backend's row at
    /// the shortest prompt length of the run to this one: how fast a step pays for a longer
    /// filled cache (issue 42's measure: at least half the read bandwidth); null at the
    /// shortest length, or when the step did not get slower.
    #[serde(default)]
    pub cache_read_gbps: Option<f64>,
    /// The runtime's own time per decode step over the timed generations, ms
    /// (llama.cpp's counters; null for a runtime that keeps none).
    #[serde(default)]
    pub runtime_decode_ms_per_token: Option<f64>,
    /// runlens' wall time per decode step over the runtime's own: what the
    /// wrapper adds (1.0: nothing).
    #[serde(default)]
    pub wrapper_overhead: Option<f64>,
}

/// A cell that was not measured, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Skipped {
    pub backend: String,
    pub prompt_len: usize,
    pub why: String,
}

/// The whole generation bench, as `--json` writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GenerationReport {
    pub machine: Machine,
    pub model: String,
    pub weights: String,
    pub threads: usize,
    pub command: String,
    pub gen_tokens: usize,
    pub warmup: u32,
    pub iters: u32,
    pub max_seconds: f64,
    /// Timed generations per Python cell (the script has no time budget).
    pub python_iters: Option<u32>,
    pub interrupted: bool,
    pub results: Vec<GenRow>,
    pub loads: Vec<LoadRow>,
    pub skipped: Vec<Skipped>,
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A row from per-generation TTFTs (ms) and decode rates (tokens/s).
pub fn row(backend: &str, cache: Option<String>, prompt_len: usize, gen_tokens: usize, ttft_ms: &[f64], decode: &[f64]) -> Option<GenRow> {
    if ttft_ms.is_empty() {
        return None;
    }
    let lo = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let ttft = median(ttft_ms);
    let decode_median = if decode.is_empty() { 0.0 } else { median(decode) };
    Some(GenRow {
        backend: backend.to_string(),
        cache,
        prompt_len,
        gen_tokens,
        runs: ttft_ms.len(),
        ttft_ms: ttft,
        ttft_min_ms: lo(ttft_ms),
        ttft_max_ms: hi(ttft_ms),
        prompt_tokens_per_s: prompt_len as f64 / (ttft / 1e3),
        decode_tokens_per_s: decode_median,
        decode_min: if decode.is_empty() { 0.0 } else { lo(decode) },
        decode_max: if decode.is_empty() { 0.0 } else { hi(decode) },
        ttft_speedup_vs_python: None,
        decode_speedup_vs_python: None,
        weight_bytes_per_token: None,
        achieved_gbps: None,
        fraction_of_read_bandwidth: None,
        weights_in_llc: None,
        cache_bytes_per_token: None,
        cache_read_gbps: None,
        runtime_decode_ms_per_token: None,
        wrapper_overhead: None,
    })
}

/// Fill each decode row's weight bytes (by backend name; a `python-` row takes
/// its runlens counterpart's), the GB/s they stream at, the fraction of the
/// measured read bandwidth, and whether those weights fit in the last-level
/// cache (`llc_bytes`), where that fraction is the cache's, not memory's.
pub fn fill_bandwidth(rows: &mut [GenRow], weight_bytes: &std::collections::BTreeMap<String, u64>, read_gbps: Option<f64>, llc_bytes: Option<u64>) {
    for r in rows.iter_mut() {
        let name = r.backend.strip_prefix("python-").unwrap_or(&r.backend);
        r.weight_bytes_per_token = weight_bytes.get(name).copied();
        r.achieved_gbps = r.weight_bytes_per_token.map(|b| b as f64 * r.decode_tokens_per_s / 1e9);
        r.fraction_of_read_bandwidth = r.achieved_gbps.zip(read_gbps.filter(|g| *g > 0.0)).map(|(a, g)| a / g);
        r.weights_in_llc = r.weight_bytes_per_token.zip(llc_bytes.filter(|c| *c > 0)).map(|(w, c)| w <= c);
    }
}

/// Fill each decode row's KV cache bytes (by backend name, a `python-` row its runlens
/// counterpart's: `bytes_per_position` is the bytes one more filled position adds to a
/// step, every layer's keys and values) and, against the same backend's row at its
/// shortest prompt length, the GB/s at which the step's time grew with them.
pub fn fill_cache(rows: &mut [GenRow], bytes_per_position: &std::collections::BTreeMap<String, u64>) {
    for r in rows.iter_mut() {
        let name = r.backend.strip_prefix("python-").unwrap_or(&r.backend);
        let cached = r.cache.as_deref().is_some_and(|c| c != "none");
        r.cache_bytes_per_token = bytes_per_position.get(name).filter(|_| cached).map(|b| b * (2 * r.prompt_len + r.gen_tokens) as u64 / 2);
    }
    let snapshot = rows.to_vec();
    for r in rows.iter_mut() {
        let base = snapshot.iter().filter(|b| b.backend == r.backend && b.gen_tokens == r.gen_tokens).min_by_key(|b| b.prompt_len);
        r.cache_read_gbps = base.filter(|b| b.prompt_len < r.prompt_len).and_then(|b| {
            let (bytes, base_bytes) = (r.cache_bytes_per_token?, b.cache_bytes_per_token?);
            let extra_s = 1.0 / r.decode_tokens_per_s - 1.0 / b.decode_tokens_per_s;
            (extra_s > 0.0 && r.decode_tokens_per_s > 0.0).then(|| (bytes - base_bytes) as f64 / extra_s / 1e9)
        });
    }
}

/// The text table's "of wall" cell: the fraction, marked `LLC` where the weights fit in the
/// last-level cache (then it is how fast the cache serves them, not the memory wall).
pub fn wall_cell(r: &GenRow) -> String {
    match (r.fraction_of_read_bandwidth, r.weights_in_llc) {
        (None, _) => "-".to_string(),
        (Some(f), Some(true)) => format!("{:.0}% LLC", f * 100.0),
        (Some(f), _) => format!("{:.0}%", f * 100.0),
    }
}

/// The manifest's cache kind of a program (`static`, else `none`); eager's
/// cache is `dynamic`: it grows by one position a token (as transformers'
/// `DynamicCache`, which the Python eager row uses).
pub fn cache_of(dir: &ModelDir, spec: &BackendSpec) -> Option<String> {
    match spec.cache_kind() {
        CacheKind::Runtime(kind) => Some(kind.to_string()),
        CacheKind::FromManifest => {
            let program = dir.manifest().programs.iter().find(|p| p.name == spec.name)?;
            Some(program.cache.clone().unwrap_or_else(|| "none".to_string()))
        }
    }
}

/// A prompt of exactly `n` ids: the tokens of assets/prompts.txt and
/// assets/corpus.txt (comments and blank lines left out), repeated, as
/// python/bench_generate.py makes it, so both sides time the same ids.
pub fn prompt_ids(tokenizer: &crate::model::TextTokenizer, n: usize) -> anyhow::Result<Vec<i64>> {
    let text: Vec<&str> = [include_str!("../../../assets/prompts.txt"), include_str!("../../../assets/corpus.txt")]
        .iter()
        .flat_map(|t| t.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let ids = tokenizer.encode(&text.join("\n"))?.ids;
    anyhow::ensure!(!ids.is_empty(), "the tokenizer encodes the assets text to no tokens");
    Ok(ids.iter().copied().cycle().take(n).collect())
}

/// Time greedy generation on one loaded backend: for each prompt, warm-ups
/// then up to `iters` generations of exactly `gen_tokens` within `max_seconds`.
/// Returns the rows and the cells skipped (no room for the new tokens).
#[allow(clippy::too_many_arguments)]
pub fn bench_backend(
    spec: &BackendSpec,
    cache: Option<String>,
    backend: &mut dyn backend::Backend,
    prompts: &[Vec<i64>],
    gen_tokens: usize,
    budget: Budget,
    stop: &AtomicBool,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<(Vec<GenRow>, Vec<Skipped>)> {
    let name = spec.name().to_string();
    let detok = Detokenizer::default();
    let options = GenerateOptions { max_new_tokens: gen_tokens, eos_token_ids: Vec::new() };
    let max_len = crate::task::generation::decoder_of(backend, &name)?.max_len();
    let (mut rows, mut skipped) = (Vec::new(), Vec::new());
    for prompt in prompts {
        let n = prompt.len();
        if n + gen_tokens - 1 > max_len {
            skipped.push(Skipped { backend: name.clone(), prompt_len: n, why: format!("{n} + {gen_tokens} new tokens do not fit its {max_len} positions") });
            continue;
        }
        progress(&format!("{name}: {n}-token prompt, {gen_tokens} new tokens"));
        let (mut ttft, mut decode) = (Vec::new(), Vec::new());
        // One generation: its TTFT (ms) and decode rate.
        let once = |backend: &mut dyn backend::Backend| -> anyhow::Result<(f64, Option<f64>)> {
            let decoder = crate::task::generation::decoder_of(backend, &name)?;
            let g = crate::task::generation::greedy(decoder, &detok, prompt, &options, &mut |_| std::ops::ControlFlow::Continue(()))?;
            anyhow::ensure!(g.ids.len() == gen_tokens, "{name} stopped after {} of {gen_tokens} tokens ({})", g.ids.len(), g.stop);
            Ok((g.ttft.as_secs_f64() * 1e3, g.decode_tokens_per_s()))
        };
        for _ in 0..budget.for_spec(spec).warmup {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            once(backend)?;
        }
        // The runtime's own counters around the timed generations (llama.cpp's).
        let counted_before = backend.runtime_counters();
        let deadline = Instant::now() + Duration::from_secs_f64(budget.max_seconds);
        while ttft.len() < budget.iters as usize && !stop.load(Ordering::Relaxed) {
            let (t, d) = once(backend)?;
            ttft.push(t);
            decode.extend(d);
            if Instant::now() >= deadline {
                break;
            }
        }
        let mut new_row = row(&name, cache.clone(), n, gen_tokens, &ttft, &decode);
        if let (Some(r), Some(before), Some(after)) = (new_row.as_mut(), counted_before, backend.runtime_counters()) {
            let own = after.since(&before);
            if own.decode_tokens > 0 && !decode.is_empty() {
                let runtime_ms = own.decode_ms / own.decode_tokens as f64;
                // The mean of runlens' time per step, as the runtime's is a mean.
                let wall_ms = decode.iter().map(|d| 1e3 / d).sum::<f64>() / decode.len() as f64;
                r.runtime_decode_ms_per_token = Some(runtime_ms);
                r.wrapper_overhead = (runtime_ms > 0.0).then(|| wall_ms / runtime_ms);
            }
        }
        rows.extend(new_row);
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok((rows, skipped))
}

/// Fill the speed ratios of every Rust row whose Python counterpart (`python-NAME`) was measured.
pub fn fill_ratios(rows: &mut [GenRow]) {
    let python: Vec<GenRow> = rows.iter().filter(|r| r.backend.starts_with("python-")).cloned().collect();
    for r in rows.iter_mut().filter(|r| !r.backend.starts_with("python-")) {
        let py = python.iter().find(|p| p.backend == format!("python-{}", r.backend) && p.prompt_len == r.prompt_len && p.gen_tokens == r.gen_tokens);
        if let Some(py) = py {
            r.ttft_speedup_vs_python = (r.ttft_ms > 0.0).then(|| py.ttft_ms / r.ttft_ms);
            r.decode_speedup_vs_python = (py.decode_tokens_per_s > 0.0).then(|| r.decode_tokens_per_s / py.decode_tokens_per_s);
        }
    }
}

/// The KV cache's speed-up per program pair (`X` with a cache, `X-nocache`
/// without) and prompt length: (program, prompt_len, ttft ratio, decode ratio).
pub fn cache_speedups(rows: &[GenRow]) -> Vec<(String, usize, f64, f64)> {
    let mut out = Vec::new();
    for with in rows.iter().filter(|r| r.cache.as_deref().is_some_and(|c| c != "none")) {
        let without = format!("{}-nocache", with.backend);
        if let Some(no) = rows.iter().find(|r| r.backend == without && r.prompt_len == with.prompt_len) {
            if no.decode_tokens_per_s > 0.0 {
                out.push((with.backend.clone(), with.prompt_len, no.ttft_ms / with.ttft_ms, with.decode_tokens_per_s / no.decode_tokens_per_s));
            }
        }
    }
    out
}

fn speedup(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), |x| format!("{x:.2}x"))
}

/// The human table, llama-bench's way: a `ppN` and a `tgG @N` line per backend and prompt length.
pub fn table(report: &GenerationReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "machine: {}", report.machine.summary());
    let _ = writeln!(out, "model: {} ({})", report.model, report.weights);
    let py = report.python_iters.map_or(String::new(), |n| format!("; Python: {n} per cell"));
    let _ = writeln!(
        out,
        "threads: {}, warm-ups {}, up to {} generations or {} s per cell{py}{}",
        report.threads,
        report.warmup,
        report.iters,
        report.max_seconds,
        if report.interrupted { " (INTERRUPTED: partial results)" } else { "" }
    );
    if let Some(bw) = &report.machine.memory_read {
        let _ = writeln!(
            out,
            "memory read bandwidth: {:.1} GB/s (best of {} passes, median {:.1}; {} threads over {} MiB)",
            bw.gbps,
            bw.passes,
            bw.median_gbps,
            bw.threads,
            bw.buffer_bytes >> 20
        );
    }
    let _ = writeln!(out, "{:<24} {:>6} {:>10} {:>5} {:>11} {:>11} {:>10} {:>9} {:>7} {:>9}", "backend", "cache", "test", "runs", "t/s", "ttft ms", "vs python", "MB/token", "GB/s", "of wall");
    for r in &report.results {
        let cache = r.cache.as_deref().unwrap_or("-");
        let _ = writeln!(
            out,
            "{:<24} {:>6} {:>10} {:>5} {:>11.1} {:>11.2} {:>10}",
            r.backend,
            cache,
            format!("pp{}", r.prompt_len),
            r.runs,
            r.prompt_tokens_per_s,
            r.ttft_ms,
            speedup(r.ttft_speedup_vs_python)
        );
        let _ = writeln!(
            out,
            "{:<24} {:>6} {:>10} {:>5} {:>11.1} {:>11} {:>10} {:>9} {:>7} {:>9}",
            r.backend,
            cache,
            format!("tg{} @{}", r.gen_tokens, r.prompt_len),
            r.runs,
            r.decode_tokens_per_s,
            "",
            speedup(r.decode_speedup_vs_python),
            r.weight_bytes_per_token.map_or("-".to_string(), |b| format!("{:.1}", b as f64 / 1e6)),
            r.achieved_gbps.map_or("-".to_string(), |g| format!("{g:.1}")),
            wall_cell(r),
        );
        if let Some(bytes) = r.cache_bytes_per_token {
            let growth = r.cache_read_gbps.map_or(String::new(), |g| format!("; the step's growth since the shortest prompt paid {g:.1} GB/s of cache"));
            let _ = writeln!(out, "{:<24} {:>6} KV cache read a step {:.1} MB{growth}", r.backend, "", bytes as f64 / 1e6);
        }
        if let (Some(own), Some(over)) = (r.runtime_decode_ms_per_token, r.wrapper_overhead) {
            let _ = writeln!(out, "{:<24} {:>6} the runtime's own decode step {own:.2} ms; runlens' step over it {over:.3}x", r.backend, "");
        }
    }
    out.push_str("t/s: prompt tokens/s (pp) = prompt / TTFT; decode tokens/s (tg) = (new - 1) / time from the first new token to the last.\n");
    out.push_str("vs python: speed over the same backend in Python in this run (> 1: runlens is faster).\n");
    out.push_str("MB/token: weights a decode step reads; GB/s: MB/token x decode t/s; of wall: GB/s over the measured read bandwidth.\n");
    if report.results.iter().any(|r| r.cache_bytes_per_token.is_some()) {
        out.push_str("KV cache read a step: every layer's keys and values at the timed steps' mean filled length; paid N GB/s: the extra cache over the step's extra time since the run's shortest prompt.\n");
    }
    if report.results.iter().any(|r| r.weights_in_llc == Some(true)) {
        let llc = report.machine.memory_read.as_ref().and_then(|m| m.llc_bytes).map_or(String::new(), |b| format!(" ({} MiB)", b >> 20));
        let _ = writeln!(out, "LLC: the weights a step reads fit in the last-level cache{llc}: that figure is the cache's speed, not the memory wall.");
    }
    for (program, len, ttft, decode) in cache_speedups(&report.results) {
        let _ = writeln!(out, "KV cache: {program} over {program}-nocache at a {len}-token prompt: decode {decode:.1}x, TTFT {ttft:.1}x");
    }
    for s in &report.skipped {
        let _ = writeln!(out, "skipped: {} at {} tokens: {}", s.backend, s.prompt_len, s.why);
    }
    let _ = writeln!(out, "loads:");
    for l in &report.loads {
        let _ = writeln!(out, "  {:<24} {:>9.1} ms  rss {:>7.1} MB", l.backend, l.load_ms, l.rss_mb);
    }
    out
}

pub fn write_json(report: &GenerationReport, path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(report)? + "\n").with_context(|| format!("writing {}", path.display()))
}

/// The CSV: one line per row.
pub fn csv(report: &GenerationReport) -> String {
    let mut out = String::from("backend,cache,prompt_len,gen_tokens,runs,ttft_ms,ttft_min_ms,ttft_max_ms,prompt_tokens_per_s,decode_tokens_per_s,decode_min,decode_max,ttft_speedup_vs_python,decode_speedup_vs_python,threads,weight_bytes_per_token,achieved_gbps,fraction_of_read_bandwidth\n");
    let opt = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.4}"));
    for r in &report.results {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{:.4},{:.4},{:.4},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{}",
            r.backend,
            r.cache.as_deref().unwrap_or(""),
            r.prompt_len,
            r.gen_tokens,
            r.runs,
            r.ttft_ms,
            r.ttft_min_ms,
            r.ttft_max_ms,
            r.prompt_tokens_per_s,
            r.decode_tokens_per_s,
            r.decode_min,
            r.decode_max,
            opt(r.ttft_speedup_vs_python),
            opt(r.decode_speedup_vs_python),
            report.threads,
            r.weight_bytes_per_token.map_or(String::new(), |b| b.to_string()),
            opt(r.achieved_gbps),
            opt(r.fraction_of_read_bandwidth)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_take_medians_and_ratios_pair_with_python() {
        let r = row("xnnpack", Some("static".into()), 8, 32, &[4.0, 2.0, 3.0], &[100.0, 300.0, 200.0]).unwrap();
        assert_eq!((r.ttft_ms, r.ttft_min_ms, r.ttft_max_ms, r.decode_tokens_per_s), (3.0, 2.0, 4.0, 200.0));
        assert!((r.prompt_tokens_per_s - 8.0 / 3e-3).abs() < 1e-6);
        let py = row("python-xnnpack", Some("static".into()), 8, 32, &[6.0], &[50.0]).unwrap();
        let no = row("xnnpack-nocache", Some("none".into()), 8, 32, &[9.0], &[20.0]).unwrap();
        let mut rows = vec![r, py, no];
        fill_ratios(&mut rows);
        assert_eq!((rows[0].ttft_speedup_vs_python, rows[0].decode_speedup_vs_python), (Some(2.0), Some(4.0)));
        assert_eq!(rows[1].decode_speedup_vs_python, None, "a Python row has no ratio");
        assert_eq!(rows[2].decode_speedup_vs_python, None, "no python-xnnpack-nocache row");
        assert_eq!(cache_speedups(&rows), vec![("xnnpack".to_string(), 8, 3.0, 10.0)]);
        assert!(row("eager", None, 8, 32, &[], &[]).is_none());

        let bytes = std::collections::BTreeMap::from([("xnnpack".to_string(), 500_000_000u64)]);
        fill_bandwidth(&mut rows, &bytes, Some(20.0), Some(260 << 20));
        assert_eq!(rows[0].weight_bytes_per_token, Some(500_000_000));
        assert_eq!(rows[0].weights_in_llc, Some(false), "500 MB of weights past a 260 MiB cache");
        assert_eq!(wall_cell(&rows[0]), "500%");
        assert_eq!(rows[2].weights_in_llc, None, "no weight figure, no verdict");
        let small = std::collections::BTreeMap::from([("xnnpack".to_string(), 135_000_000u64)]);
        fill_bandwidth(&mut rows, &small, Some(20.0), Some(260 << 20));
        assert_eq!(rows[0].weights_in_llc, Some(true), "135 MB fit in 260 MiB");
        assert_eq!(wall_cell(&rows[0]), "135% LLC");
        fill_bandwidth(&mut rows, &small, Some(20.0), None);
        assert_eq!(rows[0].weights_in_llc, None, "no cache size read: no verdict");
        fill_bandwidth(&mut rows, &bytes, Some(20.0), Some(260 << 20));
        assert!((rows[0].achieved_gbps.unwrap() - 100.0).abs() < 1e-9, "0.5 GB x 200 t/s");
        assert!((rows[0].fraction_of_read_bandwidth.unwrap() - 5.0).abs() < 1e-9);
        assert!((rows[1].achieved_gbps.unwrap() - 25.0).abs() < 1e-9, "python-xnnpack reads what xnnpack reads");
        assert_eq!(rows[2].weight_bytes_per_token, None, "no figure for xnnpack-nocache");
    }

    fn table_of(results: Vec<GenRow>) -> String {
        table(&GenerationReport {
            machine: crate::bench::machine::Machine::probe(None),
            model: "m".into(),
            weights: weights_note("random"),
            threads: 1,
            command: "runlens bench".into(),
            gen_tokens: 16,
            warmup: 0,
            iters: 1,
            max_seconds: 1.0,
            python_iters: None,
            interrupted: false,
            results,
            loads: vec![],
            skipped: vec![],
        })
    }

    #[test]
    fn cache_bytes_follow_the_filled_length_and_its_growth_is_paid_in_gb_per_s() {
        // 10 ms a step at 64 tokens, 14 ms at 1000: 4 ms more for 936 more positions of 46,080 bytes.
        let mut rows = vec![
            row("xnnpack", Some("static".into()), 1000, 16, &[1.0], &[1e3 / 14.0]).unwrap(),
            row("xnnpack", Some("static".into()), 64, 16, &[1.0], &[1e3 / 10.0]).unwrap(),
            row("python-xnnpack", Some("static".into()), 64, 16, &[1.0], &[50.0]).unwrap(),
            row("xnnpack-nocache", Some("none".into()), 64, 16, &[1.0], &[5.0]).unwrap(),
            row("llamacpp-q8_0", Some("static".into()), 64, 16, &[1.0], &[100.0]).unwrap(),
            row("llamacpp-q8_0", Some("static".into()), 1000, 16, &[1.0], &[110.0]).unwrap(),
        ];
        let per_position = std::collections::BTreeMap::from([
            ("xnnpack".to_string(), 46_080u64),
            ("xnnpack-nocache".to_string(), 46_080),
            ("llamacpp-q8_0".to_string(), 23_040),
        ]);
        fill_cache(&mut rows, &per_position);
        assert_eq!(rows[1].cache_bytes_per_token, Some(46_080 * 72), "64 + 16 / 2 positions");
        assert_eq!(rows[0].cache_bytes_per_token, Some(46_080 * 1008));
        let gbps = rows[0].cache_read_gbps.unwrap();
        assert!((gbps - 46_080.0 * 936.0 / 4e-3 / 1e9).abs() < 1e-9, "{gbps}");
        assert_eq!(rows[1].cache_read_gbps, None, "the shortest prompt is the base");
        assert_eq!(rows[2].cache_bytes_per_token, Some(46_080 * 72), "a Python row reads what its counterpart reads");
        assert_eq!(rows[3].cache_bytes_per_token, None, "a window program keeps no cache");
        assert_eq!(rows[5].cache_read_gbps, None, "a step that got faster pays nothing measurable");
        assert!(table_of(rows).contains("KV cache read a step 46.4 MB; the step's growth since the shortest prompt paid 10.8 GB/s of cache"));
    }
}
