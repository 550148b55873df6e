//! GPT-2 (transformers' `modeling_gpt2.py`, `GPT2LMHeadModel`, the eager
//! attention path) with a KV cache: its `config.json` fields under their own
//! names ([`Gpt2Config`]: `n_embd`, `n_layer`, `n_head`, `n_positions`,
//! `activation_function`) and the decoder, one struct per module.
//!
//! What differs from the BERT family: a causal decoder with pre-LayerNorm
//! blocks (`ln_1`, `ln_2`, a final `ln_f`); the projections are `Conv1D`s,
//! whose weights are stored `[in, out]` (transposed here once, at load); the
//! query, key and value come from one `c_attn`; the LM head is tied to `wte`.
//! Every block keeps the keys and values of the positions seen so far, so a
//! new token costs one position, not the whole sequence.
//!
//! One sequence at a time, no batch dimension: `S` = new tokens of this call,
//! `T` = all positions so far, `E` = `n_embd`, `nh` = `n_head`, `d` = head size,
//! `I` = `n_inner`. Weight paths mirror the checkpoint keys
//! (`transformer.h.{i}.attn.c_attn`).

use anyhow::Context;
use serde::Deserialize;
use tch::{Kind, Tensor};

use super::config::{self, Check, HiddenAct};
use super::nn::{LayerNorm, Linear, LoadResult, Result};
use super::timing::scope;
use super::weights::{WeightPath, Weights};
use super::checkpoint::CheckpointConfig;
use super::config::ConfigError;
use super::kv_cache::{DecoderStack, LayerCache, WithKvCache};
use super::model::{ArchConfig, EagerModel};
use crate::backend::OutputKind;

/// The GPT-2 hyper-parameters under their own names (transformers' `GPT2Config`; defaults are GPT-2 124M's).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Gpt2Config {
    #[serde(default = "defaults::vocab_size")]
    pub vocab_size: i64,
    /// The longest sequence the position embeddings cover.
    #[serde(default = "defaults::n_positions")]
    pub n_positions: i64,
    #[serde(default = "defaults::n_embd")]
    pub n_embd: i64,
    #[serde(default = "defaults::n_layer")]
    pub n_layer: usize,
    #[serde(default = "defaults::n_head")]
    pub n_head: i64,
    /// The feed-forward size; `null` means `4 * n_embd`.
    #[serde(default)]
    pub n_inner: Option<i64>,
    #[serde(default = "defaults::activation", deserialize_with = "activation_function")]
    pub activation_function: HiddenAct,
    #[serde(default = "defaults::layer_norm_epsilon")]
    pub layer_norm_epsilon: f64,
    /// Scores divided by sqrt(d).
    #[serde(default = "defaults::yes")]
    pub scale_attn_weights: bool,
    /// Scores also divided by the layer's index + 1.
    #[serde(default)]
    pub scale_attn_by_inverse_layer_idx: bool,
}

mod defaults {
    use super::HiddenAct;
    pub fn vocab_size() -> i64 {
        50257
    }
    pub fn n_positions() -> i64 {
        1024
    }
    pub fn n_embd() -> i64 {
        768
    }
    pub fn n_layer() -> usize {
        12
    }
    pub fn n_head() -> i64 {
        12
    }
    pub fn activation() -> HiddenAct {
        HiddenAct::GeluTanh
    }
    pub fn layer_norm_epsilon() -> f64 {
        1e-5
    }
    pub fn yes() -> bool {
        true
    }
}

fn activation_function<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<HiddenAct, D::Error> {
    let name = String::deserialize(d)?;
    HiddenAct::from_name(&name, "activation_function").map_err(serde::de::Error::custom)
}

impl Gpt2Config {
    /// The size of one attention head (`n_embd / n_head`).
    pub fn head_size(&self) -> i64 {
        self.n_embd / self.n_head
    }

    pub fn inner_size(&self) -> i64 {
        self.n_inner.unwrap_or(4 * self.n_embd)
    }

