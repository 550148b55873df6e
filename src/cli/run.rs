//! `runlens run`: one input through each chosen backend, with the task's
//! output, latency and parity against the reference backend. For
//! text-generation each backend continues the prompt greedily (streamed to the
//! terminal as it comes, unless `--json`).

use std::io::Write;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use super::Common;
use crate::backend::{self, BackendSpec};
use crate::task::generation::{parity, terminal_safe, Generation, Top1Agreement, DEFAULT_MAX_NEW_TOKENS};
use crate::task::{TaskContext, TaskOutput, TaskParity, VsReference};
use crate::tensor::Encoded;
use crate::timeline::{nest, Process, Span, Thread};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Run each backend N times and report the median latency (the first run included).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub repeat: u32,
    /// text-generation: at most N new tokens per backend (it also stops at the end-of-text token and at the program's maximum length).
    #[arg(long, default_value_t = DEFAULT_MAX_NEW_TOKENS as u32, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_new_tokens: u32,
    /// Also write each backend's load, runs and (text-generation) prefill and decode steps as a timeline (Chrome trace-event JSON, for Perfetto): docs/trace.md.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// text-generation with --json: also each backend's first-step logits (the last timed run's prefill) as `first_logits`, to compare machines (make test-aarch64).
    #[arg(long)]
    pub first_logits: bool,
    /// The text (several words are joined with spaces); for fill-mask, with `[MASK]` where a word should be predicted.
    #[arg(required = true, num_args = 1.., value_name = "TEXT")]
    pub text: Vec<String>,
}

/// The JSON of `run --json`, one object.
#[derive(Debug, Serialize)]
pub struct RunReport {
    pub text: String,
    pub model: String,
    pub task: String,
    /// The checkpoint's dtype and what the float columns compute in (the manifest's; absent in older ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_dtype: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_dtype: Option<String>,
    /// text-generation: how the text reached the model (`chat`: through its chat template; `raw`); `ids` are what was fed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_format: Option<crate::model::PromptFormat>,
    pub truncated: bool,
    pub tokens: Vec<String>,
    pub ids: Vec<i64>,
    /// The backend compared against: eager when run, else the first.
    pub reference: String,
    /// Why the text cannot be run for this task (no mask in a fill-mask text); then no backend ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// text-generation: why `parity.first_logits_cosine` and `parity.top1_agreement` are null
    /// (the reference is itself quantized, or it failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parity_note: Option<String>,
    pub backends: Vec<BackendResult>,
}

#[derive(Debug, Serialize)]
pub struct BackendResult {
    pub name: String,
    pub ok: bool,
    pub error: Option<String>,
    pub latency_ms: f64,
    /// The task's output (the last run's), its fields as the task writes them
    /// ([`TaskOutput`]'s JSON: `embedding`, `masks`, `labels`, `generated_ids`, ...); none when it failed.
    #[serde(flatten)]
    pub output: Option<TaskOutput>,
    /// text-generation with `--first-logits`: the prompt's next-token logits, `[V]`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_logits: Option<Vec<f32>>,
    /// Against the reference backend ([`VsReference`]'s JSON: `parity`,
    /// `max_abs_diff_vs_reference`, `cosine_vs_reference`); no parity for the reference itself.
    #[serde(flatten)]
    pub vs_reference: VsReference,
}

