//! Programs runlens cannot run, named before they are loaded (issue 25, item 5):
//! `models/llm-flow/update-cache.pte` (tests/python/llm_flow_program.py) calls
//! `llama::update_cache`, a custom operator of ExecuTorch's LLM export flow whose
//! kernel ships only in the executorch wheel's Python extension. `inspect` lists
//! it, a column with it fails naming it (the others go on), and no program
//! runlens exports itself lacks anything.

mod common;
use common::{model_path, runlens};

use std::path::{Path, PathBuf};

use runlens::backend::executorch::MissingKernels;
use serde_json::Value;

const OPERATOR: &str = "llama::update_cache.out";

fn llm_flow_program() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/llm-flow/update-cache.pte");
    assert!(path.is_file(), "{} is missing: run `make test-models`", path.display());
    // The program really calls the operator (tests/python/llm_flow_program.py wrote what it calls).
    let listed: Value = serde_json::from_str(&std::fs::read_to_string(path.with_file_name("programs.json")).unwrap()).unwrap();
    assert_eq!(listed["update-cache.pte"]["custom_operator"], OPERATOR);
    path
}

#[test]
fn inspect_names_the_operator_without_a_kernel() {
    let path = llm_flow_program();
    let out = runlens(&["inspect", "--json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["missing_kernels"], serde_json::json!([{"method": "forward", "operators": [OPERATOR], "backends": []}]), "{j}");
    // It is also one of the operators the report counts on the default kernels.
    assert_eq!(j["plans"][0]["operators"][OPERATOR], 1, "{j}");

    let out = runlens(&["inspect", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains(&format!("no kernel in this runlens for {OPERATOR}")), "{text}");
    assert!(text.contains("python/export.py"), "says how to export it instead: {text}");
}

#[test]
fn a_column_with_a_custom_operator_fails_naming_it_and_the_others_go_on() {
    let path = llm_flow_program();
    let program = format!("llm={}", path.display());
    let others: &[&str] = if cfg!(feature = "eager") { &["eager", "xnnpack"] } else { &["xnnpack"] };
    let out = runlens(&[
        "--model", &model_path("tiny-gpt2"), "--threads", "1", "--backends", &format!("{},llm", others.join(",")), "--program", &program,
        "run", "--json", "--max-new-tokens", "4", "Once upon a time",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // One column failed: exit 1, not an abort (134) or a crash.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let j: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let backends = j["backends"].as_array().unwrap();
    let get = |n: &str| backends.iter().find(|b| b["name"] == n).unwrap_or_else(|| panic!("no {n}: {j}"));
    for &name in others {
        assert_eq!(get(name)["ok"], true, "{name}: {j}");
        assert_eq!(get(name)["generated_ids"].as_array().unwrap().len(), 4, "{name}: {j}");
    }
    let llm = get("llm");
    assert_eq!(llm["ok"], false, "{llm}");
    let error = llm["error"].as_str().unwrap();
    assert!(error.contains(&path.display().to_string()), "names the file: {error}");
    assert!(error.contains(OPERATOR), "names the operator: {error}");
    assert!(error.contains("python/export.py"), "says how to export it instead: {error}");
}

#[test]
fn every_program_runlens_exports_has_all_its_kernels() {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut checked = 0;
    for dir in ["minilm", "tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-distilbert-mlm", "tiny-bert-cls"] {
        let manifest: Value = serde_json::from_str(&std::fs::read_to_string(models.join(dir).join("manifest.json")).unwrap()).unwrap();
        // The ExecuTorch programs (a GGUF entry is llama.cpp's: tests/llamacpp.rs).
        for entry in manifest["programs"].as_array().unwrap().iter().filter(|e| e["runtime"].is_null()) {
            let file = models.join(dir).join(entry["file"].as_str().unwrap());
            let report = runlens::pte::inspect_file(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for plan in &report.plans {
                let missing = MissingKernels::of(plan);
                assert!(missing.is_empty(), "{}: {missing}", file.display());
                checked += plan.operators.len();
            }
        }
    }
    // Operators of many kinds were looked up (a registry that answered nothing would fail above).
    assert!(checked > 100, "only {checked} operators checked");
}
