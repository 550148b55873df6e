//! DistilBERT (transformers' `modeling_distilbert.py`, the eager attention path):
//! its `config.json` fields under their own names ([`DistilBertConfig`]: `dim`,
//! `n_layers`, `n_heads`, `hidden_dim`, `activation`) and the encoder, one struct
//! per module. The heads on top are in `heads.rs`.
//!
//! What differs from BERT: no token type embeddings, the attention's projections
//! are `q_lin` / `k_lin` / `v_lin` / `out_lin` with the residual and LayerNorm in the
//! block (`sa_layer_norm`), the feed-forward is `ffn.lin1` / `ffn.lin2`, every
//! LayerNorm has eps 1e-12.
//!
//! One sentence at a time, no batch dimension: `S` = tokens, `H` = `dim`,
//! `nh` = `n_heads`, `d` = head size, `I` = `hidden_dim`.
//! Weight paths mirror the checkpoint keys (`transformer.layer.{i}.attention.q_lin`).

use serde::Deserialize;
use tch::Tensor;

use super::timing::scope;
use super::config::{self, Check, HiddenAct};
use super::nn::{self, LayerNorm, Linear, LoadResult, Result};
use anyhow::Context;
use super::weights::{WeightPath, Weights};
use super::checkpoint::CheckpointConfig;
use super::config::ConfigError;
use super::heads::{decoder, Classifier, MaskedLm, SentenceEmbedding, TokenHead};
use super::model::{encoder_model, head_context, ArchConfig, EagerModel, EncoderStack, Head};
use crate::backend::OutputKind;

/// The DistilBERT hyper-parameters under their own names (transformers' `DistilBertConfig`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct DistilBertConfig {
    #[serde(default = "config::defaults::vocab_size")]
    pub vocab_size: i64,
    /// The hidden size (BERT's `hidden_size`).
    #[serde(default = "config::defaults::hidden_size")]
    pub dim: i64,
    #[serde(default = "config::defaults::distilbert_layers")]
    pub n_layers: usize,
    #[serde(default = "config::defaults::num_heads")]
    pub n_heads: i64,
    /// The feed-forward size (BERT's `intermediate_size`).
    #[serde(default = "config::defaults::intermediate_size")]
    pub hidden_dim: i64,
    /// The feed-forward and masked-LM head activation (BERT's `hidden_act`).
    #[serde(default = "config::defaults::hidden_act", deserialize_with = "config::distilbert_activation")]
    pub activation: HiddenAct,
    #[serde(default = "config::defaults::max_positions")]
    pub max_position_embeddings: i64,
    /// The position embeddings were initialised as sinusoids; they are saved in the
    /// checkpoint like learned ones, so the encoder reads them either way.
    #[serde(default)]
    pub sinusoidal_pos_embds: bool,
}

impl DistilBertConfig {
    /// DistilBERT's layer norms all use `eps=1e-12`, fixed in `modeling_distilbert.py`.
    pub const LAYER_NORM_EPS: f64 = 1e-12;

    /// The size of one attention head (`dim / n_heads`).
    pub fn head_size(&self) -> i64 {
        self.dim / self.n_heads
    }

    pub(crate) fn check(&self) -> Check {
        config::check_positive(&[
            ("vocab_size", self.vocab_size),
            ("dim", self.dim),
            ("n_layers", self.n_layers as i64),
            ("n_heads", self.n_heads),
            ("hidden_dim", self.hidden_dim),
            ("max_position_embeddings", self.max_position_embeddings),
        ])?;
        config::check_heads(self.dim, ("n_heads", self.n_heads))
    }
}


/// `embeddings`: word + position embeddings, then LayerNorm.
pub struct Embeddings {
    word_embeddings: Tensor,     // [vocab, H]
    position_embeddings: Tensor, // [max_positions, H]
    layer_norm: LayerNorm,
}

impl Embeddings {
    pub fn load(p: &WeightPath, cfg: &DistilBertConfig) -> LoadResult<Embeddings> {
        Ok(Embeddings {
            word_embeddings: p.get("word_embeddings.weight", &[cfg.vocab_size, cfg.dim])?,
            position_embeddings: p.get("position_embeddings.weight", &[cfg.max_position_embeddings, cfg.dim])?,
            layer_norm: LayerNorm::load(&p.pp("LayerNorm"), cfg.dim, DistilBertConfig::LAYER_NORM_EPS)?,
        })
    }

