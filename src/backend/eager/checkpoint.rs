//! What a checkpoint is, from its `config.json`: [`CheckpointConfig`] reads the
//! file once; `architectures[0]` (or `model_type` when the file names no class)
//! picks the architecture, then that architecture's own field names are parsed
//! ([`BertConfig`](super::bert::BertConfig): `hidden_size`, `num_hidden_layers`, ...; [`DistilBertConfig`](super::distilbert::DistilBertConfig):
//! `dim`, `n_layers`, ...; [`Gpt2Config`](super::gpt2::Gpt2Config): `n_embd`, `n_layer`, ...). Fields the encoder does not need (dropout, token ids, ...)
//! are ignored; a field left out takes transformers' default, as `from_pretrained`
//! does. A class eager does not implement is [`Unsupported`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use super::config::ConfigError;
use super::traits::EagerModel;
use super::weights::Weights;
use crate::arch::Architecture;
use crate::backend::OutputKind;
use crate::model::ModelConfig;

/// The checkpoint classes eager implements (`config.json`'s `architectures[0]`),
/// from the one table of architectures ([`crate::arch::ARCHITECTURES`]).
pub static SUPPORTED: LazyLock<Vec<&'static str>> = LazyLock::new(crate::arch::supported_classes);

/// The decoder classes, for messages.
fn decoders() -> String {
    crate::arch::ARCHITECTURES.iter().filter(|a| a.decoder).flat_map(|a| a.classes.iter().copied()).collect::<Vec<_>>().join(", ")
}

/// The checkpoint is of a kind eager does not implement. The ExecuTorch programs of the
/// same model directory do not depend on this: the caller shows it in the eager column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("eager does not implement {architecture} (model_type \"{model_type}\", {path}); it implements {}", SUPPORTED.join(", "))]
    Architecture {
        path: String,
        architecture: String,
        model_type: String,
    },
    #[error("{path}: {architecture} is an encoder and text-generation needs a decoder; eager generates with {}", decoders())]
    NotADecoder { path: String, architecture: String },
}

/// An architecture's config.json fields, parsed and checked: its row of the
/// table ([`crate::arch::Architecture::eager`]) makes one, and it builds the model.
pub trait ArchConfig: std::fmt::Debug + Send + Sync {
    fn vocab_size(&self) -> i64;
    fn hidden_size(&self) -> i64;
    /// The longest input the position embeddings cover.
    fn max_positions(&self) -> i64;
    /// "BERT 6 layers, hidden 384, 12 heads"
    fn describe(&self) -> String;
    /// The model from the checkpoint's weights, with the head `output` needs.
    fn load(&self, checkpoint: &CheckpointConfig, weights: &Weights, output: OutputKind) -> anyhow::Result<EagerModel>;
    fn as_any(&self) -> &dyn std::any::Any;
}

/// `config.json` read once: what the checkpoint is and its sizes.
#[derive(Clone)]
pub struct CheckpointConfig {
    pub path: PathBuf,
    /// `architectures[0]`, or the bare model class when the file names none (`BertModel`).
    pub architecture: String,
    pub model_type: String,
    /// The number of classes a sequence-classification head has: `id2label`'s
    /// length, else `num_labels`, else 2 (transformers' rule).
    pub num_labels: i64,
    /// Its row of the architecture table.
    pub arch: &'static Architecture,
    /// The architecture's own fields, parsed and checked.
    pub model: Arc<dyn ArchConfig>,
}

impl std::fmt::Debug for CheckpointConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointConfig")
            .field("path", &self.path)
            .field("architecture", &self.architecture)
            .field("model_type", &self.model_type)
            .field("num_labels", &self.num_labels)
            .field("model", &self.model)
            .finish()
    }
}

/// Why [`CheckpointConfig::load`] failed: a file it cannot use, or a checkpoint eager does not implement.
#[derive(Debug, thiserror::Error)]
pub enum LoadConfigError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
}

impl CheckpointConfig {
    /// Read `config.json`, pick the architecture, parse its fields.
    pub fn load(path: &Path) -> Result<CheckpointConfig, LoadConfigError> {
        let config = ModelConfig::read(path).map_err(ConfigError::from)?;
        CheckpointConfig::of(&config)
    }

    /// The typed `config.json` ([`ModelDir::model_config`](crate::model::ModelDir::model_config)):
    /// its `architectures[0]` / `model_type` pick the architecture, whose own
    /// config then parses every field its model needs from the same file.
    pub fn of(config: &ModelConfig) -> Result<CheckpointConfig, LoadConfigError> {
        let shown = config.path.display().to_string();
        let model_type = config.model_type.clone().unwrap_or_default();
        let (arch, architecture) = crate::arch::of_config(config.model_type.as_deref(), config.class()).ok_or_else(|| Unsupported::Architecture {
            path: shown.clone(),
            architecture: config.class().map_or_else(|| "a model without `architectures`".into(), str::to_string),
            model_type: model_type.clone(),
        })?;
        // The row's eager model parses its own fields.
        let model: Arc<dyn ArchConfig> = Arc::from(super::parser(arch.eager)(&shown, &config.raw)?);
        let num_labels = match (&config.id2label, config.num_labels) {
            (Some(labels), _) if !labels.is_empty() => labels.len() as i64,
            (_, Some(n)) => n,
            _ => 2,
        };
        if num_labels < 1 {
            return Err(ConfigError::Invalid {
                path: shown,
                field: "num_labels",
                value: num_labels.to_string(),
                reason: "a classifier needs at least one label",
            }
            .into());
        }
        Ok(CheckpointConfig {
            path: config.path.clone(),
            architecture,
            model_type,
            num_labels,
            arch,
            model,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::eager::{BertConfig, DistilBertConfig, Gpt2Config, HiddenAct};

    fn model<T: 'static>(checkpoint: &CheckpointConfig) -> &T {
        checkpoint.model.as_any().downcast_ref::<T>().unwrap_or_else(|| panic!("{checkpoint:?}"))
    }

    const MINILM: &str = r#"{"architectures": ["BertModel"], "model_type": "bert",
        "hidden_act": "gelu", "hidden_size": 384, "intermediate_size": 1536,
        "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "num_attention_heads": 12,
        "num_hidden_layers": 6, "position_embedding_type": "absolute", "type_vocab_size": 2,
        "vocab_size": 30522, "hidden_dropout_prob": 0.1}"#;

    const DISTILBERT: &str = r#"{"architectures": ["DistilBertForSequenceClassification"],
        "model_type": "distilbert", "activation": "gelu", "dim": 48, "n_layers": 3, "n_heads": 4,
        "hidden_dim": 96, "max_position_embeddings": 512, "vocab_size": 30522, "dropout": 0.1,
        "id2label": {"0": "negative", "1": "neutral", "2": "positive"}}"#;

