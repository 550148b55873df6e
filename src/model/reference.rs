//! `reference.json`, written by `python/export.py`: for every sentence of the
//! export, the Python tokenizer's ids and Python transformers' output for the
//! directory's task (`docs/model-directory.md`). Tests compare every backend with it.

use std::path::Path;

use anyhow::Context;
use serde::Deserialize;


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
    /// text-generation: how `ids` were made from `text`: `raw` (the tokenizer
    /// alone) or `chat` (the model's chat template, as `apply_chat_template`).
    #[serde(default)]
    pub prompt_format: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ReferenceMask {
    pub position: usize,
    pub logits: Vec<f32>,
    #[serde(default)]
    pub top: Vec<ReferenceTokenProb>,
}

/// One of Python's top tokens at a mask.
#[derive(Clone, Debug, Deserialize)]
pub struct ReferenceTokenProb {
    pub id: i64,
    pub token: String,
    pub prob: f64,
}

impl Reference {
    pub fn load(path: &Path) -> anyhow::Result<Reference> {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_slice(&bytes).with_context(|| format!("{} is not a reference file", path.display()))
    }
}
