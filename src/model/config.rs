//! `config.json`, read once ([`ModelConfig`]): what the checkpoint is
//! (`model_type`, `architectures`) and the sizes the layers above ask of it
//! (the memory estimate's cache geometry, llama.cpp's vocabulary check,
//! `bench`'s FLOP count, text-classification's labels), under any of the names
//! transformers' families give them (Llama / BERT: `num_hidden_layers`, GPT-2:
//! `n_layer`, DistilBERT: `n_layers`, ...). Eager's per-architecture configs
//! (`backend/eager/{bert,gpt2,llama}.rs`) parse the same file strictly, every
//! field its model needs, from [`ModelConfig::raw`].
//!
//! A field is the first of its names the file has with a value; `null` is the
//! same as absent (Qwen3's `num_key_value_heads: null`, GPT-2's `n_inner: null`).
//! Not serde's `alias`: a file with two of the names (some configs carry both
//! `num_hidden_layers` and `n_layer`) would be a "duplicate field" error. A
//! field of the wrong type is an error naming the field and the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// The names of each field, the first present one read (transformers' names
/// per family: Llama, Qwen and BERT first, then GPT-2's, DistilBERT's, T5's).
const LAYERS: &[&str] = &["num_hidden_layers", "n_layer", "n_layers", "num_layers"];
const HEADS: &[&str] = &["num_attention_heads", "n_head", "n_heads"];
const KV_HEADS: &[&str] = &["num_key_value_heads"];
const HEAD_DIM: &[&str] = &["head_dim"];
const HIDDEN: &[&str] = &["hidden_size", "n_embd", "d_model", "dim"];
/// The feed-forward width: BERT's `intermediate_size`, DistilBERT's `hidden_dim`.
const INTERMEDIATE: &[&str] = &["intermediate_size", "hidden_dim"];
const VOCAB: &[&str] = &["vocab_size"];
/// What a size must be.
const COUNT: &str = "a non-negative whole number";
const MAX_POSITIONS: &[&str] = &["max_position_embeddings", "n_positions"];

/// A model directory's `config.json`, typed. Every size is `None` when the file
/// does not say it (a question that needs it is then left out, or takes
/// transformers' default where its asker knows one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelConfig {
    pub path: PathBuf,
    pub model_type: Option<String>,
    /// The checkpoint's classes, `architectures[0]` first (empty when it names none).
    pub architectures: Vec<String>,
    pub layers: Option<u64>,
    pub heads: Option<u64>,
    /// Grouped-query attention's key/value heads (`None`: as many as `heads`).
    pub kv_heads: Option<u64>,
    /// Given by the file (Qwen3); else `hidden / heads` ([`ModelConfig::head_dim`]).
    pub head_dim: Option<u64>,
    pub hidden: Option<u64>,
    pub intermediate: Option<u64>,
    pub vocab_size: Option<u64>,
    pub max_positions: Option<u64>,
    pub tie_word_embeddings: Option<bool>,
    /// A classifier's label names by id, as the file keys them (`"0"`, `"1"`, ...).
    pub id2label: Option<BTreeMap<String, String>>,
    pub num_labels: Option<i64>,
    /// The whole file, for eager's per-architecture configs.
    pub raw: serde_json::Value,
}

/// Why `config.json` could not be read as a [`ModelConfig`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("cannot read {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: not JSON", path.display())]
    NotJson { path: PathBuf, source: serde_json::Error },
    #[error("{}: not a JSON object", path.display())]
    NotAnObject { path: PathBuf, source: serde_json::Error },
    #[error("{}: `{field}` is {found}, not {expected}", path.display())]
    Field { path: PathBuf, field: &'static str, found: String, expected: &'static str, source: serde_json::Error },
}

impl ConfigFileError {
    /// serde's own error, for those who wrap it (eager's `ConfigError::Parse`).
    pub fn json_error(&self) -> Option<&serde_json::Error> {
        match self {
            ConfigFileError::NotJson { source, .. } | ConfigFileError::NotAnObject { source, .. } | ConfigFileError::Field { source, .. } => {
                Some(source)
            }
            ConfigFileError::Read { .. } => None,
        }
    }
}

