//! The eager Llama-family decoders (src/backend/eager/llama.rs) against Python
//! transformers, on tiny random-weight checkpoints of each member:
//!   llama  grouped-query attention, `llama3` rope scaling, an untied head
//!   qwen2  q/k/v biases, one KV head, a tied head
//!   qwen3  per-head q/k norms, head_dim unlike hidden / heads, `linear` rope scaling
//! For each, the prefill's logits and a greedy continuation equal what
//! transformers computed (`reference.json`, tests/python/eager_llama_reference.py),
//! and the cached steps equal a full recompute. Then the errors for files the
//! decoder cannot use.
//!
//! Needs the checkpoints: `python tests/python/eager_llama_reference.py --out models/eager-llama`
//! (or `$RUNLENS_LLAMA_FIXTURES` pointing at a folder made so).
#![cfg(feature = "eager")]

use std::path::{Path, PathBuf};

use runlens::backend::eager::llama::{Family, LlamaConfig, LlamaForCausalLM};
use runlens::backend::eager::rope::{RopeConfig, RopeScaling};
use runlens::backend::eager::timing;
use runlens::backend::eager::weights::Weights;
use runlens::backend::Decoder;
use runlens::task::generation::argmax;
use serde::Deserialize;

/// Logits may differ from transformers' by this much (float32, other matmul shapes).
const TOLERANCE: f32 = 1e-4;

#[derive(Deserialize)]
struct Reference {
    model_type: String,
    /// The rotary embedding's inverse frequencies.
    inv_freq: Vec<f32>,
    prompts: Vec<Prompt>,
}

#[derive(Deserialize)]
struct Prompt {
    ids: Vec<i64>,
    last_logits: Vec<f32>,
    greedy: Vec<i64>,
    final_logits: Vec<f32>,
    min_top2_gap: f32,
}

/// `$RUNLENS_LLAMA_FIXTURES/<arch>`, else `models/eager-llama/<arch>` of this checkout.
fn checkpoint(arch: &str) -> PathBuf {
    let root = match std::env::var_os("RUNLENS_LLAMA_FIXTURES") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("models/eager-llama"),
    };
    let dir = root.join(arch);
    for file in ["config.json", "model.safetensors", "reference.json"] {
        assert!(
            dir.join(file).is_file(),
            "{} is missing: build the tiny checkpoints with `.venv/bin/python tests/python/eager_llama_reference.py --out {}`",
            dir.join(file).display(),
            root.display()
        );
    }
    dir
}

fn load(dir: &Path) -> LlamaForCausalLM {
    LlamaForCausalLM::from_files(&dir.join("config.json"), &dir.join("model.safetensors")).unwrap_or_else(|e| panic!("{e:#}"))
}

fn reference(dir: &Path) -> Reference {
    serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "logits of different lengths");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Prefill, then greedy steps: the new ids and the logits of each step.
fn greedy(model: &mut LlamaForCausalLM, prompt: &[i64], n: usize) -> (Vec<i64>, Vec<Vec<f32>>) {
    let mut logits = vec![model.prefill(prompt).unwrap()];
    let mut ids = vec![argmax(&logits[0]).unwrap()];
    while ids.len() < n {
        logits.push(model.step(*ids.last().unwrap()).unwrap());
        ids.push(argmax(logits.last().unwrap()).unwrap());
    }
    (ids, logits)
}

/// Every reference prompt: the prefill's logits, the greedy ids and the last step's logits.
fn matches_transformers(arch: &str) -> LlamaConfig {
    let dir = checkpoint(arch);
    let reference = reference(&dir);
    let mut model = load(&dir);
    assert_eq!(reference.model_type, arch);
    // The frequencies are computed with transformers' float32 operations: the same numbers.
    let config = model.config();
    let inv_freq = Vec::<f32>::try_from(&config.rope.inv_freq(config.head_dim).unwrap()).unwrap();
    assert_eq!(inv_freq, reference.inv_freq, "{arch}: inverse frequencies of {:?}", config.rope);
    assert!(reference.prompts.len() >= 3);
    for p in &reference.prompts {
        // The reference's margins are far above the tolerance, so greedy ids must agree exactly.
        assert!(p.min_top2_gap > 10.0 * TOLERANCE, "{arch}: reference top-2 gap {} too small", p.min_top2_gap);
        let (ids, logits) = greedy(&mut model, &p.ids, p.greedy.len());
        let first = max_abs_diff(&logits[0], &p.last_logits);
        assert!(first <= TOLERANCE, "{arch}, prompt of {}: prefill logits differ by {first}", p.ids.len());
        assert_eq!(ids, p.greedy, "{arch}, prompt {:?}: greedy ids differ from transformers' generate", p.ids);
        let last = max_abs_diff(logits.last().unwrap(), &p.final_logits);
        assert!(last <= TOLERANCE, "{arch}, prompt of {}: the last step's logits differ by {last}", p.ids.len());
        assert_eq!(model.seen() as usize, p.ids.len() + p.greedy.len() - 1);
        eprintln!("{arch}, prompt of {}: logits within {first:.1e} (prefill) and {last:.1e} (last step) of transformers", p.ids.len());
    }
    model.config().clone()
}

