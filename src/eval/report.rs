//! `runlens eval --json`: the machine, the command, the model and whether its
//! weights are trained, what was measured on, and one summary per column (the
//! reference first), with its per-prompt figures.

use serde::{Deserialize, Serialize};

use super::math::median_first_divergence;
use super::{ColumnOutcome, EvalInput, Evaluation, Selection, Skipped};
use crate::backend::{BackendSpec, WeightFormat};
use crate::bench::machine::Machine;
use crate::model::{Manifest, ModelDir};

/// The whole JSON of `runlens eval --json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EvalReport {
    pub machine: Machine,
    pub command: String,
    /// The manifest's model name.
    pub model: String,
    pub model_dir: String,
    /// The manifest's `source`: where the checkpoint came from.
    pub source: Option<String>,
    /// `real` (trained weights), `random` (a test model's), or the source string when it is not known.
    pub weights: String,
    pub threads: usize,
    /// `chat` (through the chat template, as the explorer feeds a prompt) or `raw`.
    pub prompt_format: String,
    pub prompts_file: String,
    pub prompts: usize,
    /// New tokens the reference generates per prompt (fewer when it ends a turn first).
    pub gen_tokens: usize,
    pub text_file: String,
    /// The text's tokens (after `--text-tokens`).
    pub text_tokens: usize,
    /// Tokens per window of the text (the model's `max_seq_len`).
    pub text_window: usize,
    pub text_windows: usize,
    /// Tokens scored: every token of a window but its first.
    pub text_predicted: usize,
    pub reference: String,
    pub reference_why: String,
    /// Columns present and left out (`portable` unless named).
    pub skipped: Vec<Skipped>,
    /// The reference first, then each compared column in order.
    pub columns: Vec<ColumnReport>,
    /// The reference's continuation of each prompt.
    pub continuations: Vec<Continuation>,
    /// The whole evaluation, loads included.
    pub seconds: f64,
}

/// One column's summary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ColumnReport {
    pub name: String,
    pub title: String,
    pub runtime: String,
    /// The scheme (`int8-dynamic`, `8da4w`, `q4_0`, ...); null for float32.
    pub quantization: Option<String>,
    /// Bits per weight of its linear layers (32 for float32); null when not known.
    pub bits: Option<u32>,
    pub reference: bool,
    /// Why it has no figures (it failed to load or run).
    pub error: Option<String>,
    /// Teacher-forced positions whose likeliest token is the reference's, over all prompts.
    pub top1_agreement: Option<f64>,
    pub top1_positions: usize,
    /// The median over prompts of the first position where its greedy continuation
    /// leaves the reference's (the lower middle for an even count); null when more
    /// than half the prompts are continued identically ("none").
    pub median_first_divergence: Option<usize>,
    /// Prompts whose continuation is the reference's, every token.
    pub prompts_identical: usize,
    /// Mean over all positions of KL(p_ref || p_col), nats.
    pub mean_kl: Option<f64>,
    /// The text's perplexity.
    pub perplexity: Option<f64>,
    /// Over the reference's perplexity.
    pub perplexity_ratio: Option<f64>,
    /// The text's tokens that were its likeliest next token.
    pub text_top1: Option<f64>,
    pub seconds: f64,
    /// One per prompt, in order (empty when it failed).
    pub per_prompt: Vec<PromptRow>,
}

/// One prompt's figures for one column.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PromptRow {
    pub positions: usize,
    pub top1_agreed: usize,
    /// Null: the same continuation as the reference's.
    pub first_divergence: Option<usize>,
    pub mean_kl: Option<f64>,
}

/// The reference's continuation of one prompt.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Continuation {
    pub prompt: String,
    pub prompt_tokens: usize,
    pub ids: Vec<i64>,
    pub text: String,
    pub stop: String,
}

/// What the command knows that the evaluation does not.
pub struct About {
    pub machine: Machine,
    pub command: String,
    pub threads: usize,
    pub prompt_format: String,
    pub prompts_file: String,
    pub text_file: String,
}

/// A finite number, else null.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Bits per weight of a column's linear layers: eager's from its format, a
/// program's or GGUF's from the manifest (`bits`), 32 for float32.
pub fn bits_of(spec: &BackendSpec, manifest: &Manifest) -> Option<u32> {
    match spec.eager_format() {
        Some(WeightFormat::Float) => Some(32),
        Some(WeightFormat::Int8) => Some(8),
        Some(WeightFormat::Int4 { .. }) => Some(4),
        None => {
            let entry = manifest.programs.iter().find(|p| p.name == spec.name);
            entry.and_then(|p| p.bits).or_else(|| (!spec.is_quantized()).then_some(32))
        }
    }
}

