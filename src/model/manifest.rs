//! `manifest.json`, written by `python/export.py` into every model directory:
//! which checkpoint and task the directory holds and which programs it has
//! (`docs/model-directory.md` is the format). Columns, `--backends` names,
//! titles and F5's cycle all come from here, not from code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a model directory was exported for (`task` in its manifest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Task {
    /// A sentence embedding (mean-pooled, L2-normalised), e.g. MiniLM.
    FeatureExtraction,
    /// Masked-LM: the likeliest tokens for every mask in the text.
    FillMask,
    /// A probability per class label.
    TextClassification,
    /// A prompt continued greedily, token by token (GPT-2).
    TextGeneration,
}

impl Task {
    pub fn name(self) -> &'static str {
        match self {
            Task::FeatureExtraction => "feature-extraction",
            Task::FillMask => "fill-mask",
            Task::TextClassification => "text-classification",
            Task::TextGeneration => "text-generation",
        }
    }

    /// Whether typed text is a prompt to continue (text-generation): it may go
    /// through the model's chat template, and a prompt too long for the decoder
    /// is an error that says both lengths instead of being cut.
    pub fn takes_a_prompt(self) -> bool {
        self == Task::TextGeneration
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The manifest version this runlens reads.
pub const MANIFEST_VERSION: u32 = 2;

/// The command that makes a model directory, for error messages.
pub const EXPORT_HINT: &str = "run `make models` for MiniLM, or `.venv/bin/python python/export.py --model CHECKPOINT_DIR --task TASK --out DIR` for another checkpoint";

#[derive(Clone, Debug, Deserialize)]
pub struct Manifest {
    #[serde(default)]
    pub runlens_manifest: u32,
    /// Short name shown in the status bar, e.g. `all-MiniLM-L6-v2`.
    pub model: String,
    #[serde(default)]
    pub source: Option<String>,
    pub task: Task,
    #[serde(default)]
    pub architecture: Option<String>,
    #[serde(default)]
    pub model_type: Option<String>,
    pub max_seq_len: usize,
    #[serde(default = "default_tokenizer")]
    pub tokenizer: String,
    #[serde(default)]
    pub reference: Option<String>,
    #[serde(default)]
    pub eager: Option<EagerFiles>,
    #[serde(default)]
    pub programs: Vec<ProgramEntry>,
    #[serde(default)]
    pub sha256: BTreeMap<String, String>,
    /// text-generation: the end-of-text id (config.json's first), where greedy decoding stops.
    #[serde(default)]
    pub eos_token_id: Option<i64>,
    /// text-generation: every end-of-text id (config.json's, then
    /// generation_config.json's: Llama 3 has several); greedy decoding stops at any.
    #[serde(default)]
    pub eos_token_ids: Vec<i64>,
    /// text-generation: the id the tokenizer puts first, when it adds one (Llama).
    #[serde(default)]
    pub bos_token_id: Option<i64>,
    /// The chat template beside the tokenizer (`chat_template.jinja`), when the checkpoint has one.
    #[serde(default)]
    pub chat_template: Option<String>,
    /// `tokenizer_config.json` beside the tokenizer (the template's special tokens).
    #[serde(default)]
    pub tokenizer_config: Option<String>,
    /// `generation_config.json` beside the tokenizer.
    #[serde(default)]
    pub generation_config: Option<String>,
    /// text-generation: what a left-padded window is padded with (config's pad, else eos).
    #[serde(default)]
    pub pad_token_id: Option<i64>,
    /// text-generation: the `max_new_tokens` reference.json was generated with.
    #[serde(default)]
    pub max_new_tokens: Option<usize>,
    /// The checkpoint's own dtype (`"bfloat16"`, `"float16"`, `"float32"`), as its config.json says;
    /// absent in manifests written before it was recorded.
    #[serde(default)]
    pub source_dtype: Option<String>,
    /// What the float columns compute in (`"float32"`, whatever the checkpoint's dtype).
    #[serde(default)]
    pub compute_dtype: Option<String>,
}

impl Manifest {
    /// Where greedy decoding stops: `eos_token_ids`, else `eos_token_id` (manifests before the list).
    pub fn eos_token_ids(&self) -> Vec<i64> {
        if self.eos_token_ids.is_empty() {
            self.eos_token_id.into_iter().collect()
        } else {
            self.eos_token_ids.clone()
        }
    }
}

impl Manifest {
    /// Whether the directory's weights are trained: `random` for the tests' tiny
    /// and random-weight models (`random` or `tiny-` in the source or the name),
    /// `real` for a checkpoint dequantized from a GGUF, MiniLM and SmolLM2, else
    /// the source string (or `unknown`). Reports say which, since a quantization
    /// error means something on trained weights only (timings hold either way).
    pub fn weights_kind(&self) -> String {
        let source = self.source.as_deref().unwrap_or("");
        let (s, model) = (source.to_lowercase(), self.model.to_lowercase());
        let last = s.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        if s.contains("random") || model.contains("random") || last.starts_with("tiny-") || model.starts_with("tiny-") {
            "random".to_string()
        } else if s.contains("dequantized") || s.contains(".gguf") || model.contains("minilm") || model.contains("smollm2") {
            "real".to_string()
        } else if source.is_empty() {
            "unknown".to_string()
        } else {
            source.to_string()
        }
    }

    /// One line on the weights' dtypes, e.g. `stored as bfloat16, computed in float32`;
    /// None when the manifest records neither.
    pub fn dtypes(&self) -> Option<String> {
        match (&self.source_dtype, &self.compute_dtype) {
            (Some(s), Some(c)) => Some(format!("stored as {s}, computed in {c}")),
            (Some(s), None) => Some(format!("stored as {s}")),
            (None, Some(c)) => Some(format!("computed in {c}")),
            (None, None) => None,
        }
    }
}

fn default_tokenizer() -> String {
    "tokenizer.json".to_string()
}

/// The checkpoint files the eager path reads.
#[derive(Clone, Debug, Deserialize)]
pub struct EagerFiles {
    pub config: String,
    pub weights: String,
}

/// One `.pte` program of the directory.
#[derive(Clone, Debug, Deserialize)]
pub struct ProgramEntry {
    pub name: String,
    pub file: String,
    pub title: String,
    #[serde(default)]
    pub about: String,
    /// Programs with the same column share one column of the explorer (F5 cycles them).
    #[serde(default)]
    pub column: Option<String>,
    /// The delegate its subgraphs are lowered to (`"XnnpackBackend"`), null for none (portable).
    #[serde(default)]
    pub delegate: Option<String>,
    /// Whether the entry has a `delegate` key at all (null included): manifests
    /// written before it was recorded have none, and the backend layer reads
    /// the delegate from the `.pte` instead.
    #[serde(skip)]
    pub delegate_recorded: bool,
    /// The quantization scheme: `"int8"` (the encoders' pt2e int8), `"int8-dynamic"`
    /// (8-bit per-channel weights) or `"8da4w"` (4-bit grouped weights) for a decoder; null: float32.
    #[serde(default)]
    pub quantization: Option<String>,
    /// A quantized decoder program: weight bits (8 or 4), activation bits (8, quantized per token at run time),
    /// the weights' group size (8da4w), what stayed in float, its reference and how far it is from float32.
    #[serde(default)]
    pub bits: Option<u32>,
    #[serde(default)]
    pub activation_bits: Option<u32>,
    #[serde(default)]
    pub group_size: Option<usize>,
    #[serde(default)]
    pub float: Vec<String>,
    /// `<name>.reference.json`: the quantized model's greedy ids as PyTorch computes them.
    #[serde(default)]
    pub reference: Option<String>,
    #[serde(default)]
    pub vs_float: Option<VsFloat>,
    #[serde(default)]
    pub fixed_len: Option<usize>,
    /// text-generation: `"static"` for a program with a KV cache inside, null for a window.
    #[serde(default)]
    pub cache: Option<String>,
    /// The runtime that runs the file: `"llama.cpp"` for a GGUF, `"onnxruntime"` for an ONNX file; absent for an ExecuTorch program.
    #[serde(default)]
    pub runtime: Option<String>,
    /// A GGUF's weight type (`f32`, `q8_0`, `q4_0`).
    #[serde(default)]
    pub gguf_type: Option<String>,
    /// An ONNX file's `last_hidden_state` to one vector (feature-extraction): `mean`, `cls`.
    #[serde(default)]
    pub pooling: Option<String>,
}

/// How far a quantized program's output is from the float32 model's, measured at export
/// on the reference prompts (reported, not a pass mark).
#[derive(Clone, Debug, Deserialize)]
pub struct VsFloat {
    pub first_logits_cosine_min: f64,
    pub first_logits_cosine_mean: f64,
    /// The fraction of float32's greedy tokens the program also picks, teacher-forced on float32's sequence.
    pub top1_agreement: f64,
    pub tokens: usize,
}

impl ProgramEntry {
    /// One line on a quantized program's weights, e.g. `8da4w: 4-bit weights in groups of 32, 8-bit dynamic
    /// activations; float: embedding, norms`; None for a float program.
    pub fn quantization_summary(&self) -> Option<String> {
        let scheme = self.quantization.as_deref()?;
        let mut line = scheme.to_string();
        if let Some(bits) = self.bits {
            line += &match self.group_size {
                Some(g) => format!(": {bits}-bit weights in groups of {g}"),
                None => format!(": {bits}-bit weights per output channel"),
            };
        }
        if let Some(a) = self.activation_bits {
            line += &format!(", {a}-bit dynamic activations");
        }
        if !self.float.is_empty() {
            line += &format!("; float: {}", self.float.join(", "));
        }
        if let Some(v) = &self.vs_float {
            line += &format!("; vs float32: first-logits cosine {:.4}, top-1 {:.0}%", v.first_logits_cosine_min, 100.0 * v.top1_agreement);
        }
        Some(line)
    }
}

/// Why a model directory cannot be used. Exit code 2 at the CLI, like a missing file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{path}: no such model directory (pass --model DIR or set RUNLENS_MODEL); {EXPORT_HINT}")]
    NoDirectory { path: PathBuf },
    #[error("{path} is missing: this is not a runlens model directory; {EXPORT_HINT}")]
    Missing { path: PathBuf },
    /// A Hugging Face checkpoint (config.json, no manifest.json): not exported yet.
    #[error(
        "{dir} is a Hugging Face checkpoint ({architecture}), not a runlens model directory: export it first with\n  \
         .venv/bin/python python/export.py --model {dir} --task {task} --out models/{name}\nthen run runlens --model models/{name}"
    )]
    Checkpoint { dir: PathBuf, architecture: String, task: &'static str, name: String },
    #[error("{path} was written by an older runlens (manifest version {found}, this runlens reads {MANIFEST_VERSION}); re-export the directory: {EXPORT_HINT}")]
    Old { path: PathBuf, found: u32 },
    #[error("{path} is not a readable manifest: {reason}; re-export the directory: {EXPORT_HINT}")]
    Bad { path: PathBuf, reason: String },
}