#[test]
fn llama_matches_transformers() {
    let c = matches_transformers("llama");
    // What the checkpoint is meant to exercise.
    assert_eq!(c.model_type, Family::Llama);
    assert!(c.num_key_value_heads < c.num_attention_heads, "grouped-query attention");
    assert!(matches!(c.rope.scaling, RopeScaling::Llama3 { .. }));
    assert!(!c.tie_word_embeddings && !c.qkv_bias);
    assert_eq!(c.head_dim, c.hidden_size / c.num_attention_heads, "no head_dim in the file: hidden / heads");
}

#[test]
fn qwen2_matches_transformers() {
    let c = matches_transformers("qwen2");
    assert_eq!(c.model_type, Family::Qwen2);
    assert!(c.qkv_bias && !c.o_bias && c.tie_word_embeddings);
    assert_eq!(c.num_key_value_heads, 1);
    assert_eq!(c.rope, RopeConfig { theta: 1e6, scaling: RopeScaling::Default }, "rope_theta from the top of the file");
}

#[test]
fn qwen3_matches_transformers() {
    let c = matches_transformers("qwen3");
    assert_eq!(c.model_type, Family::Qwen3);
    assert_ne!(c.head_dim, c.hidden_size / c.num_attention_heads);
    assert_eq!(c.rope, RopeConfig { theta: 20000.0, scaling: RopeScaling::Linear { factor: 2.0 } }, "from rope_parameters");
}

/// A step with the cache gives the logits of running the whole sequence again.
#[test]
fn cached_steps_equal_a_full_recompute() {
    for arch in ["llama", "qwen2", "qwen3"] {
        let dir = checkpoint(arch);
        let p = &reference(&dir).prompts[1];
        let (mut cached, mut full) = (load(&dir), load(&dir));
        let (ids, logits) = greedy(&mut cached, &p.ids, 8);
        for k in 0..ids.len() {
            let sequence = [&p.ids[..], &ids[..k]].concat();
            let again = full.prefill(&sequence).unwrap();
            let diff = max_abs_diff(&logits[k], &again);
            assert!(diff <= TOLERANCE, "{arch}: step {k} differs from a full recompute by {diff}");
        }
        // A new prefill forgets the old sequence.
        assert_eq!(max_abs_diff(&cached.prefill(&p.ids).unwrap(), &logits[0]), 0.0);
    }
}

/// Time per module under the checkpoint's module names (`runlens layers`).
#[test]
fn module_timings_use_the_checkpoints_names() {
    let mut model = load(&checkpoint("qwen3"));
    let (out, times) = timing::record(|| model.prefill(&[1, 2, 3]));
    out.unwrap();
    let paths: Vec<&str> = times.spans.iter().map(|(p, _)| p.as_str()).collect();
    for path in [
        "model.embed_tokens",
        "model.layers.0.input_layernorm",
        "model.layers.0.self_attn",
        "model.layers.0.post_attention_layernorm",
        "model.layers.0.mlp",
        "model.layers.2.mlp",
        "model.norm",
        "lm_head",
    ] {
        assert!(paths.contains(&path), "no span {path} in {paths:?}");
    }
}

#[test]
fn describes_itself_and_holds_its_length() {
    let dir = checkpoint("llama");
    let mut model = load(&dir);
    let text = model.describe();
    assert!(text.starts_with("Llama 2 layers, hidden 48, 6 heads / 2 KV heads of 8"), "{text}");
    assert!(text.contains("llama3") && text.contains("untied"), "{text}");
    assert_eq!(model.max_len(), 128);
    model.limit_len(12);
    assert_eq!(model.max_len(), 12);
    assert!(model.describe().ends_with("KV cache of 12 positions"));
    let err = model.prefill(&[1; 13]).unwrap_err().to_string();
    assert!(err.contains("13 tokens") && err.contains("at most 12"), "{err}");
    model.prefill(&[1; 11]).unwrap();
    model.step(2).unwrap();
    let err = model.step(3).unwrap_err().to_string();
    assert!(err.contains("at most 12"), "{err}");
    let err = model.prefill(&[320]).unwrap_err().to_string();
    assert!(err.contains("320") && err.contains("vocab_size 320"), "{err}");
    assert!(model.prefill(&[]).is_err());
    let mut fresh = load(&dir);
    assert!(fresh.step(1).unwrap_err().to_string().contains("before any prefill"));
    assert!(load(&checkpoint("qwen2")).describe().contains("tied to embed_tokens"));
}