    /// input_ids `[S]` (int64) -> `[S, H]`
    pub fn forward(&self, input_ids: &Tensor) -> Result<Tensor> {
        let seq_len = input_ids.size1()?;
        // embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        let mut embeddings = Tensor::f_embedding(&self.word_embeddings, input_ids, -1, false, false)?;
        let _ = embeddings.f_add_(&self.position_embeddings.f_narrow(0, 0, seq_len)?)?;
        self.layer_norm.forward(&embeddings)
    }
}

/// `transformer.layer.{i}.attention`: multi-head attention with its output projection.
pub struct DistilBertSelfAttention {
    q_lin: Linear,   // [H, H]
    k_lin: Linear,   // [H, H]
    v_lin: Linear,   // [H, H]
    out_lin: Linear, // [H, H]
    num_heads: i64,
    head_size: i64,
    scale: f64,
}

impl DistilBertSelfAttention {
    pub fn load(p: &WeightPath, cfg: &DistilBertConfig) -> LoadResult<DistilBertSelfAttention> {
        let h = cfg.dim;
        let head_size = cfg.head_size();
        Ok(DistilBertSelfAttention {
            q_lin: Linear::load(&p.pp("q_lin"), h, h)?,
            k_lin: Linear::load(&p.pp("k_lin"), h, h)?,
            v_lin: Linear::load(&p.pp("v_lin"), h, h)?,
            out_lin: Linear::load(&p.pp("out_lin"), h, h)?,
            num_heads: cfg.n_heads,
            head_size,
            scale: (head_size as f64).powf(-0.5),
        })
    }

    /// x `[S, H]`, additive mask `[1, 1, S]` or None -> `[S, H]`
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let seq_len = x.size2()?.0;
        // self.q_lin(hidden_states).view(*hidden_shape).transpose(1, 2): [S, H] -> [nh, S, d]
        let heads = |t: Tensor| t.f_view([seq_len, self.num_heads, self.head_size])?.f_transpose(0, 1);
        let query = heads(self.q_lin.forward(x)?)?;
        let key = heads(self.k_lin.forward(x)?)?;
        let value = heads(self.v_lin.forward(x)?)?;
        let context = nn::attention(&query, &key, &value, self.scale, mask)?; // [S, H]
        self.out_lin.forward(&context)
    }
}

/// `transformer.layer.{i}.ffn`: `lin2(activation(lin1(x)))`.
pub struct Ffn {
    lin1: Linear, // [I, H]
    lin2: Linear, // [H, I]
    activation: HiddenAct,
}

impl Ffn {
    pub fn load(p: &WeightPath, cfg: &DistilBertConfig) -> LoadResult<Ffn> {
        Ok(Ffn {
            lin1: Linear::load(&p.pp("lin1"), cfg.dim, cfg.hidden_dim)?,
            lin2: Linear::load(&p.pp("lin2"), cfg.hidden_dim, cfg.dim)?,
            activation: cfg.activation,
        })
    }

    /// `[S, H]` -> `[S, H]`
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = self.lin1.forward(x)?; // [S, I]
        let _ = self.activation.forward_(&mut x)?;
        self.lin2.forward(&x)
    }
}

/// `transformer.layer.{i}`.
pub struct TransformerBlock {
    attention: DistilBertSelfAttention,
    sa_layer_norm: LayerNorm,
    ffn: Ffn,
    output_layer_norm: LayerNorm,
}

impl TransformerBlock {
    pub fn load(p: &WeightPath, cfg: &DistilBertConfig) -> LoadResult<TransformerBlock> {
        let eps = DistilBertConfig::LAYER_NORM_EPS;
        Ok(TransformerBlock {
            attention: DistilBertSelfAttention::load(&p.pp("attention"), cfg)?,
            sa_layer_norm: LayerNorm::load(&p.pp("sa_layer_norm"), cfg.dim, eps)?,
            ffn: Ffn::load(&p.pp("ffn"), cfg)?,
            output_layer_norm: LayerNorm::load(&p.pp("output_layer_norm"), cfg.dim, eps)?,
        })
    }

    /// `[S, H]` -> `[S, H]`
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        // attention_output = self.sa_layer_norm(attention_output + hidden_states)
        let mut attention_output = scope("attention", || self.attention.forward(x, mask))?;
        let _ = attention_output.f_add_(x)?;
        let attention_output = scope("sa_layer_norm", || self.sa_layer_norm.forward(&attention_output))?;
        // ffn_output = self.output_layer_norm(ffn_output + attention_output)
        let mut ffn_output = scope("ffn", || self.ffn.forward(&attention_output))?;
        let _ = ffn_output.f_add_(&attention_output)?;
        scope("output_layer_norm", || self.output_layer_norm.forward(&ffn_output))
    }
}

