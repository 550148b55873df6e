//! The nearest-sentence corpus of sentence-embedding models: embedded once, in
//! the background, by the fastest backend that matches eager.

use std::sync::Arc;
use std::time::Duration;

use super::{App, Nearest, Phase};
use crate::schedule::Request;
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

/// The order in which backends are asked to embed the corpus, lowest first
/// (`BackendSpec::corpus_preference`: read from what each spec is, never from its name).
pub(super) fn corpus_preference(spec: &BackendSpec) -> u8 {
    spec.corpus_preference()
}

impl App {
    /// Ask the fastest backend not tried yet (and not failed) to embed the corpus.
    pub(super) fn assign_corpus(&mut self) {
        let next = self
            .columns
            .iter()
            .filter(|c| !self.corpus.tried.contains(&c.kind) && !matches!(c.phase, Phase::Failed(_)))
            .min_by_key(|c| corpus_preference(&c.kind))
            .map(|c| c.kind.clone());
        match next {
            Some(kind) => {
                self.corpus.tried.push(kind.clone());
                self.corpus.state = CorpusState::Embedding(kind.clone());
                self.requests.push(Request::EmbedCorpus(kind, self.corpus.encoded.clone()));
            }
            None => self.corpus.state = CorpusState::Failed("no backend could embed the corpus".to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::corpus_preference;
    use crate::backend::{named, BackendSpec, Delegate};

    #[test]
    fn the_corpus_goes_to_the_fastest_program_by_what_it_is_not_by_its_name() {
        let order = |names: &[&str]| names.iter().map(|n| corpus_preference(&named(n))).collect::<Vec<_>>();
        // MiniLM's: XNNPACK first, then eager, the fixed-length program, int8, portable last.
        assert_eq!(order(&["xnnpack", "eager", "xnnpack-static", "xnnpack-int8", "portable"]), [0, 1, 2, 3, 4]);
        assert_eq!(corpus_preference(&BackendSpec::eager_with(crate::backend::WeightFormat::Int8)), 3);
        // A program named like portable but lowered to XNNPACK is as fast as XNNPACK.
        let mut mine = named("my-portable-thing");
        mine.delegate = Delegate::Xnnpack;
        assert_eq!(corpus_preference(&mine), 0);
        // Named like int8 and static, but float, dynamic and on no delegate: portable's place.
        let mut plain = named("int8-static");
        plain.delegate = Delegate::None;
        assert_eq!(corpus_preference(&plain), 4);
    }
}
