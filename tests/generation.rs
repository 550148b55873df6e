//! text-generation on the tiny random-weight GPT-2 (`make test-models`:
//! `models/tiny-gpt2`, L = 64, and the course-style programs of
//! `models/course-gpt2`): the greedy ids of every backend (eager with its KV
//! cache, the KV-cache programs, the no-cache windows, the course's windows
//! given with `--program`) against transformers' `generate(do_sample=False)`
//! in `reference.json`, id for id; the stopping rules on real backends; and
//! `runlens run` as a user calls it.
//!
//! The weights are random: the text is gibberish (often bytes that are no
//! UTF-8 alone), which is what exercises the streaming detokenizer.
//!
//! Needs the full build (eager is one of the backends checked) and `make
//! test-models`, like tests/tasks.rs.
#![cfg(feature = "eager")]

mod common;
use common::model_dir;

use std::ops::ControlFlow;
use std::process::{Command, Output};

use runlens::backend::{self, Backend, BackendSpec};
use runlens::task::generation::{GenerateOptions, Generation, Stop, TokenStep};
use runlens::model::{Encoded, ModelDir, Reference};
use runlens::task::generation::{generate, GenerationContext};
use runlens::task::TaskContext;

const TINY: &str = "tiny-gpt2";

fn context(dir: &ModelDir, max_new_tokens: usize) -> GenerationContext {
    let ctx = TaskContext::for_model(dir, &dir.load_tokenizer().unwrap(), 5).unwrap().with_max_new_tokens(max_new_tokens);
    ctx.generation().unwrap().clone()
}

fn present(dir: &ModelDir) -> Vec<BackendSpec> {
    backend::catalog(dir, &[]).unwrap().into_iter().filter(|s| backend::files_present(s, dir).is_ok()).collect()
}

/// Generate, collecting the streamed pieces.
fn generate_streamed(b: &mut dyn Backend, ctx: &GenerationContext, ids: &[i64]) -> anyhow::Result<(Generation, Vec<TokenStep>)> {
    let mut steps = Vec::new();
    let g = generate(b, ctx, &Encoded::from_ids(ids), &mut |s| {
        steps.push(s.clone());
        ControlFlow::Continue(())
    })?;
    Ok((g, steps))
}

#[test]
fn every_backend_generates_transformers_greedy_ids() {
    let dir = model_dir(TINY);
    let reference = Reference::load(&dir.reference().unwrap()).unwrap();
    assert!(reference.sentences.iter().any(|s| s.ids.len() >= 24), "a prompt of at least 24 tokens");
    assert!(reference.sentences.iter().all(|s| s.generated_ids.len() >= 16), "at least 16 new tokens compared per prompt");
    greedy_ids_match(TINY);
}

/// The Llama family (`make test-models`: tiny random Llama with grouped-query
/// attention and llama3 rope scaling, Qwen2 with biases, Qwen3 with q/k norms,
/// a Llama with a SentencePiece tokenizer): every backend, eager included,
/// continues each prompt with transformers' greedy ids, and stops at any of
/// the manifest's end-of-text ids (tiny-llama has three, and stops at two of them).
#[test]
fn every_backend_of_every_llama_family_decoder_generates_transformers_greedy_ids() {
    for name in ["tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-llama2-sp"] {
        // Each prompt raw and through the chat template (the default for these
        // instruct-style checkpoints): runlens makes the same chat ids as
        // transformers, and greedy_ids_match generates from both.
        let dir = model_dir(name);
        let reference = Reference::load(&dir.reference().unwrap()).unwrap();
        let chat: Vec<_> = reference.sentences.iter().filter(|s| s.prompt_format.as_deref() == Some("chat")).collect();
        assert!(chat.len() >= 2, "{name}: at least two chat-formatted prompts in reference.json, found {}", chat.len());
        let prompter = dir.prompter(Some(runlens::model::PromptFormat::Chat)).unwrap();
        for s in &chat {
            assert_eq!(prompter.encode(&s.text).unwrap().ids, s.ids, "{name}: the chat prompt of {:?}", s.text);
            assert!(s.generated_ids.len() >= 16, "{name}: 16 new tokens or more from the chat prompt of {:?}", s.text);
        }
        greedy_ids_match(name);
    }
    let dir = model_dir("tiny-llama");
    let eos = dir.manifest().eos_token_ids();
    assert!(eos.len() >= 2, "tiny-llama stops at several ids: {eos:?}");
    let reference = Reference::load(&dir.reference().unwrap()).unwrap();
    let stopped_at: Vec<i64> = reference.sentences.iter().filter_map(|s| s.generated_ids.last().copied()).filter(|id| eos.contains(id)).collect();
    assert!(stopped_at.iter().any(|id| *id != eos[0]), "a prompt stops at an end-of-text id other than the first: {stopped_at:?} of {eos:?}");
}

