//! llama.cpp's columns (issue 35), on the GGUF files the export writes beside
//! the programs (`make models`, `make test-models`): `llamacpp-f32.gguf` from
//! the checkpoint by llama.cpp's own converter, `llamacpp-q8_0.gguf` and
//! `llamacpp-q4_0.gguf` quantized from it by llama.cpp's quantizer.
//!
//! - the manifest lists the three in one column, and runlens' header reader
//!   agrees with it (weight type, vocabulary);
//! - float32 is the parity reference: its embedding against transformers'
//!   (MiniLM), its greedy ids against transformers' (tests/generation.rs runs
//!   every present float column, this one included, id for id);
//! - Q8_0 and Q4_0 against float32 llama.cpp, bounded below by what random
//!   weights allow (the measured values are in the comments);
//! - a user's GGUF (`--program NAME=FILE.gguf`) joins as a column, and one
//!   that cannot run is refused with its reason, before llama.cpp loads it.
//!
//! Runs in the full and the lite build: llama.cpp needs no libtorch.

mod common;
use common::{cosine, model_dir, models, runlens};

use std::ops::ControlFlow;

use runlens::backend::{self, BackendSpec, Runtime};
use runlens::model::{Encoded, ModelDir, Reference};
use runlens::task::generation::{generate, parity};
use runlens::task::TaskContext;

const DECODERS: [&str; 4] = ["tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-qwen3"];
const FILES: [(&str, &str); 3] = [("llamacpp-f32", "f32"), ("llamacpp-q8_0", "q8_0"), ("llamacpp-q4_0", "q4_0")];

fn spec(dir: &ModelDir, name: &str) -> BackendSpec {
    backend::catalog(dir, &[]).unwrap().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{}: no backend {name}", dir.root().display()))
}

fn config_vocab(dir: &ModelDir) -> u64 {
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.config().unwrap()).unwrap()).unwrap();
    config["vocab_size"].as_u64().unwrap()
}

