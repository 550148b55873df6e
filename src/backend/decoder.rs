//! A backend that continues a token sequence one token at a time: eager's
//! decoders with their KV cache, an ExecuTorch program with a static KV cache,
//! or a fixed window recomputed for every token. The loop that drives one is
//! the generation task's ([`crate::task::generation`]).

/// A model that continues a token sequence one token at a time.
pub trait Decoder {
    /// The longest sequence (prompt + generated) it holds.
    fn max_len(&self) -> usize;
    /// Forget any previous sequence, run `prompt` (>= 1 token): the logits of the next token, `[V]`.
    fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>>;
    /// Append `token` to the sequence: the logits of the next token, `[V]`.
    fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>>;
}
