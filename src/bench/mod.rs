//! `runlens bench`: latency of every backend at chosen sequence lengths, side
//! by side with the course's Python flow (`python/bench_python.py`).
//!
//! - [`Row`] / [`LoadRow`] / [`BenchReport`]: what is measured, as JSON and CSV carry it;
//! - [`python`]: launching the Python flow on the same token ids;
//! - [`report`]: the table, JSON and CSV; [`plot`]: the SVG; [`machine`]: the machine description;
//! - [`generation`]: a text-generation model's prefill and decode rows (llama-bench's pp / tg);

pub mod bandwidth;
pub mod generation;
pub mod machine;
pub mod plot;
pub mod python;
pub mod report;
pub mod weights;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::backend::BackendSpec;


/// The name of the row timing `forward` in the C shim's own loop, paired with
/// MiniLM's float XNNPACK program (see [`shim_loop_row`]).
pub const SHIM_LOOP: &str = "shim-loop-xnnpack";

/// What a shim-loop row's name starts with; the paired backend's name follows.
const SHIM_LOOP_PREFIX: &str = "shim-loop-";

/// The name of the row timing `forward` in the C shim's own loop, paired with `backend`.
pub fn shim_loop_row(backend: &str) -> String {
    format!("{SHIM_LOOP_PREFIX}{backend}")
}

/// The backend a row measures: itself, or for a shim-loop row the backend it is paired with.
pub fn measured_backend(row: &str) -> &str {
    row.strip_prefix(SHIM_LOOP_PREFIX).unwrap_or(row)
}

/// One backend at one sequence length.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub backend: String,
    pub seq_len: usize,
    pub runs: u64,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    pub tokens_per_s: f64,
    /// Achieved GFLOP/s at the median latency (work from `config.json`, see [`forward_flops`]).
    pub gflops: f64,
    /// This row's median over its Python counterpart's median (null without one).
    pub ratio_vs_python: Option<f64>,
    /// The thread count of this row (a `--threads 1,2,3,4` sweep has one row per count).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Temperature, clock and throttling at the start and end of the cell's
    /// runs (null for Python rows and in JSON from before they were recorded).
    #[serde(default)]
    pub heat_start: Option<crate::heat::HeatSample>,
    #[serde(default)]
    pub heat_end: Option<crate::heat::HeatSample>,
}

/// One backend's load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoadRow {
    pub backend: String,
    pub load_ms: f64,
    /// Resident memory of the (Rust or Python) process right after the load.
    pub rss_mb: f64,
}

/// The whole bench, as `--json` writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchReport {
    pub machine: machine::Machine,
    pub threads: usize,
    pub command: String,
    pub warmup: u32,
    pub iters: u32,
    pub max_seconds: f64,
    /// Ctrl-C stopped the bench early; the rows are what was measured by then.
    pub interrupted: bool,
    pub results: Vec<Row>,
    pub loads: Vec<LoadRow>,
    /// The Rust wrapper's cost per XNNPACK call, per length (absent in reports
    /// written before it was measured this way).
    #[serde(default)]
    pub wrapper_overhead: Vec<WrapperOverhead>,
    /// The thread counts of a `--threads 1,2,3,4` sweep (empty: one count, `threads`).
    #[serde(default)]
    pub thread_sweep: Vec<usize>,
}

impl BenchReport {
    /// More than one thread count was measured.
    pub fn is_sweep(&self) -> bool {
        self.thread_sweep.len() > 1
    }
}

/// The Rust wrapper's cost per XNNPACK call at one length. Measured on each
/// call: Rust's time around `Backend::run` minus the time the shim spent
/// inside it in the span its C++ loop times (`EtModule::last_run_ns`), so the
/// inference's own noise cancels exactly. As a cross-check, the median of the
/// paired differences between Rust calls and the C++ loop's runs, alternated
/// (noise of a few hundred µs per run remains in each pair).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WrapperOverhead {
    pub seq_len: usize,
    /// Rust calls measured.
    pub calls: u64,
    /// Median and 90th percentile of (Rust call − shim's inner time), in µs.
    pub median_us: f64,
    pub p90_us: f64,
    /// Median of (Rust call − C++ loop run) over alternated pairs, in µs.
    pub paired_median_us: f64,
}

/// The `q` quantile (0..=1, nearest rank) of `values`, in µs from ns; None when empty.
pub fn quantile_us(values: &[i64], q: f64) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    let last = v.len().checked_sub(1)?;
    Some(v[((q.clamp(0.0, 1.0) * last as f64).round() as usize).min(last)] as f64 / 1e3)
}

/// Two things timed alternately (see [`Budget::measure_pair`]).
pub struct PairedSamples {
    pub a: Samples,
    pub b: Samples,
    /// a − b for each pair, in ns.
    pub differences_ns: Vec<i64>,
}

impl PairedSamples {
    /// The median of the paired differences in µs (None without pairs; an
    /// even count takes the upper middle).
    pub fn median_difference_us(&self) -> Option<f64> {
        quantile_us(&self.differences_ns, 0.5)
    }
}

