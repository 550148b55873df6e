//! Rotary position embeddings as transformers computes them
//! (`modeling_rope_utils.py`, `LlamaRotaryEmbedding`, `apply_rotary_pos_emb`):
//! the config's RoPE parameters ([`RopeConfig`]), the inverse frequencies of
//! each scaling type (default, `linear`, `llama3`), and the rotation of queries
//! and keys by position.
//!
//! The parameters come from `config.json` in one of two forms: `rope_scaling`
//! (with `rope_theta` beside it at the top; what transformers 4 saved and what
//! downloaded checkpoints carry) or `rope_parameters` (with `rope_theta` inside;
//! what transformers 5 saves). As transformers reads them: `rope_scaling` when
//! it is a non-empty object, else `rope_parameters`; the type is `rope_type`,
//! else the older `type`, else `"default"`; `rope_theta` inside the object,
//! else at the top, else 10000; `llama3`'s `original_max_position_embeddings`
//! defaults to `max_position_embeddings`.
//!
//! The frequencies are computed with the same float32 tensor operations, in the
//! same order, as transformers' rope init functions, so that they are the same
//! numbers, not merely close ones.

use serde_json::{Map, Value};
use tch::{Device, Kind, Tensor};

use super::nn::Result;

/// The base of the frequencies when a config gives none (`RotaryEmbeddingConfigMixin.default_theta`).
pub const DEFAULT_THETA: f64 = 10_000.0;

/// The scaling types eager implements.
pub const SUPPORTED: &str = "default, linear, llama3";

/// How the inverse frequencies are scaled (`rope_type`).
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    /// `inv_freq = 1 / theta^(2i/d)`.
    Default,
    /// Every frequency divided by `factor` (positions interpolated).
    Linear { factor: f64 },
    /// Llama 3.1's: low frequencies divided by `factor`, high ones kept, those between smoothed.
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position_embeddings: f64,
    },
}

/// `rope_theta` and the scaling, read from `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeConfig {
    pub theta: f64,
    pub scaling: RopeScaling,
}

/// The RoPE fields of `config.json` as given (all optional).
pub(crate) struct RopeFields<'a> {
    pub rope_scaling: Option<&'a Map<String, Value>>,
    pub rope_parameters: Option<&'a Map<String, Value>>,
    pub rope_theta: Option<f64>,
    pub partial_rotary_factor: Option<f64>,
    pub max_position_embeddings: i64,
}