/// What a checkpoint directory is, from its config.json's `architectures[0]`
/// (else `model_type`), and the export command for it: the task its class
/// head says (`...ForMaskedLM`: fill-mask, `...ForSequenceClassification`:
/// text-classification, `...ForCausalLM` / `...LMHeadModel`: text-generation,
/// else feature-extraction).
fn checkpoint_error(dir: &Path) -> ManifestError {
    let config = super::ModelConfig::read(&dir.join("config.json")).unwrap_or_default();
    let (class, model_type) = (config.class(), config.model_type.as_deref());
    let architecture = match (class, model_type) {
        (Some(class), Some(model_type)) => format!("{class}, model_type \"{model_type}\""),
        (Some(class), None) => class.to_string(),
        (None, Some(model_type)) => format!("model_type \"{model_type}\""),
        (None, None) => "config.json names no architecture".to_string(),
    };
    let class = class.unwrap_or_default();
    let task = if class.ends_with("ForMaskedLM") {
        Task::FillMask
    } else if class.ends_with("ForSequenceClassification") {
        Task::TextClassification
    } else if class.ends_with("ForCausalLM") || class.ends_with("LMHeadModel") {
        Task::TextGeneration
    } else {
        Task::FeatureExtraction
    };
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "my-model".to_string());
    ManifestError::Checkpoint { dir: dir.to_path_buf(), architecture, task: task.name(), name }
}

