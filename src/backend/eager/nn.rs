//! The `torch.nn` building blocks every architecture file shares: `nn.Linear`,
//! `nn.LayerNorm` and the activations transformers names in its configs.
//!
//! One sentence runs at a time, so activations drop the batch dimension:
//! `[S, in]` rather than `[1, S, in]`.

use tch::{TchError, Tensor};

use super::config::HiddenAct;
use super::weights::{WeightError, WeightPath};

/// A forward pass: libtorch errors (bad input shapes, ids out of range).
pub(crate) type Result<T> = std::result::Result<T, TchError>;
/// Loading a module: a tensor missing or of the wrong shape.
pub(crate) type LoadResult<T> = std::result::Result<T, WeightError>;

/// `nn.Linear`: `x @ weight.T + bias`.
pub(crate) struct Linear {
    weight: Tensor, // [out, in]
    bias: Tensor,   // [out]
}

impl Linear {
    pub fn load(p: &WeightPath, in_features: i64, out_features: i64) -> LoadResult<Linear> {
        Ok(Linear {
            weight: p.get("weight", &[out_features, in_features])?,
            bias: p.get("bias", &[out_features])?,
        })
    }

    /// A layer from tensors found elsewhere (a decoder tied to the word embeddings).
    pub fn from_parts(weight: Tensor, bias: Tensor) -> Linear {
        Linear { weight, bias }
    }

    /// [S, in] -> [S, out] (or [in] -> [out])
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.f_linear(&self.weight, Some(&self.bias))
    }
}

/// `nn.LayerNorm` over the last dimension.
pub(crate) struct LayerNorm {
    weight: Tensor, // [H]
    bias: Tensor,   // [H]
    size: i64,
    eps: f64,
}

impl LayerNorm {
    /// `weight` / `bias`, or the TensorFlow-era names `gamma` / `beta` that
    /// checkpoints converted from Google's originals still carry.
    pub fn load(p: &WeightPath, size: i64, eps: f64) -> LoadResult<LayerNorm> {
        Ok(LayerNorm {
            weight: p.get_either(&["weight", "gamma"], &[size])?,
            bias: p.get_either(&["bias", "beta"], &[size])?,
            size,
            eps,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.f_layer_norm([self.size], Some(&self.weight), Some(&self.bias), self.eps, false)
    }
}

impl HiddenAct {
    /// `ACT2FN[hidden_act](x)`, in place on a tensor the caller owns.
    pub(crate) fn forward_(self, x: &mut Tensor) -> Result<Tensor> {
        match self {
            HiddenAct::Gelu => x.f_gelu_("none"),
            HiddenAct::GeluTanh => x.f_gelu_("tanh"),
            HiddenAct::Relu => x.f_relu_(),
        }
    }
}

/// The additive attention mask: `(1 - mask) * finfo(float32).min`, broadcast over
/// heads and query positions. attention_mask [S] (f32, 1 = real token) -> [1, 1, S].
///
/// transformers' `create_bidirectional_mask` for the eager attention path; BERT and
/// DistilBERT both add it to the scores before the softmax.
pub(crate) fn additive_mask(attention_mask: &Tensor) -> Result<Tensor> {
    attention_mask
        .f_rsub_scalar(1.0)?
        .f_mul_scalar(f64::from(f32::MIN))?
        .f_view([1, 1, -1])
}

/// Scaled dot-product attention over heads, the eager path of both architectures:
/// query, key, value [nh, S, d], additive mask [1, 1, S] or None -> context [S, nh * d].
///
/// ```python
/// attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
/// attn_weights = attn_weights + attention_mask
/// attn_output = torch.matmul(softmax(attn_weights, dim=-1), value).transpose(1, 2)
/// ```
pub(crate) fn attention(query: &Tensor, key: &Tensor, value: &Tensor, scale: f64, mask: Option<&Tensor>) -> Result<Tensor> {
    let (_, seq_len, _) = query.size3()?;
    let mut scores = query.f_matmul(&key.f_transpose(1, 2)?)?; // [nh, S, S]
    let _ = scores.f_mul_scalar_(scale)?;
    if let Some(mask) = mask {
        let _ = scores.f_add_(mask)?;
    }
    let probs = scores.f_softmax(-1, None::<tch::Kind>)?;
    // [nh, S, d] -> [S, nh, d] -> [S, nh * d]
    probs.f_matmul(value)?.f_transpose(0, 1)?.f_reshape([seq_len, -1])
}
