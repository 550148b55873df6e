//! The Llama family: `LlamaForCausalLM`, `Qwen2ForCausalLM`, `Qwen3ForCausalLM`
//! (transformers' `modeling_llama.py`, `modeling_qwen2.py`, `modeling_qwen3.py`,
//! the eager attention path) with a KV cache: the `config.json` fields under
//! their own names ([`LlamaConfig`], transformers' defaults per `model_type`) and
//! the decoder, one struct per module. SmolLM2 and TinyLlama are `llama`.
//!
//! What the three share: pre-RMSNorm blocks (`input_layernorm`,
//! `post_attention_layernorm`, a final `norm`), rotary position embeddings
//! ([`super::rope`]: default, `linear`, `llama3`), grouped-query attention (each
//! key/value head serves `num_attention_heads / num_key_value_heads` query heads:
//! `repeat_kv`), a SwiGLU MLP (`down_proj(silu(gate_proj(x)) * up_proj(x))`),
//! the LM head tied to `embed_tokens` or its own `lm_head`. What differs:
//! Qwen2's q/k/v projections have biases (its `o_proj` has none); Qwen3
//! RMS-normalises each head of the queries and keys (`q_norm`, `k_norm`) before
//! the rotation, and its `head_dim` comes from the config (128 unless given),
//! not hidden / heads; Llama may have biases on all four projections
//! (`attention_bias`) and on the MLP (`mlp_bias`).
//!
//! The cache keeps the keys and values of the positions seen so far, per
//! key/value head (before `repeat_kv`), as transformers' `DynamicCache` does.
//!
//! One sequence at a time, no batch dimension: `S` = new tokens of this call,
//! `T` = all positions so far, `E` = `hidden_size`, `nh` = query heads, `nkv` =
//! key/value heads, `d` = `head_dim`, `I` = `intermediate_size`. Weight paths
//! mirror the checkpoint keys (`model.layers.{i}.self_attn.q_proj`).

use std::path::Path;

use anyhow::Context;
use serde::Deserialize;
use serde_json::{Map, Value};
use tch::{Kind, Tensor};

use super::config::{self, Check, ConfigError};
use super::nn::{Linear, LoadResult, Result};
use super::quant::tensor_bytes;
use super::rope::{self, RopeConfig, RopeFields, Rotary};
use super::timing::scope;
use super::weights::{WeightError, WeightPath, Weights};
use super::checkpoint::CheckpointConfig;
use super::kv_cache::{DecoderStack, LayerCache, WithKvCache};
use super::model::{ArchConfig, EagerModel};
use crate::backend::OutputKind;

/// Which member of the family (`model_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Llama,
    Qwen2,
    Qwen3,
}

impl Family {
    /// "Llama", "Qwen2", "Qwen3"
    pub fn name(self) -> &'static str {
        match self {
            Family::Llama => "Llama",
            Family::Qwen2 => "Qwen2",
            Family::Qwen3 => "Qwen3",
        }
    }
}

/// The hyper-parameters under their own names, with transformers' defaults for
/// the family (`LlamaConfig`, `Qwen2Config`, `Qwen3Config`) filled in.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "RawLlamaConfig")]
pub struct LlamaConfig {
    pub model_type: Family,
    pub vocab_size: i64,
    pub hidden_size: i64,
    pub intermediate_size: i64,
    pub num_hidden_layers: usize,
    pub num_attention_heads: i64,
    /// Grouped-query attention: fewer key/value heads than query heads.
    pub num_key_value_heads: i64,
    pub head_dim: i64,
    /// The longest sequence the model was made for.
    pub max_position_embeddings: i64,
    pub rms_norm_eps: f64,
    /// The LM head is `embed_tokens` (no `lm_head.weight` of its own).
    pub tie_word_embeddings: bool,
    /// Biases on q_proj, k_proj, v_proj (Qwen2 always; Llama and Qwen3: `attention_bias`).
    pub qkv_bias: bool,
    /// A bias on o_proj (Llama and Qwen3: `attention_bias`; Qwen2 never).
    pub o_bias: bool,
    /// Biases on the MLP's projections (Llama's `mlp_bias`).
    pub mlp_bias: bool,
    pub rope: RopeConfig,
}

