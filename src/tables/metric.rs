//! What a table can show: the metrics of a bench JSON by name, and the one
//! figure a (backend, metric, length) names in a file `runlens bench --json`
//! wrote: an encoder bench ([`BenchReport`], `--seq-lens`) or a generation
//! bench ([`GenerationReport`], `--prompt-lens`); or `runlens eval --json`'s
//! report ([`EvalReport`]: one figure a column, no length).

use std::path::Path;

use super::format::Format;
use crate::bench::generation::{GenRow, GenerationReport};
use crate::bench::{BenchReport, LoadRow, Row};
use crate::eval::{ColumnReport, EvalReport};

/// Which way a metric is better, for `bold:` (none: never bold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
    Neither,
}

/// Where a metric's figure is read.
#[derive(Debug, Clone, Copy)]
pub enum Getter {
    /// An encoder bench's row at one length (`seq_len`).
    Encoder(fn(&Row) -> Option<f64>),
    /// A generation bench's row at one prompt length (`prompt_len`).
    Generation(fn(&GenRow) -> Option<f64>),
    /// A backend's load (either kind of bench; no length).
    Load(fn(&LoadRow) -> f64),
    /// An eval report's column (no length). Null where the report has no figure: on the
    /// reference column a cell shows `–`, on another the metric's `null` text.
    Eval(fn(&ColumnReport) -> Option<f64>),
}

/// One metric a table may name.
#[derive(Debug)]
pub struct Metric {
    /// Its name in the spec: the JSON field, or a field in other units (`weight_mb_per_token`).
    pub name: &'static str,
    /// The title a column or row gets when the spec gives none (with ` @N` for a length).
    pub title: &'static str,
    pub get: Getter,
    pub better: Better,
    /// Its format when neither the item nor the table names one.
    pub format: Format,
    /// A fraction shown as a percentage (0.887 is `89%`; the format applies to 88.7).
    pub percent: bool,
    /// A figure against the memory wall: marked `(in LLC)` where the row's weights fit in the
    /// last-level cache (`weights_in_llc`), where it is the cache's speed, not memory's.
    pub marks_llc: bool,
    /// What a null figure means, shown in its cell (`none`: no first divergence); None: a
    /// null is an error.
    pub null: Option<&'static str>,
}

impl Metric {
    /// `value` as a cell shows it, in `format`.
    pub fn show(&self, value: f64, format: Format) -> String {
        if self.percent {
            format!("{}%", format.apply(value * 100.0))
        } else {
            format.apply(value)
        }
    }

    /// Read at one length (every metric but a load's and an eval's).
    pub fn needs_length(&self) -> bool {
        !matches!(self.get, Getter::Load(_) | Getter::Eval(_))
    }

    fn kind(&self) -> &'static str {
        match self.get {
            Getter::Encoder(_) => "encoder benches (`bench --seq-lens`)",
            Getter::Generation(_) => "generation benches (`bench --prompt-lens`)",
            Getter::Load(_) => "every bench's loads",
            Getter::Eval(_) => "eval reports (`runlens eval --json`)",
        }
    }
}

macro_rules! metric {
    ($name:literal, $title:literal, Encoder, $field:ident, $better:ident) => {
        Metric { name: $name, title: $title, get: Getter::Encoder(|r| Some(r.$field)), better: Better::$better, format: Format::Sig3, percent: false, marks_llc: false, null: None }
    };
    ($name:literal, $title:literal, Generation, $field:ident, $better:ident) => {
        Metric { name: $name, title: $title, get: Getter::Generation(|r| Some(r.$field)), better: Better::$better, format: Format::Sig3, percent: false, marks_llc: false, null: None }
    };
    ($name:literal, $title:literal, GenerationOpt, $field:ident, $better:ident, $format:expr) => {
        Metric { name: $name, title: $title, get: Getter::Generation(|r| r.$field), better: Better::$better, format: $format, percent: false, marks_llc: false, null: None }
    };
}