#[test]
fn the_manifest_lists_three_gguf_files_in_one_llama_cpp_column() {
    for dir in DECODERS.iter().map(|m| model_dir(m)).chain([models()]) {
        for (name, weights) in FILES {
            let s = spec(&dir, name);
            assert_eq!(s.runtime(), Runtime::LlamaCpp, "{name}");
            assert_eq!(s.column, "llamacpp", "F5 cycles the three in one column");
            assert_eq!(s.is_quantized(), weights != "f32", "{name}");
            let file = s.gguf_file().unwrap();
            let header = runlens::gguf::read_path(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            assert_eq!(header.main_type().unwrap().name(), weights, "{}: the weights are {weights}", file.display());
            assert_eq!(header.vocab_size(), Some(config_vocab(&dir)), "{}: the vocabulary is the model's", file.display());
            header.check_runnable(Some(config_vocab(&dir))).unwrap();
            let entry = dir.manifest().programs.iter().find(|p| p.name == name).unwrap();
            assert_eq!((entry.runtime.as_deref(), entry.gguf_type.as_deref()), (Some("llama.cpp"), Some(weights)));
            assert!(dir.manifest().sha256.contains_key(&entry.file), "{name}: its sha256 is in the manifest");
        }
        // Smaller by what quantizing the 2-D weights must save.
        let size = |n: &str| std::fs::metadata(spec(&dir, n).gguf_file().unwrap()).unwrap().len() as f64;
        let (f32, q8, q4) = (size("llamacpp-f32"), size("llamacpp-q8_0"), size("llamacpp-q4_0"));
        assert!(q8 < 0.5 * f32 && q4 < q8, "{}: f32 {f32} q8_0 {q8} q4_0 {q4}", dir.root().display());
    }
}

/// MiniLM in llama.cpp: mean-pooled, L2-normalised, against transformers'
/// embedding of each reference sentence.
#[test]
fn minilm_embeddings_in_llama_cpp_match_transformers() {
    let dir = models();
    let reference = Reference::load(&dir.reference().unwrap()).unwrap();
    // (name, lowest cosine to transformers over the sentences): measured f32 0.999997,
    // q8_0 0.9979, q4_0 0.867 (pure Q4_0: every matrix, the token embedding too, at 4 bits).
    for (name, bound) in [("llamacpp-f32", 0.99999), ("llamacpp-q8_0", 0.995), ("llamacpp-q4_0", 0.85)] {
        let mut worst = f64::INFINITY;
        let mut b = runlens::task::load_backend(&spec(&dir, name), &dir).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        for s in &reference.sentences {
            let out = b.run(&Encoded::from_ids(&s.ids)).unwrap();
            assert_eq!(out.shape, [1, s.embedding.len()], "{name}");
            let norm: f32 = out.data.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{name}: L2-normalised, norm {norm}");
            worst = worst.min(cosine(&out.data, &s.embedding));
        }
        eprintln!("MiniLM {name}: lowest cosine to transformers {worst:.6} over {} sentences", reference.sentences.len());
        assert!(worst >= bound, "{name}: lowest cosine {worst} to transformers, bound {bound}");
    }
}

/// Q8_0 and Q4_0 against float32 llama.cpp on each reference prompt: the
/// first step's logits (cosine) and the greedy tokens teacher-forced on
/// float32's (top-1 agreement). Random weights of std 0.2 quantize worse than
/// trained ones (docs/quantization.md); the bounds sit under what was measured.
#[test]
fn quantized_ggufs_stay_within_bounds_of_float32() {
    // (model, file, lowest first-logits cosine, lowest top-1 agreement); measured in the comments.
    const BOUNDS: [(&str, &str, f64, f64); 8] = [
        ("tiny-gpt2", "llamacpp-q8_0", 0.995, 0.8),  // 0.9996, 46/48
        ("tiny-gpt2", "llamacpp-q4_0", 0.9, 0.5),    // 0.9548, 34/48
        ("tiny-llama", "llamacpp-q8_0", 0.99, 0.75), // 0.9986, 33/36
        ("tiny-llama", "llamacpp-q4_0", 0.6, 0.15),  // 0.7475, 10/36
        ("tiny-qwen2", "llamacpp-q8_0", 0.99, 0.75), // 0.9989, 44/48
        ("tiny-qwen2", "llamacpp-q4_0", 0.6, 0.15),  // 0.7827, 13/48
        ("tiny-qwen3", "llamacpp-q8_0", 0.99, 0.8),  // 0.9988, 46/48
        ("tiny-qwen3", "llamacpp-q4_0", 0.75, 0.4),  // 0.8826, 28/48
    ];
    for model in DECODERS {
        let dir = model_dir(model);
        let reference = Reference::load(&dir.reference().unwrap()).unwrap();
        let ctx = TaskContext::for_model(&dir, &dir.load_tokenizer().unwrap(), 5).unwrap().with_max_new_tokens(16);
        let ctx = ctx.generation().unwrap().clone();
        let mut float = runlens::task::load_backend(&spec(&dir, "llamacpp-f32"), &dir).unwrap();
        let prompts: Vec<&[i64]> = reference.sentences.iter().take(3).map(|s| s.ids.as_slice()).collect();
        let floats: Vec<_> = prompts.iter().map(|p| generate(float.as_mut(), &ctx, &Encoded::from_ids(p), &mut |_| ControlFlow::Continue(())).unwrap()).collect();
        for (name, min_cos, min_top1) in BOUNDS.iter().filter(|b| b.0 == model).map(|b| (b.1, b.2, b.3)) {
            let mut q = runlens::task::load_backend(&spec(&dir, name), &dir).unwrap();
            let (mut worst_cos, mut agreed, mut positions) = (f64::INFINITY, 0, 0);
            for (p, f) in prompts.iter().zip(&floats) {
                let g = generate(q.as_mut(), &ctx, &Encoded::from_ids(p), &mut |_| ControlFlow::Continue(())).unwrap();
                worst_cos = worst_cos.min(cosine(&g.first_logits, &f.first_logits));
                let a = parity::top1_agreement_of(q.as_mut(), name, p, &g.ids, &f.ids).unwrap();
                agreed += a.agreed;
                positions += a.positions;
            }
            let top1 = agreed as f64 / positions as f64;
            eprintln!("{model}/{name}: first-logits cosine min {worst_cos:.4}, top-1 {agreed}/{positions}");
            assert!(worst_cos >= min_cos, "{model}/{name}: cosine {worst_cos} < {min_cos}");
            assert!(top1 >= min_top1, "{model}/{name}: top-1 {top1} < {min_top1}");
            assert!(worst_cos < 0.999_999 || name.ends_with("q8_0"), "{model}/{name}: 4-bit weights moved nothing: not quantized?");
        }
    }
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A user's GGUF joins as a column of its own; GGUFs that cannot run are
/// refused with the reason, by runlens' reader, before llama.cpp loads them.
#[test]
fn a_users_gguf_joins_and_one_that_cannot_run_is_refused_with_its_reason() {
    let llama = model_dir("tiny-llama");
    let f32 = spec(&llama, "llamacpp-f32").gguf_file().unwrap().to_path_buf();
    let tmp = tempfile::tempdir().unwrap();
    let mine = tmp.path().join("mine.gguf");
    std::fs::copy(&f32, &mine).unwrap();
    let root = llama.root().to_str().unwrap().to_string();
    let program = format!("mine={}", mine.display());
    let out = runlens(&["--model", &root, "--threads", "1", "--program", &program, "--backends", "llamacpp-f32,mine", "run", "--json", "--max-new-tokens", "4", "Hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mine_row = json["backends"].as_array().unwrap().iter().find(|b| b["name"] == "mine").unwrap_or_else(|| panic!("{json}"));
    assert_eq!(mine_row["parity"]["same_ids"], true, "the same file as llamacpp-f32: {mine_row}");

    let refused = |file: &std::path::Path, model: &str, needle: &str| {
        let program = format!("x={}", file.display());
        let out = runlens(&["--model", model, "--threads", "1", "--program", &program, "--backends", "x", "run", "--json", "--max-new-tokens", "2", "Hello [MASK] world"]);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert_eq!(out.status.code(), Some(1), "{}: {all}", file.display());
        assert!(all.contains(needle), "{}: expected {needle:?} in {all}", file.display());
    };
    // Truncated inside its tensor data.
    let bytes = std::fs::read(&f32).unwrap();
    let cut = tmp.path().join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() - 1000]).unwrap();
    refused(&cut, &root, "bytes are missing");
    // Another model's vocabulary.
    let qwen = model_dir("tiny-qwen2");
    if config_vocab(&qwen) != config_vocab(&llama) {
        refused(spec(&qwen, "llamacpp-f32").gguf_file().unwrap(), &root, "vocabulary");
    }
    // An encoder in a text-generation directory, a decoder where fill-mask is asked.
    refused(spec(&models(), "llamacpp-f32").gguf_file().unwrap(), &root, "architecture bert");
    let mlm = model_dir("tiny-bert-mlm");
    refused(&f32, mlm.root().to_str().unwrap(), "no fill-mask head");
    // Not a GGUF at all, named .gguf.
    let junk = tmp.path().join("junk.gguf");
    std::fs::write(&junk, b"not a gguf file, just text").unwrap();
    refused(&junk, &root, "GGUF");
}

/// Two llama.cpp columns loading at once, each with its own thread count: each
/// context keeps the count its load was given (a count kept for the process
/// and read by each load would give both whichever was set last), and runs.
#[test]
fn columns_loading_at_once_each_keep_their_own_thread_count() {
    use runlens::backend::llamacpp::LlamaCppBackend;
    use runlens::backend::OutputKind;
    let dir = model_dir("tiny-llama");
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let loads: Vec<_> = [("llamacpp-q8_0", 1), ("llamacpp-q4_0", 2)]
        .into_iter()
        .map(|(name, threads)| {
            let (dir, barrier, spec) = (dir.clone(), barrier.clone(), spec(&dir, name));
            std::thread::spawn(move || {
                barrier.wait();
                let mut column = LlamaCppBackend::load(&spec, spec.gguf_file().unwrap(), &dir, OutputKind::NextToken, threads).unwrap();
                let described = runlens::backend::Backend::describe(&column);
                let logits = runlens::backend::Backend::run(&mut column, &Encoded::from_ids(&[1, 2, 3])).unwrap();
                (name, threads, column.threads(), described, logits.data.iter().all(|v| v.is_finite()))
            })
        })
        .collect();
    for load in loads {
        let (name, asked, kept, described, finite) = load.join().unwrap();
        assert_eq!(kept, asked, "{name}: {described}");
        assert!(described.ends_with(&format!(", {asked} threads")), "{name}: {described}");
        assert!(finite, "{name}: its logits");
    }
}
