//! The one place that picks an architecture and a head: [`load_model`] reads
//! `config.json` and the weights and returns an [`EncoderModel`], tensors in,
//! tensors out, shaped like the task's ExecuTorch programs.

use std::path::Path;

use anyhow::Context;
use tch::{Kind, Tensor};

use super::checkpoint::{CheckpointConfig, LoadConfigError, Unsupported};
pub use super::checkpoint::ArchConfig;
use super::quant::WeightFormat;
pub use super::traits::{DecoderModel, EagerModel, EncoderModel, EncoderStack, Head};
use super::weights::Weights;
use crate::backend::OutputKind;

/// What quantizing a decoder's linear layers did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantized {
    pub format: WeightFormat,
    /// Layers now on the packed kernel.
    pub layers: usize,
    /// Layers left in float (a 4-bit layer whose input width no group size divides).
    pub float_layers: usize,
    /// The smallest group size used (int4), which may be under the one asked for.
    pub min_group: Option<i64>,
}

impl Quantized {
    /// "int4 (aten::_weight_int4pack_mm_for_cpu, groups of 32, bfloat16 activations): 9 linear layers"
    pub fn describe(&self) -> String {
        let groups = match (self.format, self.min_group) {
            (WeightFormat::Int4 { group_size }, Some(min)) if min < group_size => format!(", groups of {group_size} ({min} where narrower)"),
            (WeightFormat::Int4 { group_size }, _) => format!(", groups of {group_size}"),
            _ => String::new(),
        };
        let float = if self.float_layers > 0 { format!(", {} left in float (no group divides their width)", self.float_layers) } else { String::new() };
        format!("{} weights on {}{groups}, bfloat16 activations: {} linear layers{float}", self.format.backend_name().trim_start_matches("eager-"), self.format.kernel(), self.layers)
    }
}

/// Quantize every linear layer of `model` (the head included) to `format`.
pub fn quantize_decoder(model: &mut dyn DecoderModel, format: WeightFormat) -> tch::Result<Quantized> {
    let mut done = Quantized { format, layers: 0, float_layers: 0, min_group: None };
    for linear in model.linears() {
        if linear.quantize(format)? {
            done.layers += 1;
            if let Some(g) = linear.group_size() {
                done.min_group = Some(done.min_group.map_or(g, |m: i64| m.min(g)));
            }
        } else {
            done.float_layers += 1;
        }
    }
    Ok(done)
}

/// Reads config.json and the weights; the architecture's row of the table
/// picks the model and `output` the head. An architecture it does not
/// implement is an [`Unsupported`] that names it and lists the supported ones
/// ([`super::SUPPORTED`]), found with `err.downcast_ref::<Unsupported>()`; a
/// missing or mis-shaped tensor is a [`super::WeightError`] naming it and the
/// file; a config it cannot use, a [`super::ConfigError`].
pub fn load_eager(config_file: &Path, weights_file: &Path, output: OutputKind) -> anyhow::Result<EagerModel> {
    load_checkpoint(&checked(CheckpointConfig::load(config_file))?, weights_file, output)
}

/// A [`LoadConfigError`] as the error [`load_eager`] returns: unwrapped, so that
/// `downcast_ref::<Unsupported>` finds it.
pub(crate) fn checked(config: Result<CheckpointConfig, LoadConfigError>) -> anyhow::Result<CheckpointConfig> {
    match config {
        Ok(config) => Ok(config),
        Err(LoadConfigError::Unsupported(unsupported)) => Err(unsupported.into()),
        Err(LoadConfigError::Config(error)) => Err(error.into()),
    }
}

/// [`load_eager`] from a config already read.
pub fn load_checkpoint(config: &CheckpointConfig, weights_file: &Path, output: OutputKind) -> anyhow::Result<EagerModel> {
    let config_file = &config.path;
    if output == OutputKind::NextToken && !config.arch.decoder {
        return Err(Unsupported::NotADecoder { path: config.path.display().to_string(), architecture: config.architecture.clone() }.into());
    }
    if output != OutputKind::NextToken && config.arch.decoder {
        anyhow::bail!(
            "{}: {} is a decoder: eager runs it for text-generation, not as an encoder for {}",
            config_file.display(),
            config.arch.name,
            head_name(output)
        );
    }
    let _no_grad = tch::no_grad_guard();
    let weights = Weights::read(weights_file)?;
    config.model.load(config, &weights, output)
}

