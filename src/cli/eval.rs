//! `runlens eval`: quantization error on the model's own weights, every column
//! against a float32 reference, over chat prompts (top-1 agreement, KL, where
//! greedy continuations part) and a text (perplexity); a table, `--json`,
//! `--plot` (docs/eval.md). The measuring is `crate::eval`'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use super::Common;
use crate::eval::report::{About, ColumnReport, EvalReport};
use crate::eval::{self, EvalInput};
use crate::task::generation::check_prompt;

/// The chat prompts and the text built into the binary (`assets/eval/`).
const PROMPTS: &str = include_str!("../../assets/eval/chat-prompts.txt");
const TEXT: &str = include_str!("../../assets/eval/text.txt");

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Chat prompts, one per line (blank lines and lines starting with # skipped) [default: assets/eval/chat-prompts.txt, built in: 60 prompts]
    #[arg(long, value_name = "FILE")]
    pub prompts: Option<PathBuf>,
    /// A text for the perplexity [default: assets/eval/text.txt, built in: an essay of about 2,000 tokens]
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,
    /// New tokens the reference generates per prompt (each column is teacher-forced on them).
    #[arg(long, default_value_t = 32, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub gen_tokens: u32,
    /// Score only the text's first N tokens [default: all of them]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..))]
    pub text_tokens: Option<u32>,
    /// Write the report as one JSON object to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an SVG plot (top-1 agreement and mean KL per column) to FILE.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// `path`'s text (named in the error), or the built-in one with its name.
fn read_or(path: Option<&Path>, built_in: &'static str, name: &str) -> anyhow::Result<(String, String)> {
    match path {
        Some(p) => Ok((std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?, p.display().to_string())),
        None => Ok((built_in.to_string(), format!("{name} (built in)"))),
    }
}

/// Run the command; `Ok(false)` when a compared column failed (exit code 1, the rest still reported).
pub fn run(common: &Common, args: &EvalArgs) -> anyhow::Result<bool> {
    let started = Instant::now();
    let setup = common.setup()?;
    let dir = &setup.dir;
    anyhow::ensure!(
        dir.task().generates(),
        "{} is a {} model: eval measures a decoder's next-token distributions (a text-generation model directory)",
        dir.model_name(),
        dir.task()
    );
    let catalog = common.catalog(dir)?;
    let named = common.backends.as_ref().map(|_| common.backends(dir)).transpose()?;
    let selection = eval::choose(&catalog, named.as_deref(), dir)?;
    let mut all = vec![selection.reference.clone()];
    all.extend(selection.compared.iter().cloned());
    for spec in &all {
        crate::backend::files_present(spec, dir)?;
    }
    common.check_memory(dir, &all, crate::memory::Holding::OneAtATime)?;

    let (prompts_text, prompts_file) = read_or(args.prompts.as_deref(), PROMPTS, "assets/eval/chat-prompts.txt")?;
    let (text, text_file) = read_or(args.text.as_deref(), TEXT, "assets/eval/text.txt")?;
    let lines: Vec<&str> = prompts_text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    anyhow::ensure!(!lines.is_empty(), "{prompts_file}: no prompts (one a line)");
    let window = dir.max_seq_len();
    let mut prompts = Vec::with_capacity(lines.len());
    for line in &lines {
        let encoded = setup.prompter.encode(line)?;
        check_prompt(encoded.len(), window).with_context(|| format!("{prompts_file}: the prompt {line:?}"))?;
        prompts.push(encoded);
    }
    let mut text_ids = setup.prompter.tokenizer().encode(&text).with_context(|| format!("{text_file}: tokenizing"))?.ids;
    if let Some(n) = args.text_tokens {
        text_ids.truncate(n as usize);
    }
    anyhow::ensure!(text_ids.len() >= 2, "{text_file}: {} token(s): the perplexity needs at least 2", text_ids.len());
    let ctx = setup.ctx.clone().with_max_new_tokens(args.gen_tokens as usize);
    let generation = ctx.generation()?;
    let input = EvalInput {
        prompts,
        text: text_ids,
        window,
        options: generation.options.clone(),
        detokenizer: Arc::clone(&generation.detokenizer),
    };

    common.set_threads()?;
    let format = setup.prompter.format();
    eprintln!(
        "{} · reference {} ({}) · {} columns · {} prompts ({}) × {} new tokens · text {} tokens · {} threads",
        dir.model_name(),
        selection.reference.name,
        selection.reference_why,
        all.len(),
        input.prompts.len(),
        format.name(),
        args.gen_tokens,
        input.text.len(),
        common.thread_count()
    );
    for s in &selection.skipped {
        eprintln!("note: {} left out: {}", s.name, s.why);
    }
    let evaluation = eval::evaluate(dir, &selection, &input, &mut |line| eprintln!("{line}"))?;
    let about = About {
        machine: crate::bench::machine::Machine::probe(crate::bench::python::venv().as_deref()),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        threads: common.thread_count(),
        prompt_format: format.name().to_string(),
        prompts_file,
        text_file,
    };
    let report = EvalReport::new(about, dir, &selection, &input, &evaluation, started.elapsed().as_secs_f64());
    print_table(&report);
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.plot {
        eval::plot::write_svg(&report, path)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(report.all_ok())
}

/// One row's cells: column, bits, top-1, median first divergence, mean KL, perplexity, ratio.
fn cells(c: &ColumnReport) -> [String; 7] {
    let bits = c.bits.map_or("?".to_string(), |b| b.to_string());
    if c.error.is_some() {
        return [c.name.clone(), bits, "failed".to_string(), String::new(), String::new(), String::new(), String::new()];
    }
    let or_dash = |x: Option<String>| x.unwrap_or_else(|| "–".to_string());
    let (top1, divergence, kl) = if c.reference {
        ("reference".to_string(), "–".to_string(), "–".to_string())
    } else {
        (
            or_dash(c.top1_agreement.map(|t| format!("{:.1}%", t * 100.0))),
            c.median_first_divergence.map_or("none".to_string(), |d| d.to_string()),
            or_dash(c.mean_kl.map(|k| format!("{k:.2e}"))),
        )
    };
    [c.name.clone(), bits, top1, divergence, kl, or_dash(c.perplexity.map(|p| format!("{p:.3}"))), or_dash(c.perplexity_ratio.map(|r| format!("{r:.4}")))]
}

fn print_table(report: &EvalReport) {
    println!(
        "{} ({} weights) · against {} · {} prompts ({}) × {} tokens · text {} tokens in {} window(s) of {} · {} threads",
        report.model,
        report.weights,
        report.reference,
        report.prompts,
        report.prompt_format,
        report.gen_tokens,
        report.text_tokens,
        report.text_windows,
        report.text_window,
        report.threads
    );
    let header = ["column", "bits", "top-1", "median 1st divergence", "mean KL", "perplexity", "vs reference"];
    let rows: Vec<[String; 7]> = report.columns.iter().map(cells).collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).chain([header[i].len()]).max().unwrap_or(0);
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |r: &[String]| {
        let mut out = format!("{:<w$}", r[0], w = widths[0]);
        for (cell, &w) in r.iter().zip(&widths).skip(1) {
            out.push_str(&format!("  {cell:>w$}"));
        }
        out.trim_end().to_string()
    };
    println!("{}", line(&header.map(String::from)));
    for r in &rows {
        println!("{}", line(r));
    }
    for c in &report.columns {
        if let Some(e) = &c.error {
            println!("{} failed: {e}", c.name);
        }
    }
    for s in &report.skipped {
        println!("left out: {} ({})", s.name, s.why);
    }
}
