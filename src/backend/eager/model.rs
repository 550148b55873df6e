//! The one place that picks an architecture and a head: [`load_model`] reads
//! `config.json` and the weights and returns an [`EncoderModel`], tensors in,
//! tensors out, shaped like the task's ExecuTorch programs.

use std::path::Path;

use anyhow::Context;
use tch::{Kind, Tensor};

use super::bert::BertModel;
use super::checkpoint::{CheckpointConfig, LoadConfigError, ModelConfig, Unsupported};
use super::distilbert::DistilBertModel;
use super::gpt2::Gpt2LmHeadModel;
use super::heads::{
    BertClassificationHead, BertMaskedLmHead, DistilBertClassificationHead, DistilBertMaskedLmHead, SentenceEmbedding,
};
use super::weights::Weights;
use crate::backend::OutputKind;

/// A checkpoint's encoder with the head its task needs, in libtorch tensors.
pub trait EncoderModel: Send {
    /// ids and mask: int64 [S]. Returns what the task's programs return:
    /// "feature-extraction" [1, H] (masked mean pooling, L2-normalised, as today),
    /// "fill-mask" [1, S, V] logits, "text-classification" [1, C] logits.
    ///
    /// Inputs the model cannot take (wrong kind or shape, too long, ids outside the
    /// vocabulary, mask values other than 0 and 1) are errors before libtorch sees them.
    fn forward(&self, ids: &Tensor, mask: &Tensor) -> anyhow::Result<Tensor>;
    /// e.g. "DistilBERT 6 layers, dim 768, 12 heads + masked-LM head".
    fn describe(&self) -> String;
}

/// Reads config.json and the weights; picks the architecture from config.json and the head from `output`
/// (what the task needs). An architecture it does not implement is an error that names it
/// and lists the supported ones ([`super::SUPPORTED`]): an [`Unsupported`], which the caller finds with
/// `err.downcast_ref::<Unsupported>()`. A missing or mis-shaped tensor is a
/// [`super::WeightError`] naming it and the file; a config it cannot use, a [`super::ConfigError`].
pub fn load_model(config_file: &Path, weights_file: &Path, output: OutputKind) -> anyhow::Result<Box<dyn EncoderModel>> {
    let config = match CheckpointConfig::load(config_file) {
        Ok(config) => config,
        // Unwrapped, so that `downcast_ref::<Unsupported>` finds it.
        Err(LoadConfigError::Unsupported(unsupported)) => return Err(unsupported.into()),
        Err(LoadConfigError::Config(error)) => return Err(error.into()),
    };
    let _no_grad = tch::no_grad_guard();
    let weights = Weights::read(weights_file)?;
    let root = weights.root("");
    let head_context = || {
        format!(
            "loading the {} head of {} ({}): the checkpoint lacks a tensor this task needs",
            head_name(output),
            config.architecture,
            config_file.display()
        )
    };
    let (encoder, head) = match &config.model {
        ModelConfig::Bert(cfg) => {
            let path = weights.encoder_root("bert");
            let bert = BertModel::load(&path, cfg)?;
            let head = match output {
                OutputKind::Pooled => Head::SentenceEmbedding(SentenceEmbedding),
                OutputKind::TokenLogits => {
                    Head::BertMaskedLm(BertMaskedLmHead::load(&root, cfg, bert.word_embeddings()).with_context(head_context)?)
                }
                OutputKind::ClassLogits => Head::BertClassification(
                    BertClassificationHead::load(&path, &root, cfg, config.num_labels).with_context(head_context)?,
                ),
                OutputKind::NextToken => return Err(not_a_decoder(&config)),
            };
            (Encoder::Bert(bert), head)
        }
        ModelConfig::DistilBert(cfg) => {
            let path = weights.encoder_root("distilbert");
            let distilbert = DistilBertModel::load(&path, cfg)?;
            let head = match output {
                OutputKind::Pooled => Head::SentenceEmbedding(SentenceEmbedding),
                OutputKind::TokenLogits => Head::DistilBertMaskedLm(
                    DistilBertMaskedLmHead::load(&root, cfg, distilbert.word_embeddings()).with_context(head_context)?,
                ),
                OutputKind::ClassLogits => Head::DistilBertClassification(
                    DistilBertClassificationHead::load(&root, cfg, config.num_labels).with_context(head_context)?,
                ),
                OutputKind::NextToken => return Err(not_a_decoder(&config)),
            };
            (Encoder::DistilBert(distilbert), head)
        }
        ModelConfig::Gpt2(_) => anyhow::bail!(
            "{}: GPT-2 is a decoder: eager runs it for text-generation (load_eager), not as an encoder for {}",
            config_file.display(),
            head_name(output)
        ),
    };
    let description = format!("{} + {}", config.model.describe(), head.describe(config.num_labels));
    Ok(Box::new(TaskModel {
        encoder,
        head,
        vocab_size: config.model.vocab_size(),
        max_positions: config.model.max_positions(),
        description,
    }))
}