    fn load(json: &str) -> Result<CheckpointConfig, LoadConfigError> {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), json).unwrap();
        CheckpointConfig::load(tmp.path())
    }

    #[test]
    fn parses_minilm_and_ignores_other_fields() {
        let config: BertConfig = serde_json::from_str(MINILM).unwrap();
        assert_eq!(config.hidden_act, HiddenAct::Gelu);
        assert_eq!((config.num_hidden_layers, config.head_size()), (6, 32));
        assert!(config.check().is_ok());
        let checkpoint = load(MINILM).unwrap();
        assert_eq!(checkpoint.architecture, "BertModel");
        assert_eq!(model::<BertConfig>(&checkpoint), &config);
        assert_eq!(checkpoint.num_labels, 2);
    }

    #[test]
    fn reads_distilbert_under_its_own_field_names() {
        let checkpoint = load(DISTILBERT).unwrap();
        assert_eq!(checkpoint.architecture, "DistilBertForSequenceClassification");
        assert_eq!(checkpoint.num_labels, 3);
        let c = model::<DistilBertConfig>(&checkpoint);
        assert_eq!((c.dim, c.n_layers, c.n_heads, c.hidden_dim, c.head_size()), (48, 3, 4, 96, 12));
        assert_eq!(checkpoint.model.describe(), "DistilBERT 3 layers, dim 48, 4 heads");
        // A file that names no class: its model_type picks the bare model.
        let bare = load(r#"{"model_type": "distilbert", "dim": 48, "n_heads": 4}"#).unwrap();
        assert_eq!(bare.architecture, "DistilBertModel");
    }

    #[test]
    fn an_unknown_architecture_names_itself_and_the_supported_ones() {
        let err = load(r#"{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 768}"#).unwrap_err();
        let LoadConfigError::Unsupported(unsupported) = &err else {
            panic!("{err}")
        };
        let message = unsupported.to_string();
        assert!(message.contains("MistralForCausalLM") && message.contains("\"mistral\""), "{message}");
        assert!(SUPPORTED.iter().all(|name| message.contains(name)), "{message}");
        let err = load(r#"{"model_type": "roberta"}"#).unwrap_err();
        assert!(err.to_string().contains("roberta"), "{err}");
    }

    #[test]
    fn reads_gpt2_under_its_own_field_names_with_transformers_defaults() {
        let checkpoint = load(r#"{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64, "n_layer": 2,
            "n_head": 4, "n_positions": 128, "n_inner": null, "vocab_size": 512, "activation_function": "gelu_new"}"#)
        .unwrap();
        let c = model::<Gpt2Config>(&checkpoint);
        assert_eq!((c.n_embd, c.n_layer, c.n_head, c.head_size(), c.inner_size()), (64, 2, 4, 16, 256));
        assert_eq!((c.activation_function, c.layer_norm_epsilon, c.scale_attn_weights), (HiddenAct::GeluTanh, 1e-5, true));
        assert_eq!(checkpoint.model.max_positions(), 128);
        assert_eq!(checkpoint.model.describe(), "GPT-2 2 layers, n_embd 64, 4 heads");
        assert_eq!(load(r#"{"model_type": "gpt2"}"#).unwrap().architecture, "GPT2LMHeadModel");
        let err = load(r#"{"model_type": "gpt2", "n_embd": 64, "n_head": 5}"#).unwrap_err();
        assert!(err.to_string().contains("n_head = 5"), "{err}");
    }

    #[test]
    fn names_unsupported_values() {
        let err = load(&MINILM.replace("\"gelu\"", "\"swish\"")).unwrap_err();
        assert!(format!("{err:?}").contains("hidden_act \\\"swish\\\""), "{err:?}");
        let err = load(&DISTILBERT.replace("\"activation\": \"gelu\"", "\"activation\": \"mish\"")).unwrap_err();
        assert!(format!("{err:?}").contains("activation \\\"mish\\\""), "{err:?}");
        let json = MINILM.replace("\"absolute\"", "\"relative_key\"");
        let err = serde_json::from_str::<BertConfig>(&json).unwrap_err();
        assert!(
            err.to_string().contains("position_embedding_type \"relative_key\""),
            "{err}"
        );
        let config: BertConfig =
            serde_json::from_str(&MINILM.replace("\"num_attention_heads\": 12", "\"num_attention_heads\": 7")).unwrap();
        assert_eq!(config.check().unwrap_err().0, "num_attention_heads");
        let err = load(&DISTILBERT.replace("\"n_heads\": 4", "\"n_heads\": 5")).unwrap_err();
        assert!(err.to_string().contains("n_heads = 5"), "{err}");
    }
}
