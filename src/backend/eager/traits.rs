//! What a loaded eager model is to the rest of runlens: an [`EncoderModel`]
//! (an [`EncoderStack`] with its task's [`Head`]) or a [`DecoderModel`], as one
//! [`EagerModel`]. The architectures' files implement these; `model.rs` and
//! `checkpoint.rs` build on them (the dependency goes one way: here, then there).

use tch::Tensor;

use super::nn::Linear;
use crate::backend::Decoder;

/// A checkpoint's encoder with the head its task needs, in libtorch tensors.
pub trait EncoderModel: Send {
    /// ids and mask: int64 `[S]`. Returns what the task's programs return:
    /// "feature-extraction" `[1, H]` (masked mean pooling, L2-normalised, as today),
    /// "fill-mask" `[1, S, V]` logits, "text-classification" `[1, C]` logits.
    ///
    /// Inputs the model cannot take (wrong kind or shape, too long, ids outside the
    /// vocabulary, mask values other than 0 and 1) are errors before libtorch sees them.
    fn forward(&self, ids: &Tensor, mask: &Tensor) -> anyhow::Result<Tensor>;
    /// e.g. "DistilBERT 6 layers, dim 768, 12 heads + masked-LM head".
    fn describe(&self) -> String;
}

/// A decoder with its LM head that continues a sequence (text-generation).
pub trait DecoderModel: Decoder + Send {
    /// e.g. "GPT-2 12 layers, n_embd 768, 12 heads, KV cache".
    fn describe(&self) -> String;
    /// Hold at most `max_len` positions (the model directory's `max_seq_len`).
    fn limit_len(&mut self, max_len: usize);
    /// Every linear layer, the LM head included (what `eager-int8` / `eager-int4` quantize).
    fn linears(&mut self) -> Vec<&mut Linear>;
    /// The bytes of weights a decode step reads, as the model holds them now:
    /// every matrix and norm once; a table it gathers one row from (position
    /// embeddings, a token embedding that is not the head) not counted.
    fn weight_bytes_per_token(&self) -> u64;
}

/// An encoder's layer stack: input_ids `[S]`, attention_mask `[S]` (f32) or None
/// when every token is real -> the last hidden state `[S, H]`.
pub trait EncoderStack: Send {
    fn forward(&self, ids: &Tensor, mask: Option<&Tensor>) -> tch::Result<Tensor>;
}

/// What a task puts on an encoder's last hidden state: hidden `[S, H]`,
/// attention_mask `[S]` (f32) -> `[H]`, `[S, V]` or `[C]`.
pub trait Head: Send {
    fn forward(&self, hidden: &Tensor, mask: &Tensor) -> tch::Result<Tensor>;
    fn describe(&self) -> String;
}

/// What eager loads for a model directory: an encoder with its task's head, or
/// a decoder that continues a sequence (text-generation).
pub enum EagerModel {
    Encoder(Box<dyn EncoderModel>),
    Decoder(Box<dyn DecoderModel>),
}

