//! A model directory (`--model DIR`, default `models/minilm`): its manifest,
//! the files a backend needs, and a clear message, naming the command that
//! makes them, when one is missing.

use std::path::{Path, PathBuf};

use super::manifest::{Manifest, ManifestError, EXPORT_HINT};
use super::TextTokenizer;
use super::manifest::Task;

/// MiniLM's maximum input length (`Dim("seq", max=128)` in `python/export.py`);
/// other directories say theirs in the manifest.
pub const MAX_SEQ_LEN: usize = 128;

/// The default model directory, relative to the working directory.
pub const DEFAULT_MODEL_DIR: &str = "models/minilm";

/// A model directory on disk with its manifest read.
#[derive(Clone, Debug)]
pub struct ModelDir {
    root: PathBuf,
    manifest: Manifest,
}

/// A required model file is not there (or is not a regular file). Exit code 2 at the CLI.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe_missing(path))]
pub struct ModelsMissing {
    pub path: PathBuf,
}

/// What is at `path` when it is not the file a backend needs.
fn describe_missing(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => format!("{} is a directory, not a model file: give the file itself (a .pte, config.json, ...)", path.display()),
        Ok(m) if !m.is_file() => {
            format!("{} is not a regular file (a device, FIFO or socket): give a model file (a .pte, config.json, ...)", path.display())
        }
        _ => format!("missing model file {}: {EXPORT_HINT}", path.display()),
    }
}

impl ModelDir {
    /// Open `dir` and read its manifest. A folder that holds `minilm/` (the
    /// `models/` of a checkout, as older runlens took it) opens `minilm/`.
    pub fn open(dir: &Path) -> Result<ModelDir, ManifestError> {
        let nested = dir.join("minilm");
        let root = if !dir.join("manifest.json").exists() && nested.join("manifest.json").is_file() { nested } else { dir.to_path_buf() };
        let manifest = Manifest::load(&root)?;
        Ok(ModelDir { root, manifest })
    }

    /// `--model`, else `$RUNLENS_MODEL` (or the older `$RUNLENS_MODELS`), else `models/minilm`.
    pub fn from_option(model: Option<&Path>) -> Result<ModelDir, ManifestError> {
        if let Some(p) = model {
            return ModelDir::open(p);
        }
        for var in ["RUNLENS_MODEL", "RUNLENS_MODELS"] {
            if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
                return ModelDir::open(Path::new(&p));
            }
        }
        ModelDir::open(Path::new(DEFAULT_MODEL_DIR))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn task(&self) -> Task {
        self.manifest.task
    }

    /// The model's name for people (`all-MiniLM-L6-v2`).
    pub fn model_name(&self) -> &str {
        &self.manifest.model
    }

    pub fn max_seq_len(&self) -> usize {
        self.manifest.max_seq_len
    }

    /// The path of a file in the directory, or [`ModelsMissing`] naming it.
    pub fn require(&self, name: &str) -> Result<PathBuf, ModelsMissing> {
        let path = self.root.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(ModelsMissing { path })
        }
    }

    pub fn tokenizer(&self) -> Result<PathBuf, ModelsMissing> {
        self.require(&self.manifest.tokenizer)
    }

    /// The tokenizer, truncating at the model's maximum length; for
    /// text-generation it does not cut: a prompt too long for the decoder is an
    /// error that says both lengths ([`crate::task::generation::PromptError`]).
    pub fn load_tokenizer(&self) -> anyhow::Result<TextTokenizer> {
        let max_len = if self.task().takes_a_prompt() { usize::MAX / 2 } else { self.max_seq_len() };
        TextTokenizer::load(&self.tokenizer()?, max_len)
    }

    /// The model's chat template, text-generation only: the file the manifest
    /// names (with its tokenizer_config.json), else what transformers would
    /// find in the directory; `None` when it has none.
    pub fn chat_template(&self) -> anyhow::Result<Option<super::ChatTemplate>> {
        if !self.task().takes_a_prompt() {
            return Ok(None);
        }
        match &self.manifest.chat_template {
            Some(name) => {
                let template = self.require(name)?;
                let config = self.manifest.tokenizer_config.as_ref().map(|c| self.require(c)).transpose()?;
                Ok(Some(super::ChatTemplate::from_file(&template, config.as_deref())?))
            }
            None => Ok(super::ChatTemplate::load(&self.root)?),
        }
    }

    /// The tokenizer and chat template, in `asked` format (else chat when the model has a template).
    pub fn prompter(&self, asked: Option<super::PromptFormat>) -> anyhow::Result<super::Prompter> {
        Ok(super::Prompter::new(self.load_tokenizer()?, self.chat_template()?, asked)?)
    }

    pub fn config(&self) -> Result<PathBuf, ModelsMissing> {
        self.require(self.manifest.eager.as_ref().map_or("config.json", |e| e.config.as_str()))
    }

    pub fn weights(&self) -> Result<PathBuf, ModelsMissing> {
        self.require(self.manifest.eager.as_ref().map_or("model.safetensors", |e| e.weights.as_str()))
    }

    pub fn reference(&self) -> Result<PathBuf, ModelsMissing> {
        self.require(self.manifest.reference.as_deref().unwrap_or("reference.json"))
    }
}

#[cfg(test)]
mod missing_tests {
    use super::*;

    #[test]
    fn a_path_that_exists_but_is_no_file_says_what_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ModelsMissing { path: tmp.path().to_path_buf() }.to_string();
        assert!(dir.contains("is a directory, not a model file") && !dir.contains("missing"), "{dir}");
        let device = ModelsMissing { path: PathBuf::from("/dev/null") }.to_string();
        assert!(device.contains("/dev/null is not a regular file (a device"), "{device}");
        let absent = ModelsMissing { path: tmp.path().join("nope.pte") }.to_string();
        assert!(absent.starts_with("missing model file") && absent.contains("nope.pte"), "{absent}");
    }
}