    pub(crate) fn check(&self) -> Check {
        config::check_positive(&[
            ("vocab_size", self.vocab_size),
            ("n_positions", self.n_positions),
            ("n_embd", self.n_embd),
            ("n_layer", self.n_layer as i64),
            ("n_head", self.n_head),
            ("n_inner", self.inner_size()),
        ])?;
        config::check_heads(self.n_embd, ("n_head", self.n_head))
    }
}

/// A `Conv1D` of transformers: `x @ weight + bias` with `weight` stored `[in, out]`;
/// kept as an `nn.Linear` (`[out, in]`) so it runs as one addmm.
fn conv1d(p: &WeightPath, in_features: i64, out_features: i64) -> LoadResult<Linear> {
    let weight = p.get_map("weight", &[in_features, out_features], |w| w.f_transpose(0, 1)?.f_contiguous())?;
    Ok(Linear::from_parts(weight, Some(p.get("bias", &[out_features])?)))
}

/// `h.{i}.attn`: causal multi-head attention over the cached positions and the new ones.
struct Gpt2Attention {
    c_attn: Linear, // E -> 3E
    c_proj: Linear, // E -> E
    n_head: i64,
    head_size: i64,
    scale: f64,
}

impl Gpt2Attention {
    fn load(p: &WeightPath, cfg: &Gpt2Config, layer_idx: usize) -> LoadResult<Gpt2Attention> {
        let e = cfg.n_embd;
        let head_size = cfg.head_size();
        let mut scale = if cfg.scale_attn_weights { (head_size as f64).powf(-0.5) } else { 1.0 };
        if cfg.scale_attn_by_inverse_layer_idx {
            scale /= (layer_idx + 1) as f64;
        }
        Ok(Gpt2Attention {
            c_attn: conv1d(&p.pp("c_attn"), e, 3 * e)?,
            c_proj: conv1d(&p.pp("c_proj"), e, e)?,
            n_head: cfg.n_head,
            head_size,
            scale,
        })
    }

    /// x `[S, E]` of positions past..past+S -> `[S, E]`; appends their keys and values to `cache`.
    fn forward(&self, x: &Tensor, cache: &mut LayerCache) -> Result<Tensor> {
        let s = x.size2()?.0;
        // query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        let qkv = self.c_attn.forward(x)?; // [S, 3E]
        let parts = qkv.f_split(self.n_head * self.head_size, 1)?;
        // [S, E] -> [S, nh, d] -> [nh, S, d]
        let heads = |t: &Tensor| t.f_view([s, self.n_head, self.head_size])?.f_transpose(0, 1);
        let query = heads(&parts[0])?;
        let (key, value) = cache.with_past(heads(&parts[1])?, heads(&parts[2])?)?; // [nh, T, d]
        let t = key.size()[1];
        let past = t - s;
        // attn_weights = torch.matmul(query, key.transpose(-1, -2)) * scaling
        let mut scores = query.f_matmul(&key.f_transpose(1, 2)?)?; // [nh, S, T]
        let _ = scores.f_mul_scalar_(self.scale)?;
        if s > 1 {
            // The causal mask: query i (at past + i) sees keys 0..=past + i; masked scores get float32's min.
            let future = Tensor::f_ones([s, t], (Kind::Bool, x.device()))?.f_triu(past + 1)?;
            scores = scores.f_masked_fill(&future, f64::from(f32::MIN))?;
        }
        let probs = scores.f_softmax(-1, None::<Kind>)?;
        let context = probs.f_matmul(&value)?.f_transpose(0, 1)?.f_reshape([s, -1])?; // [S, E]
        cache.kv = Some((key, value));
        self.c_proj.forward(&context)
    }
}

/// `h.{i}.mlp`: `c_proj(act(c_fc(x)))`.
struct Gpt2Mlp {
    c_fc: Linear,   // E -> I
    c_proj: Linear, // I -> E
    act: HiddenAct,
}