/// Floating-point operations of one forward pass at `seq_len` tokens: every
/// linear layer (Q, K, V, attention output, FFN in and out) and the two
/// attention products (Q·Kᵀ and P·V); 2 FLOPs per multiply-add. Layer norms,
/// softmax, GELU and pooling are ignored (under 1% here).
pub fn forward_flops(cfg: &EncoderShape, seq_len: usize) -> f64 {
    let s = seq_len as f64;
    let h = cfg.hidden as f64;
    let i = cfg.intermediate as f64;
    let linear = 2.0 * s * (4.0 * h * h + 2.0 * h * i);
    let attention = 2.0 * 2.0 * s * s * h;
    cfg.layers as f64 * (linear + attention)
}

/// The sizes of an encoder that the FLOP count needs, from `config.json`
/// ([`crate::model::ModelConfig`]: BERT's `hidden_size`, `intermediate_size`,
/// `num_hidden_layers`, or DistilBERT's `dim`, `hidden_dim`, `n_layers`). Independent of the eager
/// path, so the build without libtorch counts FLOPs too.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EncoderShape {
    pub hidden: u64,
    pub intermediate: u64,
    pub layers: u64,
}

impl EncoderShape {
    /// `None` when the config names no encoder sizes.
    pub fn of(config: &crate::model::ModelConfig) -> Option<EncoderShape> {
        Some(EncoderShape { hidden: config.hidden?, intermediate: config.intermediate?, layers: config.layers? })
    }
}

/// Latencies of one cell, in nanoseconds, recorded in an hdrhistogram.
pub struct Samples {
    hist: Histogram<u64>,
}

impl Default for Samples {
    fn default() -> Self {
        Samples::new()
    }
}

impl Samples {
    pub fn new() -> Samples {
        // 1 ns .. 1 hour at 3 significant digits.
        Samples { hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds are valid") }
    }

    pub fn record_ns(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
    }

    pub fn record_ms(&mut self, ms: f64) {
        self.record_ns((ms * 1e6).round().max(1.0) as u64);
    }

    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The row for these samples; `None` when there are none.
    pub fn row(&self, backend: &str, seq_len: usize, flops: f64) -> Option<Row> {
        if self.hist.is_empty() {
            return None;
        }
        let ms = |ns: u64| ns as f64 / 1e6;
        let p50 = ms(self.hist.value_at_quantile(0.5));
        Some(Row {
            backend: backend.to_string(),
            seq_len,
            runs: self.hist.len(),
            min_ms: ms(self.hist.min()),
            p50_ms: p50,
            p90_ms: ms(self.hist.value_at_quantile(0.9)),
            p99_ms: ms(self.hist.value_at_quantile(0.99)),
            max_ms: ms(self.hist.max()),
            mean_ms: self.hist.mean() / 1e6,
            tokens_per_s: seq_len as f64 / (p50 / 1e3),
            gflops: flops / (p50 / 1e3) / 1e9,
            ratio_vs_python: None,
            threads: None,
            heat_start: None,
            heat_end: None,
        })
    }
}

/// How many runs a cell gets: warm-ups, then up to `iters` timed runs, stopping
/// once `max_seconds` of timed runs have passed (always at least one).
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub warmup: u32,
    pub iters: u32,
    pub max_seconds: f64,
}

impl Budget {
    /// This budget for `spec`: a program on no delegate (the portable path)
    /// takes about a second at 128 tokens, so one warm-up at most (the Python
    /// side does the same).
    pub fn for_spec(self, spec: &BackendSpec) -> Budget {
        let warmup = spec.max_warmups().map_or(self.warmup, |most| self.warmup.min(most));
        Budget { warmup, ..self }
    }

    /// Run `f` (which returns its own duration in ns) under this budget.
    pub fn measure(&self, stop: &AtomicBool, mut f: impl FnMut() -> anyhow::Result<u64>) -> anyhow::Result<Samples> {
        for _ in 0..self.warmup {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            f()?;
        }
        let mut samples = Samples::new();
        let deadline = Instant::now() + Duration::from_secs_f64(self.max_seconds);
        while samples.len() < u64::from(self.iters) && !stop.load(Ordering::Relaxed) {
            samples.record_ns(f()?);
            if Instant::now() >= deadline {
                break;
            }
        }
        Ok(samples)
    }