/// `DistilBertModel`: embeddings and `transformer`, the stack of blocks; the last hidden state.
pub struct DistilBertModel {
    embeddings: Embeddings,
    layers: Vec<TransformerBlock>,
}

impl DistilBertModel {
    pub fn load(p: &WeightPath, cfg: &DistilBertConfig) -> LoadResult<DistilBertModel> {
        let layers = (0..cfg.n_layers)
            .map(|i| TransformerBlock::load(&p.pp(&format!("transformer.layer.{i}")), cfg))
            .collect::<LoadResult<_>>()?;
        Ok(DistilBertModel {
            embeddings: Embeddings::load(&p.pp("embeddings"), cfg)?,
            layers,
        })
    }

    /// [vocab, H]: the masked-LM projector reuses it (tied embeddings).
    pub fn word_embeddings(&self) -> &Tensor {
        &self.embeddings.word_embeddings
    }

    /// input_ids `[S]` (int64), attention_mask `[S]` (f32, 1 = real token) -> last hidden state `[S, H]`.
    /// `attention_mask` None means every token is real.
    pub fn forward(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        let additive = attention_mask.map(nn::additive_mask).transpose()?; // [1, 1, S]
        let mut x = scope("embeddings", || self.embeddings.forward(input_ids))?;
        for (i, layer) in self.layers.iter().enumerate() {
            x = scope(&format!("transformer.layer.{i}"), || layer.forward(&x, additive.as_ref()))?;
        }
        Ok(x)
    }
}

/// `DistilBertForMaskedLM`'s head: hidden `[S, H]` -> logits `[S, V]`.
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
}

impl TokenHead for DistilBertMaskedLmHead {
    fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let mut x = self.vocab_transform.forward(hidden)?;
        let _ = self.activation.forward_(&mut x)?;
        self.vocab_projector.forward(&self.vocab_layer_norm.forward(&x)?)
    }
}

/// `DistilBertForSequenceClassification`'s head: `pre_classifier`, ReLU, `classifier`,
/// on the first token. hidden `[S, H]` -> logits `[C]`.
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
}

impl TokenHead for DistilBertClassificationHead {
    fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let pooled = self.pre_classifier.forward(&hidden.f_select(0, 0)?)?.f_relu()?; // [H]
        self.classifier.forward(&pooled)
    }
}

/// config.json's fields, for the architecture table ([`crate::arch::distilbert`]).
pub fn parse_config(path: &str, value: &serde_json::Value) -> std::result::Result<Box<dyn ArchConfig>, ConfigError> {
    Ok(Box::new(config::parse(path, "DistilBERT", value, DistilBertConfig::check)?))
}

impl EncoderStack for DistilBertModel {
    fn forward(&self, ids: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        DistilBertModel::forward(self, ids, mask)
    }
}

impl ArchConfig for DistilBertConfig {
    fn vocab_size(&self) -> i64 {
        self.vocab_size
    }
    fn hidden_size(&self) -> i64 {
        self.dim
    }
    fn max_positions(&self) -> i64 {
        self.max_position_embeddings
    }
    fn describe(&self) -> String {
        format!("DistilBERT {} layers, dim {}, {} heads", self.n_layers, self.dim, self.n_heads)
    }
    /// The encoder under `distilbert.` (or at the root), the head at the root
    /// (`vocab_transform`, `vocab_projector`, `pre_classifier`, `classifier`).
    fn load(&self, checkpoint: &CheckpointConfig, weights: &Weights, output: OutputKind) -> anyhow::Result<EagerModel> {
        let path = weights.encoder_root("distilbert");
        let root = weights.root("");
        let distilbert = DistilBertModel::load(&path, self)?;
        let context = || head_context(checkpoint, output);
        let head: Box<dyn Head> = match output {
            OutputKind::Pooled => Box::new(SentenceEmbedding),
            OutputKind::TokenLogits => {
                Box::new(MaskedLm(DistilBertMaskedLmHead::load(&root, self, distilbert.word_embeddings()).with_context(context)?))
            }
            OutputKind::ClassLogits => Box::new(Classifier {
                head: DistilBertClassificationHead::load(&root, self, checkpoint.num_labels).with_context(context)?,
                num_labels: checkpoint.num_labels,
            }),
            OutputKind::NextToken => anyhow::bail!("{}: DistilBERT is an encoder", checkpoint.path.display()),
        };
        Ok(encoder_model(checkpoint, Box::new(distilbert), head))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
