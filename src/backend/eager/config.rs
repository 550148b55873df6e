//! `config.json` of a BERT-family checkpoint, as transformers writes it.
//!
//! Only the fields the encoder needs are read; the others (dropout, vocabulary
//! ids, `architectures`, ...) are ignored. Values the encoder cannot run are
//! rejected while parsing, with the field and the value in the message.

use std::path::Path;

use serde::Deserialize;

/// The BERT hyper-parameters, straight from `config.json`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct BertConfig {
    pub vocab_size: i64,
    pub hidden_size: i64,
    pub num_hidden_layers: usize,
    pub num_attention_heads: i64,
    pub intermediate_size: i64,
    pub hidden_act: HiddenAct,
    pub max_position_embeddings: i64,
    #[serde(default = "default_type_vocab_size")]
    pub type_vocab_size: i64,
    #[serde(default = "default_layer_norm_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub position_embedding_type: PositionEmbeddingType,
}

// transformers' `BertConfig` defaults for fields older files leave out.
fn default_type_vocab_size() -> i64 {
    2
}
fn default_layer_norm_eps() -> f64 {
    1e-12
}

/// The feed-forward activation (`hidden_act`), as transformers' `ACT2FN` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum HiddenAct {
    /// `gelu`: the exact, erf-based GELU.
    Gelu,
    /// `gelu_new` / `gelu_pytorch_tanh`: the tanh approximation.
    GeluTanh,
    Relu,
}

impl HiddenAct {
    pub const SUPPORTED: &'static str = "gelu, gelu_new, gelu_pytorch_tanh, relu";
}

impl TryFrom<String> for HiddenAct {
    type Error = String;
    fn try_from(name: String) -> Result<Self, Self::Error> {
        match name.as_str() {
            "gelu" => Ok(HiddenAct::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" => Ok(HiddenAct::GeluTanh),
            "relu" => Ok(HiddenAct::Relu),
            _ => Err(format!(
                "unsupported hidden_act \"{name}\" (supported: {})",
                HiddenAct::SUPPORTED
            )),
        }
    }
}

/// `position_embedding_type`: only learned absolute positions are implemented.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum PositionEmbeddingType {
    #[default]
    Absolute,
}

impl TryFrom<String> for PositionEmbeddingType {
    type Error = String;
    fn try_from(name: String) -> Result<Self, Self::Error> {
        match name.as_str() {
            "absolute" => Ok(PositionEmbeddingType::Absolute),
            _ => Err(format!(
                "unsupported position_embedding_type \"{name}\" (supported: absolute)"
            )),
        }
    }
}

/// `config.json` could not be read, parsed, or describes a model the encoder cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} is not a BERT config runlens can run")]
    Parse { path: String, source: serde_json::Error },
    #[error("{path}: {field} = {value} is not usable: {reason}")]
    Invalid {
        path: String,
        field: &'static str,
        value: String,
        reason: &'static str,
    },
}

impl BertConfig {
    /// Read, parse and check `config.json`.
    pub fn load(path: &Path) -> Result<BertConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let config: BertConfig = serde_json::from_str(&text).map_err(|source| ConfigError::Parse {
            path: shown.clone(),
            source,
        })?;
        config.check().map_err(|(field, value, reason)| ConfigError::Invalid {
            path: shown,
            field,
            value,
            reason,
        })?;
        Ok(config)
    }

    /// The size of one attention head (`hidden_size / num_attention_heads`).
    pub fn head_size(&self) -> i64 {
        self.hidden_size / self.num_attention_heads
    }

    /// Sizes that would make a tensor shape meaningless: (field, value, why).
    fn check(&self) -> Result<(), (&'static str, String, &'static str)> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers as i64),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ];
        for (field, value) in positive {
            if value < 1 {
                return Err((field, value.to_string(), "it must be at least 1"));
            }
        }
        if self.hidden_size % self.num_attention_heads != 0 {
            return Err((
                "num_attention_heads",
                self.num_attention_heads.to_string(),
                "hidden_size must be a multiple of it",
            ));
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err((
                "layer_norm_eps",
                self.layer_norm_eps.to_string(),
                "it must be a positive number",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINILM: &str = r#"{"hidden_act": "gelu", "hidden_size": 384, "intermediate_size": 1536,
        "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "num_attention_heads": 12,
        "num_hidden_layers": 6, "position_embedding_type": "absolute", "type_vocab_size": 2,
        "vocab_size": 30522, "hidden_dropout_prob": 0.1}"#;

    #[test]
    fn parses_minilm_and_ignores_other_fields() {
        let config: BertConfig = serde_json::from_str(MINILM).unwrap();
        assert_eq!(config.hidden_act, HiddenAct::Gelu);
        assert_eq!((config.num_hidden_layers, config.head_size()), (6, 32));
        assert!(config.check().is_ok());
    }

    #[test]
    fn names_unsupported_values() {
        let err = serde_json::from_str::<BertConfig>(&MINILM.replace("\"gelu\"", "\"swish\"")).unwrap_err();
        assert!(err.to_string().contains("hidden_act \"swish\""), "{err}");
        let json = MINILM.replace("\"absolute\"", "\"relative_key\"");
        let err = serde_json::from_str::<BertConfig>(&json).unwrap_err();
        assert!(
            err.to_string().contains("position_embedding_type \"relative_key\""),
            "{err}"
        );
        let config: BertConfig =
            serde_json::from_str(&MINILM.replace("\"num_attention_heads\": 12", "\"num_attention_heads\": 7")).unwrap();
        assert_eq!(config.check().unwrap_err().0, "num_attention_heads");
    }
}
