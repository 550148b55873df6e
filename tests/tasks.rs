//! The encoder tasks on tiny random-weight checkpoints (`make test-models`:
//! BERT and DistilBERT, fill-mask and text-classification, sizes unlike
//! MiniLM's): every backend of each directory against Python transformers'
//! outputs in its `reference.json`, and `runlens run` as a user calls it.
//!
//! Tolerances, on logits of magnitude ~1-10 (random weights, init range 0.2):
//! eager within 1e-4, the float ExecuTorch programs within 1e-3 (XNNPACK
//! reorders the float sums); the same top-1 token at every mask, the same
//! label order. The int8 program is an approximation: it must run and keep
//! most of the top-5 tokens.

mod common;
use common::model_dir;

use std::process::{Command, Output};

use runlens::backend::{self, BackendSpec};
use runlens::model::{Encoded, ModelDir, Reference};
use runlens::task::{TaskContext, TaskOutput, TaskParity};

fn context(dir: &ModelDir) -> TaskContext {
    TaskContext::for_model(dir, &dir.load_tokenizer().unwrap(), 5).unwrap()
}

fn present(dir: &ModelDir) -> Vec<BackendSpec> {
    backend::catalog(dir, &[]).unwrap().into_iter().filter(|s| backend::files_present(s, dir).is_ok()).collect()
}

/// Every present backend of `name` on every reference sentence.
fn check_against_python(name: &str) {
    let dir = model_dir(name);
    let ctx = context(&dir);
    let reference = Reference::load(&dir.reference().unwrap()).unwrap();
    assert!(reference.sentences.len() >= 5, "{name}: too few reference sentences");
    let specs = present(&dir);
    for must in ["eager", "portable", "xnnpack"] {
        assert!(specs.iter().any(|s| s.name == must), "{name} has no {must}");
    }
    let mut worst = Vec::new();
    for spec in &specs {
        let mut b = backend::load(spec, &dir).unwrap_or_else(|e| panic!("{name}/{spec}: {e:#}"));
        let tol = if spec.is_eager() { 1e-4 } else { 1e-3 };
        let mut max_diff: f64 = 0.0;
        for sentence in &reference.sentences {
            let input = Encoded::from_ids(&sentence.ids);
            let out = backend::run_task(b.as_mut(), &ctx, &input).unwrap_or_else(|e| panic!("{name}/{spec} on {:?}: {e:#}", sentence.text));
            let expected = sentence.output(&ctx);
            let parity = out.parity(&expected).unwrap_or_else(|| panic!("{name}/{spec}: not comparable with Python on {:?}", sentence.text));
            max_diff = max_diff.max(parity.max_abs_diff());
            if spec.name.contains("int8") {
                if let TaskParity::FillMask(p) = parity {
                    assert!(p.topk_overlap >= 0.4, "{name}/{spec} on {:?}: top-5 overlap {}", sentence.text, p.topk_overlap);
                }
                continue;
            }
            assert!(parity.agrees(), "{name}/{spec} on {:?}: {parity:?}", sentence.text);
            assert!(parity.max_abs_diff() <= tol, "{name}/{spec} on {:?}: max|diff| {} > {tol}", sentence.text, parity.max_abs_diff());
            if let (TaskOutput::Classification(mine), TaskOutput::Classification(theirs)) = (&out, &expected) {
                assert_eq!(mine.order(), theirs.order(), "{name}/{spec} on {:?}: label order", sentence.text);
            }
        }
        worst.push(format!("{spec} {max_diff:.1e}"));
    }
    println!("{name}: max |logit diff| vs Python: {}", worst.join(", "));
}

#[test]
fn bert_fill_mask_matches_python() {
    check_against_python("tiny-bert-mlm");
}

#[test]
fn distilbert_fill_mask_matches_python() {
    check_against_python("tiny-distilbert-mlm");
}

#[test]
fn bert_classification_matches_python() {
    check_against_python("tiny-bert-cls");
}

