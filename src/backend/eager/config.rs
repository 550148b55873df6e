//! The vocabulary of `config.json` files the architecture files share: the
//! activations transformers names ([`HiddenAct`]), transformers' defaults for
//! fields a file leaves out, and [`ConfigError`] with the checks that produce it.
//! Which architecture a file describes is `checkpoint.rs`'s business; each
//! architecture's fields are in its own file (`bert.rs`, `distilbert.rs`).

use serde::Deserialize;

/// The feed-forward activation (`hidden_act`, DistilBERT's `activation`), as transformers' `ACT2FN` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HiddenAct {
    /// `gelu`: the exact, erf-based GELU.
    Gelu,
    /// `gelu_new` / `gelu_pytorch_tanh`: the tanh approximation.
    GeluTanh,
    Relu,
}

impl HiddenAct {
    pub const SUPPORTED: &'static str = "gelu, gelu_new, gelu_pytorch_tanh, relu";

    /// The activation called `name` in the config field `field`.
    pub fn from_name(name: &str, field: &str) -> Result<HiddenAct, String> {
        match name {
            "gelu" => Ok(HiddenAct::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" => Ok(HiddenAct::GeluTanh),
            "relu" => Ok(HiddenAct::Relu),
            _ => Err(format!(
                "unsupported {field} \"{name}\" (supported: {})",
                HiddenAct::SUPPORTED
            )),
        }
    }
}

/// serde's `deserialize_with` for BERT's `hidden_act` and DistilBERT's `activation`,
/// so that the error names the field.
fn activation<'de, D: serde::Deserializer<'de>>(d: D, field: &str) -> Result<HiddenAct, D::Error> {
    let name = String::deserialize(d)?;
    HiddenAct::from_name(&name, field).map_err(serde::de::Error::custom)
}
pub(crate) fn hidden_act<'de, D: serde::Deserializer<'de>>(d: D) -> Result<HiddenAct, D::Error> {
    activation(d, "hidden_act")
}
pub(crate) fn distilbert_activation<'de, D: serde::Deserializer<'de>>(d: D) -> Result<HiddenAct, D::Error> {
    activation(d, "activation")
}

/// `config.json` could not be read, parsed, or describes a model the encoder cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} is not a {architecture} config runlens can run")]
    Parse {
        path: String,
        architecture: &'static str,
        source: serde_json::Error,
    },
    /// A field the typed `config.json` ([`crate::model::ModelConfig`]) refused: it names the field.
    #[error(transparent)]
    Field(crate::model::ConfigFileError),
    #[error("{path}: {field} = {value} is not usable: {reason}")]
    Invalid {
        path: String,
        field: &'static str,
        value: String,
        reason: &'static str,
    },
}

impl From<crate::model::ConfigFileError> for ConfigError {
    /// As eager said it before the file was typed once: unreadable, or not a config it can run.
    fn from(error: crate::model::ConfigFileError) -> ConfigError {
        use crate::model::ConfigFileError as E;
        match error {
            E::Read { path, source } => ConfigError::Read { path: path.display().to_string(), source },
            E::NotJson { path, source } | E::NotAnObject { path, source } => {
                ConfigError::Parse { path: path.display().to_string(), architecture: "BERT-family", source }
            }
            field @ E::Field { .. } => ConfigError::Field(field),
        }
    }
}

/// Sizes that would make a tensor shape meaningless: (field, value, why).
pub(crate) type Check = Result<(), (&'static str, String, &'static str)>;

pub(crate) fn check_positive(fields: &[(&'static str, i64)]) -> Check {
    match fields.iter().find(|(_, value)| *value < 1) {
        Some((field, value)) => Err((field, value.to_string(), "it must be at least 1")),
        None => Ok(()),
    }
}

pub(crate) fn check_heads(hidden: i64, heads: (&'static str, i64)) -> Check {
    if hidden % heads.1 != 0 {
        return Err((heads.0, heads.1.to_string(), "the hidden size must be a multiple of it"));
    }
    Ok(())
}

/// Parse `value` as `T` and check it, with `path` in any error.
pub(crate) fn parse<T>(path: &str, architecture: &'static str, value: &serde_json::Value, check: fn(&T) -> Check) -> Result<T, ConfigError>
where
    T: for<'de> Deserialize<'de>,
{
    let config = T::deserialize(value).map_err(|source| ConfigError::Parse {
        path: path.to_string(),
        architecture,
        source,
    })?;
    check(&config).map_err(|(field, value, reason)| ConfigError::Invalid {
        path: path.to_string(),
        field,
        value,
        reason,
    })?;
    Ok(config)
}

/// transformers' defaults for fields a config.json leaves out (`BertConfig`, `DistilBertConfig`).
pub(crate) mod defaults {
    use super::HiddenAct;
    pub fn vocab_size() -> i64 {
        30522
    }
    pub fn hidden_size() -> i64 {
        768
    }
    pub fn distilbert_layers() -> usize {
        6
    }
    pub fn bert_layers() -> usize {
        12
    }
    pub fn num_heads() -> i64 {
        12
    }
    pub fn intermediate_size() -> i64 {
        3072
    }
    pub fn hidden_act() -> HiddenAct {
        HiddenAct::Gelu
    }
    pub fn max_positions() -> i64 {
        512
    }
    pub fn type_vocab_size() -> i64 {
        2
    }
    pub fn layer_norm_eps() -> f64 {
        1e-12
    }
}
