//! The Python counterparts of the generation bench: `python/bench_generate.py`
//! through the venv (transformers `generate` for eager, a `_load_for_executorch`
//! greedy loop per program, ONNX Runtime's Python package per ONNX file), on the
//! same prompt lengths and thread count.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use serde::Deserialize;

use super::{row, GenRow, Skipped};
use crate::backend::BackendSpec;
use crate::model::ModelDir;

/// `python/bench_generate.py` under the current directory, else next to the sources.
pub fn script() -> anyhow::Result<PathBuf> {
    let candidates = [PathBuf::from("python/bench_generate.py"), Path::new(env!("CARGO_MANIFEST_DIR")).join("python/bench_generate.py")];
    candidates
        .into_iter()
        .find(|p| p.exists())
        .context("python/bench_generate.py not found; run from the repository root")
}

/// What the script writes (its header documents the format).
#[derive(Debug, Deserialize)]
struct ScriptOutput {
    rows: Vec<ScriptRow>,
    #[serde(default)]
    skipped: Vec<Skipped>,
    #[serde(default)]
    interrupted: bool,
    #[serde(flatten)]
    rest: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct ScriptRow {
    backend: String,
    prompt_len: usize,
    gen_tokens: usize,
    ttft_ms: Vec<f64>,
    decode_tokens_per_s: Vec<f64>,
}

/// What the Python side measured: rows named `python-NAME`, skipped cells, versions.
pub struct PythonGeneration {
    pub rows: Vec<GenRow>,
    pub skipped: Vec<Skipped>,
    pub versions: BTreeMap<String, String>,
    pub interrupted: bool,
}

/// Run the script for the columns of `backends` that have a Python flow
/// ([`BackendSpec::has_python_flow`]: eager, the manifest's programs, ONNX files,
/// each file's path passed; not llama.cpp), each with its cache kind.
#[allow(clippy::too_many_arguments)]
pub fn run(
    dir: &ModelDir,
    backends: &[(&BackendSpec, Option<String>)],
    prompt_lens: &[usize],
    gen_tokens: usize,
    iters: u32,
    warmup: u32,
    threads: usize,
) -> anyhow::Result<PythonGeneration> {
    let venv = super::super::python::venv().context("no Python venv found ($VIRTUAL_ENV or ./.venv); `make build` creates it")?;
    let python = venv.join("bin/python");
    let script = script()?;
    // The script writes its JSON here; the file is removed when `out` is dropped.
    let out = tempfile::Builder::new().prefix("runlens-bench-generate-").suffix(".json").tempfile().context("cannot make a temporary file for the script's results")?;
    let backends: Vec<&(&BackendSpec, Option<String>)> = backends.iter().filter(|(s, _)| s.has_python_flow()).collect();
    if backends.is_empty() {
        bail!("no column here has a Python counterpart (llama.cpp's has none)");
    }
    let join = |v: Vec<String>| v.join(",");
    let mut command = Command::new(&python);
    command.arg(&script).arg("--model").arg(dir.root());
    command.args(["--backends", &join(backends.iter().map(|(s, _)| s.name.clone()).collect())]);
    // An ONNX file is run from its path (the manifest's or a --program's).
    for (spec, _) in &backends {
        if let Some(path) = spec.onnx_file() {
            command.arg("--onnx").arg(format!("{}={}", spec.name, path.display()));
        }
    }
    let status = command
        .args(["--prompt-lens", &join(prompt_lens.iter().map(usize::to_string).collect())])
        .args(["--gen-tokens", &gen_tokens.to_string(), "--iters", &iters.to_string(), "--warmup", &warmup.to_string()])
        .args(["--threads", &threads.to_string()])
        .arg("--json")
        .arg(out.path())
        .env("OMP_NUM_THREADS", threads.to_string())
        .status()
        .with_context(|| format!("starting {} {}", python.display(), script.display()))?;
    let text = std::fs::read_to_string(out.path()).unwrap_or_default();
    if text.trim().is_empty() {
        bail!("{} wrote no results (exit status {status}); its messages are above", script.display());
    }
    let parsed: ScriptOutput = serde_json::from_str(&text).with_context(|| format!("parsing the output of {}", script.display()))?;
    let cache = |b: &str| backends.iter().find(|(s, _)| s.name == b).and_then(|(_, c)| c.clone());
    let rows = parsed
        .rows
        .iter()
        .filter_map(|r| row(&format!("python-{}", r.backend), cache(&r.backend), r.prompt_len, r.gen_tokens, &r.ttft_ms, &r.decode_tokens_per_s))
        .collect();
    let versions = parsed.rest.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).filter(|(k, _)| ["torch", "transformers", "executorch", "onnxruntime", "python"].contains(&k.as_str())).collect();
    let skipped = parsed.skipped.into_iter().map(|s| Skipped { backend: format!("python-{}", s.backend), ..s }).collect();
    Ok(PythonGeneration { rows, skipped, versions, interrupted: parsed.interrupted })
}