/// What a head is called in messages: the task it serves.
fn head_name(output: OutputKind) -> &'static str {
    match output {
        OutputKind::Pooled => "feature-extraction",
        OutputKind::TokenLogits => "fill-mask",
        OutputKind::ClassLogits => "text-classification",
        OutputKind::NextToken => "text-generation",
    }
}

/// text-generation asked of an encoder checkpoint.
fn not_a_decoder(config: &CheckpointConfig) -> anyhow::Error {
    Unsupported::NotADecoder { path: config.path.display().to_string(), architecture: config.architecture.clone() }.into()
}

/// What eager loads for a model directory: an encoder with its task's head, or
/// a decoder that continues a sequence (text-generation).
pub enum EagerModel {
    Encoder(Box<dyn EncoderModel>),
    Decoder(Box<Gpt2LmHeadModel>),
}

/// Like [`load_model`], for any architecture eager implements: a GPT-2
/// checkpoint is a decoder (text-generation only), the others encoders.
pub fn load_eager(config_file: &Path, weights_file: &Path, output: OutputKind) -> anyhow::Result<EagerModel> {
    let config = match CheckpointConfig::load(config_file) {
        Ok(config) => config,
        Err(LoadConfigError::Unsupported(unsupported)) => return Err(unsupported.into()),
        Err(LoadConfigError::Config(error)) => return Err(error.into()),
    };
    let ModelConfig::Gpt2(cfg) = &config.model else {
        return load_model(config_file, weights_file, output).map(EagerModel::Encoder);
    };
    anyhow::ensure!(
        output == OutputKind::NextToken,
        "{}: {} is a decoder: eager runs it for text-generation, not {}",
        config_file.display(),
        config.architecture,
        head_name(output)
    );
    let _no_grad = tch::no_grad_guard();
    let weights = Weights::read(weights_file)?;
    Ok(EagerModel::Decoder(Box::new(Gpt2LmHeadModel::load(&weights, cfg)?)))
}

/// The encoders eager implements, one file each.
enum Encoder {
    Bert(BertModel),
    DistilBert(DistilBertModel),
}

impl Encoder {
    /// input_ids [S], attention_mask [S] (f32) or None when every token is real -> [S, H]
    fn forward(&self, ids: &Tensor, mask: Option<&Tensor>) -> tch::Result<Tensor> {
        match self {
            Encoder::Bert(m) => m.forward(ids, mask),
            Encoder::DistilBert(m) => m.forward(ids, mask),
        }
    }
}

/// The heads eager implements, picked by task and architecture.
enum Head {
    SentenceEmbedding(SentenceEmbedding),
    BertMaskedLm(BertMaskedLmHead),
    DistilBertMaskedLm(DistilBertMaskedLmHead),
    BertClassification(BertClassificationHead),
    DistilBertClassification(DistilBertClassificationHead),
}

impl Head {
    /// hidden [S, H], attention_mask [S] (f32) -> [H], [S, V] or [C]
    fn forward(&self, hidden: &Tensor, mask: &Tensor) -> tch::Result<Tensor> {
        match self {
            Head::SentenceEmbedding(h) => h.forward(hidden, mask),
            Head::BertMaskedLm(h) => h.forward(hidden),
            Head::DistilBertMaskedLm(h) => h.forward(hidden),
            Head::BertClassification(h) => h.forward(hidden),
            Head::DistilBertClassification(h) => h.forward(hidden),
        }
    }

    fn describe(&self, num_labels: i64) -> String {
        match self {
            Head::SentenceEmbedding(_) => "mean pooling, L2-normalised".into(),
            Head::BertMaskedLm(_) | Head::DistilBertMaskedLm(_) => "masked-LM head".into(),
            Head::BertClassification(_) | Head::DistilBertClassification(_) => {
                format!("sequence-classification head ({num_labels} labels)")
            }
        }
    }
}

/// An encoder, its head and the limits of its inputs.
struct TaskModel {
    encoder: Encoder,
    head: Head,
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
