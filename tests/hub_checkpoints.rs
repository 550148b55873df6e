//! Checkpoints as the hub ships them (issue 33; `make test-models`: models/hub-llama,
//! models/hub-qwen2, models/hub-llama2-sp from tests/python/hub_layout.py): a tiny Llama, Qwen2
//! and SentencePiece Llama in bfloat16, sharded with model.safetensors.index.json,
//! chat_template.jinja, a position limit of 4096 and (llama, qwen2) an end-id list of two
//! in generation_config.json; hub-llama2-sp has only tokenizer.model. Each went through
//! python/export.py with its defaults (no --programs, no --max-seq-len).
//!
//! Held against transformers run on its own in Python (tests/python/hub_reference.py:
//! `from_pretrained(dtype=torch.float32)`, greedy `generate`, `hub_reference.json`
//! beside each checkpoint): every float column (eager from the bfloat16 shards widened
//! to float32, portable, XNNPACK) continues the raw and chat prompts with transformers'
//! float32 ids, stops at either end id, and a chat prompt of about 400 tokens runs in
//! every column, the quantized ones included (their ids are their own).
#![cfg(feature = "eager")]

mod common;
use common::{model_dir, model_path, runlens};

use std::ops::ControlFlow;
use std::path::Path;

use runlens::backend::{self, BackendSpec};
use runlens::model::{Encoded, ModelDir, PromptFormat};
use runlens::task::generation::{generate, GenerationContext, Stop};
use runlens::task::TaskContext;
use serde::Deserialize;

const HUB: [&str; 3] = ["hub-llama", "hub-qwen2", "hub-llama2-sp"];
/// The two with an end-id list of two in generation_config.json.
const TWO_END_IDS: [&str; 2] = ["hub-llama", "hub-qwen2"];
const FLOAT_COLUMNS: [&str; 3] = ["eager", "portable", "xnnpack"];
const QUANTIZED_PROGRAMS: [&str; 2] = ["xnnpack-int8", "xnnpack-8da4w"];

#[derive(Deserialize)]
struct HubReference {
    source_dtype: String,
    computed_in: String,
    max_new_tokens: usize,
    eos_token_ids: Vec<i64>,
    sentences: Vec<Sentence>,
}

#[derive(Deserialize)]
struct Sentence {
    text: String,
    prompt_format: String,
    long: bool,
    ids: Vec<i64>,
    generated_ids: Vec<i64>,
    stopped_at: Option<i64>,
}

/// transformers' float32 ids for `models/checkpoints/<name>` (tests/python/hub_reference.py).
fn reference(name: &str) -> HubReference {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/checkpoints").join(name).join("hub_reference.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}; run `make test-models`", path.display()));
    let r: HubReference = serde_json::from_str(&text).unwrap();
    assert_eq!((r.source_dtype.as_str(), r.computed_in.as_str()), ("bfloat16", "float32"), "{name}: a bfloat16 checkpoint, computed in float32");
    r
}

fn format_of(s: &Sentence) -> PromptFormat {
    match s.prompt_format.as_str() {
        "chat" => PromptFormat::Chat,
        "raw" => PromptFormat::Raw,
        other => panic!("prompt_format {other}"),
    }
}

fn context(dir: &ModelDir, max_new_tokens: usize) -> GenerationContext {
    let ctx = TaskContext::for_model(dir, &dir.load_tokenizer().unwrap(), 5).unwrap().with_max_new_tokens(max_new_tokens);
    ctx.generation().unwrap().clone()
}

fn spec(dir: &ModelDir, name: &str) -> BackendSpec {
    backend::catalog(dir, &[]).unwrap().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{}: no backend {name}", dir.root().display()))
}

#[test]
fn the_export_with_its_defaults_writes_the_quantized_programs_the_dtypes_and_the_shards() {
    for name in HUB {
        let dir = model_dir(name);
        let m = dir.manifest();
        let raw: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.root().join("manifest.json")).unwrap()).unwrap();
        let command = raw["command"].as_str().unwrap_or_default();
        assert!(!command.contains("--programs") && !command.contains("--max-seq-len"), "{name}: exported with the defaults: {command}");
        assert!(raw.get("failed_checks").is_none_or(|f| f.as_array().is_some_and(|f| f.is_empty())), "{name}: {}", raw["failed_checks"]);
        // The default context, under the checkpoint's 4096 positions.
        assert_eq!(m.max_seq_len, 1024, "{name}");
        for program in FLOAT_COLUMNS.iter().skip(1).chain(&QUANTIZED_PROGRAMS) {
            let p = m.programs.iter().find(|p| p.name == *program).unwrap_or_else(|| panic!("{name}: the manifest lists no {program}"));
            assert_eq!(p.quantization.is_some(), QUANTIZED_PROGRAMS.contains(program), "{name}/{program}");
            assert!(dir.root().join(&p.file).is_file(), "{name}/{program}");
        }
        assert_eq!((m.source_dtype.as_deref(), m.compute_dtype.as_deref()), (Some("bfloat16"), Some("float32")), "{name}");
        // Eager reads the checkpoint's own shards through their index, not a rewritten copy.
        assert_eq!(m.eager.as_ref().unwrap().weights, "model.safetensors.index.json", "{name}");
        let files = dir.weight_files().unwrap();
        assert!(files.len() >= 3, "{name}: the index and at least two shards: {files:?}");
        assert!(!dir.root().join("model.safetensors").exists(), "{name}: no single-file copy beside the shards");
        let checkpoint = runlens::model::safetensors::Checkpoint::read(&files[0]).unwrap();
        assert!(checkpoint.tensors().all(|(_, info, _)| info.dtype == "BF16"), "{name}: the shards are the checkpoint's bfloat16 ones");
        assert_eq!(m.eos_token_ids(), reference(name).eos_token_ids, "{name}: the end ids of config.json and generation_config.json");
        assert!(dir.root().join("chat_template.jinja").is_file(), "{name}");
        // inspect describes the directory with the dtypes.
        let out = runlens(&["inspect", "--json", &model_path(name)]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!((&j["source_dtype"], &j["compute_dtype"]), (&"bfloat16".into(), &"float32".into()), "{j}");
        assert_eq!(j["weights"].as_array().unwrap().len(), files.len(), "{j}");
    }
    for name in TWO_END_IDS {
        assert_eq!(model_dir(name).manifest().eos_token_ids().len(), 2, "{name}: an end-id list of two");
    }
    // A checkpoint with only tokenizer.model: the export made tokenizer.json with
    // transformers' converter, and runlens tokenizes with it as transformers does.
    let sp = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/checkpoints/hub-llama2-sp");
    assert!(sp.join("tokenizer.model").is_file() && !sp.join("tokenizer.json").exists(), "the checkpoint has tokenizer.model only");
    let dir = model_dir("hub-llama2-sp");
    assert!(dir.tokenizer().unwrap().is_file(), "the export wrote tokenizer.json");
}

