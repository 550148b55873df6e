//! `runlens bench`: every backend at several sequence lengths, optionally side
//! by side with the course's Python flow; a table, JSON, CSV and an SVG plot.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::Common;
use crate::backend::{self, BackendSpec};
use crate::bench::{self, machine::Machine, report, BenchReport, Budget, LoadRow, Row, Samples, WrapperOverhead};
use crate::model::Encoded;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Comma list of sequence lengths (tokens, 2 up to the model's maximum).
    #[arg(long, value_delimiter = ',', default_value = "8,32,128", value_name = "LIST", value_parser = clap::value_parser!(u32).range(2..=4096))]
    pub seq_lens: Vec<u32>,
    /// Timed runs per cell at most.
    #[arg(long, default_value_t = 50, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub iters: u32,
    /// Untimed warm-up runs per cell (the portable path gets at most one).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub warmup: u32,
    /// Time budget of one cell's timed runs, in seconds (at least one run is made).
    #[arg(long, default_value_t = 3.0, value_name = "S")]
    pub max_seconds: f64,
    /// Also run the course's Python flow (python/bench_python.py through .venv) on the same ids.
    #[arg(long)]
    pub python: bool,
    /// Write the report as one JSON object to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the rows as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write an SVG plot (median latency against sequence length, log scale) to FILE.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// text-generation: comma list of prompt lengths (tokens) for the prefill (pp) and decode (tg) rows.
    #[arg(long, value_delimiter = ',', default_value = "8,32,128", value_name = "LIST", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub prompt_lens: Vec<u32>,
    /// text-generation: new tokens per timed generation (the end-of-text token does not stop it).
    #[arg(long, default_value_t = 32, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub gen_tokens: u32,
}

pub fn run(common: &Common, args: &BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.max_seconds > 0.0 && args.max_seconds.is_finite(), "--max-seconds must be positive");
    let dir = common.model_dir()?;
    if dir.task().generates() {
        return run_generation(common, args, &dir);
    }
    let tokenizer = dir.load_tokenizer()?;
    // FLOPs are counted for BERT-shaped configs; other architectures get none.
    let config = dir.model_config().ok().and_then(|c| bench::EncoderShape::of(&c));
    let kinds = common.backends(&dir)?;
    for spec in &kinds {
        backend::files_present(spec, &dir)?;
    }
    common.check_memory(&dir, &kinds, crate::memory::Holding::OneAtATime)?;
    let mut lens: Vec<usize> = args.seq_lens.iter().map(|&l| l as usize).collect();
    lens.dedup();
    if let Some(&l) = lens.iter().find(|&&l| l > dir.max_seq_len()) {
        anyhow::bail!("--seq-lens {l}: the model takes at most {} tokens", dir.max_seq_len());
    }
    let inputs: Vec<Encoded> = lens.iter().map(|&l| tokenizer.synthetic(l)).collect::<anyhow::Result<_>>()?;
    let sweep = common.thread_counts();
    let threads = sweep[0];
    let budget = Budget { warmup: args.warmup, iters: args.iters, max_seconds: args.max_seconds };

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        // A second bench in one process keeps the first handler; that is fine.
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst));
    }

    let paired = paired_spec(&kinds).cloned();
    let per_count = kinds.len() * lens.len() + if paired.is_some() { lens.len() } else { 0 };
    let bar = ProgressBar::new((per_count * sweep.len()) as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} cells  {elapsed_precise}  {msg}").expect("static template"));

    // Like llama-bench's -t: every backend and length at each thread count in turn
    // (each backend loaded again after the count is set: ExecuTorch's pool is sized at load).
    let mut out = Measured::default();
    for &t in &sweep {
        backend::set_threads(t)?;
        let first_row = out.rows.len();
        for kind in &kinds {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            bar.set_message(format!("loading {kind}, {t} threads"));
            let pair = paired.as_ref() == Some(kind);
            bench_backend(kind, pair, &dir, &inputs, config.as_ref(), budget, &stop, &bar, &mut out)?;
        }
        out.rows[first_row..].iter_mut().for_each(|r| r.threads = Some(t));
    }
    let Measured { mut rows, mut loads, wrapper_overhead } = out;
    bar.finish_and_clear();

    let mut machine = Machine::probe(bench::python::venv().as_deref());
    let mut interrupted = stop.load(Ordering::Relaxed);
    for &t in sweep.iter().filter(|_| args.python) {
        if interrupted {
            break;
        }
        eprintln!("running the Python flow (python/bench_python.py) on the same ids, {t} threads ...");
        let out = bench::python::run(&dir, &kinds, &inputs, t, budget)?;
        machine.versions.extend(out.versions);
        loads.extend(out.loads);
        for cell in out.results {
            let mut samples = Samples::new();
            cell.times_ms.iter().for_each(|&ms| samples.record_ms(ms));
            rows.extend(samples.row(&cell.backend, cell.seq_len, flops(config.as_ref(), cell.seq_len)).map(|mut r| {
                r.threads = Some(t);
                r
            }));
        }
        interrupted |= out.interrupted || stop.load(Ordering::Relaxed);
    }
    rows.sort_by_key(|r| (r.seq_len, r.threads));
    bench::fill_ratios(&mut rows);

    let report = BenchReport {
        machine,
        threads,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        warmup: args.warmup,
        iters: args.iters,
        max_seconds: args.max_seconds,
        interrupted,
        results: rows,
        loads,
        wrapper_overhead,
        thread_sweep: if sweep.len() > 1 { sweep.clone() } else { Vec::new() },
    };
    print!("{}", report::table(&report));
    if let Some(path) = &args.json {
        report::write_json(&report, path)?;
    }
    if let Some(path) = &args.csv {
        report::write_csv(&report, path)?;
    }
    if let Some(path) = &args.plot {
        bench::plot::write_svg(&report, path)?;
    }
    Ok(())
}