impl ModelConfig {
    /// Read and type `path`.
    pub fn read(path: &Path) -> Result<ModelConfig, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read { path: path.to_path_buf(), source })?;
        let raw: serde_json::Value = serde_json::from_str(&text).map_err(|source| ConfigFileError::NotJson { path: path.to_path_buf(), source })?;
        ModelConfig::of(path, raw)
    }

    /// Type an already parsed `config.json` (`path` is for messages).
    pub fn of(path: &Path, raw: serde_json::Value) -> Result<ModelConfig, ConfigFileError> {
        if !raw.is_object() {
            let source = <serde_json::Map<String, serde_json::Value> as serde::Deserialize>::deserialize(&raw).unwrap_err();
            return Err(ConfigFileError::NotAnObject { path: path.to_path_buf(), source });
        }
        let f = Fields { path, raw: &raw };
        Ok(ModelConfig {
            model_type: f.get(&["model_type"], "a string")?,
            architectures: f.get(&["architectures"], "a list of class names")?.unwrap_or_default(),
            layers: f.get(LAYERS, COUNT)?,
            heads: f.get(HEADS, COUNT)?,
            kv_heads: f.get(KV_HEADS, COUNT)?,
            head_dim: f.get(HEAD_DIM, COUNT)?,
            hidden: f.get(HIDDEN, COUNT)?,
            intermediate: f.get(INTERMEDIATE, COUNT)?,
            vocab_size: f.get(VOCAB, COUNT)?,
            max_positions: f.get(MAX_POSITIONS, COUNT)?,
            tie_word_embeddings: f.get(&["tie_word_embeddings"], "true or false")?,
            id2label: f.get(&["id2label"], "a map of label ids to names")?,
            num_labels: f.get(&["num_labels"], COUNT)?,
            path: path.to_path_buf(),
            raw,
        })
    }

    /// `architectures[0]`, the checkpoint's class.
    pub fn class(&self) -> Option<&str> {
        self.architectures.first().map(String::as_str)
    }

    /// One attention head's width: the file's `head_dim`, else `hidden / heads`.
    pub fn head_dim(&self) -> Option<u64> {
        self.head_dim.or_else(|| Some(self.hidden? / self.heads.filter(|&h| h > 0)?))
    }

    /// The key/value heads: the file's, else one per attention head.
    pub fn kv_heads(&self) -> Option<u64> {
        self.kv_heads.or(self.heads)
    }
}

/// The fields of one file, read by name.
struct Fields<'a> {
    path: &'a Path,
    raw: &'a serde_json::Value,
}

impl Fields<'_> {
    /// The first of `names` the file has, not null, as a `T`; `None` when it has none.
    fn get<T: DeserializeOwned>(&self, names: &[&'static str], expected: &'static str) -> Result<Option<T>, ConfigFileError> {
        let Some((field, value)) = names.iter().find_map(|n| Some((*n, self.raw.get(n).filter(|v| !v.is_null())?))) else {
            return Ok(None);
        };
        T::deserialize(value).map(Some).map_err(|source| ConfigFileError::Field {
            path: self.path.to_path_buf(),
            field,
            found: shown(value),
            expected,
            source,
        })
    }
}