/// Every metric a table may name, in the JSON's order.
pub static METRICS: &[Metric] = &[
    // Encoder benches: latency of one forward at `seq_len` tokens.
    metric!("p50_ms", "p50 ms", Encoder, p50_ms, Lower),
    metric!("p90_ms", "p90 ms", Encoder, p90_ms, Lower),
    metric!("p99_ms", "p99 ms", Encoder, p99_ms, Lower),
    metric!("min_ms", "min ms", Encoder, min_ms, Lower),
    metric!("max_ms", "max ms", Encoder, max_ms, Lower),
    metric!("mean_ms", "mean ms", Encoder, mean_ms, Lower),
    metric!("tokens_per_s", "tokens/s", Encoder, tokens_per_s, Higher),
    metric!("gflops", "GFLOP/s", Encoder, gflops, Higher),
    Metric { name: "ratio_vs_python", title: "vs Python", get: Getter::Encoder(|r| r.ratio_vs_python), better: Better::Neither, format: Format::Decimals(2), percent: false, marks_llc: false, null: None },
    // Generation benches: one backend at one prompt length.
    metric!("ttft_ms", "TTFT ms", Generation, ttft_ms, Lower),
    metric!("prompt_tokens_per_s", "prefill t/s", Generation, prompt_tokens_per_s, Higher),
    metric!("decode_tokens_per_s", "decode t/s", Generation, decode_tokens_per_s, Higher),
    metric!("decode_min", "decode t/s, slowest", Generation, decode_min, Higher),
    metric!("decode_max", "decode t/s, fastest", Generation, decode_max, Higher),
    Metric { name: "weight_mb_per_token", title: "MB a token", get: Getter::Generation(|r| r.weight_bytes_per_token.map(|b| b as f64 / 1e6)), better: Better::Neither, format: Format::Whole, percent: false, marks_llc: false, null: None },
    Metric { name: "weight_bytes_per_token", title: "bytes a token", get: Getter::Generation(|r| r.weight_bytes_per_token.map(|b| b as f64)), better: Better::Neither, format: Format::Whole, percent: false, marks_llc: false, null: None },
    metric!("achieved_gbps", "GB/s", GenerationOpt, achieved_gbps, Neither, Format::Sig3),
    Metric { name: "fraction_of_read_bandwidth", title: "of read bandwidth", get: Getter::Generation(|r| r.fraction_of_read_bandwidth), better: Better::Neither, format: Format::Whole, percent: true, marks_llc: true, null: None },
    Metric { name: "decode_ms_per_token", title: "ms a step", get: Getter::Generation(|r| (r.decode_tokens_per_s > 0.0).then(|| 1e3 / r.decode_tokens_per_s)), better: Better::Lower, format: Format::Sig3, percent: false, marks_llc: false, null: None },
    Metric { name: "cache_mb_per_token", title: "cache MB a step", get: Getter::Generation(|r| r.cache_bytes_per_token.map(|b| b as f64 / 1e6)), better: Better::Neither, format: Format::Sig3, percent: false, marks_llc: false, null: None },
    Metric { name: "cache_read_gbps", title: "cache GB/s", get: Getter::Generation(|r| r.cache_read_gbps), better: Better::Higher, format: Format::Sig3, percent: false, marks_llc: false, null: Some("–") },
    metric!("runtime_decode_ms_per_token", "runtime ms a step", GenerationOpt, runtime_decode_ms_per_token, Lower, Format::Sig3),
    metric!("wrapper_overhead", "wrapper overhead", GenerationOpt, wrapper_overhead, Neither, Format::Decimals(3)),
    metric!("ttft_speedup_vs_python", "TTFT vs Python", GenerationOpt, ttft_speedup_vs_python, Neither, Format::Decimals(2)),
    metric!("decode_speedup_vs_python", "decode vs Python", GenerationOpt, decode_speedup_vs_python, Neither, Format::Decimals(2)),
    // Loads, either kind.
    Metric { name: "load_ms", title: "load ms", get: Getter::Load(|l| l.load_ms), better: Better::Lower, format: Format::Sig3, percent: false, marks_llc: false, null: None },
    Metric { name: "rss_mb", title: "load RSS MB", get: Getter::Load(|l| l.rss_mb), better: Better::Neither, format: Format::Sig3, percent: false, marks_llc: false, null: None },
    // Eval reports: one column against the reference (docs/eval.md); what compares a column
    // with the reference is `–` on the reference's own row.
    Metric { name: "bits", title: "bits", get: Getter::Eval(|c| c.bits.map(f64::from)), better: Better::Neither, format: Format::Whole, percent: false, marks_llc: false, null: Some("–") },
    Metric { name: "top1_agreement", title: "top-1", get: Getter::Eval(|c| c.top1_agreement.filter(|_| !c.reference)), better: Better::Higher, format: Format::Decimals(1), percent: true, marks_llc: false, null: None },
    Metric { name: "median_first_divergence", title: "median first divergence", get: Getter::Eval(|c| c.median_first_divergence.map(|t| t as f64)), better: Better::Neither, format: Format::Whole, percent: false, marks_llc: false, null: Some("none") },
    Metric { name: "prompts_identical", title: "prompts identical", get: Getter::Eval(|c| (!c.reference).then_some(c.prompts_identical as f64)), better: Better::Higher, format: Format::Whole, percent: false, marks_llc: false, null: None },
    Metric { name: "mean_kl", title: "mean KL", get: Getter::Eval(|c| c.mean_kl.filter(|_| !c.reference)), better: Better::Lower, format: Format::Sci(2), percent: false, marks_llc: false, null: None },
    Metric { name: "perplexity", title: "perplexity", get: Getter::Eval(|c| c.perplexity), better: Better::Lower, format: Format::Decimals(3), percent: false, marks_llc: false, null: None },
    Metric { name: "perplexity_ratio", title: "vs reference", get: Getter::Eval(|c| c.perplexity_ratio), better: Better::Neither, format: Format::Decimals(4), percent: false, marks_llc: false, null: None },
];