fn greedy_ids_match(name: &str) {
    let dir = model_dir(name);
    let reference = Reference::load(&dir.reference().unwrap()).unwrap();
    let max_new = reference.max_new_tokens.expect("reference.json of text-generation has max_new_tokens");
    assert!(max_new >= 16 && reference.sentences.len() >= 2);
    assert!(reference.sentences.iter().any(|s| s.generated_ids.len() >= 16), "{name}: at least one prompt with 16 new tokens");
    let ctx = context(&dir, max_new);
    let specs = present(&dir);
    for must in ["eager", "portable", "portable-nocache", "xnnpack", "xnnpack-nocache", "xnnpack-kvin", "llamacpp-f32", "onnx"] {
        assert!(specs.iter().any(|s| s.name == must), "{name} has no {must}");
    }
    // Quantized backends compute other numbers on purpose: tests/quantized_generation.rs
    // and tests/eager_quantized.rs check them.
    for spec in specs.iter().filter(|s| !s.is_quantized()) {
        // One load per backend: the prompts run one after another on it (a
        // KV-cache program starts each at position 0 over the last one's cache).
        let mut b = runlens::task::load_backend(spec, &dir).unwrap_or_else(|e| panic!("{spec}: {e:#}"));
        assert!(b.as_decoder().is_some(), "{spec} is a decoder");
        for sentence in reference.sentences.iter().chain(reference.sentences.first()) {
            let (g, steps) = generate_streamed(b.as_mut(), &ctx, &sentence.ids).unwrap_or_else(|e| panic!("{spec} on {:?}: {e:#}", sentence.text));
            assert_eq!(g.ids, sentence.generated_ids, "{name}/{spec} on {:?}", sentence.text);
            assert_eq!(g.text, sentence.generated_text, "{name}/{spec} on {:?}: the text of the ids", sentence.text);
            let streamed: String = steps.iter().map(|s| s.text.as_str()).collect();
            // What is still held at the end: an unfinished character (at most 3 bytes), or
            // with byte-fallback pieces the last run of them (a few U+FFFD or one character).
            let held = g.text.strip_prefix(streamed.as_str()).unwrap_or_else(|| panic!("{spec}: streamed {streamed:?} vs {:?}", g.text));
            assert!(held.len() <= 3 || (held.chars().count() <= 8 && held.chars().all(|c| c == '\u{FFFD}')), "{spec}: held {held:?}");
            assert_eq!(steps.len(), g.ids.len());
            assert_eq!(g.token_latencies.len(), g.ids.len());
            assert_eq!(g.ttft, g.token_latencies[0]);
            let expected_stop = if ctx.options.eos_token_ids.contains(g.ids.last().unwrap()) { Stop::EndOfText } else { Stop::MaxNewTokens };
            assert_eq!(g.stop, expected_stop, "{spec}");
        }
    }
}

#[derive(serde::Deserialize)]
struct Course {
    max_new_tokens: usize,
    programs: Vec<CourseProgram>,
    sentences: Vec<CourseSentence>,
}

#[derive(serde::Deserialize)]
struct CourseProgram {
    name: String,
    file: String,
    drivable: bool,
}

#[derive(serde::Deserialize)]
struct CourseSentence {
    text: String,
    ids: Vec<i64>,
    generated_ids: Vec<i64>,
}

fn course() -> (std::path::PathBuf, Course) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/course-gpt2");
    let text = std::fs::read_to_string(root.join("programs.json")).unwrap_or_else(|e| panic!("{}: {e}; run `make test-models`", root.display()));
    (root, serde_json::from_str(&text).unwrap())
}

