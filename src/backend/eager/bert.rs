//! BERT (transformers' `modeling_bert.py`, the eager attention path): its
//! `config.json` fields ([`BertConfig`]) and the encoder, one struct per module.
//! MiniLM is a BERT. The heads on top are in `heads.rs`.
//!
//! One sentence runs at a time, so activations drop the batch dimension:
//! `S` = tokens, `H` = hidden size, `nh` = heads, `d` = head size, `I` = intermediate size.
//! Weight paths mirror the checkpoint keys (`encoder.layer.{i}.attention.self.query`).

use std::path::Path;

use serde::Deserialize;
use tch::Tensor;

use super::config::{self, Check, ConfigError, HiddenAct};
use super::nn::{self, LayerNorm, Linear, LoadResult, Result};
use super::timing::scope;
use anyhow::Context;
use super::weights::{WeightPath, Weights};
use super::checkpoint::CheckpointConfig;
use super::heads::{decoder, Classifier, MaskedLm, SentenceEmbedding, TokenHead};
use super::model::{encoder_model, head_context, ArchConfig, EagerModel, EncoderStack, Head};
use crate::backend::OutputKind;

/// The BERT hyper-parameters, straight from `config.json` (transformers' `BertConfig`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct BertConfig {
    #[serde(default = "config::defaults::vocab_size")]
    pub vocab_size: i64,
    #[serde(default = "config::defaults::hidden_size")]
    pub hidden_size: i64,
    #[serde(default = "config::defaults::bert_layers")]
    pub num_hidden_layers: usize,
    #[serde(default = "config::defaults::num_heads")]
    pub num_attention_heads: i64,
    #[serde(default = "config::defaults::intermediate_size")]
    pub intermediate_size: i64,
    #[serde(default = "config::defaults::hidden_act", deserialize_with = "config::hidden_act")]
    pub hidden_act: HiddenAct,
    #[serde(default = "config::defaults::max_positions")]
    pub max_position_embeddings: i64,
    #[serde(default = "config::defaults::type_vocab_size")]
    pub type_vocab_size: i64,
    #[serde(default = "config::defaults::layer_norm_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub position_embedding_type: PositionEmbeddingType,
}

/// `position_embedding_type`: only learned absolute positions are implemented.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum PositionEmbeddingType {
    #[default]
    Absolute,
}

impl TryFrom<String> for PositionEmbeddingType {
    type Error = String;
    fn try_from(name: String) -> std::result::Result<Self, Self::Error> {
        match name.as_str() {
            "absolute" => Ok(PositionEmbeddingType::Absolute),
            _ => Err(format!(
                "unsupported position_embedding_type \"{name}\" (supported: absolute)"
            )),
        }
    }
}

impl BertConfig {
    /// Read, parse and check a BERT `config.json` (whatever its `architectures`).
    pub fn load(path: &Path) -> std::result::Result<BertConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|source| ConfigError::Parse {
            path: shown.clone(),
            architecture: "BERT",
            source,
        })?;
        config::parse(&shown, "BERT", &value, BertConfig::check)
    }

    /// The size of one attention head (`hidden_size / num_attention_heads`).
    pub fn head_size(&self) -> i64 {
        self.hidden_size / self.num_attention_heads
    }

    pub(crate) fn check(&self) -> Check {
        config::check_positive(&[
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers as i64),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ])?;
        config::check_heads(self.hidden_size, ("num_attention_heads", self.num_attention_heads))?;
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err((
                "layer_norm_eps",
                self.layer_norm_eps.to_string(),
                "it must be a positive number",
            ));
        }
        Ok(())
    }
}

/// `embeddings`: word + token type + position embeddings, then LayerNorm.
pub struct BertEmbeddings {
    word_embeddings: Tensor,     // [vocab, H]
    position_embeddings: Tensor, // [max_positions, H]
    token_type_0: Tensor,        // [H]: row 0 of token_type_embeddings (one sentence, no pair)
    layer_norm: LayerNorm,
}

