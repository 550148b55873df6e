//! The `torch.nn` building blocks every architecture file shares: `nn.Linear`,
//! `nn.LayerNorm` and the activations transformers names in its configs.
//!
//! One sentence runs at a time, so activations drop the batch dimension:
//! `[S, in]` rather than `[1, S, in]`.

use tch::{TchError, Tensor};

use super::config::HiddenAct;
use super::quant::{tensor_bytes, PackedWeight, WeightFormat};
use super::weights::{WeightError, WeightPath};

/// A forward pass: libtorch errors (bad input shapes, ids out of range).
pub(crate) type Result<T> = std::result::Result<T, TchError>;
/// Loading a module: a tensor missing or of the wrong shape.
pub(crate) type LoadResult<T> = std::result::Result<T, WeightError>;

/// `nn.Linear`: `x @ weight.T (+ bias)`, its weight in float32 or quantized
/// for one of ATen's packed kernels ([`super::quant`]).
pub struct Linear {
    weight: Tensor, // [out, in]; undefined once packed
    packed: Option<PackedWeight>,
    bias: Option<Tensor>, // [out]
}

impl Linear {
    pub fn load(p: &WeightPath, in_features: i64, out_features: i64) -> LoadResult<Linear> {
        Linear::load_with_bias(p, in_features, out_features, true)
    }

    /// With a bias or without (Llama's projections have none).
    pub fn load_with_bias(p: &WeightPath, in_features: i64, out_features: i64, bias: bool) -> LoadResult<Linear> {
        Ok(Linear {
            weight: p.get("weight", &[out_features, in_features])?,
            packed: None,
            bias: if bias { Some(p.get("bias", &[out_features])?) } else { None },
        })
    }

    /// A layer from tensors found elsewhere (a Conv1D's transposed weight, a head tied to the embeddings).
    pub fn from_parts(weight: Tensor, bias: Option<Tensor>) -> Linear {
        Linear { weight, packed: None, bias }
    }

    /// `[S, in]` -> `[S, out]` (or `[in]` -> `[out]`)
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let Some(packed) = &self.packed else {
            return x.f_linear(&self.weight, self.bias.as_ref());
        };
        let y = if x.dim() == 1 { packed.matmul(&x.f_unsqueeze(0)?)?.f_squeeze_dim(0)? } else { packed.matmul(x)? };
        match &self.bias {
            Some(bias) => y.f_add(bias),
            None => Ok(y),
        }
    }

    /// Quantize the weight to `format` (float: nothing); whether it was (a
    /// 4-bit layer no group size divides stays float).
    pub fn quantize(&mut self, format: WeightFormat) -> Result<bool> {
        if self.packed.is_some() {
            return Ok(true);
        }
        self.packed = PackedWeight::quantize(&self.weight, format)?;
        if self.packed.is_some() {
            // The float weight is no longer read (a tied embedding keeps its own handle).
            self.weight = Tensor::new();
        }
        Ok(self.packed.is_some())
    }

    /// The group size of a 4-bit layer.
    pub fn group_size(&self) -> Option<i64> {
        self.packed.as_ref().and_then(|p| matches!(p.format(), WeightFormat::Int4 { .. }).then(|| p.group_size()))
    }

    /// The bytes a forward reads: the weight (float or packed with its scales) and the bias.
    pub fn bytes(&self) -> u64 {
        let weight = match &self.packed {
            Some(p) => p.bytes(),
            None => tensor_bytes(&self.weight),
        };
        weight + self.bias.as_ref().map_or(0, tensor_bytes)
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

    /// The bytes a forward reads.
    pub fn bytes(&self) -> u64 {
        tensor_bytes(&self.weight) + tensor_bytes(&self.bias)
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
/// heads and query positions. attention_mask `[S]` (f32, 1 = real token) -> `[1, 1, S]`.
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
/// query, key, value [nh, S, d], additive mask `[1, 1, S]` or None -> context [S, nh * d].
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
