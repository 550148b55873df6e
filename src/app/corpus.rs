//! The nearest-sentence corpus of sentence-embedding models: embedded once, in
//! the background, by the fastest backend that matches eager.

use std::sync::Arc;
use std::time::Duration;

use super::Nearest;
use crate::backend::BackendSpec;
use crate::model::Encoded;
use crate::task::Embedding;

#[derive(Clone, Debug, PartialEq)]
pub enum CorpusState {
    /// Being embedded by this backend.
    Embedding(BackendSpec),
    Ready { kind: BackendSpec, elapsed: Duration },
    Failed(String),
    Empty,
}

/// The nearest-sentence corpus, embedded once and shared by all columns.
#[derive(Clone, Debug)]
pub struct Corpus {
    pub sentences: Vec<String>,
    pub(super) encoded: Arc<Vec<Encoded>>,
    /// In the order of `sentences` once ready.
    pub embeddings: Vec<Embedding>,
    pub state: CorpusState,
    pub(super) tried: Vec<BackendSpec>,
}

impl Corpus {
    /// The sentence nearest to `embedding` by cosine; `None` until the corpus is embedded.
    pub fn nearest(&self, embedding: &Embedding) -> Option<Nearest> {
        self.embeddings
            .iter()
            .enumerate()
            .map(|(index, e)| Nearest { index, cosine: embedding.cosine(e) })
            .max_by(|a, b| a.cosine.total_cmp(&b.cosine))
    }
}

/// The order in which backends are asked to embed the corpus: fastest first
/// among those that match eager (a fixed-length program pads every sentence,
/// int8 is an approximation, portable is slow). Names are the manifest's.
pub(super) fn corpus_preference(spec: &BackendSpec) -> u8 {
    let name = spec.name.as_str();
    match () {
        _ if spec.is_float_eager() => 1,
        _ if spec.is_eager() => 3,
        _ if name.contains("portable") => 4,
        _ if name.contains("int8") => 3,
        _ if name.contains("static") => 2,
        _ => 0,
    }
}
