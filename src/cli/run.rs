//! `runlens run`: one input through each chosen backend, with latency and parity.

use std::time::Instant;

use clap::Args;
use serde::Serialize;

use super::Common;
use crate::backend::{self, BackendKind};
use crate::model::{Embedding, Encoded, SentenceTokenizer};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Run each backend N times and report the median latency (the first run included).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub repeat: u32,
    /// The text to embed (several words are joined with spaces).
    #[arg(required = true, num_args = 1.., value_name = "TEXT")]
    pub text: Vec<String>,
}

/// The JSON of `run --json`, one object.
#[derive(Debug, Serialize)]
pub struct RunReport {
    pub text: String,
    pub truncated: bool,
    pub tokens: Vec<String>,
    pub ids: Vec<i64>,
    /// The backend compared against: eager when run, else the first.
    pub reference: String,
    pub backends: Vec<BackendResult>,
}

#[derive(Debug, Serialize)]
pub struct BackendResult {
    pub name: String,
    pub ok: bool,
    pub error: Option<String>,
    pub embedding: Vec<f32>,
    pub latency_ms: f64,
    pub cosine_vs_reference: Option<f64>,
    pub max_abs_diff_vs_reference: Option<f64>,
}

/// Run the command; `Ok(false)` when a backend failed (exit code 1, output still printed).
pub fn run(common: &Common, args: &RunArgs) -> anyhow::Result<bool> {
    let dir = common.model_dir();
    let tokenizer = SentenceTokenizer::load(&dir.tokenizer()?)?;
    let kinds = common.backends(&dir)?;
    for &kind in &kinds {
        backend::files_present(kind, &dir)?;
    }
    let input = tokenizer.encode(&args.text.join(" "))?;
    backend::set_threads(common.thread_count())?;

    let mut results: Vec<(BackendKind, anyhow::Result<(Embedding, f64)>)> = Vec::new();
    for &kind in &kinds {
        let outcome = backend::load(kind, &dir).and_then(|mut b| timed_runs(b.as_mut(), &input, args.repeat));
        results.push((kind, outcome));
    }
    let report = build_report(&input, &kinds, results);
    let all_ok = report.backends.iter().all(|b| b.ok);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_human(&report, &input, common.thread_count());
    }
    Ok(all_ok)
}

/// Run `repeat` times; the last embedding and the median latency in ms.
fn timed_runs(backend: &mut dyn backend::Backend, input: &Encoded, repeat: u32) -> anyhow::Result<(Embedding, f64)> {
    let mut times = Vec::with_capacity(repeat as usize);
    let mut last = None;
    for _ in 0..repeat {
        let start = Instant::now();
        let embedding = backend.run(input)?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        last = Some(embedding);
    }
    times.sort_by(f64::total_cmp);
    let embedding = last.expect("repeat >= 1 (clap range)");
    Ok((embedding, times[times.len() / 2]))
}

fn build_report(input: &Encoded, kinds: &[BackendKind], results: Vec<(BackendKind, anyhow::Result<(Embedding, f64)>)>) -> RunReport {
    let reference_kind = if kinds.contains(&BackendKind::Eager) { BackendKind::Eager } else { kinds[0] };
    let reference: Option<Embedding> = results
        .iter()
        .find(|(k, _)| *k == reference_kind)
        .and_then(|(_, r)| r.as_ref().ok().map(|(e, _)| e.clone()));
    let backends = results
        .into_iter()
        .map(|(kind, outcome)| match outcome {
            Ok((embedding, latency_ms)) => {
                let parity = match &reference {
                    Some(r) if kind != reference_kind => embedding.parity(r),
                    _ => None,
                };
                BackendResult {
                    name: kind.name().to_string(),
                    ok: true,
                    error: None,
                    embedding: embedding.0,
                    latency_ms,
                    cosine_vs_reference: parity.map(|p| p.cosine),
                    max_abs_diff_vs_reference: parity.map(|p| p.max_abs_diff),
                }
            }
            Err(e) => BackendResult {
                name: kind.name().to_string(),
                ok: false,
                error: Some(format!("{e:#}")),
                embedding: Vec::new(),
                latency_ms: 0.0,
                cosine_vs_reference: None,
                max_abs_diff_vs_reference: None,
            },
        })
        .collect();
    RunReport {
        text: input.text.clone(),
        truncated: input.truncated,
        tokens: input.tokens.clone(),
        ids: input.ids.clone(),
        reference: reference_kind.name().to_string(),
        backends,
    }
}

fn print_human(report: &RunReport, input: &Encoded, threads: usize) {
    let cut = if input.truncated { format!(", TRUNCATED to the first {} (the model's maximum)", crate::model::MAX_SEQ_LEN) } else { String::new() };
    println!("{} tokens{cut}, {threads} threads", input.len());
    println!("tokens: {}", input.tokens.join(" "));
    let width = report.backends.iter().map(|b| b.name.len()).max().unwrap_or(0);
    for b in &report.backends {
        if !b.ok {
            println!("{:<width$} error: {}", b.name, b.error.as_deref().unwrap_or("?"));
            continue;
        }
        let e = Embedding(b.embedding.clone());
        let head: Vec<String> = b.embedding.iter().take(4).map(|v| format!("{v:+.4}")).collect();
        let parity = match (b.cosine_vs_reference, b.max_abs_diff_vs_reference) {
            (Some(c), Some(d)) => format!("vs {}: cosine {c:.7}, max|diff| {d:.1e}", report.reference),
            _ if b.name == report.reference => "(reference)".to_string(),
            _ => "(no reference)".to_string(),
        };
        println!(
            "{:<width$} {}-d [{}, ...] norm {:.4}  {:>9.2} ms  {parity}",
            b.name,
            e.dim(),
            head.join(", "),
            e.norm(),
            b.latency_ms
        );
    }
}
