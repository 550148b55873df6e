//! The model directories on disk, for the explorer's model list (F8): every
//! folder of `models/` that holds a `manifest.json`, with the model and task
//! its manifest names, or why it cannot be opened. Plain data: reading it
//! loads nothing.

use std::path::{Path, PathBuf};

use super::manifest::Task;
use super::ModelDir;

/// Where the model list looks, relative to the working directory (the `models/` of a checkout).
pub const MODELS_ROOT: &str = "models";

/// Folders of [`MODELS_ROOT`] that are not model directories: the Hugging
/// Face checkpoints the exports were made from.
const NOT_LISTED: &[&str] = &["checkpoints"];

/// One model directory as the list shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The directory as found (`models/minilm`), what `--model` would take.
    pub path: PathBuf,
    /// Its folder's name (`minilm`).
    pub name: String,
    /// The manifest's model name and task, or why the directory cannot be opened.
    pub opened: Result<(String, Task), String>,
}

impl DirEntry {
    /// Read `path`'s manifest and check that its tokenizer is there (what
    /// every column needs); a failure is kept as the entry's error.
    pub fn read(path: &Path) -> DirEntry {
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        let opened = ModelDir::open(path).map_err(|e| e.to_string()).and_then(|dir| {
            dir.tokenizer().map_err(|e| e.to_string())?;
            Ok((dir.model_name().to_string(), dir.task()))
        });
        DirEntry { path: path.to_path_buf(), name, opened }
    }

    /// Is this the directory at `other` (the same folder, however it was named)?
    pub fn is(&self, other: &Path) -> bool {
        same_dir(&self.path, other)
    }
}

/// Whether two paths name the same folder (compared resolved, when they can be).
pub fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Every folder of `root` holding a `manifest.json`, by name; dot-folders and
/// `checkpoints/` are left out. A folder whose manifest cannot be read is
/// listed with its error. An unreadable `root` lists nothing.
pub fn list_dirs(root: &Path) -> Vec<DirEntry> {
    let Ok(read) = std::fs::read_dir(root) else { return Vec::new() };
    let mut found: Vec<DirEntry> = read
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            !name.starts_with('.') && !NOT_LISTED.contains(&name.as_str())
        })
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.join("manifest.json").exists())
        .map(|p| DirEntry::read(&p))
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.path.cmp(&b.path)));
    found
}

/// [`list_dirs`] of `root`, then each of `also` (the directories given with
/// `--model`) that is not among them.
pub fn list_with(root: &Path, also: &[PathBuf]) -> Vec<DirEntry> {
    let mut entries = list_dirs(root);
    for dir in also {
        if !entries.iter().any(|e| e.is(dir)) {
            entries.push(DirEntry::read(dir));
        }
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(model: &str, task: &str) -> String {
        format!(r#"{{"runlens_manifest": 2, "model": "{model}", "task": "{task}", "max_seq_len": 64, "programs": []}}"#)
    }

    fn model_dir(root: &Path, name: &str, manifest: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("manifest.json"), manifest).unwrap();
        std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
        dir
    }

    #[test]
    fn lists_model_directories_with_their_model_and_task_and_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        model_dir(root, "minilm", &manifest("all-MiniLM-L6-v2", "feature-extraction"));
        model_dir(root, "broken", "{ not json");
        let no_tokenizer = model_dir(root, "no-tokenizer", &manifest("x", "fill-mask"));
        std::fs::remove_file(no_tokenizer.join("tokenizer.json")).unwrap();
        // Not model directories: the checkpoints, a dot-folder, a folder without a manifest, a file.
        model_dir(root, "checkpoints", &manifest("ckpt", "feature-extraction"));
        model_dir(&root.join("checkpoints"), "tiny", &manifest("tiny", "feature-extraction"));
        model_dir(root, ".hidden", &manifest("hidden", "feature-extraction"));
        std::fs::create_dir(root.join("course")).unwrap();
        std::fs::write(root.join("README.md"), "models").unwrap();

        let entries = list_dirs(root);
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["broken", "minilm", "no-tokenizer"]);
        assert_eq!(entries[1].opened, Ok(("all-MiniLM-L6-v2".to_string(), Task::FeatureExtraction)));
        assert_eq!(entries[1].path, root.join("minilm"));
        let broken = entries[0].opened.as_ref().unwrap_err();
        assert!(broken.contains("broken/manifest.json is not a readable manifest"), "{broken}");
        let missing = entries[2].opened.as_ref().unwrap_err();
        assert!(missing.contains("tokenizer.json"), "{missing}");
    }

    #[test]
    fn a_directory_given_elsewhere_is_added_once_and_a_missing_root_lists_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("models");
        let minilm = model_dir(&root, "minilm", &manifest("all-MiniLM-L6-v2", "feature-extraction"));
        let elsewhere = model_dir(tmp.path(), "my-gpt2", &manifest("gpt2", "text-generation"));
        // The same folder named another way is not listed twice.
        let again = root.join("..").join("models").join("minilm");
        let entries = list_with(&root, &[elsewhere.clone(), again]);
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["minilm", "my-gpt2"]);
        assert!(entries[0].is(&minilm) && !entries[0].is(&elsewhere));
        assert_eq!(entries[1].opened, Ok(("gpt2".to_string(), Task::TextGeneration)));
        assert!(list_dirs(&tmp.path().join("nowhere")).is_empty());
    }
}