/// The metric named `name`, or an error listing them all.
pub fn metric(name: &str) -> Result<&'static Metric, String> {
    METRICS.iter().find(|m| m.name == name).ok_or_else(|| format!("unknown metric `{name}`; the metrics: {}", names(METRICS.iter())))
}

fn names<'a>(metrics: impl Iterator<Item = &'a Metric>) -> String {
    metrics.map(|m| m.name).collect::<Vec<_>>().join(", ")
}

/// A bench JSON (or an eval report), read.
#[derive(Debug)]
pub enum Bench {
    Encoder(BenchReport),
    Generation(GenerationReport),
    Eval(EvalReport),
}

impl Bench {
    /// Read `path`: an eval report has `columns`, a generation bench `gen_tokens`, an encoder bench neither.
    pub fn read(path: &Path) -> Result<Bench, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        let not_a_bench = |e: serde_json::Error| format!("{} is not a `runlens bench --json` file: {e}", path.display());
        if value.get("columns").is_some() {
            serde_json::from_value(value).map(Bench::Eval).map_err(|e| format!("{} is not a `runlens eval --json` file: {e}", path.display()))
        } else if value.get("gen_tokens").is_some() {
            let mut report: GenerationReport = serde_json::from_value(value).map_err(not_a_bench)?;
            // A bench from before `weights_in_llc`: the same verdict from its machine section.
            let llc = report.machine.memory_read.as_ref().and_then(|m| m.llc_bytes).filter(|c| *c > 0);
            for r in report.results.iter_mut().filter(|r| r.weights_in_llc.is_none()) {
                r.weights_in_llc = r.weight_bytes_per_token.zip(llc).map(|(w, c)| w <= c);
            }
            Ok(Bench::Generation(report))
        } else {
            serde_json::from_value(value).map(Bench::Encoder).map_err(not_a_bench)
        }
    }

    /// Every backend with a row or a load (an eval report's columns), in the file's order.
    pub fn backends(&self) -> Vec<&str> {
        let (rows, loads): (Vec<&str>, &[LoadRow]) = match self {
            Bench::Encoder(b) => (b.results.iter().map(|r| r.backend.as_str()).collect(), &b.loads),
            Bench::Generation(b) => (b.results.iter().map(|r| r.backend.as_str()).collect(), &b.loads),
            Bench::Eval(e) => (e.columns.iter().map(|c| c.name.as_str()).collect(), &[]),
        };
        let mut names: Vec<&str> = Vec::new();
        for name in rows.into_iter().chain(loads.iter().map(|l| l.backend.as_str())) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// `backend` has a load row.
    pub fn has_load(&self, backend: &str) -> bool {
        let loads = match self {
            Bench::Encoder(b) => &b.loads,
            Bench::Generation(b) => &b.loads,
            Bench::Eval(_) => return false,
        };
        loads.iter().any(|l| l.backend == backend)
    }

    /// The lengths measured, in the file's order.
    pub fn lengths(&self) -> Vec<usize> {
        let all: Vec<usize> = match self {
            Bench::Encoder(b) => b.results.iter().map(|r| r.seq_len).collect(),
            Bench::Generation(b) => b.results.iter().map(|r| r.prompt_len).collect(),
            Bench::Eval(_) => Vec::new(),
        };
        let mut lengths = Vec::new();
        for n in all {
            if !lengths.contains(&n) {
                lengths.push(n);
            }
        }
        lengths
    }

    /// The metrics of this kind of bench.
    pub fn metrics(&self) -> impl Iterator<Item = &'static Metric> + '_ {
        METRICS.iter().filter(move |m| self.has(m))
    }

    fn has(&self, metric: &Metric) -> bool {
        matches!(
            (self, metric.get),
            (Bench::Encoder(_) | Bench::Generation(_), Getter::Load(_)) | (Bench::Encoder(_), Getter::Encoder(_)) | (Bench::Generation(_), Getter::Generation(_)) | (Bench::Eval(_), Getter::Eval(_))
        )
    }

    fn kind(&self) -> &'static str {
        match self {
            Bench::Encoder(_) => "an encoder bench",
            Bench::Generation(_) => "a generation bench",
            Bench::Eval(_) => "an eval report",
        }
    }

    /// The cell of `backend`'s `metric` at `len` tokens (`threads`: the row of that
    /// count in a thread sweep): its figure, `Ok(Err(text))` for a null the metric
    /// gives a meaning (`none`; `–` on an eval report's reference), or why there is
    /// none. `file` names the file.
    pub fn cell(&self, file: &str, backend: &str, metric: &Metric, len: Option<usize>, threads: Option<usize>) -> Result<Result<f64, &'static str>, String> {
        if !self.has(metric) {
            return Err(format!("`{}` is a metric of {}; {file} is {} (its metrics: {})", metric.name, metric.kind(), self.kind(), names(self.metrics())));
        }
        if !self.backends().contains(&backend) {
            let what = if let Bench::Eval(_) = self { "column" } else { "backend" };
            return Err(format!("no {what} `{backend}` in {file} (it has: {})", self.backends().join(", ")));
        }
        let at = |n: usize| format!("`{backend}` at {n} tokens");
        let value = match (metric.get, len) {
            (Getter::Eval(_), Some(n)) => return Err(format!("`{}` is one figure per column, not per length: `{}` without `@{n}`", metric.name, metric.name)),
            (Getter::Eval(get), None) => {
                let Bench::Eval(e) = self else { unreachable!("checked by has()") };
                let Some(column) = e.columns.iter().find(|c| c.name == backend) else { unreachable!("checked by backends()") };
                match (get(column), metric.null) {
                    (Some(v), _) => v,
                    (None, _) if column.reference => return Ok(Err("–")),
                    (None, Some(text)) => return Ok(Err(text)),
                    (None, None) => return Err(format!("{file}: `{backend}` has no `{}` (null{})", metric.name, column.error.as_ref().map(|e| format!("; the column failed: {e}")).unwrap_or_default())),
                }
            }
            (Getter::Load(get), None) => {
                let loads = match self {
                    Bench::Encoder(b) => &b.loads,
                    Bench::Generation(b) => &b.loads,
                    Bench::Eval(_) => unreachable!("checked by has()"),
                };
                loads.iter().find(|l| l.backend == backend).map(get).ok_or_else(|| format!("{file} has no load of `{backend}`"))?
            }
            (Getter::Load(_), Some(n)) => return Err(format!("`{}` is one figure per load, not per length: `{}` without `@{n}`", metric.name, metric.name)),
            (_, None) => return Err(format!("`{}` needs a length: `{}@{}`", metric.name, metric.name, self.lengths().first().copied().unwrap_or(128))),
            (Getter::Encoder(get), Some(n)) => {
                let Bench::Encoder(b) = self else { unreachable!("checked by has()") };
                let rows: Vec<&Row> = b.results.iter().filter(|r| r.backend == backend && r.seq_len == n && threads.is_none_or(|t| r.threads == Some(t))).collect();
                self.one(file, &at(n), &rows, threads)?;
                get(rows[0]).ok_or_else(|| format!("{file}: {} has no `{}` (null)", at(n), metric.name))?
            }
            (Getter::Generation(get), Some(n)) => {
                let Bench::Generation(b) = self else { unreachable!("checked by has()") };
                let rows: Vec<&GenRow> = b.results.iter().filter(|r| r.backend == backend && r.prompt_len == n).collect();
                self.one(file, &at(n), &rows, None)?;
                match (get(rows[0]), metric.null) {
                    (Some(v), _) => v,
                    (None, Some(text)) => return Ok(Err(text)),
                    (None, None) => return Err(format!("{file}: {} has no `{}` (null)", at(n), metric.name)),
                }
            }
        };
        if value.is_finite() {
            Ok(Ok(value))
        } else {
            Err(format!("{file}: `{backend}`'s `{}` is {value}", metric.name))
        }
    }

    /// Whether `backend`'s weights at `len` tokens fit in the last-level cache (a generation bench's row says).
    pub fn in_llc(&self, backend: &str, len: Option<usize>) -> bool {
        match self {
            Bench::Generation(b) => b.results.iter().any(|r| r.backend == backend && Some(r.prompt_len) == len && r.weights_in_llc == Some(true)),
            Bench::Encoder(_) | Bench::Eval(_) => false,
        }
    }

    /// Exactly one row matched, or why not.
    fn one<T>(&self, file: &str, what: &str, rows: &[T], threads: Option<usize>) -> Result<(), String> {
        let lengths = || self.lengths().iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
        match (rows.len(), threads) {
            (1, _) => Ok(()),
            (0, None) => Err(format!("{file} has no row of {what} (its lengths: {})", lengths())),
            (0, Some(t)) => Err(format!("{file} has no row of {what} with {t} threads")),
            (n, _) => Err(format!("{file} has {n} rows of {what} (a thread sweep): add `threads: N`")),
        }
    }
}