impl Gpt2Mlp {
    fn load(p: &WeightPath, cfg: &Gpt2Config) -> LoadResult<Gpt2Mlp> {
        let (e, i) = (cfg.n_embd, cfg.inner_size());
        Ok(Gpt2Mlp { c_fc: conv1d(&p.pp("c_fc"), e, i)?, c_proj: conv1d(&p.pp("c_proj"), i, e)?, act: cfg.activation_function })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = self.c_fc.forward(x)?;
        self.c_proj.forward(&self.act.forward_(&mut h)?)
    }
}

/// `h.{i}`: a pre-LayerNorm block.
struct Gpt2Block {
    ln_1: LayerNorm,
    attn: Gpt2Attention,
    ln_2: LayerNorm,
    mlp: Gpt2Mlp,
}

impl Gpt2Block {
    fn load(p: &WeightPath, cfg: &Gpt2Config, layer_idx: usize) -> LoadResult<Gpt2Block> {
        let (e, eps) = (cfg.n_embd, cfg.layer_norm_epsilon);
        Ok(Gpt2Block {
            ln_1: LayerNorm::load(&p.pp("ln_1"), e, eps)?,
            attn: Gpt2Attention::load(&p.pp("attn"), cfg, layer_idx)?,
            ln_2: LayerNorm::load(&p.pp("ln_2"), e, eps)?,
            mlp: Gpt2Mlp::load(&p.pp("mlp"), cfg)?,
        })
    }

    fn forward(&self, x: &Tensor, cache: &mut LayerCache) -> Result<Tensor> {
        // hidden_states = attn_output + residual; hidden_states = residual + feed_forward_hidden_states
        // Scoped as transformers names the modules, for `runlens layers` (`h.{i}.attn`, ...).
        let normed = scope("ln_1", || self.ln_1.forward(x))?;
        let x = scope("attn", || self.attn.forward(&normed, cache))?.f_add(x)?;
        let normed = scope("ln_2", || self.ln_2.forward(&x))?;
        scope("mlp", || self.mlp.forward(&normed))?.f_add(&x)
    }
}

/// `GPT2LMHeadModel`'s modules: the embeddings, the blocks, `ln_f` and the LM head.
pub struct Gpt2Decoder {
    wte: Tensor,     // [V, E]
    lm_head: Linear, // [V, E]: wte itself (tied), unless the file has lm_head.weight
    wpe: Tensor,     // [n_positions, E]
    blocks: Vec<Gpt2Block>,
    ln_f: LayerNorm,
    config: Gpt2Config,
}

/// `GPT2LMHeadModel` with a KV cache of the sequence so far.
pub type Gpt2LmHeadModel = WithKvCache<Gpt2Decoder>;

impl Gpt2LmHeadModel {
    /// The model from the checkpoint's tensors: keys under `transformer.` (a
    /// saved `GPT2LMHeadModel`) or at the root (a bare `GPT2Model`); the LM head
    /// is `lm_head.weight` when the file has it, else `wte` (tied, as GPT-2 is).
    pub fn load(weights: &Weights, cfg: &Gpt2Config) -> LoadResult<Gpt2LmHeadModel> {
        let root = if weights.contains("transformer.wte.weight") { weights.root("transformer") } else { weights.root("") };
        let e = cfg.n_embd;
        let wte = root.get("wte.weight", &[cfg.vocab_size, e])?;
        let head = weights.root("");
        let lm_head = if head.contains("lm_head.weight") { head.get("lm_head.weight", &[cfg.vocab_size, e])? } else { wte.shallow_clone() };
        let blocks = (0..cfg.n_layer).map(|i| Gpt2Block::load(&root.pp(&format!("h.{i}")), cfg, i)).collect::<LoadResult<Vec<_>>>()?;
        Ok(WithKvCache::new(Gpt2Decoder {
            wte,
            lm_head: Linear::from_parts(lm_head, None),
            wpe: root.get("wpe.weight", &[cfg.n_positions, e])?,
            blocks,
            ln_f: LayerNorm::load(&root.pp("ln_f"), e, cfg.layer_norm_epsilon)?,
            config: cfg.clone(),
        }))
    }
}