impl RopeConfig {
    /// transformers' `convert_rope_params_to_dict` and `standardize_rope_params`;
    /// an error names the field and what eager implements.
    pub(crate) fn from_fields(f: &RopeFields) -> std::result::Result<RopeConfig, String> {
        let (field, params) = match (f.rope_scaling, f.rope_parameters) {
            (Some(m), _) if !m.is_empty() => ("rope_scaling", Some(m)),
            (_, Some(m)) => ("rope_parameters", Some(m)),
            _ => ("rope_parameters", None),
        };
        let empty = Map::new();
        let params = params.unwrap_or(&empty);
        let number = |key: &str| -> std::result::Result<Option<f64>, String> {
            match params.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or_else(|| format!("{field}.{key} is {v}, not a number")),
            }
        };
        let theta = number("rope_theta")?.or(f.rope_theta).unwrap_or(DEFAULT_THETA);
        if theta.is_nan() || theta <= 0.0 {
            return Err(format!("rope_theta is {theta}; it must be positive"));
        }
        let partial = number("partial_rotary_factor")?.or(f.partial_rotary_factor).unwrap_or(1.0);
        if partial != 1.0 {
            return Err(format!(
                "partial_rotary_factor is {partial}; the Llama family rotates whole heads (1.0), and eager implements only that"
            ));
        }
        let kind = match params.get("rope_type").or_else(|| params.get("type")) {
            None | Some(Value::Null) => "default",
            Some(Value::String(s)) => s.as_str(),
            Some(v) => return Err(format!("{field}.rope_type is {v}, not a name")),
        };
        let required = |key: &str| -> std::result::Result<f64, String> {
            number(key)?.ok_or_else(|| format!("{field} of rope_type \"{kind}\" has no `{key}`, which that type requires"))
        };
        let positive = |key: &str| -> std::result::Result<f64, String> {
            let v = required(key)?;
            if v > 0.0 {
                Ok(v)
            } else {
                Err(format!("{field}.{key} is {v}; it must be positive"))
            }
        };
        let scaling = match kind {
            "default" => RopeScaling::Default,
            "linear" => RopeScaling::Linear { factor: positive("factor")? },
            "llama3" => {
                let low_freq_factor = positive("low_freq_factor")?;
                let high_freq_factor = positive("high_freq_factor")?;
                if high_freq_factor <= low_freq_factor {
                    return Err(format!(
                        "{field}: high_freq_factor ({high_freq_factor}) must be greater than low_freq_factor ({low_freq_factor})"
                    ));
                }
                let original = match number("original_max_position_embeddings")? {
                    Some(v) if v > 0.0 => v,
                    Some(v) => return Err(format!("{field}.original_max_position_embeddings is {v}; it must be positive")),
                    None => f.max_position_embeddings as f64,
                };
                RopeScaling::Llama3 {
                    factor: positive("factor")?,
                    low_freq_factor,
                    high_freq_factor,
                    original_max_position_embeddings: original,
                }
            }
            other => {
                return Err(format!(
                    "{field}.rope_type \"{other}\" is not implemented in eager (it implements {SUPPORTED})"
                ))
            }
        };
        Ok(RopeConfig { theta, scaling })
    }

    /// "default, θ 10000", "llama3 (factor 8), θ 500000"
    pub fn describe(&self) -> String {
        let theta = self.theta;
        match &self.scaling {
            RopeScaling::Default => format!("rope θ {theta}"),
            RopeScaling::Linear { factor } => format!("rope θ {theta}, linear ×{factor}"),
            RopeScaling::Llama3 { factor, .. } => format!("rope θ {theta}, llama3 ×{factor}"),
        }
    }

    /// The inverse frequencies [d / 2] for heads of size `dim`: transformers'
    /// `compute_default_rope_parameters`, `_compute_linear_scaling_rope_parameters`,
    /// `_compute_llama3_parameters` (their `attention_factor` is 1.0).
    pub fn inv_freq(&self, dim: i64) -> Result<Tensor> {
        // inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim))
        let exponent = Tensor::f_arange_start_step(0, dim, 2, (Kind::Int64, Device::Cpu))?
            .f_to_kind(Kind::Float)?
            .f_div_scalar(dim)?;
        let inv_freq = Tensor::f_pow_scalar(self.theta, &exponent)?.f_reciprocal()?;
        match self.scaling {
            RopeScaling::Default => Ok(inv_freq),
            // inv_freq /= factor
            RopeScaling::Linear { factor } => inv_freq.f_div_scalar(factor),
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings: old_context_len } => {
                let low_freq_wavelen = old_context_len / low_freq_factor;
                let high_freq_wavelen = old_context_len / high_freq_factor;
                // wavelen = 2 * math.pi / inv_freq
                let wavelen = inv_freq.f_reciprocal()?.f_mul_scalar(2.0 * std::f64::consts::PI)?;
                // inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
                let low = wavelen.f_gt(low_freq_wavelen)?;
                let inv_freq_llama = inv_freq.f_div_scalar(factor)?.f_where_self(&low, &inv_freq)?;
                // smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
                let smooth_factor = wavelen
                    .f_reciprocal()?
                    .f_mul_scalar(old_context_len)?
                    .f_sub_scalar(low_freq_factor)?
                    .f_div_scalar(high_freq_factor - low_freq_factor)?;
                // smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
                let smoothed = smooth_factor
                    .f_rsub_scalar(1.0)?
                    .f_mul(&inv_freq_llama)?
                    .f_div_scalar(factor)?
                    .f_add(&smooth_factor.f_mul(&inv_freq_llama)?)?;
                // is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
                let medium = wavelen.f_lt(high_freq_wavelen)?.f_logical_not()?.f_logical_and(&low.f_logical_not()?)?;
                smoothed.f_where_self(&medium, &inv_freq_llama)
            }
        }
    }
}

/// The rotary embedding of one model: its inverse frequencies, built once.
pub(crate) struct Rotary {
    inv_freq: Tensor, // [d / 2]
}

impl Rotary {
    pub fn new(config: &RopeConfig, head_dim: i64) -> Result<Rotary> {
        Ok(Rotary { inv_freq: config.inv_freq(head_dim)? })
    }

    /// cos, sin [S, d] of positions `start..start + len` (`LlamaRotaryEmbedding.forward`).
    pub fn cos_sin(&self, start: i64, len: i64) -> Result<(Tensor, Tensor)> {
        // freqs = position_ids[..., None].float() * self.inv_freq; emb = torch.cat((freqs, freqs), dim=-1)
        let positions = Tensor::f_arange_start(start, start + len, (Kind::Int64, Device::Cpu))?
            .f_to_kind(Kind::Float)?
            .f_unsqueeze(1)?;
        let freqs = positions.f_mul(&self.inv_freq.f_unsqueeze(0)?)?; // [S, d / 2]
        let emb = Tensor::f_cat(&[&freqs, &freqs], -1)?;
        Ok((emb.f_cos()?, emb.f_sin()?))
    }
}

/// `x * cos + rotate_half(x) * sin` for x [h, S, d], cos and sin [S, d].
pub(crate) fn apply(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    // rotate_half: torch.cat((-x2, x1), dim=-1)
    let half = x.size()[2] / 2;
    let x1 = x.f_narrow(2, 0, half)?;
    let x2 = x.f_narrow(2, half, half)?;
    let rotated = Tensor::f_cat(&[&x2.f_neg()?, &x1], -1)?;
    x.f_mul(cos)?.f_add(&rotated.f_mul(sin)?)
}
