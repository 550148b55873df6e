//! The quantized text-generation programs of the tiny random-weight GPT-2
//! (`make test-models`: `models/tiny-gpt2` with `xnnpack-int8`, 8-bit
//! per-channel weights, and `xnnpack-8da4w`, 4-bit weights in groups of 32,
//! both with 8-bit dynamic activations, python/runlens_export/quantize.py).
//!
//! Two references, two bounds:
//! - tight: the same quantized model run by PyTorch (torchao) at export,
//!   `<program>.reference.json`: the program's greedy ids equal its ids, and its
//!   first-step logits have cosine >= 0.9999 to its logits and max|diff| within
//!   1e-3 (int8; measured 1.4e-6) or 1e-1 (8da4w; measured 3.2e-2 on logits
//!   spread over about +-10: XNNPACK's per-token activation quantization may
//!   round an activation the other way than torchao's; the group scales are
//!   rounded to bfloat16 at export as XNNPACK holds them, else 1e-1);
//! - loose, what random weights allow: float32 (the eager column, libtorch).
//!   Random weights (std 0.2) quantize worse than trained ones: at export the
//!   8-bit program's first-step logits have cosine 0.9994 to float32's and
//!   the 4-bit one's 0.95, and they pick float32's top-1 token 93% and 57%
//!   of the time. The bounds below sit under those with room to spare.
//!
//! And the weights really are quantized: GPT-2's `Conv1D` projections are
//! converted to linear layers first (left as Conv1D, torchao skips them and the
//! file stays float32-sized), checked through the bytes the files save.
#![cfg(feature = "eager")]

mod common;
use common::model_dir;

use std::process::Command;

use runlens::backend::{self, BackendSpec};
use runlens::model::{ModelDir, ProgramEntry, Reference};

const TINY: &str = "tiny-gpt2";
const QUANTIZED: [&str; 2] = ["xnnpack-int8", "xnnpack-8da4w"];

fn entry<'a>(dir: &'a ModelDir, name: &str) -> &'a ProgramEntry {
    dir.manifest().programs.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{TINY} has no {name} program"))
}

fn spec(dir: &ModelDir, name: &str) -> BackendSpec {
    backend::catalog(dir, &[]).unwrap().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no backend {name}"))
}