/// A JSON value in a message, cut short.
fn shown(value: &serde_json::Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> Result<ModelConfig, ConfigFileError> {
        ModelConfig::of(Path::new("/m/config.json"), serde_json::from_str(json).unwrap())
    }

    #[test]
    fn reads_gpt2_under_its_own_names() {
        let c = config(
            r#"{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_layer": 12,
                "n_head": 12, "n_positions": 1024, "n_inner": null, "vocab_size": 50257}"#,
        )
        .unwrap();
        assert_eq!((c.model_type.as_deref(), c.class()), (Some("gpt2"), Some("GPT2LMHeadModel")));
        assert_eq!((c.layers, c.heads, c.hidden, c.max_positions, c.vocab_size), (Some(12), Some(12), Some(768), Some(1024), Some(50257)));
        assert_eq!((c.kv_heads(), c.head_dim(), c.intermediate, c.tie_word_embeddings), (Some(12), Some(64), None, None));
    }

    #[test]
    fn reads_llama_and_qwen2_with_and_without_head_dim() {
        let qwen2 = config(
            r#"{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
                "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 32768,
                "tie_word_embeddings": true, "vocab_size": 151936}"#,
        )
        .unwrap();
        assert_eq!((qwen2.layers, qwen2.heads, qwen2.kv_heads(), qwen2.head_dim()), (Some(24), Some(14), Some(2), Some(64)));
        assert_eq!((qwen2.intermediate, qwen2.tie_word_embeddings, qwen2.max_positions), (Some(4864), Some(true), Some(32768)));
        // num_key_value_heads null: one per head; head_dim given: not hidden / heads.
        let qwen3 = config(
            r#"{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": null, "head_dim": 12, "hidden_size": 32}"#,
        )
        .unwrap();
        assert_eq!((qwen3.kv_heads, qwen3.kv_heads(), qwen3.head_dim()), (None, Some(4), Some(12)));
        let llama = config(r#"{"model_type": "llama", "hidden_size": 576, "num_attention_heads": 9, "num_key_value_heads": 3}"#).unwrap();
        assert_eq!((llama.class(), llama.head_dim(), llama.kv_heads(), llama.layers), (None, Some(64), Some(3), None));
    }

    #[test]
    fn reads_bert_and_distilbert_and_their_labels() {
        let bert = config(
            r#"{"architectures": ["BertForSequenceClassification"], "model_type": "bert", "hidden_size": 384,
                "intermediate_size": 1536, "num_hidden_layers": 6, "num_attention_heads": 12, "max_position_embeddings": 512,
                "vocab_size": 30522, "id2label": {"0": "NEGATIVE", "1": "POSITIVE"}, "hidden_act": "gelu"}"#,
        )
        .unwrap();
        assert_eq!((bert.hidden, bert.intermediate, bert.layers, bert.head_dim()), (Some(384), Some(1536), Some(6), Some(32)));
        assert_eq!(bert.id2label.unwrap().get("1").map(String::as_str), Some("POSITIVE"));
        let distil = config(r#"{"model_type": "distilbert", "dim": 48, "n_layers": 3, "n_heads": 4, "hidden_dim": 96}"#).unwrap();
        assert_eq!((distil.hidden, distil.intermediate, distil.layers, distil.heads), (Some(48), Some(96), Some(3), Some(4)));
        // Two names of one field: the first in the list, no "duplicate field".
        let both = config(r#"{"num_hidden_layers": 4, "n_layer": 9}"#).unwrap();
        assert_eq!(both.layers, Some(4));
    }

    #[test]
    fn a_wrong_typed_field_names_itself_and_the_file() {
        let err = config(r#"{"model_type": "llama", "num_hidden_layers": "24"}"#).unwrap_err();
        assert_eq!(err.to_string(), r#"/m/config.json: `num_hidden_layers` is "24", not a non-negative whole number"#);
        let err = config(r#"{"n_head": -1}"#).unwrap_err();
        assert!(err.to_string().contains("`n_head` is -1"), "{err}");
        let err = config(r#"{"architectures": "LlamaForCausalLM"}"#).unwrap_err();
        assert!(err.to_string().contains("`architectures`") && err.to_string().contains("/m/config.json"), "{err}");
        assert_eq!(config("[1]").unwrap_err().to_string(), "/m/config.json: not a JSON object");
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.json");
        std::fs::write(&path, "{").unwrap();
        assert!(ModelConfig::read(&path).unwrap_err().to_string().ends_with("config.json: not JSON"));
        assert!(ModelConfig::read(&tmp.path().join("gone.json")).unwrap_err().to_string().starts_with("cannot read"));
    }
}