/// The course's way: a left-padded window of 32, `[1, V]` (XNNPACK) and per position `[1, 32, V]`.
#[test]
fn course_window_programs_given_with_program_generate_the_reference_ids() {
    let dir = model_dir(TINY);
    let (root, course) = course();
    assert!(course.max_new_tokens >= 16);
    let ctx = context(&dir, course.max_new_tokens);
    let drivable: Vec<&CourseProgram> = course.programs.iter().filter(|p| p.drivable).collect();
    assert!(drivable.len() >= 2, "window.pte and window-per-position.pte");
    for p in drivable {
        let spec = BackendSpec::program(&p.name, &root.join(&p.file));
        let mut b = runlens::task::load_backend(&spec, &dir).unwrap_or_else(|e| panic!("{}: {e:#}", p.name));
        assert!(b.describe().contains("left-padded"), "{}", b.describe());
        for sentence in &course.sentences {
            let (g, _) = generate_streamed(b.as_mut(), &ctx, &sentence.ids).unwrap_or_else(|e| panic!("{}: {e:#}", p.name));
            assert_eq!(g.ids, sentence.generated_ids, "{} on {:?}", p.name, sentence.text);
        }
    }
}

#[test]
fn generation_stops_at_the_maximum_length_and_at_the_end_of_text_id() {
    let dir = model_dir(TINY);
    let l = dir.max_seq_len();
    for spec in present(&dir) {
        // A quantized program continues as its quantized model does (its own reference file).
        let file = dir.manifest().programs.iter().find(|p| p.name == spec.name).and_then(|p| p.reference.clone());
        let own_reference = file.is_some();
        let reference = Reference::load(&file.map_or_else(|| dir.reference().unwrap(), |f| dir.root().join(f))).unwrap();
        let long = reference.sentences.iter().max_by_key(|s| s.ids.len()).unwrap();
        let mut b = runlens::task::load_backend(&spec, &dir).unwrap();
        // Past the reference's 24 tokens to the 64 every program holds: the cache and the windows fill up.
        let (g, _) = generate_streamed(b.as_mut(), &context(&dir, 1000), &long.ids).unwrap_or_else(|e| panic!("{spec}: {e:#}"));
        assert_eq!((g.stop, g.prompt_len + g.ids.len()), (Stop::MaxLength, l), "{spec}");
        if spec.is_quantized() && !own_reference {
            // No reference file of its own (eager's: tests/eager_quantized.rs computes one;
            // llama.cpp's Q8_0 and Q4_0: tests/llamacpp.rs bounds them): the length only.
            continue;
        }
        assert_eq!(&g.ids[..long.generated_ids.len()], &long.generated_ids[..], "{spec}");
        // The end-of-text id stops it and is kept (here an id the model does write: from its
        // third on, the first it has not written before).
        let first = &reference.sentences[0];
        let ids = &first.generated_ids;
        let k = (2..ids.len()).find(|&k| !ids[..k].contains(&ids[k])).expect("a new id from the third on");
        let mut ctx = context(&dir, 1000);
        ctx.options = GenerateOptions { max_new_tokens: 1000, eos_token_ids: vec![ids[k]] };
        let (g, _) = generate_streamed(b.as_mut(), &ctx, &first.ids).unwrap();
        assert_eq!((g.ids.as_slice(), g.stop), (&ids[..=k], Stop::EndOfText), "{spec}");
    }
}

