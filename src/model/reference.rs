//! `reference.json`, written by `python/export.py`: for every sentence of the
//! export, the Python tokenizer's ids and Python transformers' output for the
//! directory's task (`docs/model-directory.md`). Tests compare every backend with it.

use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

use std::time::Duration;

use crate::generate::{Generation, Stop};
use crate::task::{Classification, Embedding, FillMask, MaskPrediction, TaskContext, TaskOutput, TokenProb};

#[derive(Debug, Deserialize)]
pub struct Reference {
    pub model: String,
    pub max_seq_len: usize,
    /// text-generation: what `generated_ids` were generated with.
    #[serde(default)]
    pub max_new_tokens: Option<usize>,
    pub sentences: Vec<ReferenceSentence>,
}

#[derive(Debug, Deserialize)]
pub struct ReferenceSentence {
    pub text: String,
    pub ids: Vec<i64>,
    /// feature-extraction
    #[serde(default)]
    pub embedding: Vec<f32>,
    /// fill-mask
    #[serde(default)]
    pub masks: Vec<ReferenceMask>,
    /// text-classification
    #[serde(default)]
    pub logits: Vec<f32>,
    /// text-generation: transformers' greedy new ids (the end-of-text id last when it stopped there).
    #[serde(default)]
    pub generated_ids: Vec<i64>,
    /// text-generation: the new tokens' text, special tokens skipped.
    #[serde(default)]
    pub generated_text: String,
}

#[derive(Debug, Deserialize)]
pub struct ReferenceMask {
    pub position: usize,
    pub logits: Vec<f32>,
    #[serde(default)]
    pub top: Vec<TokenProb>,
}

impl Reference {
    pub fn load(path: &Path) -> anyhow::Result<Reference> {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_slice(&bytes).with_context(|| format!("{} is not a reference file", path.display()))
    }
}

impl ReferenceSentence {
    pub fn embedding(&self) -> Embedding {
        Embedding(self.embedding.clone())
    }

    /// Python's output as a [`TaskOutput`], read the way runlens reads a backend's
    /// (the top tokens from Python's logits, the labels named by `ctx`).
    pub fn output(&self, ctx: &TaskContext) -> TaskOutput {
        match ctx.task {
            crate::task::Task::FeatureExtraction => TaskOutput::Embedding(self.embedding()),
            crate::task::Task::FillMask => TaskOutput::FillMask(FillMask {
                masks: self
                    .masks
                    .iter()
                    .map(|m| MaskPrediction { position: m.position, top: crate::task::fill_mask::top_k(ctx, &m.logits), logits: m.logits.clone() })
                    .collect(),
                uncovered: 0,
            }),
            crate::task::Task::TextClassification => TaskOutput::Classification(Classification::from_logits(self.logits.clone(), &ctx.labels)),
            crate::task::Task::TextGeneration => {
                let eos = ctx.generation.as_ref().and_then(|g| g.options.eos_token_id);
                let stop = if eos.is_some() && self.generated_ids.last().copied() == eos { Stop::EndOfText } else { Stop::MaxNewTokens };
                TaskOutput::Generation(Generation {
                    prompt_len: self.ids.len(),
                    ids: self.generated_ids.clone(),
                    text: self.generated_text.clone(),
                    ttft: Duration::ZERO,
                    token_latencies: vec![Duration::ZERO; self.generated_ids.len()],
                    stop,
                })
            }
        }
    }
}