impl BertEmbeddings {
    pub fn load(p: &WeightPath, cfg: &BertConfig) -> LoadResult<BertEmbeddings> {
        let h = cfg.hidden_size;
        Ok(BertEmbeddings {
            word_embeddings: p.get("word_embeddings.weight", &[cfg.vocab_size, h])?,
            position_embeddings: p.get("position_embeddings.weight", &[cfg.max_position_embeddings, h])?,
            token_type_0: p.get_map("token_type_embeddings.weight", &[cfg.type_vocab_size, h], |t| {
                t.f_select(0, 0)
            })?,
            layer_norm: LayerNorm::load(&p.pp("LayerNorm"), h, cfg.layer_norm_eps)?,
        })
    }

    /// [vocab, H]: the masked-LM decoder reuses it (tied embeddings).
    pub fn word_embeddings(&self) -> &Tensor {
        &self.word_embeddings
    }

    /// input_ids `[S]` (int64) -> `[S, H]`
    pub fn forward(&self, input_ids: &Tensor) -> Result<Tensor> {
        let seq_len = input_ids.size1()?;
        // embeddings = inputs_embeds + token_type_embeddings; embeddings = embeddings + position_embeddings
        let mut embeddings = Tensor::f_embedding(&self.word_embeddings, input_ids, -1, false, false)?;
        let _ = embeddings.f_add_(&self.token_type_0)?;
        let _ = embeddings.f_add_(&self.position_embeddings.f_narrow(0, 0, seq_len)?)?;
        self.layer_norm.forward(&embeddings)
    }
}

/// `encoder.layer.{i}.attention.self`: multi-head scaled dot-product attention.
pub struct BertSelfAttention {
    query: Linear, // [H, H]
    key: Linear,   // [H, H]
    value: Linear, // [H, H]
    num_heads: i64,
    head_size: i64,
    scale: f64,
}

impl BertSelfAttention {
    pub fn load(p: &WeightPath, cfg: &BertConfig) -> LoadResult<BertSelfAttention> {
        let h = cfg.hidden_size;
        let head_size = cfg.head_size();
        Ok(BertSelfAttention {
            query: Linear::load(&p.pp("query"), h, h)?,
            key: Linear::load(&p.pp("key"), h, h)?,
            value: Linear::load(&p.pp("value"), h, h)?,
            num_heads: cfg.num_attention_heads,
            head_size,
            scale: (head_size as f64).powf(-0.5),
        })
    }

    /// x `[S, H]`, additive mask `[1, 1, S]` or None -> context `[S, H]`
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let seq_len = x.size2()?.0;
        // [S, H] -> [S, nh, d] -> [nh, S, d]
        let heads = |t: Tensor| t.f_view([seq_len, self.num_heads, self.head_size])?.f_transpose(0, 1);
        let query = heads(self.query.forward(x)?)?;
        let key = heads(self.key.forward(x)?)?;
        let value = heads(self.value.forward(x)?)?;
        nn::attention(&query, &key, &value, self.scale, mask)
    }
}

/// `encoder.layer.{i}.attention.output`: projection, residual, LayerNorm.
pub struct BertSelfOutput {
    dense: Linear, // [H, H]
    layer_norm: LayerNorm,
}

impl BertSelfOutput {
    pub fn load(p: &WeightPath, cfg: &BertConfig) -> LoadResult<BertSelfOutput> {
        let h = cfg.hidden_size;
        Ok(BertSelfOutput {
            dense: Linear::load(&p.pp("dense"), h, h)?,
            layer_norm: LayerNorm::load(&p.pp("LayerNorm"), h, cfg.layer_norm_eps)?,
        })
    }

    /// context `[S, H]`, input `[S, H]` -> [S, H]: LayerNorm(dense(context) + input)
    pub fn forward(&self, context: &Tensor, input: &Tensor) -> Result<Tensor> {
        let mut x = self.dense.forward(context)?;
        let _ = x.f_add_(input)?;
        scope("LayerNorm", || self.layer_norm.forward(&x))
    }
}

