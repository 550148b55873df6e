//! PyTorch eager: BERT-family encoders, GPT-2 and the Llama family written with
//! tch operations, each one dispatched by libtorch as it comes, as a PyTorch user
//! runs the model.
//!
//! - [`checkpoint`]: `config.json` -> which architecture (its row of
//!   [`crate::arch::ARCHITECTURES`], whose `eager` field names the model that parses the rest:
//!   [`parser`]) and its sizes ([`ArchConfig`]);
//! - [`config`]: what the architectures' configs share (activations, defaults, [`ConfigError`]);
//! - [`weights`]: `model.safetensors`, read once, every tensor checked by name and shape;
//! - [`quant`]: `eager-int8` / `eager-int4`: linear weights quantized at load for ATen's packed kernels;
//! - [`nn`]: `nn.Linear`, `nn.LayerNorm`, the activations and the attention both encoders share;
//! - [`bert`], [`distilbert`], [`gpt2`], [`llama`]: one file per architecture, its config
//!   fields, its modules and their forward (an encoder's task heads too);
//! - [`kv_cache`]: what the decoders share, written once: the per-layer KV caches, the
//!   checks, `limit_len`, `reset` and the [`crate::backend::Decoder`] ([`kv_cache::WithKvCache`]);
//! - [`heads`]: what the encoders' task heads share (pooling, the masked-LM and classification wrappers);
//! - [`traits`]: what a loaded model is ([`EncoderModel`], [`DecoderModel`], [`EagerModel`]);
//! - [`model`]: [`load_eager`] / [`load_model`], the one place that picks the architecture and
//!   the head, and the encoder with its head, tensors in, tensors out, shaped like the task's programs.
//!
//! [`EagerBackend`] is the [`Backend`] on top, for the model directory's task.

pub mod bert;
pub mod checkpoint;
pub mod config;
pub mod distilbert;
pub mod gpt2;
pub mod heads;
pub mod kv_cache;
pub mod llama;
pub mod model;
pub mod nn;
pub mod quant;
pub mod rope;
pub mod timing;
pub mod traits;
pub mod weights;

use std::path::PathBuf;

use anyhow::Context;
use tch::Tensor;

use crate::backend::{Backend, OutputKind};
use crate::model::ModelDir;
use crate::tensor::{Encoded, OutputTensor};

pub use bert::BertConfig;
pub use checkpoint::{Unsupported, SUPPORTED};
pub use config::{ConfigError, HiddenAct};
pub use distilbert::DistilBertConfig;
pub use gpt2::{Gpt2Config, Gpt2LmHeadModel};
pub use model::{load_checkpoint, load_eager, load_model, quantize_decoder, ArchConfig, DecoderModel, EagerModel, EncoderModel, Quantized};
pub use quant::WeightFormat;
pub use weights::WeightError;

/// config.json's fields parsed and checked, for one architecture.
pub type ParseConfig = fn(path: &str, config: &serde_json::Value) -> Result<Box<dyn ArchConfig>, ConfigError>;

/// The file of each eager model its row of [`crate::arch::ARCHITECTURES`]
/// names ([`crate::arch::Architecture::eager`]).
pub fn parser(model: crate::arch::EagerModel) -> ParseConfig {
    use crate::arch::EagerModel;
    match model {
        EagerModel::Bert => bert::parse_config,
        EagerModel::DistilBert => distilbert::parse_config,
        EagerModel::Gpt2 => gpt2::parse_config,
        EagerModel::Llama => llama::parse_config,
    }
}

/// The eager path: a BERT-family checkpoint with its task's head, or GPT-2, in libtorch tensors.
pub struct EagerBackend {
    weights_file: PathBuf,
    max_positions: i64,
    model: EagerModel,
    /// `eager-int8` / `eager-int4`: what quantizing did.
    quantized: Option<Quantized>,
}

impl EagerBackend {
    /// Read `config.json` and `model.safetensors` from `dir`. A missing file is
    /// [`crate::model::ModelsMissing`]; an architecture eager does not implement is
    /// [`Unsupported`]; a config the encoder cannot run is a [`ConfigError`]; a missing
    /// or mis-shaped tensor is a [`WeightError`] naming it.
    pub fn load(dir: &ModelDir, output: OutputKind) -> anyhow::Result<EagerBackend> {
        EagerBackend::load_as(dir, output, WeightFormat::Float)
    }

