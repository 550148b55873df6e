//! The greedy decoding loop ([`greedy`]) every decoder backend shares, and
//! what one generation is ([`Generation`]: ids, text, per-token latencies, why
//! it stopped).

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::detokenizer::Detokenizer;
use crate::backend::Decoder;

/// What `--max-new-tokens` defaults to.
pub const DEFAULT_MAX_NEW_TOKENS: usize = 32;

/// When greedy decoding stops, besides the decoder's own length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerateOptions {
    /// At most this many new tokens (>= 1).
    pub max_new_tokens: usize,
    /// Stop after any of these tokens (it is kept in the ids, as transformers
    /// does); Llama 3 has several (`<|end_of_text|>`, `<|eot_id|>`, ...).
    pub eos_token_ids: Vec<i64>,
}

impl Default for GenerateOptions {
    fn default() -> GenerateOptions {
        GenerateOptions { max_new_tokens: DEFAULT_MAX_NEW_TOKENS, eos_token_ids: Vec::new() }
    }
}

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    /// `max_new_tokens` were generated.
    MaxNewTokens,
    /// The end-of-text token came (it is the last id).
    EndOfText,
    /// Prompt and generated tokens fill the decoder's maximum length.
    MaxLength,
    /// The caller's `on_token` asked to stop (a newer input is waiting).
    Cancelled,
}

impl Stop {
    /// As in JSON: `max-new-tokens`, `end-of-text`, `max-length`, `cancelled`.
    pub fn name(self) -> &'static str {
        match self {
            Stop::MaxNewTokens => "max-new-tokens",
            Stop::EndOfText => "end-of-text",
            Stop::MaxLength => "max-length",
            Stop::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One new token, as it comes.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenStep {
    /// 0 for the first new token.
    pub index: usize,
    pub id: i64,
    /// The text completed by this token (empty while a UTF-8 character is
    /// held, and for special tokens such as the end of text).
    pub text: String,
    /// The decoder call and the argmax that produced it (the first: prefill).
    pub latency: Duration,
}

/// A finished (or cancelled) greedy generation.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// Tokens of the prompt.
    pub prompt_len: usize,
    /// The new ids; the end-of-text id is the last one when generation stopped there.
    pub ids: Vec<i64>,
    /// The new text, special tokens left out: what the new ids add after the
    /// prompt's text (the streamed pieces and the held rest; TextStreamer's text).
    pub text: String,
    /// Time to the first token: the prefill and its argmax (== `token_latencies[0]`).
    pub ttft: Duration,
    /// One per new token.
    pub token_latencies: Vec<Duration>,
    pub stop: Stop,
    /// The next-token logits of the prefill, `[V]`, from which the first new id
    /// came: what parity compares first ([`super::parity`]); empty when not
    /// kept (a reference from `reference.json`).
    pub first_logits: Vec<f32>,
}

impl Generation {
    /// Decode speed: tokens after the first per second of their latencies; `None` with fewer than 2 tokens.
    pub fn decode_tokens_per_s(&self) -> Option<f64> {
        let rest: Duration = self.token_latencies.iter().skip(1).sum();
        (self.token_latencies.len() >= 2 && !rest.is_zero()).then(|| (self.token_latencies.len() - 1) as f64 / rest.as_secs_f64())
    }

    /// Per-token latencies in milliseconds.
    pub fn token_ms(&self) -> Vec<f64> {
        self.token_latencies.iter().map(|d| d.as_secs_f64() * 1e3).collect()
    }
}

/// Why a prompt cannot be generated from.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PromptError {
    #[error("the prompt is empty: type some text to continue")]
    Empty,
    #[error(
        "the prompt has {prompt_len} tokens and this decoder holds at most {max_len} (prompt and new tokens together), \
         which leaves no room for a new token; shorten the prompt to at most {} tokens",
        max_len.saturating_sub(1)
    )]
    TooLong { prompt_len: usize, max_len: usize },
}

/// Check a prompt against a decoder's maximum length before anything runs.
pub fn check_prompt(prompt_len: usize, max_len: usize) -> Result<(), PromptError> {
    if prompt_len == 0 {
        return Err(PromptError::Empty);
    }
    if prompt_len >= max_len {
        return Err(PromptError::TooLong { prompt_len, max_len });
    }
    Ok(())
}

pub use crate::tensor::argmax;

/// Greedy decoding: prefill `prompt`, then append the likeliest token until
/// `max_new_tokens`, the end-of-text token, or the decoder's maximum length.
/// `on_token` sees every new token as it comes; returning `Break` stops after
/// that token ([`Stop::Cancelled`], unless it was the last anyway).
///
/// An empty prompt, or one that leaves no room for a new token, is a
/// [`PromptError`] before the decoder runs.
pub fn greedy(
    decoder: &mut dyn Decoder,
    detok: &Detokenizer,
    prompt: &[i64],
    opts: &GenerateOptions,
    on_token: &mut dyn FnMut(&TokenStep) -> ControlFlow<()>,
) -> anyhow::Result<Generation> {
    let max_len = decoder.max_len();
    check_prompt(prompt.len(), max_len)?;
    anyhow::ensure!(opts.max_new_tokens >= 1, "max_new_tokens is 0: ask for at least one new token");
    // The new text is what the new tokens add after the prompt's (a SentencePiece word keeps its space).
    let mut stream = detok.stream_after(prompt);
    let mut ids = Vec::new();
    let mut token_latencies = Vec::new();

    let start = Instant::now();
    let first_logits = decoder.prefill(prompt)?;
    let mut next = argmax(&first_logits)?;
    let mut latency = start.elapsed();
    let stop = loop {
        ids.push(next);
        token_latencies.push(latency);
        let step = TokenStep { index: ids.len() - 1, id: next, text: stream.push(next), latency };
        let flow = on_token(&step);
        if opts.eos_token_ids.contains(&next) {
            break Stop::EndOfText;
        }
        if ids.len() >= opts.max_new_tokens {
            break Stop::MaxNewTokens;
        }
        if prompt.len() + ids.len() >= max_len {
            break Stop::MaxLength;
        }
        if flow.is_break() {
            break Stop::Cancelled;
        }
        let start = Instant::now();
        let logits = decoder.step(next)?;
        next = argmax(&logits)?;
        latency = start.elapsed();
    };
    Ok(Generation { prompt_len: prompt.len(), text: stream.into_text(), ttft: token_latencies[0], ids, token_latencies, stop, first_logits })
}

