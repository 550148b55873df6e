//! text-generation: a prompt continued greedily, token by token, and two
//! continuations compared id by id.
//!
//! - [`greedy`]: the one decoding loop every decoder backend shares, and what a
//!   generation is ([`Generation`], [`Stop`], [`TokenStep`]);
//! - [`detokenizer`]: ids back to text as they come ([`Detokenizer`]).
//!
//! Unlike the other tasks one forward is not the output: a backend that can
//! continue a sequence ([`Backend::as_decoder`]) is driven by the greedy loop,
//! and what a person reads is the [`Generation`] (ids, text, time to the first
//! token, per-token latencies, why it stopped).

use std::ops::ControlFlow;
use std::sync::Arc;

use serde::Serialize;

pub mod detokenizer;
mod greedy;

pub use detokenizer::{terminal_safe, Detokenizer, TextStream};
pub use greedy::{
    argmax, check_prompt, greedy, GenerateOptions, Generation, PromptError, Stop, TokenStep, DEFAULT_MAX_NEW_TOKENS,
};

use crate::backend::Backend;
use crate::tensor::Encoded;

/// How one continuation compares with the reference's for the same prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GenerationParity {
    /// The same new ids, the same number of them.
    pub same_ids: bool,
    /// Index into the new ids of the first that differs (or where one of the
    /// two ends first); `None` when they are the same.
    pub first_divergence: Option<usize>,
}

impl GenerationParity {
    pub fn of(ids: &[i64], reference: &[i64]) -> GenerationParity {
        let first_divergence = ids
            .iter()
            .zip(reference)
            .position(|(a, b)| a != b)
            .or_else(|| (ids.len() != reference.len()).then(|| ids.len().min(reference.len())));
        GenerationParity { same_ids: first_divergence.is_none(), first_divergence }
    }
}

/// What generating needs from the model directory.
#[derive(Clone, Debug, Default)]
pub struct GenerationContext {
    /// Ids back to text (the model's byte-level BPE tokenizer).
    pub detokenizer: Arc<Detokenizer>,
    /// `max_new_tokens` and the end-of-text ids (the manifest's `eos_token_ids`).
    pub options: GenerateOptions,
}

/// A text-generation program or model that cannot continue a sequence.
#[derive(Debug, thiserror::Error)]
#[error("{0}: this backend cannot generate text (it is not a decoder: no KV-cache program, window program or eager GPT-2)")]
pub struct NotADecoder(pub String);

/// Continue `input` greedily on `backend`, `on_token` called for every new token
/// (return `Break` to stop after it). [`super::run`] calls it for text-generation.
pub fn generate(
    backend: &mut dyn Backend,
    ctx: &GenerationContext,
    input: &Encoded,
    on_token: &mut dyn FnMut(&TokenStep) -> ControlFlow<()>,
) -> anyhow::Result<Generation> {
    let describe = backend.describe();
    let decoder = backend.as_decoder().ok_or(NotADecoder(describe))?;
    greedy(decoder, &ctx.detokenizer, &input.ids, &ctx.options, on_token)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod parity_tests {
    use super::*;

    #[test]
    fn parity_names_the_first_new_token_that_differs() {
        assert_eq!(GenerationParity::of(&[1, 2, 3], &[1, 2, 3]), GenerationParity { same_ids: true, first_divergence: None });
        assert_eq!(GenerationParity::of(&[1, 5, 3], &[1, 2, 3]).first_divergence, Some(1));
        assert_eq!(GenerationParity::of(&[1, 2], &[1, 2, 3]), GenerationParity { same_ids: false, first_divergence: Some(2) });
        assert_eq!(GenerationParity::of(&[1, 2, 3, 4], &[1, 2, 3]).first_divergence, Some(3));
        assert_eq!(GenerationParity::of(&[], &[]).first_divergence, None);
    }
}
