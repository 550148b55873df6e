//! STAND-IN for issue-14-core's generation API (the contract's signatures), so
//! the explorer builds before that branch lands; replaced by the merge.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use serde::Serialize;

pub trait Decoder {
    fn max_len(&self) -> usize;
    fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>>;
    fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>>;
}

#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_new_tokens: usize,
    pub eos_token_id: Option<i64>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions { max_new_tokens: 32, eos_token_id: None }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    MaxNewTokens,
    EndOfText,
    MaxLength,
    Cancelled,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TokenStep {
    pub index: usize,
    pub id: i64,
    pub text: String,
    pub latency: Duration,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    pub prompt_len: usize,
    pub ids: Vec<i64>,
    pub text: String,
    pub ttft: Duration,
    pub token_latencies: Vec<Duration>,
    pub stop: Stop,
}

/// Stand-in: a text per id.
#[derive(Clone, Debug, Default)]
pub struct Detokenizer {
    pub pieces: Vec<String>,
}

impl Detokenizer {
    pub fn from_pieces(pieces: Vec<String>) -> Detokenizer {
        Detokenizer { pieces }
    }
}

fn argmax(v: &[f32]) -> i64 {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &x)| if x > bv { (i, x) } else { (bi, bv) }).0 as i64
}

pub fn greedy(
    decoder: &mut dyn Decoder,
    detok: &Detokenizer,
    prompt: &[i64],
    opts: &GenerateOptions,
    on_token: &mut dyn FnMut(&TokenStep) -> ControlFlow<()>,
) -> anyhow::Result<Generation> {
    anyhow::ensure!(!prompt.is_empty(), "the prompt is empty");
    let mut g = Generation { prompt_len: prompt.len(), ids: vec![], text: String::new(), ttft: Duration::ZERO, token_latencies: vec![], stop: Stop::MaxNewTokens };
    let mut at = Instant::now();
    let mut logits = decoder.prefill(prompt)?;
    loop {
        let id = argmax(&logits);
        let latency = at.elapsed();
        let index = g.ids.len();
        if index == 0 {
            g.ttft = latency;
        }
        g.ids.push(id);
        g.token_latencies.push(latency);
        let text = if opts.eos_token_id == Some(id) { String::new() } else { detok.pieces.get(id as usize).cloned().unwrap_or_default() };
        g.text.push_str(&text);
        let step = TokenStep { index, id, text, latency };
        if on_token(&step).is_break() {
            g.stop = Stop::Cancelled;
            break;
        }
        if opts.eos_token_id == Some(id) {
            g.stop = Stop::EndOfText;
            break;
        }
        if g.ids.len() >= opts.max_new_tokens {
            break;
        }
        if prompt.len() + g.ids.len() >= decoder.max_len() {
            g.stop = Stop::MaxLength;
            break;
        }
        at = Instant::now();
        logits = decoder.step(id)?;
    }
    Ok(g)
}
