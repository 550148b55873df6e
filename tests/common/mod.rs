//! Helpers the integration tests share (`mod common;` in each test file).
#![allow(dead_code)] // each test crate uses a different part

pub mod damage;
pub mod fuzz;

use std::path::{Path, PathBuf};

use runlens::model::ModelDir;

/// `$RUNLENS_MODEL`, else `models/minilm` of this checkout (`make models` fills it).
pub fn models_root() -> PathBuf {
    match std::env::var_os("RUNLENS_MODEL") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("models/minilm"),
    }
}

/// MiniLM's model directory.
pub fn models() -> ModelDir {
    ModelDir::open(&models_root()).unwrap_or_else(|e| panic!("{e}"))
}

/// A model directory of this checkout's `models/` (`make models` / `make test-models`).
pub fn model_dir(name: &str) -> ModelDir {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(name);
    ModelDir::open(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Damaged versions of a real `.pte`: a third of it, 200 kB of xorshift noise, and
/// the first 4 kB with every seventh byte flipped (headers and tables).
pub fn corrupted_copies(real: &[u8]) -> [(&'static str, Vec<u8>); 3] {
    let truncated = real[..real.len() / 3].to_vec();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u8> = (0..200_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let mut flipped = real.to_vec();
    for i in (64..4096.min(real.len())).step_by(7) {
        flipped[i] ^= 0xff;
    }
    [("truncated", truncated), ("random bytes", random), ("flipped bytes", flipped)]
}

/// A spec named like MiniLM's paths (`eager`, `portable`, `xnnpack`, ...), for
/// tests of scheduling and drawing: the file need not exist.
#[allow(unused_imports)] // some test files use it, each compiles this module
pub use runlens::backend::named;

/// The backend named `name` in MiniLM's directory (`eager`, `portable`, `xnnpack`, ...).
pub fn spec(name: &str) -> runlens::backend::BackendSpec {
    runlens::backend::catalog(&models(), &[])
        .unwrap()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("MiniLM's manifest has no backend {name}"))
}

/// Load the backend named `name` of MiniLM's directory.
pub fn load(name: &str) -> Box<dyn runlens::backend::Backend> {
    runlens::task::load_backend(&spec(name), &models()).unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

/// A feature-extraction output as an embedding ([1, H] checked).
pub fn embedding(out: runlens::task::OutputTensor) -> runlens::task::Embedding {
    assert_eq!(out.shape, [1, out.data.len()], "feature-extraction returns [1, H]");
    runlens::task::Embedding(out.data)
}

/// Runs this build's `runlens` binary with `args` and waits for it.
pub fn runlens(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_runlens")).args(args).output().expect("runlens starts")
}

/// The path of `models/<name>` of this checkout, as a string for a command line.
pub fn model_path(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(name).display().to_string()
}

/// Cosine similarity, summed in f64.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

/// The index of the largest value (the greedy pick).
pub fn argmax(v: &[f32]) -> i64 {
    v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0 as i64
}