/// The checkpoint's tensors with `drop` left out and `replace` swapped in, in a temp dir beside its config.
fn altered_checkpoint(arch: &str, drop: &str, replace: Option<(&str, tch::Tensor)>) -> tempfile::TempDir {
    let dir = checkpoint(arch);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(dir.join("config.json"), tmp.path().join("config.json")).unwrap();
    let mut tensors: Vec<(String, tch::Tensor)> =
        tch::Tensor::read_safetensors(dir.join("model.safetensors")).unwrap().into_iter().filter(|(name, _)| name != drop).collect();
    if let Some((name, tensor)) = replace {
        tensors.retain(|(n, _)| n != name);
        tensors.push((name.to_string(), tensor));
    }
    tch::Tensor::write_safetensors(&tensors, tmp.path().join("model.safetensors")).unwrap();
    tmp
}

fn load_error(dir: &Path) -> String {
    let result = std::panic::catch_unwind(|| LlamaForCausalLM::from_files(&dir.join("config.json"), &dir.join("model.safetensors")));
    match result.expect("loading panicked instead of returning an error") {
        Ok(_) => panic!("loaded a checkpoint it should refuse"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn a_missing_or_misshaped_tensor_is_named() {
    for (arch, name) in [
        ("qwen2", "model.layers.1.self_attn.k_proj.bias"),
        ("qwen3", "model.layers.2.self_attn.q_norm.weight"),
        ("llama", "lm_head.weight"),
        ("llama", "model.norm.weight"),
    ] {
        let tmp = altered_checkpoint(arch, name, None);
        let err = load_error(tmp.path());
        assert!(err.contains(&format!("`{name}` is missing")) && err.contains("model.safetensors"), "{arch}: {err}");
    }
    let name = "model.layers.0.self_attn.k_proj.weight";
    let tmp = altered_checkpoint("llama", "", Some((name, tch::Tensor::zeros([48, 48], (tch::Kind::Float, tch::Device::Cpu)))));
    let err = load_error(tmp.path());
    assert!(err.contains(name) && err.contains("[48, 48]") && err.contains("[16, 48]"), "{err}");
}

/// `config.json` of the tiny Llama with `edit` applied to its JSON.
fn config_with(edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) -> (tempfile::TempDir, PathBuf) {
    let text = std::fs::read_to_string(checkpoint("llama").join("config.json")).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(value.as_object_mut().unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("config.json");
    std::fs::write(&path, serde_json::to_string(&value).unwrap()).unwrap();
    (tmp, path)
}

fn config_error(edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) -> String {
    let (_tmp, path) = config_with(edit);
    match LlamaConfig::from_file(&path) {
        Ok(c) => panic!("accepted {c:?}"),
        Err(e) => format!("{:#}", anyhow::Error::from(e)),
    }
}

fn config(edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) -> LlamaConfig {
    let (_tmp, path) = config_with(edit);
    LlamaConfig::from_file(&path).unwrap_or_else(|e| panic!("{:#}", anyhow::Error::from(e)))
}

#[test]
fn an_unknown_rope_type_is_a_clear_error() {
    use serde_json::json;
    let err = config_error(|c| {
        c.insert("rope_scaling".into(), json!({"rope_type": "yarn", "factor": 4.0}));
    });
    assert!(err.contains("config.json") && err.contains("rope_scaling.rope_type \"yarn\" is not implemented"), "{err}");
    assert!(err.contains("default, linear, llama3"), "{err}");
    // The same in transformers 5's form.
    let err = config_error(|c| {
        c.remove("rope_scaling");
        c.insert("rope_parameters".into(), json!({"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}));
    });
    assert!(err.contains("rope_parameters.rope_type \"dynamic\""), "{err}");
    let err = config_error(|c| {
        c["rope_scaling"].as_object_mut().unwrap().remove("low_freq_factor");
    });
    assert!(err.contains("has no `low_freq_factor`"), "{err}");
    let err = config_error(|c| {
        c.insert("rope_scaling".into(), json!({"type": "linear"}));
    });
    assert!(err.contains("\"linear\" has no `factor`"), "{err}");
    let err = config_error(|c| {
        c.insert("hidden_act".into(), json!("gelu"));
    });
    assert!(err.contains("hidden_act \"gelu\""), "{err}");
    let err = config_error(|c| {
        c.insert("num_key_value_heads".into(), json!(4));
    });
    assert!(err.contains("num_key_value_heads = 4") && err.contains("multiple"), "{err}");
    let err = config_error(|c| {
        c.insert("model_type".into(), json!("mistral"));
    });
    assert!(err.contains("mistral"), "{err}");
}

#[test]
fn both_rope_forms_and_transformers_defaults() {
    use serde_json::json;
    // transformers 4's `rope_scaling` with the old `type` key and `rope_theta` at the top ...
    let old = config(|c| {
        c.insert("rope_scaling".into(), json!({"type": "linear", "factor": 3}));
        c.insert("rope_theta".into(), json!(7000.0));
    });
    // ... and transformers 5's `rope_parameters` are read alike.
    let new = config(|c| {
        c.remove("rope_scaling");
        c.remove("rope_theta");
        c.insert("rope_parameters".into(), json!({"rope_type": "linear", "factor": 3.0, "rope_theta": 7000.0}));
    });
    assert_eq!(old.rope, RopeConfig { theta: 7000.0, scaling: RopeScaling::Linear { factor: 3.0 } });
    assert_eq!(old, new);
    // A non-empty rope_scaling wins over rope_parameters; a null one does not.
    let both = config(|c| {
        c.insert("rope_parameters".into(), json!({"rope_type": "linear", "factor": 3.0}));
    });
    assert!(matches!(both.rope.scaling, RopeScaling::Llama3 { .. }));
    let null = config(|c| {
        c.insert("rope_scaling".into(), serde_json::Value::Null);
        c.insert("rope_parameters".into(), json!({"rope_type": "linear", "factor": 3.0}));
    });
    assert_eq!(null.rope, RopeConfig { theta: 5000.0, scaling: RopeScaling::Linear { factor: 3.0 } });
    // llama3 without original_max_position_embeddings: max_position_embeddings.
    let llama3 = config(|c| {
        c["rope_scaling"].as_object_mut().unwrap().remove("original_max_position_embeddings");
    });
    assert!(matches!(llama3.rope.scaling, RopeScaling::Llama3 { original_max_position_embeddings, .. } if original_max_position_embeddings == 128.0));
    // No RoPE fields at all: default, theta 10000; no num_key_value_heads: the heads (Llama).
    let bare = config(|c| {
        for key in ["rope_scaling", "rope_theta", "num_key_value_heads", "rms_norm_eps", "tie_word_embeddings"] {
            c.remove(key);
        }
    });
    assert_eq!(bare.rope, RopeConfig { theta: 10000.0, scaling: RopeScaling::Default });
    assert_eq!((bare.num_key_value_heads, bare.rms_norm_eps, bare.tie_word_embeddings), (6, 1e-6, false));
    // Qwen's defaults are its own: 32 KV heads when absent (the heads when null), Qwen3's head_dim 128.
    let qwen = |model_type: &str, kv: Option<serde_json::Value>| {
        config(|c| {
            c.insert("model_type".into(), json!(model_type));
            c.insert("num_attention_heads".into(), json!(32));
            c.insert("hidden_size".into(), json!(64));
            c.remove("num_key_value_heads");
            if let Some(kv) = kv {
                c.insert("num_key_value_heads".into(), kv);
            }
        })
    };
    let q2 = qwen("qwen2", None);
    assert_eq!((q2.num_key_value_heads, q2.head_dim, q2.qkv_bias, q2.o_bias), (32, 2, true, false));
    let q3 = qwen("qwen3", Some(serde_json::Value::Null));
    assert_eq!((q3.num_key_value_heads, q3.head_dim, q3.qkv_bias), (32, 128, false));
    let q3 = qwen("qwen3", Some(json!(8)));
    assert_eq!(q3.kv_groups(), 4);
}

/// The weights file is read once and checked against the config's shapes: a
/// config from another checkpoint names the first tensor that does not fit.
#[test]
fn weights_of_another_checkpoint_are_refused() {
    let config = LlamaConfig::from_file(&checkpoint("qwen3").join("config.json")).unwrap();
    let weights = Weights::read(&checkpoint("llama").join("model.safetensors")).unwrap();
    let err = match LlamaForCausalLM::load(&weights, &config) {
        Ok(_) => panic!("loaded Llama weights with a Qwen3 config"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("model.embed_tokens.weight") && err.contains("[320, 48]"), "{err}");
}
