//! What sits on the encoder's last hidden state for each task: the
//! sentence-transformers pooling (feature-extraction), the masked-LM heads
//! (fill-mask) and the sequence-classification heads (text-classification) of
//! BERT and DistilBERT, as transformers' task classes define them.
//!
//! Heads take the last hidden state without the batch dimension, `[S, H]`, and
//! return `[H]`, `[S, V]` or `[C]` (`V` = vocabulary, `C` = labels). Their weights
//! are at the root of a task checkpoint (`cls.predictions...`, `vocab_transform`,
//! `classifier`), next to the encoder's `bert.` / `distilbert.` keys.

use tch::{Kind, Tensor};

use super::bert::BertConfig;
use super::config::HiddenAct;
use super::distilbert::DistilBertConfig;
use super::nn::{LayerNorm, Linear, LoadResult, Result};
use super::weights::WeightPath;

/// feature-extraction: sentence-transformers' mean pooling over the real tokens,
/// then L2 normalisation. hidden [S, H], attention_mask [S] (f32) -> [H].
pub struct SentenceEmbedding;

impl SentenceEmbedding {
    pub fn forward(&self, hidden: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
        l2_normalize(&mean_pooling(hidden, attention_mask)?)
    }
}

/// sentence-transformers' mean pooling: hidden [S, H], attention_mask [S] (f32) -> [H].
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

/// `torch.nn.functional.normalize(x, p=2)`: x / max(||x||, 1e-12), x [H].
pub fn l2_normalize(x: &Tensor) -> Result<Tensor> {
    x.f_div(&x.f_norm_scalaropt_dim(2.0, [-1], true)?.f_clamp_min(1e-12)?)
}

/// The vocabulary projection of a masked-LM head: `[V, H]` weight and `[V]` bias.
/// transformers ties the weight to the word embeddings and leaves it out of the
/// file; a checkpoint that stores its own (untied) weight has it under `weight_name`.
fn decoder(p: &WeightPath, weight_name: &str, bias_names: &[&str], word_embeddings: &Tensor, vocab: i64, hidden: i64) -> LoadResult<Linear> {
    let weight = if p.contains(weight_name) {
        p.get(weight_name, &[vocab, hidden])?
    } else {
        word_embeddings.shallow_clone() // tied: [V, H], shape checked with the embeddings
    };
    Ok(Linear::from_parts(weight, Some(p.get_either(bias_names, &[vocab])?)))
}

/// `BertForMaskedLM`'s `cls` (`BertOnlyMLMHead`): hidden [S, H] -> logits [S, V].
///
/// ```python
/// hidden_states = self.transform.LayerNorm(self.transform.transform_act_fn(self.transform.dense(hidden_states)))
/// prediction_scores = self.decoder(hidden_states)  # weight tied to bert.embeddings.word_embeddings, bias = cls.predictions.bias
/// ```
pub struct BertMaskedLmHead {
    dense: Linear, // [H, H]
    act: HiddenAct,
    layer_norm: LayerNorm,
    decoder: Linear, // [V, H]
}

impl BertMaskedLmHead {
    /// `p` is the checkpoint's root, where `cls.predictions` lives.
    pub fn load(p: &WeightPath, cfg: &BertConfig, word_embeddings: &Tensor) -> LoadResult<BertMaskedLmHead> {
        let h = cfg.hidden_size;
        let predictions = p.pp("cls.predictions");
        let transform = predictions.pp("transform");
        Ok(BertMaskedLmHead {
            dense: Linear::load(&transform.pp("dense"), h, h)?,
            act: cfg.hidden_act,
            layer_norm: LayerNorm::load(&transform.pp("LayerNorm"), h, cfg.layer_norm_eps)?,
            // `cls.predictions.decoder.bias` is tied to `cls.predictions.bias`; files carry one or both.
            decoder: decoder(&predictions, "decoder.weight", &["bias", "decoder.bias"], word_embeddings, cfg.vocab_size, h)?,
        })
    }

    pub fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let mut x = self.dense.forward(hidden)?;
        let _ = self.act.forward_(&mut x)?;
        self.decoder.forward(&self.layer_norm.forward(&x)?)
    }
}

/// `DistilBertForMaskedLM`'s head: hidden [S, H] -> logits [S, V].
///
/// ```python
/// prediction_logits = self.vocab_layer_norm(self.activation(self.vocab_transform(hidden_states)))
/// prediction_logits = self.vocab_projector(prediction_logits)  # weight tied to distilbert.embeddings.word_embeddings
/// ```
pub struct DistilBertMaskedLmHead {
    vocab_transform: Linear, // [H, H]
    activation: HiddenAct,
    vocab_layer_norm: LayerNorm,
    vocab_projector: Linear, // [V, H]
}