    /// Times `a` and `b` (each returns its own duration in ns) alternately,
    /// a b, b a, a b, ..., so neither always runs first: the warm-ups, then up
    /// to `iters` pairs within twice `max_seconds` (a pair is two cells' runs).
    pub fn measure_pair(
        &self,
        stop: &AtomicBool,
        mut a: impl FnMut() -> anyhow::Result<u64>,
        mut b: impl FnMut() -> anyhow::Result<u64>,
    ) -> anyhow::Result<PairedSamples> {
        for _ in 0..self.warmup {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            a()?;
            b()?;
        }
        let mut out = PairedSamples { a: Samples::new(), b: Samples::new(), differences_ns: Vec::new() };
        let deadline = Instant::now() + Duration::from_secs_f64(2.0 * self.max_seconds);
        let mut i = 0u32;
        while i < self.iters && !stop.load(Ordering::Relaxed) {
            let (ta, tb) = if i.is_multiple_of(2) {
                let ta = a()?;
                (ta, b()?)
            } else {
                let tb = b()?;
                (a()?, tb)
            };
            out.a.record_ns(ta);
            out.b.record_ns(tb);
            out.differences_ns.push(ta as i64 - tb as i64);
            i += 1;
            if Instant::now() >= deadline {
                break;
            }
        }
        Ok(out)
    }
}

/// The Python row a Rust row is compared with: the Python flow names its row
/// of each backend `python-<backend>` (python/bench_python.py); a shim-loop
/// row is compared with its paired backend's. None for a Python row.
pub fn python_counterpart(backend: &str) -> Option<String> {
    (!backend.starts_with("python-")).then(|| format!("python-{}", measured_backend(backend)))
}

/// Fill `ratio_vs_python` of every Rust row whose Python counterpart was measured.
pub fn fill_ratios(rows: &mut [Row]) {
    let medians: Vec<(String, usize, Option<usize>, f64)> = rows.iter().map(|r| (r.backend.clone(), r.seq_len, r.threads, r.p50_ms)).collect();
    for row in rows.iter_mut() {
        row.ratio_vs_python = python_counterpart(&row.backend).and_then(|py| {
            medians.iter().find(|(b, s, t, _)| *b == py && *s == row.seq_len && *t == row.threads).map(|(_, _, _, p)| row.p50_ms / p)
        });
    }
}

/// Resident memory of this process in MB (`VmRSS` of /proc/self/status; 0 elsewhere).
pub fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_give_ordered_quantiles() {
        let mut s = Samples::new();
        for ms in [1.0, 2.0, 3.0, 4.0, 100.0] {
            s.record_ms(ms);
        }
        let r = s.row("xnnpack", 8, 1e9).unwrap();
        assert_eq!(r.runs, 5);
        assert!(r.min_ms <= r.p50_ms && r.p50_ms <= r.p90_ms && r.p90_ms <= r.p99_ms && r.p99_ms <= r.max_ms);
        assert!((r.p50_ms - 3.0).abs() < 0.01, "{}", r.p50_ms);
        assert!((r.gflops - 1e9 / 3e-3 / 1e9).abs() < 1.0);
        assert!(Samples::new().row("x", 8, 1.0).is_none());
    }

    #[test]
    fn paired_measurement_alternates_and_takes_the_median_difference() {
        use std::cell::RefCell;
        let order = RefCell::new(String::new());
        let budget = Budget { warmup: 1, iters: 5, max_seconds: 60.0 };
        let stop = AtomicBool::new(false);
        // a is 10 µs slower than b, except one pair disturbed by 5 ms: the median ignores it.
        let mut n = 0u64;
        let paired = budget
            .measure_pair(
                &stop,
                || {
                    order.borrow_mut().push('a');
                    n += 1;
                    Ok(if n == 3 { 5_110_000 } else { 110_000 })
                },
                || {
                    order.borrow_mut().push('b');
                    Ok(100_000)
                },
            )
            .unwrap();
        assert_eq!(order.into_inner(), "ab" /* warm-up */.to_owned() + "ab" + "ba" + "ab" + "ba" + "ab");
        assert_eq!((paired.a.len(), paired.b.len(), paired.differences_ns.len()), (5, 5, 5));
        assert_eq!(paired.median_difference_us(), Some(10.0));
        let even = PairedSamples { a: Samples::new(), b: Samples::new(), differences_ns: vec![6_000, -4_000, 1_000_000, 2_000] };
        assert_eq!(even.median_difference_us(), Some(6.0));
        assert_eq!(quantile_us(&[5_000, -1_000, 3_000, 9_000, 7_000, 1_000, 2_000, 4_000, 8_000, 6_000], 0.9), Some(8.0));
        let none = PairedSamples { a: Samples::new(), b: Samples::new(), differences_ns: vec![] };
        assert_eq!(none.median_difference_us(), None);
    }

    #[test]
    fn ratios_pair_rust_rows_with_python_rows() {
        let mut s = Samples::new();
        s.record_ms(2.0);
        let mut py = Samples::new();
        py.record_ms(4.0);
        let mut rows = vec![s.row("xnnpack", 8, 1.0).unwrap(), py.row("python-xnnpack", 8, 1.0).unwrap(), s.row("eager", 8, 1.0).unwrap()];
        fill_ratios(&mut rows);
        assert!((rows[0].ratio_vs_python.unwrap() - 0.5).abs() < 1e-3);
        assert_eq!(rows[1].ratio_vs_python, None);
        assert_eq!(rows[2].ratio_vs_python, None);
    }
}