/// `encoder.layer.{i}.attention`.
pub struct BertAttention {
    self_attention: BertSelfAttention,
    output: BertSelfOutput,
}

impl BertAttention {
    pub fn load(p: &WeightPath, cfg: &BertConfig) -> LoadResult<BertAttention> {
        Ok(BertAttention {
            self_attention: BertSelfAttention::load(&p.pp("self"), cfg)?,
            output: BertSelfOutput::load(&p.pp("output"), cfg)?,
        })
    }

    /// `[S, H]` -> `[S, H]`
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let context = scope("self", || self.self_attention.forward(x, mask))?;
        scope("output", || self.output.forward(&context, x))
    }
}

/// `encoder.layer.{i}.intermediate`: the first feed-forward projection and its activation.
pub struct BertIntermediate {
    dense: Linear, // [I, H]
    act: HiddenAct,
}

impl BertIntermediate {
    pub fn load(p: &WeightPath, cfg: &BertConfig) -> LoadResult<BertIntermediate> {
        Ok(BertIntermediate {
            dense: Linear::load(&p.pp("dense"), cfg.hidden_size, cfg.intermediate_size)?,
            act: cfg.hidden_act,
        })
    }

    /// `[S, H]` -> `[S, I]`
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = self.dense.forward(x)?;
        self.act.forward_(&mut x)
    }
}

/// `encoder.layer.{i}.output`: the second feed-forward projection, residual, LayerNorm.
pub struct BertOutput {
    dense: Linear, // [H, I]
    layer_norm: LayerNorm,
}

impl BertOutput {
    pub fn load(p: &WeightPath, cfg: &BertConfig) -> LoadResult<BertOutput> {
        Ok(BertOutput {
            dense: Linear::load(&p.pp("dense"), cfg.intermediate_size, cfg.hidden_size)?,
            layer_norm: LayerNorm::load(&p.pp("LayerNorm"), cfg.hidden_size, cfg.layer_norm_eps)?,
        })
    }

    /// intermediate `[S, I]`, input `[S, H]` -> [S, H]: LayerNorm(dense(intermediate) + input)
    pub fn forward(&self, intermediate: &Tensor, input: &Tensor) -> Result<Tensor> {
        let mut x = self.dense.forward(intermediate)?;
        let _ = x.f_add_(input)?;
        scope("LayerNorm", || self.layer_norm.forward(&x))
    }
}

/// `encoder.layer.{i}`.
pub struct BertLayer {
    attention: BertAttention,
    intermediate: BertIntermediate,
    output: BertOutput,
}

impl BertLayer {
    pub fn load(p: &WeightPath, cfg: &BertConfig) -> LoadResult<BertLayer> {
        Ok(BertLayer {
            attention: BertAttention::load(&p.pp("attention"), cfg)?,
            intermediate: BertIntermediate::load(&p.pp("intermediate"), cfg)?,
            output: BertOutput::load(&p.pp("output"), cfg)?,
        })
    }

    /// `[S, H]` -> `[S, H]`
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let attention_output = scope("attention", || self.attention.forward(x, mask))?;
        let intermediate_output = scope("intermediate", || self.intermediate.forward(&attention_output))?;
        scope("output", || self.output.forward(&intermediate_output, &attention_output))
    }
}

/// `encoder`: the stack of layers.
pub struct BertEncoder {
    layers: Vec<BertLayer>,
}

impl BertEncoder {
    pub fn load(p: &WeightPath, cfg: &BertConfig) -> LoadResult<BertEncoder> {
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| BertLayer::load(&p.pp(&format!("layer.{i}")), cfg))
            .collect::<LoadResult<_>>()?;
        Ok(BertEncoder { layers })
    }

    /// `[S, H]` -> `[S, H]`
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let mut x = x.shallow_clone();
        for (i, layer) in self.layers.iter().enumerate() {
            x = scope(&format!("layer.{i}"), || layer.forward(&x, mask))?;
        }
        Ok(x)
    }
}