    /// [`load`](Self::load) with the linear layers' weights in `format`: a
    /// decoder's quantized at load (`eager-int8`, `eager-int4`); an encoder
    /// takes float only.
    pub fn load_as(dir: &ModelDir, output: OutputKind, format: WeightFormat) -> anyhow::Result<EagerBackend> {
        dir.config()?;
        let weights_file = dir.weights()?;
        let typed = dir.model_config().map_err(|e| match e.downcast::<crate::model::ConfigFileError>() {
            Ok(file) => ConfigError::from(file).into(),
            Err(other) => other,
        })?;
        let config = model::checked(checkpoint::CheckpointConfig::of(&typed))?;
        let mut model = load_checkpoint(&config, &weights_file, output)?;
        let mut quantized = None;
        match &mut model {
            EagerModel::Decoder(decoder) => {
                decoder.limit_len(dir.max_seq_len());
                if format != WeightFormat::Float {
                    let done = quantize_decoder(decoder.as_mut(), format)
                        .with_context(|| format!("{}: quantizing the linear layers for {}", weights_file.display(), format.kernel()))?;
                    quantized = Some(done);
                }
            }
            EagerModel::Encoder(_) => anyhow::ensure!(
                format == WeightFormat::Float,
                "{}: an encoder; {} is for text-generation models (it quantizes a decoder's linear layers)",
                dir.root().display(),
                format.backend_name()
            ),
        }
        let max_positions = config.model.max_positions();
        Ok(EagerBackend {
            weights_file,
            max_positions,
            model,
            quantized,
        })
    }

    /// The longest input the model takes (`max_position_embeddings`).
    pub fn max_positions(&self) -> i64 {
        self.max_positions
    }
}

impl Backend for EagerBackend {
    fn describe(&self) -> String {
        format!(
            "PyTorch eager (libtorch via tch): {}{}, from {}, {} intra-op threads",
            match &self.model {
                EagerModel::Encoder(m) => m.describe(),
                EagerModel::Decoder(m) => m.describe(),
            },
            self.quantized.map(|q| format!("; {}", q.describe())).unwrap_or_default(),
            self.weights_file.display(),
            tch::get_num_threads()
        )
    }

    fn run(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor> {
        let model = match &mut self.model {
            EagerModel::Encoder(model) => model,
            EagerModel::Decoder(model) => {
                // A decoder's one forward: the prefill, the next token's logits.
                let logits = crate::backend::Decoder::prefill(model.as_mut(), &input.ids)?;
                return Ok(OutputTensor::new(vec![1, logits.len()], logits));
            }
        };
        let ids = Tensor::f_from_slice(&input.ids)?; // [S]
        let mask = Tensor::f_from_slice(&input.attention_mask)?; // [S]
        let out = model.forward(&ids, &mask)?; // [1, H], [1, S, V] or [1, C]
        let shape = out.size().iter().map(|&d| usize::try_from(d).unwrap_or(0)).collect();
        let data = Vec::<f32>::try_from(&out.f_flatten(0, -1).context("the output")?)?;
        Ok(OutputTensor::new(shape, data))
    }

    fn as_decoder(&mut self) -> Option<&mut dyn crate::backend::Decoder> {
        match &mut self.model {
            EagerModel::Decoder(model) => Some(model.as_mut()),
            EagerModel::Encoder(_) => None,
        }
    }

    fn weight_bytes_per_token(&self) -> Option<u64> {
        match &self.model {
            EagerModel::Decoder(model) => Some(model.weight_bytes_per_token()),
            EagerModel::Encoder(_) => None,
        }
    }

    /// Eager's decoders, float or quantized, keep their cache in float32.
    fn kv_cache_element_bytes(&self) -> Option<u64> {
        matches!(self.model, EagerModel::Decoder(_)).then_some(4)
    }

    /// Every module's own forward, timed in runlens' own scopes ([`timing`]).
    fn run_timed_per_module(&mut self, input: &Encoded) -> Option<anyhow::Result<crate::backend::ModuleTimes>> {
        let (out, times) = timing::record(|| self.run(input));
        Some(out.map(|_| times))
    }

    /// Each innermost scope's output, flattened to float32 (a module whose
    /// output does not convert is left out).
    fn run_keeping_module_outputs(&mut self, input: &Encoded) -> Option<anyhow::Result<Vec<(String, Vec<f32>)>>> {
        let (out, kept) = timing::record_outputs(|| self.run(input));
        Some(out.map(|_| {
            kept.into_iter()
                .filter_map(|(path, tensor)| {
                    let values = tensor.f_flatten(0, -1).and_then(|t| t.f_to_kind(tch::Kind::Float)).and_then(|t| Vec::<f32>::try_from(&t));
                    values.ok().map(|v| (path, v))
                })
                .collect()
        }))
    }
}
