//! The models directory (`models/` or `--models`): which files a backend needs
//! and a clear message, naming the command that makes them, when one is missing.

use std::path::{Path, PathBuf};

/// The longest input the exported programs accept (`Dim("seq", max=128)` in
/// `python/export.py`); the tokenizer truncates to it.
pub const MAX_SEQ_LEN: usize = 128;

/// The model this build exports; its files live in `<models>/minilm/`.
pub const MODEL_SUBDIR: &str = "minilm";

/// A models directory on disk, e.g. `models/` (with `minilm/` inside) or `models/minilm/` itself.
#[derive(Clone, Debug)]
pub struct ModelDir {
    root: PathBuf,
}

/// A required model file is not there. Exit code 2 at the CLI.
#[derive(Debug, thiserror::Error)]
#[error("missing model file {path}: run `make models` in the runlens checkout (or pass --models DIR / set RUNLENS_MODELS to a directory that holds it)")]
pub struct ModelsMissing {
    pub path: PathBuf,
}

impl ModelDir {
    /// `models` is the directory the user named; `minilm/` inside it is used when present.
    pub fn new(models: &Path) -> ModelDir {
        let nested = models.join(MODEL_SUBDIR);
        let root = if nested.is_dir() { nested } else { models.to_path_buf() };
        ModelDir { root }
    }

    /// `--models`, else `$RUNLENS_MODELS`, else `models/` in the current directory.
    pub fn from_option(models: Option<&Path>) -> ModelDir {
        match models {
            Some(p) => ModelDir::new(p),
            None => match std::env::var_os("RUNLENS_MODELS") {
                Some(p) if !p.is_empty() => ModelDir::new(Path::new(&p)),
                _ => ModelDir::new(Path::new("models")),
            },
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
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
        self.require("tokenizer.json")
    }
    pub fn config(&self) -> Result<PathBuf, ModelsMissing> {
        self.require("config.json")
    }
    pub fn weights(&self) -> Result<PathBuf, ModelsMissing> {
        self.require("model.safetensors")
    }
    pub fn reference(&self) -> Result<PathBuf, ModelsMissing> {
        self.require("reference.json")
    }
}