#[test]
fn a_break_cancels_within_one_token_and_the_next_prompt_starts_clean() {
    let dir = model_dir(TINY);
    let reference = Reference::load(&dir.reference().unwrap()).unwrap();
    let ctx = context(&dir, 24);
    for name in ["xnnpack", "portable-nocache"] {
        let spec = present(&dir).into_iter().find(|s| s.name == name).unwrap();
        let mut b = runlens::task::load_backend(&spec, &dir).unwrap();
        let s = &reference.sentences[1];
        let mut seen = 0;
        let g = generate(b.as_mut(), &ctx, &Encoded::from_ids(&s.ids), &mut |step| {
            seen += 1;
            if step.index == 3 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
        assert_eq!((g.stop, g.ids.as_slice(), seen), (Stop::Cancelled, &s.generated_ids[..4], 4), "{name}");
        let next = &reference.sentences[0];
        let (g, _) = generate_streamed(b.as_mut(), &ctx, &next.ids).unwrap();
        assert_eq!(g.ids, next.generated_ids, "{name}: a cancelled generation leaves no trace");
    }
}

#[test]
fn prompts_that_cannot_be_generated_from_are_clear_errors() {
    let dir = model_dir(TINY);
    let ctx = context(&dir, 8);
    for spec in present(&dir) {
        let mut b = runlens::task::load_backend(&spec, &dir).unwrap();
        let err = generate(b.as_mut(), &ctx, &Encoded::from_ids(&[]), &mut |_| ControlFlow::Continue(())).unwrap_err();
        assert!(err.to_string().contains("prompt is empty"), "{spec}: {err}");
        let err = generate(b.as_mut(), &ctx, &Encoded::from_ids(&[5; 64]), &mut |_| ControlFlow::Continue(())).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("64 tokens") && message.contains("at most 64") && message.contains("at most 63"), "{spec}: {message}");
        // The backend is still usable.
        assert!(generate(b.as_mut(), &ctx, &Encoded::from_ids(&[5; 63]), &mut |_| ControlFlow::Continue(())).is_ok());
    }
}

fn runlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runlens")).args(args).output().expect("runlens starts")
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn run_json_reports_ids_text_speed_stop_and_parity_per_backend() {
    let dir = model_dir(TINY);
    let reference = Reference::load(&dir.reference().unwrap()).unwrap();
    let s = &reference.sentences[0];
    let (root, _) = course();
    let window = format!("course={}", root.join("window.pte").display());
    let model = dir.root().display().to_string();
    let out = runlens(&["--model", &model, "--threads", "1", "--program", &window, "run", "--json", "--max-new-tokens", "16", &s.text]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j = json(&out);
    assert_eq!(j["task"], "text-generation");
    assert_eq!(j["ids"], serde_json::json!(s.ids));
    let backends = j["backends"].as_array().unwrap();
    let names: Vec<&str> = backends.iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["eager", "portable", "xnnpack", "xnnpack-nocache", "llamacpp-f32", "onnx", "course"], "the first program of each column, then --program");
    for b in backends {
        assert_eq!(b["ok"], true, "{b}");
        assert_eq!(b["generated_ids"], serde_json::json!(s.generated_ids[..16]), "{}", b["name"]);
        assert_eq!(b["stop"], "max-new-tokens");
        assert!(b["ttft_ms"].as_f64().unwrap() > 0.0);
        assert!(b["decode_tokens_per_s"].as_f64().unwrap() > 0.0);
        let token_ms = b["token_ms"].as_array().unwrap();
        assert_eq!(token_ms.len(), 16);
        assert_eq!(token_ms[0].as_f64(), b["ttft_ms"].as_f64());
        assert!(b["generated_text"].is_string());
        if b["name"] == j["reference"] {
            assert!(b["parity"].is_null());
        } else {
            let p = &b["parity"];
            assert_eq!((&p["same_ids"], &p["first_divergence"]), (&serde_json::json!(true), &serde_json::Value::Null), "{}", b["name"]);
            // Float32 all: the first step's logits as eager's, and every teacher-forced position agreeing.
            assert!(p["first_logits_cosine"].as_f64().unwrap() >= 0.9999, "{}: {p}", b["name"]);
            assert_eq!((p["top1_agreement"].as_f64(), p["top1_positions"].as_u64()), (Some(1.0), Some(16)), "{}: {p}", b["name"]);
            assert!(b["max_abs_diff_vs_reference"].is_null(), "ids are compared, not values");
        }
    }

    // A prompt longer than the window: each backend says so, none panics.
    let long = "the quick brown fox jumps over the lazy dog ".repeat(12);
    let out = runlens(&["--model", &model, "--threads", "1", "--backends", "portable,xnnpack-nocache", "run", "--json", &long]);
    assert_eq!(out.status.code(), Some(1));
    for b in json(&out)["backends"].as_array().unwrap() {
        let error = b["error"].as_str().unwrap();
        assert!(error.contains("at most 64") && error.contains("shorten the prompt"), "{error}");
    }
}

#[test]
fn run_streams_the_continuation_for_people() {
    let dir = model_dir(TINY);
    let model = dir.root().display().to_string();
    let out = runlens(&["--model", &model, "--threads", "1", "--backends", "xnnpack", "run", "--max-new-tokens", "5", "The quick brown fox"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("prompt: The quick brown fox") && text.contains("TTFT") && text.contains("tokens/s"), "{text}");
    assert!(text.contains("5 tokens, stopped at max-new-tokens"), "{text}");
    assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "no control characters reach the terminal: {text:?}");
    let out = runlens(&["--model", &model, "run", "  "]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty"));
}
