//! STAND-IN for issue-14-core's text-generation task; replaced by the merge.

use serde::Serialize;

use crate::generate::{Detokenizer, GenerateOptions, Generation};

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GenerationParity {
    pub same_ids: bool,
    pub first_divergence: Option<usize>,
}

pub fn parity(a: &Generation, b: &Generation) -> GenerationParity {
    let first_divergence = a.ids.iter().zip(&b.ids).position(|(x, y)| x != y).or((a.ids.len() != b.ids.len()).then(|| a.ids.len().min(b.ids.len())));
    GenerationParity { same_ids: first_divergence.is_none(), first_divergence }
}

/// What the greedy loop needs from the model directory.
#[derive(Clone, Debug)]
pub struct GenerationSetup {
    pub detok: std::sync::Arc<Detokenizer>,
    pub opts: GenerateOptions,
}
