//! The course's Python flow (`python/bench_python.py`), launched through the
//! venv on the same token ids, thread count and budget as the Rust rows.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::{Budget, LoadRow};
use crate::backend::BackendSpec;
use crate::model::{Encoded, ModelDir};

/// The venv: `$VIRTUAL_ENV`, else `./.venv`, else the one next to the sources.
pub fn venv() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("VIRTUAL_ENV").map(PathBuf::from),
        Some(PathBuf::from(".venv")),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv")),
    ];
    candidates.into_iter().flatten().find(|p| p.join("bin/python").exists())
}

/// `python/bench_python.py` under the current directory, else next to the sources
/// (`$RUNLENS_BENCH_SCRIPT` overrides both).
pub fn script() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("RUNLENS_BENCH_SCRIPT") {
        return Ok(PathBuf::from(p));
    }
    let candidates = [PathBuf::from("python/bench_python.py"), Path::new(env!("CARGO_MANIFEST_DIR")).join("python/bench_python.py")];
    candidates
        .into_iter()
        .find(|p| p.exists())
        .context("python/bench_python.py not found; run from the repository root or set RUNLENS_BENCH_SCRIPT")
}

#[derive(Serialize)]
struct Job<'a> {
    model_dir: PathBuf,
    /// The directory's task: which transformers class the eager row loads.
    task: &'static str,
    pte: BTreeMap<&'a str, PathBuf>,
    /// ONNX files, run by ONNX Runtime's Python package.
    onnx: BTreeMap<&'a str, PathBuf>,
    /// Programs that take input_ids alone.
    ids_only: Vec<&'a str>,
    backends: Vec<&'a str>,
    threads: usize,
    warmup: u32,
    iters: u32,
    max_seconds: f64,
    inputs: Vec<JobInput<'a>>,
    /// Programs exported for a fixed length: the script pads their input to it,
    /// as [`crate::backend::executorch::ExecutorchBackend`] does.
    pad_to: BTreeMap<&'a str, usize>,
}

#[derive(Serialize)]
struct JobInput<'a> {
    seq_len: usize,
    ids: &'a [i64],
    mask: &'a [i64],
}

/// What the script prints.
#[derive(Debug, Deserialize)]
pub struct PythonOutput {
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    pub loads: Vec<LoadRow>,
    pub results: Vec<PythonCell>,
    #[serde(default)]
    pub interrupted: bool,
}

#[derive(Debug, Deserialize)]
pub struct PythonCell {
    pub backend: String,
    pub seq_len: usize,
    pub times_ms: Vec<f64>,
}

/// Run the Python flow for `kinds` on `inputs`; its stderr (progress) passes through.
pub fn run(dir: &ModelDir, specs: &[BackendSpec], inputs: &[Encoded], threads: usize, budget: Budget) -> anyhow::Result<PythonOutput> {
    let specs: Vec<&BackendSpec> = specs.iter().filter(|s| has_python_flow(s)).collect();
    let venv = venv().context("no Python venv found ($VIRTUAL_ENV or ./.venv); `make build` creates it")?;
    let python = venv.join("bin/python");
    let script = script()?;
    let model_dir = dir.root().to_path_buf();
    let mut pte = BTreeMap::new();
    let mut onnx = BTreeMap::new();
    let mut pad_to = BTreeMap::new();
    let mut ids_only = Vec::new();
    for spec in &specs {
        // The script runs a backend without a `pte` or `onnx` entry as transformers' eager model.
        if let Some(path) = spec.onnx_file() {
            onnx.insert(spec.name.as_str(), path.to_path_buf());
            continue;
        }
        let program = spec.pte_file();
        if let Some(path) = program {
            let report = crate::pte::inspect_file(path).with_context(|| format!("cannot read {}", path.display()))?;
            let plan = report.plan("forward");
            if let Some(len) = plan.and_then(|p| p.fixed_seq_len()) {
                pad_to.insert(spec.name.as_str(), len);
            }
            if plan.is_some_and(|p| p.inputs == 1) {
                ids_only.push(spec.name.as_str());
            }
            pte.insert(spec.name.as_str(), path.to_path_buf());
        }
    }
    let job = Job {
        model_dir,
        task: dir.task().name(),
        pte,
        onnx,
        ids_only,
        backends: specs.iter().map(|s| s.name.as_str()).collect(),
        threads,
        warmup: budget.warmup,
        iters: budget.iters,
        max_seconds: budget.max_seconds,
        inputs: inputs.iter().map(|e| JobInput { seq_len: e.len(), ids: &e.ids, mask: &e.attention_mask }).collect(),
        pad_to,
    };
    let mut child = Command::new(&python)
        .arg(&script)
        .env("OMP_NUM_THREADS", threads.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {} {}", python.display(), script.display()))?;
    {
        let mut stdin = child.stdin.take().context("no stdin for the Python bench")?;
        stdin.write_all(&serde_json::to_vec(&job)?)?;
    }
    let output = child.wait_with_output().context("waiting for the Python bench")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{'));
    match line {
        Some(line) => serde_json::from_str(line).with_context(|| format!("parsing the output of {}", script.display())),
        None => bail!("{} printed no JSON (exit status {}); its messages are above", script.display(), output.status),
    }
}

/// Whether the course's Python flow has a row for `spec` (`BackendSpec::has_python_flow`).
pub fn has_python_flow(spec: &BackendSpec) -> bool {
    spec.has_python_flow()
}
