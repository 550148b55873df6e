//! `runlens run` on a decoder as `make soak` and `make test-aarch64` call it, on
//! the tiny random-weight GPT-2 (`make test-models`: `models/tiny-gpt2`):
//! - `--repeat N` runs N full greedy generations, each from the prompt (the
//!   KV cache refilled every time), so each one is the reference's generation;
//!   with `--trace` each of them is in the timeline;
//! - `--first-logits` adds the prompt's next-token logits per backend, checked
//!   against Python's: the quantized programs' `<program>.reference.json` (the
//!   same quantized model run by PyTorch at export), with the bounds of
//!   tests/quantized_generation.rs; an encoder refuses the option.
#![cfg(feature = "eager")]

mod common;
use common::{cosine, model_dir, model_path, runlens};

use runlens::model::Reference;
use serde_json::Value;

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}")).iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

#[test]
fn first_logits_are_the_quantized_pytorch_models_and_every_repeat_is_the_same_generation() {
    let dir = model_dir("tiny-gpt2");
    let model = model_path("tiny-gpt2");
    let trace_dir = tempfile::tempdir().unwrap();
    let trace = trace_dir.path().join("trace.json");
    let mut checked = 0;
    for (name, max_diff) in [("xnnpack-int8", 1e-3f32), ("xnnpack-8da4w", 1e-1)] {
        let program = dir.manifest().programs.iter().find(|p| p.name == name).expect("the quantized program");
        let reference = Reference::load(&dir.root().join(program.reference.as_ref().unwrap())).unwrap();
        let s = &reference.sentences[0];
        let new = 12.min(s.generated_ids.len());
        let out = runlens(&[
            "--model", &model, "--threads", "1", "--backends", name, "run", "--json", "--first-logits", "--repeat", "3",
            "--trace", trace.to_str().unwrap(), "--max-new-tokens", &new.to_string(), &s.text,
        ]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let j = json(&out);
        assert_eq!(j["ids"], serde_json::json!(s.ids), "{name}: the reference's prompt ids");
        let b = &j["backends"][0];
        assert_eq!(b["ok"], true, "{b}");
        // The last of the three generations is the reference's: the cache was refilled from the prompt each time.
        assert_eq!(b["generated_ids"], serde_json::json!(s.generated_ids[..new]), "{name}: the third generation");
        let logits = floats(&b["first_logits"]);
        assert_eq!(logits.len(), s.logits.len(), "{name}: one logit per vocabulary entry");
        let diff = logits.iter().zip(&s.logits).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        let c = cosine(&logits, &s.logits);
        assert!(diff <= max_diff && c >= 0.9999, "{name}: first logits max|diff| {diff}, cosine {c} to the quantized PyTorch model");
        let top = logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0 as i64;
        assert_eq!(serde_json::json!(top), b["generated_ids"][0], "{name}: the first new token is the first logits' argmax");
        // The timeline holds the three generations, each with its steps.
        let t: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
        let events = t["traceEvents"].as_array().expect("trace events");
        let count = |n: &str| events.iter().filter(|e| e["name"] == n && e["ph"] == "X").count();
        assert_eq!(count("generate"), 3, "{name}: one generate span per repeat");
        assert_eq!(count("prefill"), 3, "{name}: a prefill per generation");
        assert_eq!(count(&format!("decode step {}", new - 1)), 3, "{name}: every generation ran to its last token");
        checked += 1;
    }
    assert_eq!(checked, 2);

    // Without the option, no logits in the JSON.
    let out = runlens(&["--model", &model, "--threads", "1", "--backends", "xnnpack", "run", "--json", "--max-new-tokens", "2", "The quick brown fox"]);
    assert!(out.status.success());
    assert!(json(&out)["backends"][0].get("first_logits").is_none());
}

#[test]
fn first_logits_on_an_encoder_is_a_clear_error() {
    let out = runlens(&["--model", &model_path("minilm"), "--backends", "xnnpack", "run", "--json", "--first-logits", "A kitten"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--first-logits") && err.contains("text-generation") && err.contains("feature-extraction"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
