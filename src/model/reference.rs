//! `reference.json`, written by `python/export.py`: for every sentence of
//! `assets/sentences.txt`, the Python tokenizer's ids and the Python
//! (transformers, eager) embedding. Tests compare every backend with it.

use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

use super::Embedding;

#[derive(Debug, Deserialize)]
pub struct Reference {
    pub model: String,
    pub max_seq_len: usize,
    pub sentences: Vec<ReferenceSentence>,
}

#[derive(Debug, Deserialize)]
pub struct ReferenceSentence {
    pub text: String,
    pub ids: Vec<i64>,
    pub embedding: Vec<f32>,
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
}