/// Run the command; `Ok(false)` when a backend failed (exit code 1, output still printed).
pub fn run(common: &Common, args: &RunArgs) -> anyhow::Result<bool> {
    let trace = super::open_trace(args.trace.as_deref())?;
    let setup = common.setup()?;
    let dir = &setup.dir;
    let ctx = setup.ctx.clone().with_max_new_tokens(args.max_new_tokens as usize);
    let specs = common.backends(dir)?;
    for spec in &specs {
        backend::files_present(spec, dir)?;
    }
    common.check_memory(dir, &specs, crate::memory::Holding::OneAtATime)?;
    let input = setup.encode(&args.text)?;
    let mut report = RunReport {
        text: input.text.clone(),
        model: dir.model_name().to_string(),
        task: ctx.task.to_string(),
        source_dtype: dir.manifest().source_dtype.clone(),
        compute_dtype: dir.manifest().compute_dtype.clone(),
        prompt_format: ctx.task.takes_a_prompt().then(|| setup.prompter.format()),
        truncated: input.truncated,
        tokens: input.tokens.clone(),
        ids: input.ids.clone(),
        reference: reference_of(&specs, &[]).name.clone(),
        error: None,
        parity_note: None,
        backends: Vec::new(),
    };
    if let Err(e) = ctx.check_input(&input) {
        report.error = Some(format!("{e:#}"));
        if args.json {
            println!("{}", serde_json::to_string(&report)?);
            return Ok(false);
        }
        return Err(e);
    }
    if args.first_logits && !ctx.task.generates() {
        anyhow::bail!("--first-logits is for text-generation models; {} is {}: leave the option out", report.model, report.task);
    }
    common.set_threads()?;
    let stream = !args.json && ctx.task.generates();
    if stream {
        println!("{} · {} · {} prompt tokens, {} threads", report.model, report.task, input.len(), common.thread_count());
        println!("prompt: {}", input.text);
    }

    let mut timeline = super::timeline_for("run", common, &setup, &input);
    // The reference runs first: text-generation teacher-forces every other
    // backend on its new ids while that backend is loaded (docs/generation.md).
    let first = reference_of(&specs, &[]);
    let mut order: Vec<&BackendSpec> = specs.iter().filter(|s| **s == first).collect();
    order.extend(specs.iter().filter(|s| **s != first));
    let mut baseline: Option<Generation> = None;
    let mut top1: Vec<(String, Top1Agreement)> = Vec::new();
    let mut results: Vec<(BackendSpec, anyhow::Result<Outcome>)> = order
        .into_iter()
        .map(|spec| {
            let zero = Instant::now();
            let mut spans = Vec::new();
            // Its peak, remembered for the memory check (docs/memory.md).
            let watch = crate::memory::measured::watch(spec);
            let loaded = crate::task::load_backend(spec, dir);
            spans.push(Span::new("load", "load", 0, ns(zero.elapsed())));
            let outcome = loaded.and_then(|mut b| {
                if stream {
                    print!("{:<16} ", spec.name);
                    let _ = std::io::stdout().flush();
                }
                let outcome = timed_runs(b.as_mut(), &ctx, &input, args.repeat, stream, (zero, trace.is_some().then_some(&mut spans)));
                if stream {
                    println!();
                }
                let (output, latency_ms) = outcome?;
                let mut first_logits = None;
                if let TaskOutput::Generation(g) = &output {
                    // The prefill's logits, kept by the greedy loop (the last repeat's).
                    first_logits = args.first_logits.then(|| g.first_logits.clone());
                    if *spec == first {
                        baseline = (!first.is_quantized()).then(|| g.clone());
                    } else if let Some(reference) = &baseline {
                        let start = Instant::now();
                        let agreement = parity::top1_agreement_of(b.as_mut(), &spec.name, &input.ids, &g.ids, &reference.ids)
                            .map_err(|e| e.context(format!("teacher-forcing {} on {}'s new ids (parity.top1_agreement)", spec.name, first.name)))?;
                        if trace.is_some() {
                            let at = ns(start.saturating_duration_since(zero));
                            spans.push(Span::new("teacher-forced pass", "parity", at, ns(start.elapsed())).arg("positions", agreement.positions));
                        }
                        top1.push((spec.name.clone(), agreement));
                    }
                }
                Ok(Outcome { output, latency_ms, first_logits })
            });
            if outcome.is_ok() {
                crate::memory::measured::finish(watch, spec, dir, "runlens run");
            }
            if trace.is_some() {
                let source = "runlens' wall clock around the load, each run and each new token (no tracer); \
                              a step is placed to end when the greedy loop handed its token over";
                let thread = Thread { name: "run (timed)".into(), spans: nest(std::mem::take(&mut spans), |s| usize::from(s.cat == "step")) };
                timeline.processes.push(Process { name: spec.name.clone(), tracer: None, source: source.into(), threads: vec![thread] });
            }
            (spec.clone(), outcome)
        })
        .collect();
    // The reference ran first; the timeline lists the backends in the order asked for, as the report does.
    timeline.processes.sort_by_key(|p| specs.iter().position(|s| s.name == p.name));
    if let Some(file) = trace {
        file.write(&timeline)?;
    }
    results.sort_by_key(|(spec, _)| specs.iter().position(|s| s == spec));
    let ok: Vec<&BackendSpec> = results.iter().filter(|(_, r)| r.is_ok()).map(|(s, _)| s).collect();
    let reference = reference_of(&specs, &ok);
    report.reference = reference.name.clone();
    // text-generation: each backend's parity completed by the task with its top-1
    // agreement (teacher-forced on the reference's ids while it was loaded); the note says why
    // the logits fields are null.
    let agreement = |name: &str| top1.iter().find(|(n, _)| n == name).map(|(_, a)| *a);
    report.backends = build_results(&reference, results, |name, p| p.completed(reference.is_quantized(), agreement(name)));
    let first_failed = results_failed(&report.backends, &first);
    report.parity_note = parity::logits_note(ctx.task, &reference.name, reference.quantization.as_deref(), first_failed);
    let all_ok = report.backends.iter().all(|b| b.ok);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else if ctx.task.generates() {
        print_generation(&report);
    } else {
        print_human(&report, &input, &ctx, common.thread_count());
    }
    Ok(all_ok)
}