/// Python's timed generations per cell: the script has no time budget, and a
/// window program recomputes the whole window for every token.
const PYTHON_GENERATIONS: u32 = 3;

/// A text-generation model: llama-bench's prefill (ppN) and decode (tgG @N)
/// rows for every backend and prompt length, Python's counterparts after.
fn run_generation(common: &Common, args: &BenchArgs, dir: &crate::model::ModelDir) -> anyhow::Result<()> {
    use crate::bench::generation::{self, GenerationReport};
    let tokenizer = dir.load_tokenizer()?;
    let kinds = common.backends(dir)?;
    for spec in &kinds {
        backend::files_present(spec, dir)?;
    }
    common.check_memory(dir, &kinds, crate::memory::Holding::OneAtATime)?;
    let mut lens: Vec<usize> = args.prompt_lens.iter().map(|&l| l as usize).collect();
    lens.sort_unstable();
    lens.dedup();
    let gen_tokens = args.gen_tokens as usize;
    let prompts: Vec<Vec<i64>> = lens.iter().map(|&n| generation::prompt_ids(&tokenizer, n)).collect::<anyhow::Result<_>>()?;
    let threads = common.thread_counts()[0];
    backend::set_threads(threads)?;
    let budget = Budget { warmup: args.warmup, iters: args.iters, max_seconds: args.max_seconds };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst));
    }
    let bar = ProgressBar::new((kinds.len() * lens.len()) as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} cells  {elapsed_precise}  {msg}").expect("static template"));
    let (mut rows, mut loads, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    // The weights a decode step reads, as each loaded backend counts them (eager's model, float or
    // quantized; a program's constants as read at open: no file is read again).
    let mut weight_bytes = std::collections::BTreeMap::new();
    // And the KV cache one more filled position adds to a step: the geometry from config.json,
    // the element size as each backend keeps its cache (llama.cpp's quantized files: float16).
    let values_per_position = dir.model_config().ok().and_then(|c| crate::memory::Geometry::of(&c)).map(|g| g.kv_values_per_position());
    let mut cache_bytes = std::collections::BTreeMap::new();
    let mut caches: Vec<(String, Option<String>)> = kinds.iter().map(|k| (k.name.clone(), generation::cache_of(dir, k))).collect();
    for (kind, (_, cache)) in kinds.iter().zip(caches.iter_mut()) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        bar.set_message(format!("loading {kind}"));
        let start = Instant::now();
        let watch = crate::memory::measured::watch(kind);
        let mut b = crate::task::load_backend(kind, dir)?;
        loads.push(LoadRow { backend: kind.name().to_string(), load_ms: start.elapsed().as_secs_f64() * 1e3, rss_mb: bench::rss_mb() });
        if let Some(bytes) = b.weight_bytes_per_token() {
            weight_bytes.insert(kind.name().to_string(), bytes);
        }
        if let Some(bytes) = values_per_position.zip(b.kv_cache_element_bytes()).map(|(n, e)| n * e) {
            cache_bytes.insert(kind.name().to_string(), bytes);
        }
        // A program's cache as its file has it (one given with --program has no manifest entry).
        if let Some(kind) = b.cache_kind() {
            *cache = Some(kind.to_string());
        }
        let (r, s) = generation::bench_backend(kind, cache.clone(), b.as_mut(), &prompts, gen_tokens, budget, &stop, |m| {
            bar.set_message(m.to_string());
            bar.inc(1);
        })?;
        drop(b);
        crate::memory::measured::finish(watch, kind, dir, "runlens bench");
        rows.extend(r);
        skipped.extend(s);
    }
    bar.finish_and_clear();
    let mut machine = Machine::probe(bench::python::venv().as_deref());
    let mut interrupted = stop.load(Ordering::Relaxed);
    let python_iters = args.iters.min(PYTHON_GENERATIONS);
    if args.python && !interrupted {
        eprintln!("running the Python counterparts (python/bench_generate.py) on the same prompts, {threads} threads ...");
        // A failed Python side loses its rows, not runlens' own.
        let columns: Vec<(&BackendSpec, Option<String>)> = kinds.iter().zip(&caches).map(|(k, (_, c))| (k, c.clone())).collect();
        match generation::python::run(dir, &columns, &lens, gen_tokens, python_iters, args.warmup.min(1), threads) {
            Ok(py) => {
                machine.versions.extend(py.versions);
                rows.extend(py.rows);
                skipped.extend(py.skipped);
                interrupted |= py.interrupted || stop.load(Ordering::Relaxed);
            }
            Err(e) => eprintln!("warning: the Python counterparts failed, the table has runlens' rows only: {e:#}"),
        }
    }
    rows.sort_by_key(|r| r.prompt_len);
    generation::fill_ratios(&mut rows);
    if !interrupted {
        eprintln!("measuring the memory read bandwidth ({threads} threads) ...");
        machine.measure_read_bandwidth(threads);
    }
    let llc = machine.memory_read.as_ref().and_then(|m| m.llc_bytes);
    generation::fill_bandwidth(&mut rows, &weight_bytes, machine.memory_read_gbps, llc);
    generation::fill_cache(&mut rows, &cache_bytes);
    let report = GenerationReport {
        machine,
        model: dir.model_name().to_string(),
        weights: generation::weights_note(&dir.manifest().weights_kind()),
        threads,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        gen_tokens,
        warmup: args.warmup,
        iters: args.iters,
        max_seconds: args.max_seconds,
        python_iters: args.python.then_some(python_iters),
        interrupted,
        results: rows,
        loads,
        skipped,
    };
    print!("{}", generation::table(&report));
    if let Some(path) = &args.json {
        generation::write_json(&report, path)?;
    }
    if let Some(path) = &args.csv {
        std::fs::write(path, generation::csv(&report)).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        generation::plot::write_svg(&report, path)?;
    }
    Ok(())
}

