//! The encoder tasks on tiny random-weight checkpoints (`make test-models`:
//! BERT and DistilBERT, fill-mask and text-classification, sizes unlike
//! MiniLM's): every backend of each directory against Python transformers'
//! outputs in its `reference.json`, and `runlens run` as a user calls it.
//!
//! Tolerances, on logits of magnitude ~1-10 (random weights, init range 0.2):
//! eager within 1e-4, the float ExecuTorch programs within 1e-3 (XNNPACK
//! reorders the float sums); the same top-1 token at every mask, the same
//! label order. The int8 program is an approximation: it must run, give
//! finite logits and keep most of the top-5 tokens (3 of 5 at least).
//!
//! Eager is the reference here, so the file needs the full build.
#![cfg(feature = "eager")]

mod common;
use common::model_dir;

use std::process::{Command, Output};

use runlens::backend::{self, BackendSpec};
use runlens::model::{Encoded, ModelDir, Reference};
use runlens::task::{TaskContext, TaskOutput, TaskParity};

fn context(dir: &ModelDir) -> TaskContext {
    TaskContext::for_model(dir, &dir.load_tokenizer().unwrap(), 5).unwrap()
}

/// Every backend the directory's manifest lists; a program whose file is
/// missing fails the test, named (an export that left one out must show).
fn present(dir: &ModelDir) -> Vec<BackendSpec> {
    let specs = backend::catalog(dir, &[]).unwrap();
    let missing: Vec<String> = specs.iter().filter_map(|s| backend::files_present(s, dir).err().map(|e| format!("{s}: {e}"))).collect();
    assert!(missing.is_empty(), "{}: the manifest lists files that are missing (`make test-models`):\n{}", dir.root().display(), missing.join("\n"));
    assert_eq!(specs.len(), dir.manifest().programs.len() + usize::from(dir.manifest().eager.is_some()), "every program of the manifest is checked");
    specs
}