/// `config.json` as given: what is absent takes the family's default in [`LlamaConfig`].
#[derive(Deserialize)]
struct RawLlamaConfig {
    model_type: Family,
    vocab_size: Option<i64>,
    hidden_size: Option<i64>,
    intermediate_size: Option<i64>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<i64>,
    /// Absent and `null` differ for Qwen (absent: 32, as `Qwen2Config` has it; null: the heads).
    #[serde(default, deserialize_with = "present")]
    num_key_value_heads: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    head_dim: Option<Option<i64>>,
    hidden_act: Option<String>,
    max_position_embeddings: Option<i64>,
    rms_norm_eps: Option<f64>,
    tie_word_embeddings: Option<bool>,
    attention_bias: Option<bool>,
    mlp_bias: Option<bool>,
    rope_theta: Option<f64>,
    rope_scaling: Option<Map<String, Value>>,
    rope_parameters: Option<Map<String, Value>>,
    partial_rotary_factor: Option<f64>,
    use_sliding_window: Option<bool>,
    sliding_window: Option<i64>,
    max_window_layers: Option<usize>,
    layer_types: Option<Vec<String>>,
}

/// A field that is there, even as `null`: `Some(None)`; absent: `None` (with `#[serde(default)]`).
fn present<'de, D, T>(d: D) -> std::result::Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

impl TryFrom<RawLlamaConfig> for LlamaConfig {
    type Error = String;

    fn try_from(raw: RawLlamaConfig) -> std::result::Result<LlamaConfig, String> {
        let family = raw.model_type;
        let llama = family == Family::Llama;
        let hidden_size = raw.hidden_size.unwrap_or(4096);
        let num_hidden_layers = raw.num_hidden_layers.unwrap_or(32);
        let num_attention_heads = raw.num_attention_heads.unwrap_or(32);
        if num_attention_heads < 1 {
            return Err(format!("num_attention_heads = {num_attention_heads}: it must be at least 1"));
        }
        let num_key_value_heads = match raw.num_key_value_heads {
            Some(Some(n)) => n,
            Some(None) => num_attention_heads,
            None if llama => num_attention_heads,
            None => 32,
        };
        let head_dim = match raw.head_dim {
            Some(Some(d)) => d,
            None if family == Family::Qwen3 => 128,
            _ => hidden_size / num_attention_heads,
        };
        match raw.hidden_act.as_deref() {
            None | Some("silu" | "swish") => {}
            Some(other) => {
                return Err(format!(
                    "hidden_act \"{other}\": eager's {} MLP is SwiGLU with silu, the family's activation",
                    family.name()
                ))
            }
        }
        if !llama && raw.use_sliding_window == Some(true) && raw.sliding_window.is_some() {
            let sliding = match &raw.layer_types {
                Some(types) => types.iter().any(|t| t == "sliding_attention"),
                None => raw.max_window_layers.unwrap_or(28) < num_hidden_layers,
            };
            if sliding {
                return Err(
                    "use_sliding_window is true and some layers are sliding_attention: eager implements full attention only".into(),
                );
            }
        }
        let max_position_embeddings = raw.max_position_embeddings.unwrap_or(if llama { 2048 } else { 32768 });
        let rope = RopeConfig::from_fields(&RopeFields {
            rope_scaling: raw.rope_scaling.as_ref(),
            rope_parameters: raw.rope_parameters.as_ref(),
            rope_theta: raw.rope_theta,
            partial_rotary_factor: raw.partial_rotary_factor,
            max_position_embeddings,
        })?;
        let attention_bias = raw.attention_bias.unwrap_or(false);
        Ok(LlamaConfig {
            model_type: family,
            vocab_size: raw.vocab_size.unwrap_or(if llama { 32000 } else { 151936 }),
            hidden_size,
            intermediate_size: raw.intermediate_size.unwrap_or(if llama { 11008 } else { 22016 }),
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            max_position_embeddings,
            rms_norm_eps: raw.rms_norm_eps.unwrap_or(1e-6),
            tie_word_embeddings: raw.tie_word_embeddings.unwrap_or(false),
            qkv_bias: family == Family::Qwen2 || attention_bias,
            o_bias: family != Family::Qwen2 && attention_bias,
            mlp_bias: llama && raw.mlp_bias.unwrap_or(false),
            rope,
        })
    }
}