/// `BertModel` without the pooler: the last hidden state.
pub struct BertModel {
    embeddings: BertEmbeddings,
    encoder: BertEncoder,
}

impl BertModel {
    pub fn load(p: &WeightPath, cfg: &BertConfig) -> LoadResult<BertModel> {
        Ok(BertModel {
            embeddings: BertEmbeddings::load(&p.pp("embeddings"), cfg)?,
            encoder: BertEncoder::load(&p.pp("encoder"), cfg)?,
        })
    }

    pub fn word_embeddings(&self) -> &Tensor {
        self.embeddings.word_embeddings()
    }

    /// input_ids `[S]` (int64), attention_mask `[S]` (f32, 1 = real token) -> last hidden state `[S, H]`.
    /// `attention_mask` None means every token is real, as for one unpadded sentence.
    pub fn forward(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        let additive = attention_mask.map(nn::additive_mask).transpose()?; // [1, 1, S]
        let embeddings = scope("embeddings", || self.embeddings.forward(input_ids))?;
        scope("encoder", || self.encoder.forward(&embeddings, additive.as_ref()))
    }
}

/// `BertForMaskedLM`'s `cls` (`BertOnlyMLMHead`): hidden `[S, H]` -> logits `[S, V]`.
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
}

impl TokenHead for BertMaskedLmHead {
    fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let mut x = self.dense.forward(hidden)?;
        let _ = self.act.forward_(&mut x)?;
        self.decoder.forward(&self.layer_norm.forward(&x)?)
    }
}

/// `BertForSequenceClassification`'s head: `bert.pooler` then `classifier`, on the
/// first token. hidden `[S, H]` -> logits `[C]`.
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
}

impl TokenHead for BertClassificationHead {
    fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let pooled = self.pooler.forward(&hidden.f_select(0, 0)?)?.f_tanh()?; // [H]
        self.classifier.forward(&pooled)
    }
}

/// config.json's fields, for the architecture table ([`crate::arch::bert`]).
pub fn parse_config(path: &str, value: &serde_json::Value) -> std::result::Result<Box<dyn ArchConfig>, ConfigError> {
    Ok(Box::new(config::parse(path, "BERT", value, BertConfig::check)?))
}

impl EncoderStack for BertModel {
    fn forward(&self, ids: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        BertModel::forward(self, ids, mask)
    }
}

impl ArchConfig for BertConfig {
    fn vocab_size(&self) -> i64 {
        self.vocab_size
    }
    fn hidden_size(&self) -> i64 {
        self.hidden_size
    }
    fn max_positions(&self) -> i64 {
        self.max_position_embeddings
    }
    fn describe(&self) -> String {
        format!("BERT {} layers, hidden {}, {} heads", self.num_hidden_layers, self.hidden_size, self.num_attention_heads)
    }
    /// The encoder under `bert.` (or at the root), the head at the root
    /// (`cls.predictions...`, `classifier`; the pooler is the encoder's).
    fn load(&self, checkpoint: &CheckpointConfig, weights: &Weights, output: OutputKind) -> anyhow::Result<EagerModel> {
        let path = weights.encoder_root("bert");
        let root = weights.root("");
        let bert = BertModel::load(&path, self)?;
        let context = || head_context(checkpoint, output);
        let head: Box<dyn Head> = match output {
            OutputKind::Pooled => Box::new(SentenceEmbedding),
            OutputKind::TokenLogits => Box::new(MaskedLm(BertMaskedLmHead::load(&root, self, bert.word_embeddings()).with_context(context)?)),
            OutputKind::ClassLogits => Box::new(Classifier {
                head: BertClassificationHead::load(&path, &root, self, checkpoint.num_labels).with_context(context)?,
                num_labels: checkpoint.num_labels,
            }),
            OutputKind::NextToken => anyhow::bail!("{}: BERT is an encoder", checkpoint.path.display()),
        };
        Ok(encoder_model(checkpoint, Box::new(bert), head))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
