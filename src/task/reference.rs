//! The reference outputs of `reference.json` (Python transformers' own, written
//! by the export) read as this layer reads a backend's, so that tests and the
//! explorer compare them with [`TaskOutput::parity`] like any other column.

use std::time::Duration;

use super::generation::{Generation, Stop};
use super::{Classification, Embedding, FillMask, MaskPrediction, Task, TaskContext, TaskOutput};
use crate::model::ReferenceSentence;

impl ReferenceSentence {
    /// feature-extraction: Python's embedding.
    pub fn embedding(&self) -> Embedding {
        Embedding(self.embedding.clone())
    }

    /// Python's output as a [`TaskOutput`], read the way runlens reads a backend's
    /// (the top tokens from Python's logits, the labels named by `ctx`).
    pub fn output(&self, ctx: &TaskContext) -> TaskOutput {
        match ctx.task {
            Task::FeatureExtraction => TaskOutput::Embedding(self.embedding()),
            Task::FillMask => TaskOutput::FillMask(FillMask {
                masks: self
                    .masks
                    .iter()
                    .map(|m| MaskPrediction { position: m.position, top: super::fill_mask::top_k(ctx, &m.logits), logits: m.logits.clone() })
                    .collect(),
                uncovered: 0,
            }),
            Task::TextClassification => TaskOutput::Classification(Classification::from_logits(self.logits.clone(), &ctx.labels)),
            Task::TextGeneration => {
                let eos = ctx.generation.as_ref().map(|g| g.options.eos_token_ids.as_slice()).unwrap_or_default();
                let stop = if self.generated_ids.last().is_some_and(|id| eos.contains(id)) { Stop::EndOfText } else { Stop::MaxNewTokens };
                TaskOutput::Generation(Generation {
                    prompt_len: self.ids.len(),
                    ids: self.generated_ids.clone(),
                    text: self.generated_text.clone(),
                    ttft: Duration::ZERO,
                    token_latencies: vec![Duration::ZERO; self.generated_ids.len()],
                    stop,
                    first_logits: Vec::new(),
                })
            }
        }
    }
}
