//! The BERT encoder with tch operations, one struct per module of
//! transformers' `modeling_bert.py` (the eager attention path), then the
//! sentence-transformers pooling.
//!
//! One sentence runs at a time, so activations drop the batch dimension:
//! `S` = tokens, `H` = hidden size, `nh` = heads, `d` = head size, `I` = intermediate size.
//! Weight paths mirror the checkpoint keys (`encoder.layer.{i}.attention.self.query`).

use tch::{Kind, TchError, Tensor};

use super::config::{BertConfig, HiddenAct};
use super::weights::{WeightError, WeightPath};

/// A forward pass: libtorch errors (bad input shapes, ids out of range).
type Result<T> = std::result::Result<T, TchError>;
/// Loading a module: a tensor missing or of the wrong shape.
type LoadResult<T> = std::result::Result<T, WeightError>;

/// `nn.Linear`: `x @ weight.T + bias`.
struct Linear {
    weight: Tensor, // [out, in]
    bias: Tensor,   // [out]
}

impl Linear {
    fn load(p: &WeightPath, in_features: i64, out_features: i64) -> LoadResult<Linear> {
        Ok(Linear {
            weight: p.get("weight", &[out_features, in_features])?,
            bias: p.get("bias", &[out_features])?,
        })
    }

    /// [S, in] -> [S, out]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.f_linear(&self.weight, Some(&self.bias))
    }
}

/// `nn.LayerNorm` over the last dimension.
struct LayerNorm {
    weight: Tensor, // [H]
    bias: Tensor,   // [H]
    size: i64,
    eps: f64,
}

impl LayerNorm {
    fn load(p: &WeightPath, size: i64, eps: f64) -> LoadResult<LayerNorm> {
        Ok(LayerNorm {
            weight: p.get("weight", &[size])?,
            bias: p.get("bias", &[size])?,
            size,
            eps,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.f_layer_norm([self.size], Some(&self.weight), Some(&self.bias), self.eps, false)
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

    /// input_ids [S] (int64) -> [S, H]
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

    /// x [S, H], additive mask [1, 1, S] or None -> context [S, H]
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let (seq_len, hidden) = x.size2()?;
        // [S, H] -> [S, nh, d] -> [nh, S, d]
        let heads = |t: Tensor| t.f_view([seq_len, self.num_heads, self.head_size])?.f_transpose(0, 1);
        let query = heads(self.query.forward(x)?)?;
        let key = heads(self.key.forward(x)?)?;
        let value = heads(self.value.forward(x)?)?;
        // attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling   [nh, S, S]
        let mut scores = query.f_matmul(&key.f_transpose(1, 2)?)?;
        let _ = scores.f_mul_scalar_(self.scale)?;
        if let Some(mask) = mask {
            let _ = scores.f_add_(mask)?;
        }
        let probs = scores.f_softmax(-1, None::<Kind>)?;
        // [nh, S, d] -> [S, nh, d] -> [S, H]
        probs.f_matmul(&value)?.f_transpose(0, 1)?.f_reshape([seq_len, hidden])
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

    /// context [S, H], input [S, H] -> [S, H]: LayerNorm(dense(context) + input)
    pub fn forward(&self, context: &Tensor, input: &Tensor) -> Result<Tensor> {
        let mut x = self.dense.forward(context)?;
        let _ = x.f_add_(input)?;
        self.layer_norm.forward(&x)
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

    /// [S, H] -> [S, H]
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let context = self.self_attention.forward(x, mask)?;
        self.output.forward(&context, x)
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

    /// [S, H] -> [S, I]
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = self.dense.forward(x)?;
        match self.act {
            HiddenAct::Gelu => x.f_gelu_("none"),
            HiddenAct::GeluTanh => x.f_gelu_("tanh"),
            HiddenAct::Relu => x.f_relu_(),
        }
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

    /// intermediate [S, I], input [S, H] -> [S, H]: LayerNorm(dense(intermediate) + input)
    pub fn forward(&self, intermediate: &Tensor, input: &Tensor) -> Result<Tensor> {
        let mut x = self.dense.forward(intermediate)?;
        let _ = x.f_add_(input)?;
        self.layer_norm.forward(&x)
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

    /// [S, H] -> [S, H]
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let attention_output = self.attention.forward(x, mask)?;
        let intermediate_output = self.intermediate.forward(&attention_output)?;
        self.output.forward(&intermediate_output, &attention_output)
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

    /// [S, H] -> [S, H]
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let mut x = x.shallow_clone();
        for layer in &self.layers {
            x = layer.forward(&x, mask)?;
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

    /// input_ids [S] (int64), attention_mask [S] (f32, 1 = real token) -> last hidden state [S, H].
    /// `attention_mask` None means every token is real, as for one unpadded sentence.
    pub fn forward(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        // (1 - mask) * finfo.min, broadcast over heads and query positions: [1, 1, S]
        let additive = match attention_mask {
            Some(mask) => Some(
                mask.f_rsub_scalar(1.0)?
                    .f_mul_scalar(f64::from(f32::MIN))?
                    .f_view([1, 1, -1])?,
            ),
            None => None,
        };
        let embeddings = self.embeddings.forward(input_ids)?;
        self.encoder.forward(&embeddings, additive.as_ref())
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