impl LlamaConfig {
    /// Read and check `config.json`: a file that is not one of the family's, a
    /// RoPE type eager does not implement, or sizes that make no model are a [`ConfigError`].
    pub fn from_file(path: &Path) -> std::result::Result<LlamaConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
        let value: Value = serde_json::from_str(&text).map_err(|source| ConfigError::Parse {
            path: shown.clone(),
            architecture: "Llama-family",
            source,
        })?;
        config::parse(&shown, "Llama-family", &value, LlamaConfig::check)
    }

    /// Query heads per key/value head.
    pub fn kv_groups(&self) -> i64 {
        self.num_attention_heads / self.num_key_value_heads
    }

    pub(crate) fn check(&self) -> Check {
        config::check_positive(&[
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers as i64),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
            ("max_position_embeddings", self.max_position_embeddings),
        ])?;
        if self.num_attention_heads % self.num_key_value_heads != 0 {
            return Err((
                "num_key_value_heads",
                self.num_key_value_heads.to_string(),
                "num_attention_heads must be a multiple of it",
            ));
        }
        if self.head_dim % 2 != 0 {
            return Err(("head_dim", self.head_dim.to_string(), "the rotary embedding needs an even head size"));
        }
        Ok(())
    }
}

/// `LlamaRMSNorm` over the last dimension: `weight * x * rsqrt(mean(x²) + eps)`.
struct RmsNorm {
    weight: Tensor, // [H]
    eps: f64,
}

impl RmsNorm {
    fn load(p: &WeightPath, size: i64, eps: f64) -> LoadResult<RmsNorm> {
        Ok(RmsNorm { weight: p.get("weight", &[size])?, eps })
    }

    fn bytes(&self) -> u64 {
        tensor_bytes(&self.weight)
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        // variance = hidden_states.pow(2).mean(-1, keepdim=True)
        // hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        let variance = x.f_pow_tensor_scalar(2)?.f_mean_dim(-1, true, None::<Kind>)?;
        let normed = x.f_mul(&variance.f_add_scalar(self.eps)?.f_rsqrt()?)?;
        self.weight.f_mul(&normed)
    }
}

/// `repeat_kv`: [nkv, T, d] -> [nkv * n_rep, T, d], each key/value head repeated for its query heads.
fn repeat_kv(x: &Tensor, n_rep: i64) -> Result<Tensor> {
    if n_rep == 1 {
        return Ok(x.shallow_clone());
    }
    let (nkv, t, d) = x.size3()?;
    x.f_unsqueeze(1)?.f_expand([nkv, n_rep, t, d], false)?.f_reshape([nkv * n_rep, t, d])
}

/// `layers.{i}.self_attn`: causal grouped-query attention over the cached positions and the new ones.
struct LlamaAttention {
    q_proj: Linear, // E -> nh * d
    k_proj: Linear, // E -> nkv * d
    v_proj: Linear, // E -> nkv * d
    o_proj: Linear, // nh * d -> E
    /// Qwen3's per-head RMSNorm of the queries and keys (over d).
    qk_norm: Option<(RmsNorm, RmsNorm)>,
    n_head: i64,
    n_kv_head: i64,
    head_dim: i64,
    scale: f64,
}

