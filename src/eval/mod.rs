//! `runlens eval`: how far each column's next-token distributions stay from a
//! float32 reference's on a trained model, over chat prompts and a text
//! (docs/eval.md). A library, no printing: the command line
//! (`cli/eval.rs`) reads the files, prints the table and writes the JSON and
//! the plot.
//!
//! - [`columns`]: which column is the reference, which are compared, which
//!   are left out by default ([`Selection`]);
//! - [`passes`]: the reference's greedy continuations, a column teacher-forced
//!   on them, a text's perplexity, each through the generation task's loops;
//! - [`math`]: log-sum-exp, KL, negative log-likelihood, perplexity, median;
//! - [`store`]: the reference's logits kept in a temporary file;
//! - [`report`]: the JSON (`--json`), a column's summary, real or random weights;
//! - [`plot`]: the SVG (`--plot`).
//!
//! [`evaluate`] loads one column at a time, the reference first, and drops
//! each before the next loads.

use std::sync::Arc;
use std::time::Instant;

pub mod columns;
pub mod math;
pub mod passes;
pub mod plot;
pub mod report;
pub mod store;

pub use columns::{choose, Selection, Skipped};
pub use passes::{compare_pass, reference_pass, text_pass, text_windows, PromptFigures, TextFigures};
pub use report::{ColumnReport, EvalReport};
pub use store::LogitRows;

use crate::backend::BackendSpec;
use crate::model::ModelDir;
use crate::task::generation::{decoder_of, Detokenizer, GenerateOptions, Generation};
use crate::tensor::Encoded;

/// What every column is measured on.
pub struct EvalInput {
    /// The prompts as fed (through the chat template, or raw: `--prompt-format`).
    pub prompts: Vec<Encoded>,
    /// The text's token ids (its tokenizer's own encoding).
    pub text: Vec<i64>,
    /// Tokens per window of the text ([`text_windows`]): the model's `max_seq_len`.
    pub window: usize,
    /// The reference's new tokens per prompt (`--gen-tokens`) and the end-of-text ids.
    pub options: GenerateOptions,
    pub detokenizer: Arc<Detokenizer>,
}

/// One column's figures.
#[derive(Clone, Debug)]
pub struct ColumnFigures {
    /// One per prompt, in order.
    pub prompts: Vec<PromptFigures>,
    pub text: TextFigures,
}

/// One column's run: its figures, or why it has none.
#[derive(Debug)]
pub struct ColumnOutcome {
    pub spec: BackendSpec,
    pub result: anyhow::Result<ColumnFigures>,
    /// Load and both passes.
    pub seconds: f64,
}

/// Everything measured: the reference's continuations, then every column's
/// figures, the reference first.
#[derive(Debug)]
pub struct Evaluation {
    /// One per prompt.
    pub continuations: Vec<Generation>,
    pub columns: Vec<ColumnOutcome>,
}

/// Run the reference, then each compared column, one loaded at a time.
/// `progress` gets a line as each column starts and ends. An error when the
/// reference fails (nothing can be compared); a compared column that fails
/// keeps its error in its [`ColumnOutcome`] and the others go on.
pub fn evaluate(dir: &ModelDir, selection: &Selection, input: &EvalInput, progress: &mut dyn FnMut(String)) -> anyhow::Result<Evaluation> {
    anyhow::ensure!(!input.prompts.is_empty(), "no prompts to evaluate on");
    let total = 1 + selection.compared.len();
    let mut store = LogitRows::new()?;
    let mut starts = Vec::with_capacity(input.prompts.len());
    let reference = &selection.reference;
    progress(format!("[1/{total}] {} (reference): {} prompts, then {} text tokens", reference.name, input.prompts.len(), input.text.len()));
    let clock = Instant::now();
    // Its peak over the load and the first prompt, remembered for the memory check (the
    // text pass, teacher-forced windows as long as the context, is eval's own workload).
    let mut watch = crate::memory::measured::watch(reference);
    let (continuations, text) = {
        let mut backend = crate::task::load_backend(reference, dir).map_err(|e| e.context(format!("loading the reference, {}", reference.name)))?;
        let decoder = decoder_of(backend.as_mut(), &reference.name)?;
        let mut continuations = Vec::with_capacity(input.prompts.len());
        for prompt in &input.prompts {
            starts.push(store.len());
            let generation = reference_pass(decoder, &input.detokenizer, &prompt.ids, &input.options, &mut store)
                .map_err(|e| e.context(format!("{} (the reference) on the prompt {:?}", reference.name, prompt.text)))?;
            continuations.push(generation);
            crate::memory::measured::finish(watch.take(), reference, dir, "runlens eval");
        }
        let text = text_pass(decoder, &input.text, input.window).map_err(|e| e.context(format!("{} (the reference) on the text", reference.name)))?;
        (continuations, text)
    };
    let seconds = clock.elapsed().as_secs_f64();
    progress(format!("[1/{total}] {} done in {seconds:.1} s", reference.name));
    let prompts = continuations.iter().map(|g| PromptFigures::of_reference(g.ids.len())).collect();
    let mut columns = vec![ColumnOutcome { spec: reference.clone(), result: Ok(ColumnFigures { prompts, text }), seconds }];

    for (i, spec) in selection.compared.iter().enumerate() {
        progress(format!("[{}/{total}] {}", i + 2, spec.name));
        let clock = Instant::now();
        let result = compare_column(dir, spec, input, &continuations, &mut store, &starts);
        let seconds = clock.elapsed().as_secs_f64();
        match &result {
            Ok(_) => progress(format!("[{}/{total}] {} done in {seconds:.1} s", i + 2, spec.name)),
            Err(e) => progress(format!("[{}/{total}] {} failed: {e:#}", i + 2, spec.name)),
        }
        columns.push(ColumnOutcome { spec: spec.clone(), result, seconds });
    }
    Ok(Evaluation { continuations, columns })
}

/// One compared column, loaded, teacher-forced on every continuation, run
/// over the text, and dropped.
fn compare_column(
    dir: &ModelDir,
    spec: &BackendSpec,
    input: &EvalInput,
    continuations: &[Generation],
    store: &mut LogitRows,
    starts: &[usize],
) -> anyhow::Result<ColumnFigures> {
    // Measured over the load and the first prompt, as the reference.
    let mut watch = crate::memory::measured::watch(spec);
    let mut backend = crate::task::load_backend(spec, dir)?;
    let decoder = decoder_of(backend.as_mut(), &spec.name)?;
    let mut prompts = Vec::with_capacity(input.prompts.len());
    for ((prompt, continuation), &start) in input.prompts.iter().zip(continuations).zip(starts) {
        let figures = compare_pass(decoder, &prompt.ids, &continuation.ids, store, start)
            .map_err(|e| e.context(format!("teacher-forced on the prompt {:?}", prompt.text)))?;
        prompts.push(figures);
        crate::memory::measured::finish(watch.take(), spec, dir, "runlens eval");
    }
    let text = text_pass(decoder, &input.text, input.window).map_err(|e| e.context("on the text"))?;
    Ok(ColumnFigures { prompts, text })
}