impl ColumnReport {
    fn of(outcome: &ColumnOutcome, reference: Option<f64>, manifest: &Manifest, is_reference: bool) -> ColumnReport {
        let spec = &outcome.spec;
        let mut report = ColumnReport {
            name: spec.name.clone(),
            title: spec.title.clone(),
            runtime: spec.runtime().title().to_string(),
            quantization: spec.quantization.clone(),
            bits: bits_of(spec, manifest),
            reference: is_reference,
            error: None,
            top1_agreement: None,
            top1_positions: 0,
            median_first_divergence: None,
            prompts_identical: 0,
            mean_kl: None,
            perplexity: None,
            perplexity_ratio: None,
            text_top1: None,
            seconds: outcome.seconds,
            per_prompt: Vec::new(),
        };
        let figures = match &outcome.result {
            Ok(figures) => figures,
            Err(e) => {
                report.error = Some(format!("{e:#}"));
                return report;
            }
        };
        let positions: usize = figures.prompts.iter().map(|p| p.positions).sum();
        let agreed: usize = figures.prompts.iter().map(|p| p.top1_agreed).sum();
        let kl: f64 = figures.prompts.iter().map(|p| p.kl_sum).sum();
        let divergences: Vec<Option<usize>> = figures.prompts.iter().map(|p| p.first_divergence).collect();
        let perplexity = figures.text.perplexity();
        report.top1_positions = positions;
        report.top1_agreement = (positions > 0).then(|| agreed as f64 / positions as f64);
        report.median_first_divergence = median_first_divergence(&divergences);
        report.prompts_identical = divergences.iter().filter(|d| d.is_none()).count();
        report.mean_kl = (positions > 0).then(|| kl / positions as f64).and_then(finite);
        report.perplexity = finite(perplexity);
        report.perplexity_ratio = reference.and_then(|r| finite(perplexity / r));
        report.text_top1 = (figures.text.predicted > 0).then(|| figures.text.top1_correct as f64 / figures.text.predicted as f64);
        report.per_prompt = figures
            .prompts
            .iter()
            .map(|p| PromptRow {
                positions: p.positions,
                top1_agreed: p.top1_agreed,
                first_divergence: p.first_divergence,
                mean_kl: (p.positions > 0).then(|| p.kl_sum / p.positions as f64).and_then(finite),
            })
            .collect();
        report
    }
}

impl EvalReport {
    /// The report of `evaluation`, run on `dir` with `selection` and `input`.
    pub fn new(about: About, dir: &ModelDir, selection: &Selection, input: &EvalInput, evaluation: &Evaluation, seconds: f64) -> EvalReport {
        let manifest = dir.manifest();
        let reference_perplexity = evaluation.columns.first().and_then(|c| c.result.as_ref().ok()).map(|f| f.text.perplexity());
        let columns: Vec<ColumnReport> = evaluation
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| ColumnReport::of(c, reference_perplexity, manifest, i == 0))
            .collect();
        let text = evaluation.columns.first().and_then(|c| c.result.as_ref().ok()).map(|f| f.text);
        let continuations = input
            .prompts
            .iter()
            .zip(&evaluation.continuations)
            .map(|(p, g)| Continuation { prompt: p.text.clone(), prompt_tokens: p.len(), ids: g.ids.clone(), text: g.text.clone(), stop: g.stop.name().to_string() })
            .collect();
        EvalReport {
            machine: about.machine,
            command: about.command,
            model: manifest.model.clone(),
            model_dir: dir.root().display().to_string(),
            source: manifest.source.clone(),
            weights: manifest.weights_kind(),
            threads: about.threads,
            prompt_format: about.prompt_format,
            prompts_file: about.prompts_file,
            prompts: input.prompts.len(),
            gen_tokens: input.options.max_new_tokens,
            text_file: about.text_file,
            text_tokens: input.text.len(),
            text_window: input.window,
            text_windows: text.map_or(0, |t| t.windows),
            text_predicted: text.map_or(0, |t| t.predicted),
            reference: selection.reference.name.clone(),
            reference_why: selection.reference_why.clone(),
            skipped: selection.skipped.clone(),
            columns,
            continuations,
            seconds,
        }
    }

    /// Every column measured (none failed).
    pub fn all_ok(&self) -> bool {
        self.columns.iter().all(|c| c.error.is_none())
    }
}
