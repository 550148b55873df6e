//! Logits parity of the text-generation columns on the tiny random-weight
//! GPT-2 (`make test-models`: `models/tiny-gpt2`, with its `xnnpack-int8` and
//! `xnnpack-8da4w` programs): `run --json`'s `parity.first_logits_cosine` (the
//! prefill's next-token logits against the reference's) and
//! `parity.top1_agreement` (teacher-forced on the reference's new ids), for
//! float32 and quantized programs, a window (no-cache) program among them;
//! the same two figures computed apart in Python (transformers and ExecuTorch's
//! `_load_for_executorch`, tests/python/generation_parity.py); and `runlens layers`
//! naming the module where the 4-bit program first drifts.
//!
//! Bounds. Float32 programs compute what eager computes: cosine >= 0.9999 and
//! every teacher-forced position agreeing. The quantized ones, on random
//! weights (std 0.2, which quantize worse than trained ones), measured on
//! "The quick brown fox": 8-bit cosine 0.99973, top-1 23/24; 4-bit (8da4w,
//! groups of 32) cosine 0.9502, top-1 16/24 (the export's own figures over
//! its four prompts: 0.9994 / 93% and 0.950 / 57%). The bounds sit under those
//! with room: 8-bit >= 0.995 and >= 0.75, 4-bit >= 0.90 and >= 0.35, and
//! 4-bit below float32's cosine (it does move the logits).

mod common;
use common::{model_path, runlens};

use serde_json::Value;

const TEXT: &str = "The quick brown fox";
const NEW_TOKENS: &str = "24";

fn run_json(backends: &str) -> Value {
    let model = model_path("tiny-gpt2");
    let args = ["--model", &model, "--threads", "1", "--backends", backends, "run", "--json", "--max-new-tokens", NEW_TOKENS, TEXT];
    let out = runlens(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "runlens {args:?}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn backend<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["backends"].as_array().unwrap().iter().find(|b| b["name"] == name).unwrap_or_else(|| panic!("no {name} in {v}"))
}

/// `(first_logits_cosine, top1_agreement, top1_positions)` of a backend.
fn figures(v: &Value, name: &str) -> (f64, f64, u64) {
    let p = &backend(v, name)["parity"];
    let get = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("{name}: parity.{k} is not a number: {p}"));
    (get("first_logits_cosine"), get("top1_agreement"), p["top1_positions"].as_u64().unwrap())
}

/// The quantized programs' bounds, and float32's.
fn check_bounds(v: &Value, float_programs: &[&str]) {
    let new_ids = backend(v, v["reference"].as_str().unwrap())["generated_ids"].as_array().unwrap().len() as u64;
    for name in float_programs {
        let (cos, top1, positions) = figures(v, name);
        assert!(cos >= 0.9999, "{name}: a float32 program's first logits have cosine {cos} to the reference's");
        assert_eq!((top1, positions), (1.0, new_ids), "{name}: float32 picks the reference's token at every position");
    }
    let (c8, t8, n8) = figures(v, "xnnpack-int8");
    let (c4, t4, n4) = figures(v, "xnnpack-8da4w");
    assert!(c8 >= 0.995 && t8 >= 0.75, "8-bit: cosine {c8}, top-1 {t8}");
    assert!((0.90..0.9999).contains(&c4) && t4 >= 0.35, "4-bit: cosine {c4}, top-1 {t4}");
    assert!(c4 < c8, "4-bit moves the logits more than 8-bit: {c4} vs {c8}");
    assert_eq!((n8, n4), (new_ids, new_ids), "one position per new token of the reference");
    // Teacher-forced, an early divergence does not end the count: the 4-bit program leaves
    // the reference's ids early, yet agrees on more positions than the ones before that.
    let diverged = backend(v, "xnnpack-8da4w")["parity"]["first_divergence"].as_u64().expect("4-bit diverges on random weights");
    assert!((t4 * n4 as f64).round() as u64 > diverged, "top-1 {t4} of {n4} after diverging at {diverged}");
}

#[cfg(feature = "eager")]
#[test]
fn quantized_columns_against_float32_eager() {
    let v = run_json("eager,xnnpack,xnnpack-nocache,xnnpack-int8,xnnpack-8da4w");
    assert_eq!(v["reference"], "eager");
    assert!(v.get("parity_note").is_none(), "{}", v["parity_note"]);
    assert!(backend(&v, "eager")["parity"].is_null(), "the reference has no parity of its own");
    check_bounds(&v, &["xnnpack", "xnnpack-nocache"]);
}

/// Without eager (and so in the lite build) the first float32 program named is the reference.
#[test]
fn without_eager_a_float32_program_is_the_reference() {
    let v = run_json("xnnpack,xnnpack-nocache,xnnpack-int8,xnnpack-8da4w");
    assert_eq!(v["reference"], "xnnpack");
    check_bounds(&v, &["xnnpack-nocache"]);
}

