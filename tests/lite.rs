//! What the binary links, with and without the eager path (the `eager` cargo
//! feature): the lite build (`make lite`) loads no libtorch and no c10, runs the
//! ExecuTorch paths against Python's reference, and refuses eager with a way to
//! get it; the full build does link libtorch (so the check can fail both ways).
//!
//! Needs the model files: `make models`.

mod common;
#[cfg(not(feature = "eager"))]
use common::models_root;
use std::process::{Command, Output};

#[cfg(not(feature = "eager"))]
use runlens::model::Reference;

#[cfg(not(feature = "eager"))]
fn runlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runlens")).args(args).output().expect("runlens starts")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The shared libraries the binary loads, as `ldd` resolves them (one per line).
fn linked_libraries() -> Vec<String> {
    let out = Command::new("ldd").arg(env!("CARGO_BIN_EXE_runlens")).output().expect("ldd runs (Debian: libc-bin)");
    assert!(out.status.success(), "ldd failed: {}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!text.contains("not found"), "a library is missing:\n{text}");
    text.lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
}

#[cfg(not(feature = "eager"))]
fn is_torch(line: &str) -> bool {
    let name = line.split_whitespace().next().unwrap_or_default();
    name.starts_with("libtorch") || name.starts_with("libc10")
}

#[cfg(not(feature = "eager"))]
#[test]
fn the_lite_binary_loads_no_libtorch() {
    let libs = linked_libraries();
    let torch: Vec<&String> = libs.iter().filter(|l| is_torch(l)).collect();
    assert!(torch.is_empty(), "the lite binary loads libtorch: {torch:?}");
    assert!(libs.iter().any(|l| l.starts_with("libexecutorch.so")), "no ExecuTorch runtime in {libs:?}");
    assert!(libs.iter().any(|l| l.starts_with("libexecutorch_backend_xnnpack.so")), "no XNNPACK delegate in {libs:?}");
}

#[cfg(feature = "eager")]
#[test]
fn the_full_binary_loads_libtorch() {
    let libs = linked_libraries();
    assert!(libs.iter().any(|l| l.starts_with("libtorch_cpu.so")), "{libs:?}");
    assert!(libs.iter().any(|l| l.starts_with("libc10.so")), "{libs:?}");
}

/// With no `--backends`, the lite binary runs the two ExecuTorch paths and
/// llama.cpp's float32 column, and each matches Python's transformers output
/// (reference.json) within the parity bounds.
#[cfg(not(feature = "eager"))]
#[test]
fn the_lite_run_is_the_executorch_paths_and_matches_python() {
    let root = models_root();
    let reference = Reference::load(&runlens::model::ModelDir::open(&root).unwrap().reference().unwrap()).unwrap();
    for sentence in reference.sentences.iter().take(3) {
        let out = runlens(&["run", "--json", "--threads", "2", "--models", root.to_str().unwrap(), &sentence.text]);
        assert!(out.status.success(), "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
        let backends = json["backends"].as_array().unwrap();
        let names: Vec<&str> = backends.iter().map(|b| b["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["portable", "xnnpack", "llamacpp-f32", "onnx"], "the default columns of the lite build: ExecuTorch's, llama.cpp's and ONNX Runtime's");
        assert_eq!(json["reference"], "portable", "without eager the first backend is the reference");
        let ids: Vec<i64> = json["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        assert_eq!(ids, sentence.ids, "{:?}", sentence.text);
        for b in backends {
            assert_eq!(b["ok"], true, "{b}");
            let embedding: Vec<f32> = b["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
            let p = runlens::task::Embedding(embedding).parity(&sentence.embedding()).unwrap();
            // ggml computes GELU through a float16 table: llama.cpp's float32 differs by up to 2e-4.
            let bound = if b["name"] == "llamacpp-f32" { 5e-4 } else { 1e-4 };
            assert!(p.cosine >= 0.99999 && p.max_abs_diff <= bound, "{} on {:?}: {p:?}", b["name"], sentence.text);
        }
    }
}

/// Asking the lite binary for eager is a usage error that says how to get it.
#[cfg(not(feature = "eager"))]
#[test]
fn the_lite_binary_says_it_has_no_eager_path() {
    let root = models_root();
    for args in [
        vec!["--backends", "eager", "run", "hello"],
        vec!["--backends", "portable,eager", "bench", "--seq-lens", "8"],
        vec!["--backends", "eager"], // the explorer: refused before the terminal is touched
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_runlens")).arg("--models").arg(&root).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("built without the PyTorch eager path") && err.contains("make build"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