impl LlamaAttention {
    fn load(p: &WeightPath, cfg: &LlamaConfig) -> LoadResult<LlamaAttention> {
        let (e, nh, nkv, d) = (cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
        let qk_norm = match cfg.model_type {
            Family::Qwen3 => Some((
                RmsNorm::load(&p.pp("q_norm"), d, cfg.rms_norm_eps)?,
                RmsNorm::load(&p.pp("k_norm"), d, cfg.rms_norm_eps)?,
            )),
            Family::Llama | Family::Qwen2 => None,
        };
        Ok(LlamaAttention {
            q_proj: Linear::load_with_bias(&p.pp("q_proj"), e, nh * d, cfg.qkv_bias)?,
            k_proj: Linear::load_with_bias(&p.pp("k_proj"), e, nkv * d, cfg.qkv_bias)?,
            v_proj: Linear::load_with_bias(&p.pp("v_proj"), e, nkv * d, cfg.qkv_bias)?,
            o_proj: Linear::load_with_bias(&p.pp("o_proj"), nh * d, e, cfg.o_bias)?,
            qk_norm,
            n_head: nh,
            n_kv_head: nkv,
            head_dim: d,
            scale: (d as f64).powf(-0.5),
        })
    }

    /// x `[S, E]` of positions past..past+S, cos/sin [S, d] of those positions -> `[S, E]`;
    /// appends their keys and values to `cache`.
    fn forward(&self, x: &Tensor, cos: &Tensor, sin: &Tensor, cache: &mut LayerCache) -> Result<Tensor> {
        let s = x.size2()?.0;
        // [S, h * d] -> [S, h, d] (Qwen3: q_norm / k_norm here) -> [h, S, d]
        let heads = |proj: &Linear, h: i64, norm: Option<&RmsNorm>| -> Result<Tensor> {
            let mut t = proj.forward(x)?.f_view([s, h, self.head_dim])?;
            if let Some(norm) = norm {
                t = norm.forward(&t)?;
            }
            t.f_transpose(0, 1)
        };
        let (q_norm, k_norm) = match &self.qk_norm {
            Some((q, k)) => (Some(q), Some(k)),
            None => (None, None),
        };
        // query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        let query = rope::apply(&heads(&self.q_proj, self.n_head, q_norm)?, cos, sin)?; // [nh, S, d]
        let key = rope::apply(&heads(&self.k_proj, self.n_kv_head, k_norm)?, cos, sin)?; // [nkv, S, d]
        let (key, value) = cache.with_past(key, heads(&self.v_proj, self.n_kv_head, None)?)?; // [nkv, T, d]
        let t = key.size()[1];
        let past = t - s;
        let n_rep = self.n_head / self.n_kv_head;
        let (key_states, value_states) = (repeat_kv(&key, n_rep)?, repeat_kv(&value, n_rep)?); // [nh, T, d]
        // attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
        let mut scores = query.f_matmul(&key_states.f_transpose(1, 2)?)?; // [nh, S, T]
        let _ = scores.f_mul_scalar_(self.scale)?;
        if s > 1 {
            // The causal mask: query i (at past + i) sees keys 0..=past + i; masked scores get float32's min.
            let future = Tensor::f_ones([s, t], (Kind::Bool, x.device()))?.f_triu(past + 1)?;
            scores = scores.f_masked_fill(&future, f64::from(f32::MIN))?;
        }
        let probs = scores.f_softmax(-1, Kind::Float)?;
        let context = probs.f_matmul(&value_states)?.f_transpose(0, 1)?.f_reshape([s, -1])?; // [S, nh * d]
        cache.kv = Some((key, value));
        self.o_proj.forward(&context)
    }
}

/// `layers.{i}.mlp`: `down_proj(silu(gate_proj(x)) * up_proj(x))`.
struct LlamaMlp {
    gate_proj: Linear, // E -> I
    up_proj: Linear,   // E -> I
    down_proj: Linear, // I -> E
}

impl LlamaMlp {
    fn load(p: &WeightPath, cfg: &LlamaConfig) -> LoadResult<LlamaMlp> {
        let (e, i, bias) = (cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias);
        Ok(LlamaMlp {
            gate_proj: Linear::load_with_bias(&p.pp("gate_proj"), e, i, bias)?,
            up_proj: Linear::load_with_bias(&p.pp("up_proj"), e, i, bias)?,
            down_proj: Linear::load_with_bias(&p.pp("down_proj"), i, e, bias)?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut gate = self.gate_proj.forward(x)?;
        let gated = gate.f_silu_()?.f_mul(&self.up_proj.forward(x)?)?;
        self.down_proj.forward(&gated)
    }
}

/// `layers.{i}`: a pre-RMSNorm block.
struct LlamaDecoderLayer {
    input_layernorm: RmsNorm,
    self_attn: LlamaAttention,
    post_attention_layernorm: RmsNorm,
    mlp: LlamaMlp,
}

impl LlamaDecoderLayer {
    fn load(p: &WeightPath, cfg: &LlamaConfig) -> LoadResult<LlamaDecoderLayer> {
        let (e, eps) = (cfg.hidden_size, cfg.rms_norm_eps);
        Ok(LlamaDecoderLayer {
            input_layernorm: RmsNorm::load(&p.pp("input_layernorm"), e, eps)?,
            self_attn: LlamaAttention::load(&p.pp("self_attn"), cfg)?,
            post_attention_layernorm: RmsNorm::load(&p.pp("post_attention_layernorm"), e, eps)?,
            mlp: LlamaMlp::load(&p.pp("mlp"), cfg)?,
        })
    }

    fn forward(&self, x: &Tensor, cos: &Tensor, sin: &Tensor, cache: &mut LayerCache) -> Result<Tensor> {
        // hidden_states = residual + self_attn(input_layernorm(hidden_states)); then the same with the MLP.
        // Scoped as transformers names the modules, for `runlens layers` (`model.layers.{i}.self_attn`, ...).
        let normed = scope("input_layernorm", || self.input_layernorm.forward(x))?;
        let x = scope("self_attn", || self.self_attn.forward(&normed, cos, sin, cache))?.f_add(x)?;
        let normed = scope("post_attention_layernorm", || self.post_attention_layernorm.forward(&x))?;
        scope("mlp", || self.mlp.forward(&normed))?.f_add(&x)
    }
}

/// The modules of `LlamaForCausalLM` / `Qwen2ForCausalLM` / `Qwen3ForCausalLM`.
pub struct LlamaDecoder {
    embed_tokens: Tensor, // [V, E]
    lm_head: Linear,      // [V, E]: embed_tokens itself when tied
    layers: Vec<LlamaDecoderLayer>,
    norm: RmsNorm,
    rotary: Rotary,
    config: LlamaConfig,
}

/// `LlamaForCausalLM` / `Qwen2ForCausalLM` / `Qwen3ForCausalLM` with a KV cache of the sequence so far.
pub type LlamaForCausalLM = WithKvCache<LlamaDecoder>;

impl LlamaForCausalLM {
    /// The model from the checkpoint's tensors: keys under `model.` (a saved
    /// `*ForCausalLM`) or at the root (a bare `LlamaModel`); the LM head is
    /// `embed_tokens` when the config ties them, else `lm_head.weight`.
    pub fn load(weights: &Weights, cfg: &LlamaConfig) -> LoadResult<LlamaForCausalLM> {
        let root = if weights.contains("model.embed_tokens.weight") { weights.root("model") } else { weights.root("") };
        let (v, e) = (cfg.vocab_size, cfg.hidden_size);
        let embed_tokens = root.get("embed_tokens.weight", &[v, e])?;
        let lm_head = if cfg.tie_word_embeddings { embed_tokens.shallow_clone() } else { weights.root("").get("lm_head.weight", &[v, e])? };
        let layers =
            (0..cfg.num_hidden_layers).map(|i| LlamaDecoderLayer::load(&root.pp(&format!("layers.{i}")), cfg)).collect::<LoadResult<Vec<_>>>()?;
        // The non-persistent buffer `rotary_emb.inv_freq`, computed as transformers does at init.
        let rotary = Rotary::new(&cfg.rope, cfg.head_dim).map_err(|source| WeightError::Prepare {
            name: "model.rotary_emb.inv_freq".into(),
            file: weights.file().to_path_buf(),
            source,
        })?;
        Ok(WithKvCache::new(LlamaDecoder {
            embed_tokens,
            lm_head: Linear::from_parts(lm_head, None),
            layers,
            norm: RmsNorm::load(&root.pp("norm"), e, cfg.rms_norm_eps)?,
            rotary,
            config: cfg.clone(),
        }))
    }

    /// `config.json` and `model.safetensors` read and checked: the config's
    /// [`ConfigError`], a [`WeightError`] naming a missing or mis-shaped tensor.
    pub fn from_files(config_file: &Path, weights_file: &Path) -> anyhow::Result<LlamaForCausalLM> {
        let config = LlamaConfig::from_file(config_file)?;
        let weights = Weights::read(weights_file)?;
        Ok(LlamaForCausalLM::load(&weights, &config)?)
    }
}

impl DecoderStack for LlamaDecoder {
    type Config = LlamaConfig;
    fn config(&self) -> &LlamaConfig {
        &self.config
    }
    fn name(&self) -> &'static str {
        self.config.model_type.name()
    }
    fn vocab_size(&self) -> i64 {
        self.config.vocab_size
    }
    fn max_positions(&self) -> (&'static str, i64) {
        ("max_position_embeddings", self.config.max_position_embeddings)
    }
    fn num_layers(&self) -> usize {
        self.layers.len()
    }

    fn layers(&self, ids: &Tensor, past: i64, cache: &mut [LayerCache]) -> anyhow::Result<Tensor> {
        let (name, s) = (self.name(), ids.size1()?);
        let mut x = scope("model.embed_tokens", || Tensor::f_embedding(&self.embed_tokens, ids, -1, false, false))?;
        // position_embeddings = self.rotary_emb(hidden_states, position_ids): shared by every layer.
        let (cos, sin) = self.rotary.cos_sin(past, s)?;
        for (i, (layer, cache)) in self.layers.iter().zip(cache.iter_mut()).enumerate() {
            x = scope(&format!("model.layers.{i}"), || layer.forward(&x, &cos, &sin, cache))
                .with_context(|| format!("eager {name} layer {i}"))?;
        }
        Ok(x)
    }

    fn logits(&self, x: &Tensor, s: i64) -> Result<Tensor> {
        let x = scope("model.norm", || self.norm.forward(x))?; // [S, E]
        // logits = self.lm_head(hidden_states[:, -1:, :]): [V]
        scope("lm_head", || self.lm_head.forward(&x.f_select(0, s - 1)?))
    }

    /// "Qwen3 3 layers, hidden 32, 4 heads / 2 KV heads of 12, rope θ 20000, linear ×2 + LM head (untied), KV cache of 128 positions"
    fn describe(&self, max_len: i64) -> String {
        let c = &self.config;
        format!(
            "{} {} layers, hidden {}, {} heads / {} KV heads of {}, {}{} + LM head ({}), KV cache of {} positions",
            c.model_type.name(),
            c.num_hidden_layers,
            c.hidden_size,
            c.num_attention_heads,
            c.num_key_value_heads,
            c.head_dim,
            c.rope.describe(),
            if c.model_type == Family::Qwen3 { ", q/k norms" } else if c.qkv_bias { ", q/k/v biases" } else { "" },
            if c.tie_word_embeddings { "tied to embed_tokens" } else { "untied" },
            max_len
        )
    }

    fn linears(&mut self) -> Vec<&mut Linear> {
        let layers = self.layers.iter_mut();
        let mut all: Vec<&mut Linear> = layers
            .flat_map(|l| {
                let (a, m) = (&mut l.self_attn, &mut l.mlp);
                [&mut a.q_proj, &mut a.k_proj, &mut a.v_proj, &mut a.o_proj, &mut m.gate_proj, &mut m.up_proj, &mut m.down_proj]
            })
            .collect();
        all.push(&mut self.lm_head);
        all
    }

    /// The layers, `norm` and the head; `embed_tokens` gives one row a token
    /// unless it is the (float) head.
    fn weight_bytes_per_token(&self) -> u64 {
        let layer = |l: &LlamaDecoderLayer| {
            let (a, m) = (&l.self_attn, &l.mlp);
            let norms = a.qk_norm.as_ref().map_or(0, |(q, k)| q.bytes() + k.bytes());
            l.input_layernorm.bytes()
                + l.post_attention_layernorm.bytes()
                + norms
                + [&a.q_proj, &a.k_proj, &a.v_proj, &a.o_proj, &m.gate_proj, &m.up_proj, &m.down_proj].iter().map(|p| p.bytes()).sum::<u64>()
        };
        self.layers.iter().map(layer).sum::<u64>() + self.norm.bytes() + self.lm_head.bytes()
    }
}

/// config.json's fields, for the architecture table ([`crate::arch::llama`]).
pub fn parse_config(path: &str, value: &Value) -> std::result::Result<Box<dyn ArchConfig>, ConfigError> {
    Ok(Box::new(config::parse(path, "Llama-family", value, LlamaConfig::check)?))
}

impl ArchConfig for LlamaConfig {
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
        format!("{} {} layers, hidden {}, {} heads", self.model_type.name(), self.num_hidden_layers, self.hidden_size, self.num_attention_heads)
    }
    fn load(&self, _checkpoint: &CheckpointConfig, weights: &Weights, _output: OutputKind) -> anyhow::Result<EagerModel> {
        Ok(EagerModel::Decoder(Box::new(LlamaForCausalLM::load(weights, self)?)))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