impl Manifest {
    /// Read `dir/manifest.json`.
    pub fn load(dir: &Path) -> Result<Manifest, ManifestError> {
        if !dir.is_dir() {
            return Err(ManifestError::NoDirectory { path: dir.to_path_buf() });
        }
        let path = dir.join("manifest.json");
        if !path.exists() && dir.join("config.json").is_file() {
            return Err(checkpoint_error(dir));
        }
        let bytes = std::fs::read(&path).map_err(|_| ManifestError::Missing { path: path.clone() })?;
        Self::parse(&path, &bytes)
    }

    /// Parse manifest bytes; `path` names them in errors.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| ManifestError::Bad { path: path.to_path_buf(), reason: e.to_string() })?;
        let found = value.get("runlens_manifest").and_then(|v| v.as_u64()).unwrap_or(1) as u32;
        if found < MANIFEST_VERSION {
            return Err(ManifestError::Old { path: path.to_path_buf(), found });
        }
        let recorded: Vec<bool> = match value.get("programs").and_then(|p| p.as_array()) {
            Some(list) => list.iter().map(|p| p.get("delegate").is_some()).collect(),
            None => Vec::new(),
        };
        let mut manifest: Manifest =
            serde_json::from_value(value).map_err(|e| ManifestError::Bad { path: path.to_path_buf(), reason: e.to_string() })?;
        for (p, recorded) in manifest.programs.iter_mut().zip(recorded) {
            p.delegate_recorded = recorded;
        }
        manifest.check(path)?;
        Ok(manifest)
    }

    fn check(&self, path: &Path) -> Result<(), ManifestError> {
        let bad = |reason: String| ManifestError::Bad { path: path.to_path_buf(), reason };
        if self.max_seq_len < 2 {
            return Err(bad(format!("max_seq_len {} is below 2", self.max_seq_len)));
        }
        let mut seen = std::collections::BTreeSet::new();
        for p in &self.programs {
            if p.name.trim().is_empty() || p.name.contains(',') {
                return Err(bad(format!("program name {:?} cannot be used (empty, or has a comma)", p.name)));
            }
            if !seen.insert(p.name.as_str()) {
                return Err(bad(format!("two programs are named {:?}", p.name)));
            }
            if Path::new(&p.file).is_absolute() || p.file.contains("..") {
                return Err(bad(format!("program file {:?} must be a plain name inside the directory", p.file)));
            }
        }
        for file in self.eager.iter().flat_map(|e| [&e.config, &e.weights]) {
            if Path::new(file).is_absolute() || file.contains("..") {
                return Err(bad(format!("eager's file {file:?} must be a plain name inside the directory")));
            }
        }
        Ok(())
    }
}