impl DistilBertMaskedLmHead {
    /// `p` is the checkpoint's root.
    pub fn load(p: &WeightPath, cfg: &DistilBertConfig, word_embeddings: &Tensor) -> LoadResult<DistilBertMaskedLmHead> {
        let h = cfg.dim;
        Ok(DistilBertMaskedLmHead {
            vocab_transform: Linear::load(&p.pp("vocab_transform"), h, h)?,
            activation: cfg.activation,
            vocab_layer_norm: LayerNorm::load(&p.pp("vocab_layer_norm"), h, DistilBertConfig::LAYER_NORM_EPS)?,
            vocab_projector: decoder(
                &p.pp("vocab_projector"),
                "weight",
                &["bias"],
                word_embeddings,
                cfg.vocab_size,
                h,
            )?,
        })
    }

    pub fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let mut x = self.vocab_transform.forward(hidden)?;
        let _ = self.activation.forward_(&mut x)?;
        self.vocab_projector.forward(&self.vocab_layer_norm.forward(&x)?)
    }
}

/// `BertForSequenceClassification`'s head: `bert.pooler` then `classifier`, on the
/// first token. hidden [S, H] -> logits [C].
///
/// ```python
/// pooled_output = self.bert.pooler.activation(self.bert.pooler.dense(hidden_states[:, 0]))  # tanh
/// logits = self.classifier(pooled_output)
/// ```
pub struct BertClassificationHead {
    pooler: Linear,     // [H, H]
    classifier: Linear, // [C, H]
}

impl BertClassificationHead {
    /// `encoder` is where the encoder's keys start (the pooler belongs to `BertModel`:
    /// `bert.pooler.dense`); `root` is the checkpoint's root (`classifier`).
    pub fn load(encoder: &WeightPath, root: &WeightPath, cfg: &BertConfig, num_labels: i64) -> LoadResult<BertClassificationHead> {
        let h = cfg.hidden_size;
        Ok(BertClassificationHead {
            pooler: Linear::load(&encoder.pp("pooler.dense"), h, h)?,
            classifier: Linear::load(&root.pp("classifier"), h, num_labels)?,
        })
    }

    pub fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let pooled = self.pooler.forward(&hidden.f_select(0, 0)?)?.f_tanh()?; // [H]
        self.classifier.forward(&pooled)
    }
}

/// `DistilBertForSequenceClassification`'s head: `pre_classifier`, ReLU, `classifier`,
/// on the first token. hidden [S, H] -> logits [C].
///
/// ```python
/// pooled_output = nn.ReLU()(self.pre_classifier(hidden_state[:, 0]))
/// logits = self.classifier(pooled_output)
/// ```
pub struct DistilBertClassificationHead {
    pre_classifier: Linear, // [H, H]
    classifier: Linear,     // [C, H]
}

impl DistilBertClassificationHead {
    /// `p` is the checkpoint's root.
    pub fn load(p: &WeightPath, cfg: &DistilBertConfig, num_labels: i64) -> LoadResult<DistilBertClassificationHead> {
        Ok(DistilBertClassificationHead {
            pre_classifier: Linear::load(&p.pp("pre_classifier"), cfg.dim, cfg.dim)?,
            classifier: Linear::load(&p.pp("classifier"), cfg.dim, num_labels)?,
        })
    }

    pub fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let pooled = self.pre_classifier.forward(&hidden.f_select(0, 0)?)?.f_relu()?; // [H]
        self.classifier.forward(&pooled)
    }
}

/// What each head is to the encoder model ([`super::model::Head`]).
mod as_head {
    use super::*;
    use crate::backend::eager::model::Head;

    impl Head for SentenceEmbedding {
        fn forward(&self, hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
            SentenceEmbedding::forward(self, hidden, mask)
        }
        fn describe(&self) -> String {
            "mean pooling, L2-normalised".into()
        }
    }

    /// A masked-LM head reads the hidden state alone.
    macro_rules! masked_lm {
        ($($head:ty),*) => {$(
            impl Head for $head {
                fn forward(&self, hidden: &Tensor, _mask: &Tensor) -> Result<Tensor> {
                    <$head>::forward(self, hidden)
                }
                fn describe(&self) -> String {
                    "masked-LM head".into()
                }
            }
        )*};
    }
    masked_lm!(BertMaskedLmHead, DistilBertMaskedLmHead);

    /// A classification head, with its number of labels for the description.
    pub struct Classifier<H> {
        pub head: H,
        pub num_labels: i64,
    }

    macro_rules! classifier {
        ($($head:ty),*) => {$(
            impl Head for Classifier<$head> {
                fn forward(&self, hidden: &Tensor, _mask: &Tensor) -> Result<Tensor> {
                    self.head.forward(hidden)
                }
                fn describe(&self) -> String {
                    format!("sequence-classification head ({} labels)", self.num_labels)
                }
            }
        )*};
    }
    classifier!(BertClassificationHead, DistilBertClassificationHead);
}

pub use as_head::Classifier;