/// Every float column, one load each, every prompt of the reference: runlens makes
/// transformers' prompt ids (raw and chat), then its greedy ids, and stops where it stops.
#[test]
fn every_float_column_generates_transformers_float32_ids_and_stops_at_either_end_id() {
    for name in HUB {
        let dir = model_dir(name);
        let reference = reference(name);
        let ctx = context(&dir, reference.max_new_tokens);
        assert_eq!(ctx.options.eos_token_ids, reference.eos_token_ids, "{name}");
        for s in &reference.sentences {
            let prompter = dir.prompter(Some(format_of(s))).unwrap();
            assert_eq!(prompter.encode(&s.text).unwrap().ids, s.ids, "{name}: the {} prompt of {:?}", s.prompt_format, s.text);
        }
        assert!(reference.sentences.iter().any(|s| s.long && s.prompt_format == "chat" && s.ids.len() >= 300), "{name}: a long chat prompt");
        for column in FLOAT_COLUMNS {
            let spec = spec(&dir, column);
            let mut b = runlens::task::load_backend(&spec, &dir).unwrap_or_else(|e| panic!("{name}/{column}: {e:#}"));
            let mut stopped_at = Vec::new();
            for s in &reference.sentences {
                let g = generate(b.as_mut(), &ctx, &Encoded::from_ids(&s.ids), &mut |_| ControlFlow::Continue(()))
                    .unwrap_or_else(|e| panic!("{name}/{column} on {:?}: {e:#}", s.text));
                assert_eq!(g.ids, s.generated_ids, "{name}/{column} on the {} prompt {:?} ({} tokens)", s.prompt_format, s.text, s.ids.len());
                let stop = if s.stopped_at.is_some() { Stop::EndOfText } else { Stop::MaxNewTokens };
                assert_eq!(g.stop, stop, "{name}/{column} on {:?}", s.text);
                stopped_at.extend(s.stopped_at);
            }
            if TWO_END_IDS.contains(&name) {
                for id in &reference.eos_token_ids {
                    assert!(stopped_at.contains(id), "{name}/{column}: no prompt stops at the end id {id} (stopped at {stopped_at:?})");
                }
            }
        }
    }
}

/// The long chat prompt through `runlens run --json`, every column the directory has
/// (eager's quantized ones and the quantized programs included): each runs and writes
/// tokens; the float ones write transformers' float32 ids.
#[test]
fn a_chat_prompt_of_several_hundred_tokens_runs_in_every_column() {
    for name in TWO_END_IDS {
        let dir = model_dir(name);
        let reference = reference(name);
        let long = reference.sentences.iter().find(|s| s.long).expect("the long chat prompt");
        let all: Vec<String> = backend::catalog(&dir, &[]).unwrap().into_iter().map(|s| s.name).collect();
        for q in QUANTIZED_PROGRAMS {
            assert!(all.iter().any(|n| n == q), "{name}: no {q}");
        }
        let model = model_path(name);
        let out = runlens(&["--model", &model, "--threads", "1", "--prompt-format", "chat", "--backends", &all.join(","), "run", "--json", "--max-new-tokens", "8", &long.text]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["ids"], serde_json::json!(long.ids), "{name}: the chat prompt's ids");
        assert_eq!((&j["source_dtype"], &j["compute_dtype"]), (&"bfloat16".into(), &"float32".into()));
        let backends = j["backends"].as_array().unwrap();
        assert_eq!(backends.len(), all.len());
        for b in backends {
            let column = b["name"].as_str().unwrap();
            assert_eq!(b["ok"], true, "{name}/{column}: {b}");
            let ids = b["generated_ids"].as_array().unwrap();
            assert!(!ids.is_empty(), "{name}/{column}: no tokens");
            if FLOAT_COLUMNS.contains(&column) {
                let want = &long.generated_ids[..long.generated_ids.len().min(8)];
                assert_eq!(b["generated_ids"], serde_json::json!(want), "{name}/{column}");
            }
        }
    }
}
