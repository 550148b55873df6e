//! What sits on the encoder's last hidden state for each task, the part the
//! encoders share: the sentence-transformers pooling (feature-extraction), the
//! masked-LM and sequence-classification wrappers ([`MaskedLm`], [`Classifier`])
//! around an architecture's own head (in its file: `bert.rs`, `distilbert.rs`,
//! as transformers' task classes define them), and the tied vocabulary projection.
//!
//! Heads take the last hidden state without the batch dimension, `[S, H]`, and
//! return `[H]`, `[S, V]` or `[C]` (`V` = vocabulary, `C` = labels). Their weights
//! are at the root of a task checkpoint (`cls.predictions...`, `vocab_transform`,
//! `classifier`), next to the encoder's `bert.` / `distilbert.` keys.

use tch::{Kind, Tensor};

use super::traits::Head;
use super::nn::{Linear, LoadResult, Result};
use super::weights::WeightPath;

/// feature-extraction: sentence-transformers' mean pooling over the real tokens,
/// then L2 normalisation. hidden `[S, H]`, attention_mask `[S]` (f32) -> `[H]`.
pub struct SentenceEmbedding;

impl SentenceEmbedding {
    pub fn forward(&self, hidden: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
        l2_normalize(&mean_pooling(hidden, attention_mask)?)
    }
}

/// sentence-transformers' mean pooling: hidden `[S, H]`, attention_mask `[S]` (f32) -> `[H]`.
///
/// `sum(hidden * mask) / clamp(sum(mask), min=1e-9)`
pub fn mean_pooling(hidden: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
    let mask = attention_mask.f_unsqueeze(-1)?; // [S, 1]
    let summed = hidden
        .f_mul(&mask)?
        .f_sum_dim_intlist(&[0i64][..], false, None::<Kind>)?; // [H]
    summed.f_div(
        &mask
            .f_sum_dim_intlist(&[0i64][..], false, None::<Kind>)?
            .f_clamp_min(1e-9)?,
    )
}

/// `torch.nn.functional.normalize(x, p=2)`: x / max(||x||, 1e-12), x `[H]`.
pub fn l2_normalize(x: &Tensor) -> Result<Tensor> {
    x.f_div(&x.f_norm_scalaropt_dim(2.0, [-1], true)?.f_clamp_min(1e-12)?)
}

/// The vocabulary projection of a masked-LM head: `[V, H]` weight and `[V]` bias.
/// transformers ties the weight to the word embeddings and leaves it out of the
/// file; a checkpoint that stores its own (untied) weight has it under `weight_name`.
pub fn decoder(p: &WeightPath, weight_name: &str, bias_names: &[&str], word_embeddings: &Tensor, vocab: i64, hidden: i64) -> LoadResult<Linear> {
    let weight = if p.contains(weight_name) {
        p.get(weight_name, &[vocab, hidden])?
    } else {
        word_embeddings.shallow_clone() // tied: [V, H], shape checked with the embeddings
    };
    Ok(Linear::from_parts(weight, Some(p.get_either(bias_names, &[vocab])?)))
}

/// An architecture's head that reads the hidden state alone: hidden `[S, H]` -> `[S, V]` or `[C]`.
pub trait TokenHead: Send {
    fn forward(&self, hidden: &Tensor) -> Result<Tensor>;
}

/// fill-mask: an architecture's masked-LM head.
pub struct MaskedLm<H>(pub H);

/// text-classification: an architecture's classification head, with its number
/// of labels for the description.
pub struct Classifier<H> {
    pub head: H,
    pub num_labels: i64,
}

/// What each head is to the encoder model ([`Head`]).
impl Head for SentenceEmbedding {
    fn forward(&self, hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
        SentenceEmbedding::forward(self, hidden, mask)
    }
    fn describe(&self) -> String {
        "mean pooling, L2-normalised".into()
    }
}

/// A masked-LM head reads the hidden state alone.
impl<H: TokenHead> Head for MaskedLm<H> {
    fn forward(&self, hidden: &Tensor, _mask: &Tensor) -> Result<Tensor> {
        self.0.forward(hidden)
    }
    fn describe(&self) -> String {
        "masked-LM head".into()
    }
}

impl<H: TokenHead> Head for Classifier<H> {
    fn forward(&self, hidden: &Tensor, _mask: &Tensor) -> Result<Tensor> {
        self.head.forward(hidden)
    }
    fn describe(&self) -> String {
        format!("sequence-classification head ({} labels)", self.num_labels)
    }
}