/// A quantized reference gives no logits figures, and says why.
#[test]
fn a_quantized_reference_leaves_the_logits_figures_null_with_a_reason() {
    let v = run_json("xnnpack-8da4w,xnnpack");
    assert_eq!(v["reference"], "xnnpack-8da4w");
    let note = v["parity_note"].as_str().expect("a note");
    assert!(note.contains("xnnpack-8da4w is quantized (8da4w)") && note.contains("float32"), "{note}");
    let p = &backend(&v, "xnnpack")["parity"];
    assert!(p["first_logits_cosine"].is_null() && p["top1_agreement"].is_null(), "{p}");
    assert!(p["same_ids"].is_boolean(), "the ids are still compared: {p}");
}

/// The two figures computed apart in Python, on the same prompt ids: transformers
/// float32 as the reference, ExecuTorch's Python runtime running the programs.
#[cfg(feature = "eager")]
#[test]
fn runlens_figures_match_pythons() {
    let v = run_json("eager,xnnpack,xnnpack-int8,xnnpack-8da4w");
    let ids: Vec<String> = v["ids"].as_array().unwrap().iter().map(|i| i.to_string()).collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(root.join(".venv/bin/python"))
        .arg(root.join("tests/python/generation_parity.py"))
        .args(["--model", &model_path("tiny-gpt2"), "--ids", &ids.join(","), "--programs", "xnnpack,xnnpack-int8,xnnpack-8da4w"])
        .args(["--max-new-tokens", NEW_TOKENS])
        .output()
        .expect("the venv's python runs");
    assert!(out.status.success(), "tests/python/generation_parity.py: {}", String::from_utf8_lossy(&out.stderr));
    let py: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(py["reference"]["generated_ids"], backend(&v, "eager")["generated_ids"], "eager's ids are transformers'");
    for name in ["xnnpack", "xnnpack-int8", "xnnpack-8da4w"] {
        let (cos, top1, positions) = figures(&v, name);
        let theirs = &py["programs"][name];
        let (py_cos, py_top1) = (theirs["first_logits_cosine"].as_f64().unwrap(), theirs["top1_agreement"].as_f64().unwrap());
        assert_eq!(theirs["top1_positions"].as_u64(), Some(positions), "{name}");
        // Eager and transformers differ by ~1e-6 in the logits; the same program runs on both sides.
        assert!((cos - py_cos).abs() <= 1e-4, "{name}: cosine {cos} here, {py_cos} in Python");
        // A near tie may fall the other way in one position, no more.
        assert!((top1 - py_top1).abs() * positions as f64 <= 1.0 + 1e-9, "{name}: top-1 {top1} here, {py_top1} in Python");
    }
}

/// `runlens layers` names the module where the 4-bit program's output first
/// leaves eager's: its 4-bit token embedding.
#[cfg(feature = "eager")]
#[test]
fn layers_names_where_the_4_bit_program_first_drifts() {
    let model = model_path("tiny-gpt2");
    let args = ["--model", &model, "--threads", "1", "--backends", "eager,xnnpack,xnnpack-8da4w", "layers", "--json", "--runs", "1", TEXT];
    let out = runlens(&args);
    assert!(out.status.success(), "runlens {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["drift"]["xnnpack"]["first"].is_null(), "float32 XNNPACK does not drift: {}", v["drift"]["xnnpack"]);
    let d = &v["drift"]["xnnpack-8da4w"];
    let first = d["first"].as_str().unwrap_or_else(|| panic!("the 4-bit program drifts somewhere: {d}"));
    let rows = v["rows"].as_array().unwrap();
    let row = |m: &str| rows.iter().find(|r| r["module"] == m).unwrap_or_else(|| panic!("no row {m}"));
    let gap = &row(first)["gap"]["xnnpack-8da4w"];
    assert!(1.0 - gap["cosine"].as_f64().unwrap() > d["threshold"].as_f64().unwrap(), "{first}: {gap}");
    assert_eq!(gap["at"], "kernel", "the drift is judged on a kernel call's output");
    // The 4-bit program's embeddings are 4-bit tables too (quantized_decomposed::embedding_4bit):
    // its first module, the token embedding, already drifts, so nothing is clean before it.
    assert_eq!(first, "wte", "the 4-bit token embedding is where the drift begins: {d}");
    assert!(d["clean_until"].is_null(), "{d}");
    // float32 XNNPACK's embedding is exact.
    assert!(row("wte")["gap"]["xnnpack"]["cosine"].as_f64().unwrap() > 1.0 - 1e-6, "the float embeddings do not drift");
    // And the table says so.
    let args = ["--model", &model, "--threads", "1", "--backends", "eager,xnnpack-8da4w", "layers", "--runs", "1", TEXT];
    let text = String::from_utf8_lossy(&runlens(&args).stdout).to_string();
    assert!(text.contains(&format!("xnnpack-8da4w: first drifts at {first}")), "{text}");
}
