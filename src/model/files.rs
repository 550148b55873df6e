//! A model directory (`--model DIR`, default `models/minilm`): its manifest,
//! the files a backend needs, and a clear message, naming the command that
//! makes them, when one is missing.

use std::path::{Path, PathBuf};

use super::manifest::{Manifest, ManifestError, EXPORT_HINT};
use super::TextTokenizer;
use super::manifest::Task;
use super::config::ModelConfig;

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
    /// `config.json`, typed the first time it is asked for ([`ModelDir::model_config`]);
    /// shared by clones made after that.
    config: std::sync::OnceLock<std::sync::Arc<ModelConfig>>,
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
        Ok(ModelDir { root, manifest, config: std::sync::OnceLock::new() })
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

    /// The path of `config.json` (the manifest's name for it).
    pub fn config(&self) -> Result<PathBuf, ModelsMissing> {
        self.require(self.manifest.eager.as_ref().map_or("config.json", |e| e.config.as_str()))
    }

    /// `config.json`, read and typed once per directory: a [`ModelsMissing`]
    /// when it is not there, else a [`ConfigFileError`](super::ConfigFileError) (either found with
    /// `downcast_ref`); a file that fails is read again the next time.
    pub fn model_config(&self) -> anyhow::Result<std::sync::Arc<ModelConfig>> {
        if let Some(config) = self.config.get() {
            return Ok(config.clone());
        }
        let config = std::sync::Arc::new(ModelConfig::read(&self.config()?)?);
        Ok(self.config.get_or_init(|| config).clone())
    }

    /// The weights' name in the directory as the manifest gives it: `model.safetensors`,
    /// or a sharded checkpoint's `model.safetensors.index.json`.
    pub fn weights_name(&self) -> &str {
        self.manifest.eager.as_ref().map_or("model.safetensors", |e| e.weights.as_str())
    }

    /// The file eager reads its weights from (the index of a sharded checkpoint).
    pub fn weights(&self) -> Result<PathBuf, ModelsMissing> {
        self.require(self.weights_name())
    }

    /// Every file of the weights: the one file, or the index and each shard it
    /// names; [`ModelsMissing`] names the first absent. An index that cannot be
    /// read gives just itself here: loading says what is wrong with it.
    pub fn weight_files(&self) -> Result<Vec<PathBuf>, ModelsMissing> {
        let first = self.weights()?;
        let shards = if super::safetensors::is_index(&first) { super::safetensors::shard_files(&first).unwrap_or_default() } else { Vec::new() };
        for shard in &shards {
            if !shard.is_file() {
                return Err(ModelsMissing { path: shard.clone() });
            }
        }
        Ok([vec![first], shards].concat())
    }

    /// The weights' sha256 from the manifest: the file's, or for a sharded
    /// checkpoint one over the index's and every shard's (all must be listed);
    /// `None` when the manifest lacks one.
    pub fn weights_sha256(&self) -> Option<String> {
        use sha2::{Digest, Sha256};
        let files = self.weight_files().ok()?;
        let names: Vec<String> = files.iter().map(|f| f.strip_prefix(&self.root).ok().map(|n| n.to_string_lossy().into_owned())).collect::<Option<_>>()?;
        let shas: Vec<&String> = names.iter().map(|n| self.manifest.sha256.get(n)).collect::<Option<_>>()?;
        if let [one] = shas.as_slice() {
            return Some(one.to_string());
        }
        let mut h = Sha256::new();
        shas.iter().for_each(|s| h.update(s.as_bytes()));
        Some(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
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

    #[test]
    fn a_sharded_checkpoint_needs_every_shard_and_hashes_them_all() {
        let tmp = tempfile::tempdir().unwrap();
        let manifest = |sha: &str| {
            format!(
                r#"{{"runlens_manifest": 2, "model": "m", "task": "text-generation", "max_seq_len": 64,
                    "eager": {{"config": "config.json", "weights": "model.safetensors.index.json"}}, "sha256": {{{sha}}}}}"#
            )
        };
        let index = tmp.path().join("model.safetensors.index.json");
        std::fs::write(&index, r#"{"weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors", "c": "m-1.safetensors"}}"#).unwrap();
        std::fs::write(tmp.path().join("m-1.safetensors"), b"x").unwrap();
        std::fs::write(tmp.path().join("manifest.json"), manifest("")).unwrap();
        let dir = ModelDir::open(tmp.path()).unwrap();
        let missing = dir.weight_files().unwrap_err();
        assert_eq!(missing.path, tmp.path().join("m-2.safetensors"));
        std::fs::write(tmp.path().join("m-2.safetensors"), b"y").unwrap();
        let files = dir.weight_files().unwrap();
        assert_eq!(files, [index.clone(), tmp.path().join("m-1.safetensors"), tmp.path().join("m-2.safetensors")]);
        assert_eq!(dir.weights_sha256(), None, "no sha256 listed");
        let listed = r#""model.safetensors.index.json": "aa", "m-1.safetensors": "bb""#;
        std::fs::write(tmp.path().join("manifest.json"), manifest(listed)).unwrap();
        assert_eq!(ModelDir::open(tmp.path()).unwrap().weights_sha256(), None, "a shard without its sha256");
        std::fs::write(tmp.path().join("manifest.json"), manifest(&format!(r#"{listed}, "m-2.safetensors": "cc""#))).unwrap();
        let sha = ModelDir::open(tmp.path()).unwrap().weights_sha256().unwrap();
        assert_eq!(sha.len(), 64);
        std::fs::write(tmp.path().join("manifest.json"), manifest(&format!(r#"{listed}, "m-2.safetensors": "cd""#))).unwrap();
        assert_ne!(ModelDir::open(tmp.path()).unwrap().weights_sha256().unwrap(), sha, "a shard's change changes it");
    }
}