/// The backend whose calls are paired with the shim's own C++ loop (the
/// `shim-loop-xnnpack` row): the first float XNNPACK program of any length.
fn paired_spec(kinds: &[BackendSpec]) -> Option<&BackendSpec> {
    kinds.iter().find(|s| s.is_float_xnnpack_program())
}

/// The forward pass's FLOPs at `seq_len`, 0 when the config is not BERT's.
fn flops(config: Option<&bench::EncoderShape>, seq_len: usize) -> f64 {
    config.map_or(0.0, |c| bench::forward_flops(c, seq_len))
}

/// What the Rust side measured.
#[derive(Default)]
struct Measured {
    rows: Vec<Row>,
    loads: Vec<LoadRow>,
    wrapper_overhead: Vec<WrapperOverhead>,
}

/// Load one backend, then time it at every length. With `pair` (XNNPACK), it
/// is timed in pairs with the runtime's own loop on the same module (the
/// `shim-loop-xnnpack` row), which gives the wrapper's cost per call.
#[allow(clippy::too_many_arguments)]
fn bench_backend(
    kind: &BackendSpec,
    pair: bool,
    dir: &crate::model::ModelDir,
    inputs: &[Encoded],
    config: Option<&bench::EncoderShape>,
    budget: Budget,
    stop: &AtomicBool,
    bar: &ProgressBar,
    out: &mut Measured,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let watch = crate::memory::measured::watch(kind);
    let mut b = crate::task::load_backend(kind, dir)?;
    let load_ms = b.load_time().unwrap_or_else(|| start.elapsed()).as_secs_f64() * 1e3;
    out.loads.push(LoadRow { backend: kind.name().to_string(), load_ms, rss_mb: bench::rss_mb() });
    let budget = budget.for_spec(kind);

    let heat = crate::heat::HeatSource::from_env();
    for input in inputs {
        let flops = flops(config, input.len());
        let heat_start = heat.sample();
        let first_row = out.rows.len();
        if pair && b.native_loop().is_some() {
            let shim_loop = bench::shim_loop_row(kind.name());
            bar.set_message(format!("{kind} and {shim_loop} at {} tokens", input.len()));
            let (paired, nested_ns) = paired_with_native_loop(b.as_mut(), input, budget, stop)?;
            out.rows.extend(paired.a.row(kind.name(), input.len(), flops));
            out.rows.extend(paired.b.row(&shim_loop, input.len(), flops));
            let (median, p90, paired_median) =
                (bench::quantile_us(&nested_ns, 0.5), bench::quantile_us(&nested_ns, 0.9), paired.median_difference_us());
            if let (Some(median_us), Some(p90_us), Some(paired_median_us)) = (median, p90, paired_median) {
                out.wrapper_overhead.push(WrapperOverhead {
                    seq_len: input.len(),
                    calls: nested_ns.len() as u64,
                    median_us,
                    p90_us,
                    paired_median_us,
                });
            }
            bar.inc(2);
        } else {
            bar.set_message(format!("{kind} at {} tokens", input.len()));
            let samples = budget.measure(stop, || {
                let t = Instant::now();
                b.run(input)?;
                Ok(t.elapsed().as_nanos() as u64)
            })?;
            out.rows.extend(samples.row(kind.name(), input.len(), flops));
            bar.inc(1);
        }
        let heat_end = heat.sample();
        for row in &mut out.rows[first_row..] {
            row.heat_start = Some(heat_start);
            row.heat_end = Some(heat_end);
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    drop(b);
    crate::memory::measured::finish(watch, kind, dir, "runlens bench");
    Ok(())
}

/// Rust's `Backend::run` and one `forward` in the runtime's own loop (the C
/// shim's, timed in C++), alternately on the same module; with, for each Rust
/// call, its time minus the runtime's inner time of that call (ns).
fn paired_with_native_loop(
    b: &mut dyn backend::Backend,
    input: &Encoded,
    budget: Budget,
    stop: &AtomicBool,
) -> anyhow::Result<(bench::PairedSamples, Vec<i64>)> {
    let b = std::cell::RefCell::new(b);
    let nested = std::cell::RefCell::new(Vec::new());
    let no_loop = || anyhow::anyhow!("the backend has no loop of its own");
    let paired = budget.measure_pair(
        stop,
        || {
            let mut b = b.borrow_mut();
            let t = Instant::now();
            b.run(input)?;
            let ns = t.elapsed().as_nanos() as u64;
            let inner = b.native_loop().ok_or_else(no_loop)?.last_run_ns();
            nested.borrow_mut().push(ns as i64 - inner as i64);
            Ok(ns)
        },
        || b.borrow_mut().native_loop().ok_or_else(no_loop)?.run_native(input),
    )?;
    // The warm-up calls are not part of the measurement.
    let mut nested = nested.into_inner();
    let warm = nested.len().saturating_sub(paired.differences_ns.len());
    nested.drain(..warm);
    Ok((paired, nested))
}