/// Every backend of `name` on every reference sentence.
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
    let mut int8_overlaps = Vec::new();
    for spec in &specs {
        let mut b = runlens::task::load_backend(spec, &dir).unwrap_or_else(|e| panic!("{name}/{spec}: {e:#}"));
        let tol = if spec.is_eager() { 1e-4 } else { 1e-3 };
        let mut max_diff: f64 = 0.0;
        for sentence in &reference.sentences {
            let input = Encoded::from_ids(&sentence.ids);
            let out = runlens::task::run_quietly(b.as_mut(), &ctx, &input).unwrap_or_else(|e| panic!("{name}/{spec} on {:?}: {e:#}", sentence.text));
            let expected = sentence.output(&ctx);
            let parity = out.parity(&expected).unwrap_or_else(|| panic!("{name}/{spec}: not comparable with Python on {:?}", sentence.text));
            max_diff = max_diff.max(parity.max_abs_diff());
            if spec.name.contains("int8") {
                if let TaskParity::FillMask(p) = parity {
                    // "Most of the top-5": at least 3 of the 5 tokens (mean over the masks).
                    assert!(p.topk_overlap >= 0.6, "{name}/{spec} on {:?}: top-5 overlap {}", sentence.text, p.topk_overlap);
                }
                assert!(parity.max_abs_diff().is_finite(), "{name}/{spec} on {:?}: {parity:?}", sentence.text);
                int8_overlaps.push(match parity {
                    TaskParity::FillMask(p) => format!("{:.1}", p.topk_overlap),
                    _ => String::new(),
                });
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
    if !int8_overlaps.is_empty() {
        println!("{name}: int8 top-5 overlap per sentence: {}", int8_overlaps.join(" "));
    }
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

// ---- --program: programs made the way other pipelines make them (models/course) ----

#[derive(serde::Deserialize)]
struct CoursePrograms {
    programs: Vec<CourseProgram>,
    sentences: Vec<runlens::model::ReferenceSentence>,
}

#[derive(serde::Deserialize)]
struct CourseProgram {
    name: String,
    file: String,
    drivable: bool,
}

fn course() -> (std::path::PathBuf, CoursePrograms) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/course");
    let text = std::fs::read_to_string(root.join("programs.json")).unwrap_or_else(|e| panic!("{}: {e}; run `make test-models`", root.display()));
    (root, serde_json::from_str(&text).unwrap())
}

/// Each drivable convention (the course's `[1, V]` wrapper with a mask input, a
/// per-position program taking `input_ids` alone) agrees with transformers; the
/// others are errors naming the file and what runlens expects.
#[test]
fn programs_of_every_convention_are_driven_or_refused_with_a_reason() {
    let dir = model_dir("tiny-distilbert-mlm");
    let ctx = context(&dir);
    let (root, course) = course();
    assert!(course.programs.iter().filter(|p| p.drivable).count() >= 2 && course.programs.iter().any(|p| !p.drivable));
    for p in &course.programs {
        let path = root.join(&p.file);
        let spec = BackendSpec::program(&p.name, &path);
        match runlens::task::load_backend(&spec, &dir) {
            Ok(mut b) => {
                assert!(p.drivable, "{}: runlens drove a program it should refuse", p.name);
                for sentence in &course.sentences {
                    let out = runlens::task::run_quietly(b.as_mut(), &ctx, &Encoded::from_ids(&sentence.ids)).unwrap_or_else(|e| panic!("{}: {e:#}", p.name));
                    let parity = out.parity(&sentence.output(&ctx)).unwrap_or_else(|| panic!("{}: not comparable", p.name));
                    assert!(parity.agrees() && parity.max_abs_diff() <= 1e-3, "{} on {:?}: {parity:?}", p.name, sentence.text);
                }
            }
            Err(e) => {
                let message = format!("{e:#}");
                assert!(!p.drivable, "{}: {message}", p.name);
                assert!(message.contains(&p.file) && message.contains("cannot drive"), "{message}");
                assert!(message.contains("runlens drives") || message.contains("returns"), "says what it expected: {message}");
            }
        }
    }
}

/// `--program` with a `--backends` list that leaves it out: it does not run, and runlens says so.
#[test]
fn a_program_left_out_of_backends_is_said() {
    let (root, _) = course();
    let model = model_path("tiny-distilbert-mlm");
    let at_mask = format!("course={}", root.join("at-mask.pte").display());
    let out = runlens(&["--model", &model, "--threads", "1", "--backends", "xnnpack", "--program", &at_mask, "run", "--json", "The capital of France is [MASK]."]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--program course is not in --backends xnnpack"), "{stderr}");
    let names: Vec<String> = json(&out)["backends"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["xnnpack"]);
}

#[test]
fn run_with_program_adds_a_column_and_a_program_it_cannot_drive_leaves_the_others_running() {
    let (root, _) = course();
    let model = model_path("tiny-distilbert-mlm");
    let at_mask = format!("course={}", root.join("at-mask.pte").display());
    let bad = format!("bad={}", root.join("rank4-output.pte").display());
    let out = runlens(&["--model", &model, "--threads", "2", "--program", &at_mask, "--program", &bad, "run", "--json", "The capital of France is [MASK]."]);
    assert_eq!(out.status.code(), Some(1), "one backend failed: {}", String::from_utf8_lossy(&out.stderr));
    let j = json(&out);
    let names: Vec<&str> = j["backends"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["eager", "portable", "xnnpack", "onnx", "course", "bad"]);
    let get = |n: &str| j["backends"].as_array().unwrap().iter().find(|b| b["name"] == n).unwrap().clone();
    let course = get("course");
    assert_eq!(course["ok"], true, "{course}");
    assert_eq!(course["parity"]["same_top1"], true, "{course}");
    assert_eq!(course["masks"][0]["top"][0]["id"], get("eager")["masks"][0]["top"][0]["id"]);
    let bad = get("bad");
    assert_eq!(bad["ok"], false);
    let error = bad["error"].as_str().unwrap();
    assert!(error.contains("rank4-output.pte") && error.contains("[1, 1, 32, 30522]"), "{error}");
    assert!(["eager", "portable", "xnnpack", "onnx"].iter().all(|n| get(n)["ok"] == true));
    // A name the manifest already has is refused.
    let taken = format!("xnnpack={}", root.join("at-mask.pte").display());
    let out = runlens(&["--model", &model, "--program", &taken, "run", "a [MASK]"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is taken"));
}