#[test]
fn distilbert_classification_matches_python() {
    check_against_python("tiny-distilbert-cls");
}

// ---- the binary ----

fn runlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runlens")).args(args).output().expect("runlens starts")
}

fn model_path(name: &str) -> String {
    model_dir(name).root().display().to_string()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn run_json_fill_mask_gives_the_top_tokens_of_every_mask() {
    let out = runlens(&["--model", &model_path("tiny-distilbert-mlm"), "--threads", "2", "run", "--json", "--top-k", "3", "the [MASK] sat on the [MASK] ."]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j = json(&out);
    assert_eq!((j["task"].as_str(), j["model"].as_str()), (Some("fill-mask"), Some("tiny-distilbert-mlm")));
    for b in j["backends"].as_array().unwrap() {
        assert_eq!(b["ok"], true, "{b}");
        let masks = b["masks"].as_array().unwrap();
        assert_eq!(masks.len(), 2, "two masks: {b}");
        assert_eq!(masks[0]["position"], 2, "[CLS] the [MASK]: {b}");
        for m in masks {
            let top = m["top"].as_array().unwrap();
            assert_eq!(top.len(), 3);
            assert!(top.windows(2).all(|w| w[0]["prob"].as_f64() >= w[1]["prob"].as_f64()), "most likely first: {m}");
            assert!(top[0]["id"].is_i64() && top[0]["token"].is_string());
        }
        if b["name"] != "eager" {
            assert_eq!(b["parity"]["same_top1"], true, "{b}");
        }
    }
}

#[test]
fn run_json_classification_gives_every_label_in_id_order() {
    let out = runlens(&["--model", &model_path("tiny-bert-cls"), "--threads", "2", "run", "--json", "what a wonderful day"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j = json(&out);
    assert_eq!(j["task"], "text-classification");
    for b in j["backends"].as_array().unwrap() {
        let labels: Vec<&str> = b["labels"].as_array().unwrap().iter().map(|l| l["label"].as_str().unwrap()).collect();
        assert_eq!(labels, ["negative", "neutral", "positive"], "{b}");
        let sum: f64 = b["labels"].as_array().unwrap().iter().map(|l| l["prob"].as_f64().unwrap()).sum();
        assert!((sum - 1.0).abs() < 1e-6, "{b}");
    }
}

#[test]
fn fill_mask_text_without_a_mask_is_a_clear_error() {
    let model = model_path("tiny-bert-mlm");
    let out = runlens(&["--model", &model, "run", "--json", "no mask in here"]);
    assert_eq!(out.status.code(), Some(1));
    let j = json(&out);
    assert!(j["error"].as_str().unwrap().contains("[MASK]"), "{j}");
    assert!(j["backends"].as_array().unwrap().is_empty());
    let out = runlens(&["--model", &model, "run", "no mask in here"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("type [MASK]"));
    // A mask past the model's maximum length is cut off, and said so.
    let long = format!("{} [MASK]", "word ".repeat(200));
    let out = runlens(&["--model", &model, "run", "--json", &long]);
    assert_eq!(out.status.code(), Some(1));
    assert!(json(&out)["error"].as_str().unwrap().contains("cut off"), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn a_directory_without_a_manifest_or_from_an_older_runlens_names_the_file_and_the_command() {
    let tmp = tempfile::tempdir().unwrap();
    let out = runlens(&["--model", tmp.path().to_str().unwrap(), "run", "hello"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("manifest.json") && err.contains("export.py"), "{err}");
    std::fs::write(tmp.path().join("manifest.json"), r#"{"model": "sentence-transformers/all-MiniLM-L6-v2", "max_seq_len": 128}"#).unwrap();
    let out = runlens(&["--model", tmp.path().to_str().unwrap(), "run", "hello"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("older runlens") && err.contains("manifest.json") && err.contains("export.py"), "{err}");
}