impl DecoderStack for Gpt2Decoder {
    type Config = Gpt2Config;
    fn config(&self) -> &Gpt2Config {
        &self.config
    }
    fn name(&self) -> &'static str {
        "GPT-2"
    }
    fn vocab_size(&self) -> i64 {
        self.config.vocab_size
    }
    fn max_positions(&self) -> (&'static str, i64) {
        ("n_positions", self.config.n_positions)
    }
    fn num_layers(&self) -> usize {
        self.blocks.len()
    }

    fn layers(&self, ids: &Tensor, past: i64, cache: &mut [LayerCache]) -> anyhow::Result<Tensor> {
        let s = ids.size1()?;
        // hidden_states = inputs_embeds + position_embeds; `wte` and `wpe` are rows of
        // `runlens layers`, their sum is the model's own (as in transformers' GPT2Model.forward).
        let mut x = scope("wte", || Tensor::f_embedding(&self.wte, ids, -1, false, false))?;
        let positions = scope("wpe", || self.wpe.f_narrow(0, past, s))?;
        let _ = x.f_add_(&positions)?;
        for (i, (block, cache)) in self.blocks.iter().zip(cache.iter_mut()).enumerate() {
            x = scope(&format!("h.{i}"), || block.forward(&x, cache)).context("eager GPT-2 block")?;
        }
        Ok(x)
    }

    /// `ln_f` and the LM head: the row `head`.
    fn logits(&self, x: &Tensor, s: i64) -> Result<Tensor> {
        scope("head", || -> Result<Tensor> {
            let last = self.ln_f.forward(&x.f_select(0, s - 1)?)?; // [E]
            self.lm_head.forward(&last) // lm_logits = self.lm_head(hidden_states): [V]
        })
    }

    /// "GPT-2 2 layers, n_embd 64, 4 heads + LM head (tied), KV cache"
    fn describe(&self, max_len: i64) -> String {
        let c = &self.config;
        format!("GPT-2 {} layers, n_embd {}, {} heads + LM head (tied to wte), KV cache of {max_len} positions", c.n_layer, c.n_embd, c.n_head)
    }

    fn linears(&mut self) -> Vec<&mut Linear> {
        let blocks = self.blocks.iter_mut();
        let mut all: Vec<&mut Linear> =
            blocks.flat_map(|b| [&mut b.attn.c_attn, &mut b.attn.c_proj, &mut b.mlp.c_fc, &mut b.mlp.c_proj]).collect();
        all.push(&mut self.lm_head);
        all
    }

    /// The blocks, `ln_f` and the head; `wpe` and (when the head is its own
    /// matrix or quantized) `wte` give one row a token.
    fn weight_bytes_per_token(&self) -> u64 {
        let block = |b: &Gpt2Block| {
            b.ln_1.bytes() + b.attn.c_attn.bytes() + b.attn.c_proj.bytes() + b.ln_2.bytes() + b.mlp.c_fc.bytes() + b.mlp.c_proj.bytes()
        };
        self.blocks.iter().map(block).sum::<u64>() + self.ln_f.bytes() + self.lm_head.bytes()
    }
}

/// config.json's fields, for the architecture table ([`crate::arch::gpt2`]).
pub fn parse_config(path: &str, value: &serde_json::Value) -> std::result::Result<Box<dyn ArchConfig>, ConfigError> {
    Ok(Box::new(config::parse(path, "GPT-2", value, Gpt2Config::check)?))
}

impl ArchConfig for Gpt2Config {
    fn vocab_size(&self) -> i64 {
        self.vocab_size
    }
    fn hidden_size(&self) -> i64 {
        self.n_embd
    }
    fn max_positions(&self) -> i64 {
        self.n_positions
    }
    fn describe(&self) -> String {
        format!("GPT-2 {} layers, n_embd {}, {} heads", self.n_layer, self.n_embd, self.n_head)
    }
    fn load(&self, _checkpoint: &CheckpointConfig, weights: &Weights, _output: OutputKind) -> anyhow::Result<EagerModel> {
        Ok(EagerModel::Decoder(Box::new(Gpt2LmHeadModel::load(weights, self)?)))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
