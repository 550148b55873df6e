//! What every eager decoder shares, written once: the keys and values of the
//! positions seen so far ([`LayerCache`], one per layer), the sequence's length
//! and the longest it may grow to, the checks before a call reaches libtorch,
//! and the [`Decoder`] / [`DecoderModel`] on top ([`WithKvCache`]).
//!
//! An architecture's file implements [`DecoderStack`]: its layers over the new
//! positions (appending to the caches) and its LM head on the last one.

use tch::Tensor;

use super::nn::{Linear, Result};
use super::traits::DecoderModel;
use crate::backend::Decoder;

/// The keys and values of one layer for the positions seen so far: [h, T, d] each.
#[derive(Default)]
pub struct LayerCache {
    pub kv: Option<(Tensor, Tensor)>,
}

impl LayerCache {
    /// key, value [h, S, d] of the new positions -> [h, T, d], the cached ones before them.
    pub fn with_past(&self, key: Tensor, value: Tensor) -> Result<(Tensor, Tensor)> {
        match &self.kv {
            Some((past_key, past_value)) => Ok((Tensor::f_cat(&[past_key, &key], 1)?, Tensor::f_cat(&[past_value, &value], 1)?)),
            None => Ok((key, value)),
        }
    }
}

/// A decoder architecture's modules and forward, without the sequence's state.
pub trait DecoderStack: Send {
    type Config;
    fn config(&self) -> &Self::Config;
    /// For messages: "GPT-2", "Qwen3".
    fn name(&self) -> &'static str;
    fn vocab_size(&self) -> i64;
    /// The config field that bounds the sequence and its value: ("n_positions", 1024).
    fn max_positions(&self) -> (&'static str, i64);
    fn num_layers(&self) -> usize;
    /// ids `[S]` of positions past..past+S through the embeddings and every layer,
    /// appending their keys and values to `cache` (one per layer) -> hidden `[S, E]`.
    fn layers(&self, ids: &Tensor, past: i64, cache: &mut [LayerCache]) -> anyhow::Result<Tensor>;
    /// The final norm and the LM head on the last of the `s` positions: `[V]`.
    fn logits(&self, hidden: &Tensor, s: i64) -> Result<Tensor>;
    /// "GPT-2 2 layers, ... KV cache of {max_len} positions"
    fn describe(&self, max_len: i64) -> String;
    /// Every linear layer, the LM head included.
    fn linears(&mut self) -> Vec<&mut Linear>;
    /// See [`DecoderModel::weight_bytes_per_token`].
    fn weight_bytes_per_token(&self) -> u64;
}

/// A decoder with a KV cache of the sequence so far.
pub struct WithKvCache<M> {
    model: M,
    cache: Vec<LayerCache>,
    /// Positions in the cache.
    seen: i64,
    /// The longest sequence it holds: the config's, or less ([`limit_len`](Self::limit_len)).
    max_len: i64,
}

impl<M: DecoderStack> WithKvCache<M> {
    pub fn new(model: M) -> WithKvCache<M> {
        let max_len = model.max_positions().1;
        WithKvCache { model, cache: Vec::new(), seen: 0, max_len }
    }

    pub fn config(&self) -> &M::Config {
        self.model.config()
    }

    /// Hold at most `max_len` positions (the model directory's `max_seq_len`,
    /// what its programs hold), so that every backend stops at the same length.
    pub fn limit_len(&mut self, max_len: usize) {
        self.max_len = self.model.max_positions().1.min(i64::try_from(max_len).unwrap_or(i64::MAX)).max(1);
    }

    pub fn describe(&self) -> String {
        self.model.describe(self.max_len)
    }

    /// Forget the sequence.
    pub fn reset(&mut self) {
        self.cache = (0..self.model.num_layers()).map(|_| LayerCache::default()).collect();
        self.seen = 0;
    }

    /// Positions in the cache.
    pub fn seen(&self) -> i64 {
        self.seen
    }

    /// Append `ids` to the cached sequence: the next token's logits `[V]` (the
    /// LM head on the last position only). Ids outside the vocabulary and a
    /// sequence past the length it holds are errors before libtorch sees them.
    pub fn append(&mut self, ids: &[i64]) -> anyhow::Result<Vec<f32>> {
        let vocab_size = self.model.vocab_size();
        anyhow::ensure!(!ids.is_empty(), "no tokens to append");
        if let Some(&id) = ids.iter().find(|&&id| !(0..vocab_size).contains(&id)) {
            anyhow::bail!("token id {id} is outside the vocabulary (vocab_size {vocab_size})");
        }
        let s = ids.len() as i64;
        let (field, positions) = self.model.max_positions();
        anyhow::ensure!(
            self.seen + s <= self.max_len,
            "the sequence would have {} tokens; eager {} holds at most {} ({field} {positions}, limited to the model directory's max_seq_len)",
            self.seen + s,
            self.model.name(),
            self.max_len,
        );
        if self.cache.len() != self.model.num_layers() {
            self.reset();
        }
        let _no_grad = tch::no_grad_guard();
        let ids_t = Tensor::f_from_slice(ids)?;
        let x = self.model.layers(&ids_t, self.seen, &mut self.cache)?;
        self.seen += s;
        let logits = self.model.logits(&x, s)?;
        Ok(Vec::<f32>::try_from(&logits)?)
    }
}

// The model is used by one thread at a time (the backend is Send, not Sync);
// libtorch tensors may move between threads.
impl<M: DecoderStack> Decoder for WithKvCache<M> {
    fn max_len(&self) -> usize {
        self.max_len as usize
    }

    fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>> {
        self.reset();
        self.append(prompt)
    }

    fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>> {
        anyhow::ensure!(self.seen > 0, "a step before any prefill (no sequence to continue)");
        self.append(&[token])
    }
}

impl<M: DecoderStack> DecoderModel for WithKvCache<M> {
    fn describe(&self) -> String {
        WithKvCache::describe(self)
    }
    fn limit_len(&mut self, max_len: usize) {
        WithKvCache::limit_len(self, max_len)
    }
    fn linears(&mut self) -> Vec<&mut Linear> {
        self.model.linears()
    }
    fn weight_bytes_per_token(&self) -> u64 {
        self.model.weight_bytes_per_token()
    }
}
