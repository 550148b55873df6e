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
pub mod parity;

pub use detokenizer::{terminal_safe, Detokenizer, TextStream};
pub use parity::{Divergence, Top1Agreement};
pub use greedy::{
    argmax, check_prompt, greedy, GenerateOptions, Generation, PromptError, Stop, TokenStep, DEFAULT_MAX_NEW_TOKENS,
};

use crate::backend::{Backend, Decoder};
use crate::tensor::Encoded;

/// How one continuation compares with the reference's for the same prompt:
/// the ids, and how near the logits stay ([`parity`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GenerationParity {
    /// The same new ids, the same number of them.
    pub same_ids: bool,
    /// Index into the new ids of the first that differs (or where one of the
    /// two ends first); `None` when they are the same.
    pub first_divergence: Option<usize>,
    /// Cosine of the first step's (prefill's) next-token logits to the
    /// reference's; `None` when either was not kept or the vocabularies differ.
    pub first_logits_cosine: Option<f64>,
    /// Teacher-forced on the reference's new ids ([`parity::top1_agreement`]):
    /// set by the driver that holds the decoder (`run`, the explorer's worker).
    pub top1: Option<Top1Agreement>,
}

impl GenerationParity {
    /// The ids alone.
    pub fn of(ids: &[i64], reference: &[i64]) -> GenerationParity {
        let first_divergence = match parity::divergence(ids, true, reference, true) {
            Divergence::At(index) => Some(index),
            Divergence::Same { .. } | Divergence::Waiting | Divergence::Reference => None,
        };
        GenerationParity { same_ids: first_divergence.is_none(), first_divergence, first_logits_cosine: None, top1: None }
    }

    /// The ids and the first step's logits.
    pub fn between(generation: &Generation, reference: &Generation) -> GenerationParity {
        GenerationParity {
            first_logits_cosine: crate::task::cosine(&generation.first_logits, &reference.first_logits),
            ..GenerationParity::of(&generation.ids, &reference.ids)
        }
    }
}

/// In JSON: `same_ids`, `first_divergence`, `first_logits_cosine`,
/// `top1_agreement` (a fraction) and `top1_positions` (how many were compared);
/// null where not measured.
impl Serialize for GenerationParity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("GenerationParity", 5)?;
        st.serialize_field("same_ids", &self.same_ids)?;
        st.serialize_field("first_divergence", &self.first_divergence)?;
        st.serialize_field("first_logits_cosine", &self.first_logits_cosine)?;
        st.serialize_field("top1_agreement", &self.top1.and_then(|t| t.fraction()))?;
        st.serialize_field("top1_positions", &self.top1.map(|t| t.positions))?;
        st.end()
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

impl Generation {
    /// It ran to its end (it was not cancelled for a newer input): its ids can
    /// be compared with another's.
    pub fn finished(&self) -> bool {
        self.stop != Stop::Cancelled
    }

    /// Its fields in `run --json` (into the backend's object): `generated_ids`
    /// (the end-of-text id last when it stopped there), `generated_text`
    /// (special tokens left out), `ttft_ms`, `decode_tokens_per_s` (null with
    /// fewer than 2 tokens), `token_ms` (the first is the TTFT), `stop`.
    pub(crate) fn json_fields<M: serde::ser::SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        m.serialize_entry("generated_ids", &self.ids)?;
        m.serialize_entry("generated_text", &self.text)?;
        m.serialize_entry("ttft_ms", &(self.ttft.as_secs_f64() * 1e3))?;
        m.serialize_entry("decode_tokens_per_s", &self.decode_tokens_per_s())?;
        m.serialize_entry("token_ms", &self.token_ms())?;
        m.serialize_entry("stop", &self.stop)
    }
}

/// A text-generation program or model that cannot continue a sequence.
#[derive(Debug, thiserror::Error)]
#[error("{0}: this backend cannot generate text (it is not a decoder: neither a KV-cache or window program nor an eager decoder)")]
pub struct NotADecoder(pub String);

/// `backend` as a [`Decoder`], or [`NotADecoder`] naming it `name`.
pub fn decoder_of<'a>(backend: &'a mut dyn Backend, name: &str) -> Result<&'a mut dyn Decoder, NotADecoder> {
    backend.as_decoder().ok_or_else(|| NotADecoder(name.to_string()))
}

/// Continue `input` greedily on `backend`, `on_token` called for every new token
/// (return `Break` to stop after it). [`super::run`] calls it for text-generation.
pub fn generate(
    backend: &mut dyn Backend,
    ctx: &GenerationContext,
    input: &Encoded,
    on_token: &mut dyn FnMut(&TokenStep) -> ControlFlow<()>,
) -> anyhow::Result<Generation> {
    let describe = backend.describe();
    let decoder = decoder_of(backend, &describe)?;
    greedy(decoder, &ctx.detokenizer, &input.ids, &ctx.options, on_token)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod parity_tests {
    use super::*;

    #[test]
    fn parity_names_the_first_new_token_that_differs() {
        assert_eq!(
            GenerationParity::of(&[1, 2, 3], &[1, 2, 3]),
            GenerationParity { same_ids: true, first_divergence: None, first_logits_cosine: None, top1: None }
        );
        assert_eq!(GenerationParity::of(&[1, 5, 3], &[1, 2, 3]).first_divergence, Some(1));
        assert_eq!(GenerationParity::of(&[1, 2], &[1, 2, 3]).first_divergence, Some(2));
        assert_eq!(GenerationParity::of(&[1, 2, 3, 4], &[1, 2, 3]).first_divergence, Some(3));
        assert_eq!(GenerationParity::of(&[], &[]).first_divergence, None);
    }

    #[test]
    fn json_has_the_logits_fields_null_where_not_measured() {
        let mut p = GenerationParity::of(&[1, 2], &[1, 3]);
        let v = serde_json::to_value(p).unwrap();
        assert_eq!(v["same_ids"], false);
        assert_eq!(v["first_divergence"], 1);
        assert!(v["first_logits_cosine"].is_null() && v["top1_agreement"].is_null() && v["top1_positions"].is_null(), "{v}");
        p.first_logits_cosine = Some(0.5);
        p.top1 = Some(Top1Agreement { agreed: 3, positions: 4 });
        let v = serde_json::to_value(p).unwrap();
        assert_eq!((v["first_logits_cosine"].as_f64(), v["top1_agreement"].as_f64(), v["top1_positions"].as_u64()), (Some(0.5), Some(0.75), Some(4)));
    }
}