/// [`load_eager`] for an encoder: the model with its head.
pub fn load_model(config_file: &Path, weights_file: &Path, output: OutputKind) -> anyhow::Result<Box<dyn EncoderModel>> {
    match load_eager(config_file, weights_file, output)? {
        EagerModel::Encoder(model) => Ok(model),
        EagerModel::Decoder(_) => anyhow::bail!("{}: a decoder, not an encoder with a head", config_file.display()),
    }
}

/// What a head is called in messages: the task it serves.
pub fn head_name(output: OutputKind) -> &'static str {
    match output {
        OutputKind::Pooled => "feature-extraction",
        OutputKind::TokenLogits => "fill-mask",
        OutputKind::ClassLogits => "text-classification",
        OutputKind::NextToken => "text-generation",
    }
}

/// The context of a head that failed to load: which head, of what, from where.
pub fn head_context(config: &CheckpointConfig, output: OutputKind) -> String {
    format!(
        "loading the {} head of {} ({}): the checkpoint lacks a tensor this task needs",
        head_name(output),
        config.architecture,
        config.path.display()
    )
}

/// An encoder checkpoint's model: its stack and the head, checked inputs.
pub fn encoder_model(config: &CheckpointConfig, encoder: Box<dyn EncoderStack>, head: Box<dyn Head>) -> EagerModel {
    let description = format!("{} + {}", config.model.describe(), head.describe());
    EagerModel::Encoder(Box::new(TaskModel {
        encoder,
        head,
        vocab_size: config.model.vocab_size(),
        max_positions: config.model.max_positions(),
        description,
    }))
}

/// An encoder, its head and the limits of its inputs.
struct TaskModel {
    encoder: Box<dyn EncoderStack>,
    head: Box<dyn Head>,
    vocab_size: i64,
    max_positions: i64,
    description: String,
}

impl TaskModel {
    /// Inputs the model cannot take, caught before they reach libtorch.
    /// Returns whether every token is real (then no additive mask is needed).
    fn check(&self, ids: &Tensor, mask: &Tensor) -> anyhow::Result<bool> {
        for (name, t) in [("input ids", ids), ("attention mask", mask)] {
            anyhow::ensure!(t.defined(), "the {name} tensor is undefined");
            let kind = t.f_kind()?;
            anyhow::ensure!(kind == Kind::Int64, "the {name} are {kind:?}; eager takes int64");
            anyhow::ensure!(t.dim() == 1, "the {name} have shape {:?}; eager takes one sentence, [S]", t.size());
        }
        let ids: Vec<i64> = Vec::try_from(ids)?;
        let mask: Vec<i64> = Vec::try_from(mask)?;
        let len = ids.len();
        anyhow::ensure!(len > 0, "the input has no tokens");
        anyhow::ensure!(
            len as i64 <= self.max_positions,
            "the input has {len} tokens; the model takes at most {} (max_position_embeddings)",
            self.max_positions
        );
        anyhow::ensure!(mask.len() == len, "the attention mask has {} entries for {len} tokens", mask.len());
        if let Some(&id) = ids.iter().find(|&&id| !(0..self.vocab_size).contains(&id)) {
            anyhow::bail!("token id {id} is outside the vocabulary (vocab_size {})", self.vocab_size);
        }
        if let Some(&m) = mask.iter().find(|&&m| m != 0 && m != 1) {
            anyhow::bail!("the attention mask holds {m}; it takes 1 (a token) and 0 (padding)");
        }
        Ok(mask.iter().all(|&m| m == 1))
    }
}

impl EncoderModel for TaskModel {
    fn forward(&self, ids: &Tensor, mask: &Tensor) -> anyhow::Result<Tensor> {
        let all_real = self.check(ids, mask)?;
        // Grad mode is per thread in libtorch, and a model may run on any thread.
        let _no_grad = tch::no_grad_guard();
        let mask = mask.f_to_kind(Kind::Float)?; // [S]
        // One unpadded sentence (the usual case) needs no additive mask: it would add zeros.
        let hidden = self
            .encoder
            .forward(ids, (!all_real).then_some(&mask))
            .context("eager encoder forward")?; // [S, H]
        let output = super::timing::scope("head", || self.head.forward(&hidden, &mask)).context("eager head forward")?;
        Ok(output.f_unsqueeze(0)?) // the programs' batch of one: [1, H], [1, S, V], [1, C]
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}