impl Manifest {
    /// Refuse a program that takes a name of `reserved`: the names of the
    /// columns other runtimes make (eager's). The backend layer passes its
    /// list (`backend::reserved_names`) when it reads the catalog: the model
    /// layer imports no backend. `path` names the manifest in the error.
    pub fn refuse_names(&self, path: &Path, reserved: &[String]) -> Result<(), ManifestError> {
        match self.programs.iter().find(|p| reserved.contains(&p.name)) {
            Some(p) => Err(ManifestError::Bad {
                path: path.to_path_buf(),
                reason: format!("program name {:?} cannot be used (it is another runtime's column: {})", p.name, reserved.join(", ")),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod checkpoint_tests {
    use super::*;

    #[test]
    fn a_hugging_face_checkpoint_says_what_it_is_and_how_to_export_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("Qwen2.5-0.5B-Instruct");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("config.json"), r#"{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}"#).unwrap();
        let err = Manifest::load(&dir).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, ManifestError::Checkpoint { task: "text-generation", .. }), "{err:?}");
        assert!(message.contains("Hugging Face checkpoint (Qwen2ForCausalLM, model_type \"qwen2\")"), "{message}");
        let command = format!("python/export.py --model {} --task text-generation --out models/Qwen2.5-0.5B-Instruct", dir.display());
        assert!(message.contains(&command), "{message}");
        std::fs::write(dir.join("config.json"), r#"{"architectures": ["DistilBertForMaskedLM"]}"#).unwrap();
        assert!(Manifest::load(&dir).unwrap_err().to_string().contains("--task fill-mask"));
        // Without a config.json it is just not a model directory.
        std::fs::remove_file(dir.join("config.json")).unwrap();
        assert!(matches!(Manifest::load(&dir).unwrap_err(), ManifestError::Missing { .. }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(Path::new("m/manifest.json"), json.as_bytes())
    }

    #[test]
    fn reads_a_quantized_programs_fields_and_older_entries_without_them() {
        let m = parse(
            r#"{"runlens_manifest": 2, "model": "g", "task": "text-generation", "max_seq_len": 64,
                "programs": [{"name": "xnnpack", "file": "xnnpack.pte", "title": "X", "quantization": null},
                  {"name": "xnnpack-8da4w", "file": "q.pte", "title": "Q", "quantization": "8da4w", "bits": 4,
                   "activation_bits": 8, "group_size": 32, "float": ["embedding", "norms"],
                   "reference": "q.reference.json",
                   "vs_float": {"first_logits_cosine_min": 0.95, "first_logits_cosine_mean": 0.96, "top1_agreement": 0.5, "tokens": 96}}]}"#,
        )
        .unwrap();
        let (float, q) = (&m.programs[0], &m.programs[1]);
        assert!(float.bits.is_none() && float.float.is_empty() && float.quantization_summary().is_none());
        assert_eq!((q.bits, q.group_size, q.reference.as_deref()), (Some(4), Some(32), Some("q.reference.json")));
        assert_eq!(
            q.quantization_summary().unwrap(),
            "8da4w: 4-bit weights in groups of 32, 8-bit dynamic activations; float: embedding, norms; vs float32: first-logits cosine 0.9500, top-1 50%"
        );
    }

    #[test]
    fn reads_the_dtypes_when_recorded_and_manifests_without_them() {
        let m = parse(
            r#"{"runlens_manifest": 2, "model": "q", "task": "text-generation", "max_seq_len": 1024,
                "source_dtype": "bfloat16", "compute_dtype": "float32",
                "eager": {"config": "config.json", "weights": "model.safetensors.index.json"}}"#,
        )
        .unwrap();
        assert_eq!((m.source_dtype.as_deref(), m.compute_dtype.as_deref()), (Some("bfloat16"), Some("float32")));
        assert_eq!(m.dtypes().as_deref(), Some("stored as bfloat16, computed in float32"));
        assert_eq!(m.eager.unwrap().weights, "model.safetensors.index.json");
        let old = parse(r#"{"runlens_manifest": 2, "model": "g", "task": "text-generation", "max_seq_len": 64}"#).unwrap();
        assert_eq!((old.source_dtype.as_deref(), old.compute_dtype.as_deref(), old.dtypes()), (None, None, None));
    }

    #[test]
    fn reads_version_2_and_rejects_older_or_broken_ones() {
        let m = parse(
            r#"{"runlens_manifest": 2, "model": "tiny", "task": "fill-mask", "max_seq_len": 64,
                "programs": [{"name": "portable", "file": "portable.pte", "title": "ExecuTorch portable", "column": "portable"}]}"#,
        )
        .unwrap();
        assert_eq!(m.task, Task::FillMask);
        assert_eq!(m.programs[0].column.as_deref(), Some("portable"));
        assert_eq!(m.tokenizer, "tokenizer.json");

        let old = parse(r#"{"model": "sentence-transformers/all-MiniLM-L6-v2", "max_seq_len": 128}"#).unwrap_err();
        assert!(matches!(old, ManifestError::Old { found: 1, .. }), "{old}");
        assert!(old.to_string().contains("m/manifest.json") && old.to_string().contains("export.py"), "{old}");

        let task = parse(r#"{"runlens_manifest": 2, "model": "x", "task": "translation", "max_seq_len": 64}"#).unwrap_err();
        assert!(task.to_string().contains("translation"), "{task}");

        let dup = parse(
            r#"{"runlens_manifest": 2, "model": "x", "task": "fill-mask", "max_seq_len": 64,
                "programs": [{"name": "a", "file": "a.pte", "title": "A"}, {"name": "a", "file": "b.pte", "title": "B"}]}"#,
        )
        .unwrap_err();
        assert!(dup.to_string().contains("two programs"), "{dup}");
        let escape = parse(
            r#"{"runlens_manifest": 2, "model": "x", "task": "fill-mask", "max_seq_len": 64,
                "programs": [{"name": "a", "file": "../a.pte", "title": "A"}]}"#,
        )
        .unwrap_err();
        assert!(escape.to_string().contains("plain name"), "{escape}");
        let escape = parse(
            r#"{"runlens_manifest": 2, "model": "x", "task": "fill-mask", "max_seq_len": 64,
                "eager": {"config": "config.json", "weights": "/tmp/model.safetensors.index.json"}}"#,
        )
        .unwrap_err();
        assert!(escape.to_string().contains("eager's file") && escape.to_string().contains("plain name"), "{escape}");
        assert!(matches!(parse("{not json").unwrap_err(), ManifestError::Bad { .. }));
    }
}