fn reference(dir: &ModelDir, name: &str) -> Reference {
    let file = entry(dir, name).reference.clone().expect("a quantized program names its reference file");
    Reference::load(&dir.root().join(file)).unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

fn argmax(v: &[f32]) -> i64 {
    v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0 as i64
}

#[test]
fn the_manifest_records_scheme_bits_group_and_what_stayed_float() {
    let dir = model_dir(TINY);
    let int8 = entry(&dir, "xnnpack-int8");
    assert_eq!(int8.quantization.as_deref(), Some("int8-dynamic"));
    assert_eq!((int8.bits, int8.activation_bits, int8.group_size), (Some(8), Some(8), None));
    let int4 = entry(&dir, "xnnpack-8da4w");
    assert_eq!(int4.quantization.as_deref(), Some("8da4w"));
    assert_eq!((int4.bits, int4.activation_bits, int4.group_size), (Some(4), Some(8), Some(32)));
    for p in [int8, int4] {
        assert_eq!(p.column.as_deref(), Some("xnnpack"), "F5 cycles the quantized programs in the xnnpack column");
        assert_eq!(p.delegate.as_deref(), Some("XnnpackBackend"));
        assert_eq!(p.cache.as_deref(), Some("static"));
        assert!(p.float.iter().any(|f| f == "embedding"), "{:?}", p.float);
        let v = p.vs_float.as_ref().expect("the export measures the program against float32");
        assert!(v.tokens > 0 && (0.0..=1.0).contains(&v.top1_agreement) && v.first_logits_cosine_min <= 1.0, "{v:?}");
        assert!(p.about.contains("bit weights"), "the column's about says the scheme: {}", p.about);
        let summary = p.quantization_summary().unwrap();
        assert!(summary.contains(&format!("{}-bit", p.bits.unwrap())) && summary.contains("float: embedding"), "{summary}");
    }
    assert!(entry(&dir, "xnnpack").quantization.is_none() && entry(&dir, "xnnpack").quantization_summary().is_none());
}

/// Tight: each quantized program computes what the quantized model computes in PyTorch.
#[test]
fn quantized_programs_generate_the_quantized_pytorch_models_greedy_ids() {
    let dir = model_dir(TINY);
    for (name, max_diff) in [("xnnpack-int8", 1e-3f32), ("xnnpack-8da4w", 1e-1)] {
        let reference = reference(&dir, name);
        assert!(reference.sentences.len() >= 2);
        let mut b = runlens::task::load_backend(&spec(&dir, name), &dir).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let decoder = b.as_decoder().expect("a decoder");
        for s in &reference.sentences {
            let first = decoder.prefill(&s.ids).unwrap();
            assert_eq!(first.len(), s.logits.len());
            let diff = first.iter().zip(&s.logits).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            let c = cosine(&first, &s.logits);
            assert!(diff <= max_diff && c >= 0.9999, "{name} on {:?}: first logits max|diff| {diff}, cosine {c} to the quantized PyTorch model", s.text);
            // Greedy, token by token, as generation does it.
            let mut ids = vec![argmax(&first)];
            while ids.len() < s.generated_ids.len() {
                ids.push(argmax(&decoder.step(*ids.last().unwrap()).unwrap()));
            }
            assert_eq!(ids, s.generated_ids, "{name} on {:?}", s.text);
        }
    }
}

/// Loose: against float32 eager (libtorch), bounded by what random weights allow.
#[test]
fn quantized_programs_stay_near_float32_as_random_weights_allow() {
    let dir = model_dir(TINY);
    let fp32 = Reference::load(&dir.reference().unwrap()).unwrap();
    let mut eager = runlens::task::load_backend(&BackendSpec::eager(), &dir).unwrap();
    for (name, min_cosine, min_top1) in [("xnnpack-int8", 0.995, 0.75), ("xnnpack-8da4w", 0.85, 0.35)] {
        let mut b = runlens::task::load_backend(&spec(&dir, name), &dir).unwrap();
        let (mut agree, mut total) = (0, 0);
        for s in &fp32.sentences {
            let want = eager.as_decoder().unwrap().prefill(&s.ids).unwrap();
            let q = b.as_decoder().unwrap();
            let mut got = q.prefill(&s.ids).unwrap();
            let c = cosine(&got, &want);
            assert!(c >= min_cosine, "{name} on {:?}: first logits cosine {c} to float32 (bound {min_cosine})", s.text);
            // Top-1 agreement teacher-forced on float32's greedy ids.
            for (k, token) in s.generated_ids.iter().enumerate() {
                agree += (argmax(&got) == *token) as usize;
                total += 1;
                if k + 1 < s.generated_ids.len() {
                    got = q.step(*token).unwrap();
                }
            }
        }
        let top1 = agree as f64 / total as f64;
        assert!(top1 >= min_top1, "{name}: top-1 agreement with float32 {agree}/{total} (bound {min_top1})");
    }
}

/// `runlens run --json` as a user runs the two quantized programs.
#[test]
fn run_json_runs_the_quantized_programs() {
    let dir = model_dir(TINY);
    let int8 = reference(&dir, "xnnpack-int8");
    let s = &int8.sentences[0];
    let model = dir.root().display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .args(["--model", &model, "--threads", "1", "--backends", "xnnpack-int8,xnnpack-8da4w", "run", "--json", "--max-new-tokens", "12", &s.text])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["ids"], serde_json::json!(s.ids));
    let backends = j["backends"].as_array().unwrap();
    let names: Vec<&str> = backends.iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(names, QUANTIZED);
    for b in backends {
        let name = b["name"].as_str().unwrap();
        let want = reference(&dir, name).sentences.into_iter().find(|r| r.text == s.text).unwrap().generated_ids;
        assert_eq!(b["ok"], true, "{b}");
        assert_eq!(b["generated_ids"], serde_json::json!(want[..12]), "{name}");
        assert!(b["decode_tokens_per_s"].as_f64().unwrap() > 0.0);
    }
}

/// The linear layers' weights of GPT-2 (its Conv1D projections and the head), from config.json.
fn linear_weights(dir: &ModelDir) -> (u64, u64) {
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.root().join("config.json")).unwrap()).unwrap();
    let d = config["n_embd"].as_u64().unwrap();
    let layers = config["n_layer"].as_u64().unwrap();
    let inner = config["n_inner"].as_u64().unwrap_or(4 * d);
    let vocab = config["vocab_size"].as_u64().unwrap();
    // c_attn d->3d, attn c_proj d->d, c_fc d->inner, mlp c_proj inner->d; the head d->vocab.
    let per_layer = d * 3 * d + d * d + d * inner + inner * d;
    let outputs = layers * (3 * d + d + inner + d) + vocab;
    (layers * per_layer + d * vocab, outputs)
}

#[test]
fn gpt2_conv1d_weights_are_quantized_the_files_shrink_by_the_expected_bytes() {
    let dir = model_dir(TINY);
    let size = |name: &str| std::fs::metadata(dir.root().join(&entry(&dir, name).file)).unwrap().len() as f64;
    let fp32 = size("xnnpack");
    let (weights, out_channels) = linear_weights(&dir);
    // What quantizing the linear weights saves: 4 bytes a weight down to 1 (plus a
    // float scale per output channel), or to half a byte (plus a bfloat16 scale per group of 32).
    let int8_saves = (4 * weights - weights - 4 * out_channels) as f64;
    let int4_saves = (4 * weights - weights / 2 - 2 * weights / 32) as f64;
    for (name, saves) in [("xnnpack-int8", int8_saves), ("xnnpack-8da4w", int4_saves)] {
        let saved = fp32 - size(name);
        let ratio = saved / saves;
        assert!((0.85..=1.15).contains(&ratio),
            "{name}: {saved} bytes smaller than xnnpack.pte, expected about {saves} (ratio {ratio:.2}); were the Conv1D weights quantized?");
    }
    assert!(size("xnnpack-8da4w") < size("xnnpack-int8"));
}