/// The name of `first` when it failed.
fn results_failed<'a>(backends: &[BackendResult], first: &'a BackendSpec) -> Option<&'a str> {
    backends.iter().any(|b| b.name == first.name && !b.ok).then_some(first.name.as_str())
}

/// The backend the others are compared with: eager when it runs, else the
/// first; among those that ran (`ok`), when any did.
pub fn reference_of(specs: &[BackendSpec], ok: &[&BackendSpec]) -> BackendSpec {
    let pool: Vec<&BackendSpec> = if ok.is_empty() { specs.iter().collect() } else { ok.to_vec() };
    pool.iter().copied().find(|s| s.is_float_eager()).unwrap_or(pool[0]).clone()
}

/// One backend's successful run: the last output, the median latency, the first-step logits when asked.
struct Outcome {
    output: TaskOutput,
    latency_ms: f64,
    first_logits: Option<Vec<f32>>,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Run `repeat` times through the task's driver; the last output and the
/// median latency in ms (for text-generation: of the whole generation; the
/// last run's tokens are printed as they come when `stream`). With `spans`
/// (a `--trace`), each run (and each new token of a generation: the prefill,
/// then each decode step) is added to it, timed from `zero`; without, nothing
/// is kept per run but its latency, so a long `--repeat` (`make soak`) holds
/// its memory flat.
fn timed_runs(
    backend: &mut dyn backend::Backend,
    ctx: &TaskContext,
    input: &Encoded,
    repeat: u32,
    stream: bool,
    (zero, mut spans): (Instant, Option<&mut Vec<Span>>),
) -> anyhow::Result<(TaskOutput, f64)> {
    let mut times = Vec::with_capacity(repeat as usize);
    let mut last = None;
    for run in 0..repeat {
        let show = stream && run + 1 == repeat;
        let start = Instant::now();
        let mut steps: Vec<(Instant, Duration, i64)> = Vec::new();
        let keep = spans.is_some();
        let output = crate::task::run(backend, ctx, input, &mut |step| {
            if keep {
                steps.push((Instant::now(), step.latency, step.id));
            }
            if show {
                print!("{}", terminal_safe(&step.text));
                let _ = std::io::stdout().flush();
            }
            ControlFlow::Continue(())
        })?;
        let wall = start.elapsed();
        times.push(wall.as_secs_f64() * 1e3);
        if let Some(spans) = spans.as_deref_mut() {
            let what = ctx.task.run_verb();
            let at = |t: Instant| ns(t.saturating_duration_since(zero));
            spans.push(Span::new(what, "run", at(start), ns(wall)).arg("run", run).arg("new_tokens", steps.len()));
            for (k, (handed, latency, id)) in steps.into_iter().enumerate() {
                let name = if k == 0 { "prefill".to_owned() } else { format!("decode step {k}") };
                let begin = at(handed).saturating_sub(ns(latency)).max(at(start));
                spans.push(Span::new(name, "step", begin, ns(latency)).arg("token_index", k).arg("id", id));
            }
        }
        last = Some(output);
    }
    times.sort_by(f64::total_cmp);
    let output = last.expect("repeat >= 1 (clap range)");
    Ok((output, times[times.len() / 2]))
}

/// Each backend's row: its output, and its parity against `reference`'s
/// output completed by `finish` (text-generation's logits fields).
fn build_results(
    reference: &BackendSpec,
    results: Vec<(BackendSpec, anyhow::Result<Outcome>)>,
    finish: impl Fn(&str, TaskParity) -> TaskParity,
) -> Vec<BackendResult> {
    let reference_out: Option<TaskOutput> =
        results.iter().find(|(s, _)| s == reference).and_then(|(_, r)| r.as_ref().ok().map(|o| o.output.clone()));
    results
        .into_iter()
        .map(|(spec, outcome)| match outcome {
            Ok(Outcome { output, latency_ms, first_logits }) => {
                let parity = match &reference_out {
                    Some(r) if spec != *reference => output.parity(r).map(|p| finish(&spec.name, p)),
                    _ => None,
                };
                BackendResult {
                    name: spec.name.clone(),
                    ok: true,
                    error: None,
                    latency_ms,
                    output: Some(output),
                    first_logits,
                    vs_reference: VsReference(parity),
                }
            }
            Err(e) => BackendResult {
                name: spec.name.clone(),
                ok: false,
                error: Some(format!("{e:#}")),
                latency_ms: 0.0,
                output: None,
                first_logits: None,
                vs_reference: VsReference(None),
            },
        })
        .collect()
}

fn print_human(report: &RunReport, input: &Encoded, ctx: &TaskContext, threads: usize) {
    let cut = if input.truncated { format!(", TRUNCATED to the first {} (the model's maximum)", input.len()) } else { String::new() };
    println!("{} · {} · {} tokens{cut}, {threads} threads", report.model, report.task, input.len());
    println!("tokens: {}", input.tokens.join(" "));
    let width = report.backends.iter().map(|b| b.name.len()).max().unwrap_or(0);
    for b in &report.backends {
        if !b.ok {
            println!("{:<width$} error: {}", b.name, b.error.as_deref().unwrap_or("?"));
            continue;
        }
        let parity = match &b.vs_reference.0 {
            Some(TaskParity::Embedding(p)) => format!("vs {}: cosine {:.7}, max|diff| {:.1e}", report.reference, p.cosine, p.max_abs_diff),
            Some(q @ TaskParity::FillMask(p)) => format!(
                "vs {}: top-1 {}, top-{} overlap {:.0}%, max|diff| {:.1e}",
                report.reference,
                q.same_word(),
                ctx.top_k,
                p.topk_overlap * 100.0,
                p.max_abs_diff
            ),
            Some(q @ TaskParity::Classification(p)) => {
                format!("vs {}: label {}, max|diff| {:.1e}", report.reference, q.same_word(), p.max_abs_diff)
            }
            Some(TaskParity::Generation(_)) => String::new(),
            None if b.name == report.reference => "(reference)".to_string(),
            None => "(no reference)".to_string(),
        };
        println!("{:<width$} {:>9.2} ms  {parity}", b.name, b.latency_ms);
        match &b.output {
            Some(TaskOutput::Embedding(emb)) => {
                let head: Vec<String> = emb.values().iter().take(4).map(|v| format!("{v:+.4}")).collect();
                println!("{:<width$}   {}-d [{}, ...] norm {:.4}", "", emb.dim(), head.join(", "), emb.norm());
            }
            Some(TaskOutput::FillMask(f)) => {
                for m in &f.masks {
                    let top: Vec<String> = m.top.iter().map(|t| format!("{} {:.3}", t.token, t.prob)).collect();
                    println!("{:<width$}   mask @{}: {}", "", m.position, top.join(" · "));
                }
            }
            Some(TaskOutput::Classification(c)) => {
                let all: Vec<String> = c.labels.iter().map(|l| format!("{} {:.3}", l.label, l.prob)).collect();
                println!("{:<width$}   {}", "", all.join(" · "));
            }
            Some(TaskOutput::Generation(_)) | None => {}
        }
    }
}

/// `, first logits cosine 0.99998, top-1 23/24 teacher-forced` as far as measured.
fn logits_words(p: &crate::task::GenerationParity) -> String {
    let mut words = String::new();
    if let Some(c) = p.first_logits_cosine {
        words += &format!(", first logits cosine {c:.5}");
    }
    if let Some(t) = p.top1 {
        words += &format!(", top-1 {}/{} teacher-forced", t.agreed, t.positions);
    }
    words
}

/// After the streamed continuations: per backend, TTFT, decode speed, why it
/// stopped, and whether its ids are the reference's.
fn print_generation(report: &RunReport) {
    let width = report.backends.iter().map(|b| b.name.len()).max().unwrap_or(0);
    for b in &report.backends {
        if !b.ok {
            println!("{:<width$} error: {}", b.name, b.error.as_deref().unwrap_or("?"));
            continue;
        }
        let generation = match &b.output {
            Some(TaskOutput::Generation(g)) => Some(g),
            _ => None,
        };
        let tokens = generation.map_or(0, |g| g.ids.len());
        let speed = match generation.and_then(Generation::decode_tokens_per_s) {
            Some(v) => format!("{v:.1} tokens/s"),
            None => "- tokens/s".to_string(),
        };
        let parity = match &b.vs_reference.0 {
            Some(TaskParity::Generation(p)) => {
                let ids = if p.same_ids {
                    "same ids".to_string()
                } else {
                    format!("IDS DIFFER from new token {}", p.first_divergence.unwrap_or(0))
                };
                format!("vs {}: {ids}{}", report.reference, logits_words(p))
            }
            _ if b.name == report.reference => "(reference)".to_string(),
            _ => "(no reference)".to_string(),
        };
        let stop = generation.map_or("?", |g| g.stop.name());
        println!(
            "{:<width$} TTFT {:>8.2} ms · decode {speed} · {tokens} tokens, stopped at {stop} · {parity}",
            b.name,
            generation.map_or(0.0, |g| g.ttft.as_secs_f64() * 1e3)
        );
    }
    if let Some(note) = &report.parity_note {
        println!("({note})");
    }
}
