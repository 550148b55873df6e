//! The two ExecuTorch paths and the tokenizer against Python (`reference.json`),
//! all three backends in one process, and `runlens run` on bad input.
//!
//! Needs the model files: `make models`.

mod common;
use common::{embedding, load, models, models_root};
use std::process::{Command, Output};

#[cfg(feature = "eager")]
use runlens::backend;
use runlens::backend::Backend;
use runlens::model::{Encoded, Reference, MAX_SEQ_LEN};


fn reference() -> Reference {
    let path = models().reference().unwrap_or_else(|missing| panic!("{missing}"));
    let reference = Reference::load(&path).unwrap();
    assert!(reference.sentences.len() >= 20, "reference.json has too few sentences");
    reference
}

fn input(ids: &[i64]) -> Encoded {
    Encoded { text: String::new(), tokens: Vec::new(), ids: ids.to_vec(), attention_mask: vec![1; ids.len()], truncated: false }
}

/// Every reference sentence through `backend`, within the bounds.
fn assert_matches_reference(backend: &mut dyn Backend, reference: &Reference, min_cosine: f64, max_diff: f64) {
    for sentence in &reference.sentences {
        let out = embedding(backend.run(&input(&sentence.ids)).unwrap_or_else(|e| panic!("{}: {e:#}", backend.describe())));
        let parity = out.parity(&sentence.embedding()).expect("same dimension as the reference");
        assert!(
            parity.cosine >= min_cosine && parity.max_abs_diff <= max_diff,
            "{} on {:?}: cosine {} max|diff| {}",
            backend.describe(),
            sentence.text,
            parity.cosine,
            parity.max_abs_diff
        );
    }
}

#[test]
fn rust_token_ids_equal_python_ids() {
    let tokenizer = models().load_tokenizer().unwrap();
    for sentence in &reference().sentences {
        let enc = tokenizer.encode(&sentence.text).unwrap();
        assert_eq!(enc.ids, sentence.ids, "ids differ for {:?}", sentence.text);
        assert_eq!(enc.tokens.len(), enc.ids.len());
        assert!(!enc.truncated);
    }
}

#[test]
fn long_text_is_truncated_and_says_so() {
    let tokenizer = models().load_tokenizer().unwrap();
    let enc = tokenizer.encode(&"word ".repeat(500)).unwrap();
    assert!(enc.truncated);
    assert_eq!(enc.len(), MAX_SEQ_LEN);
    assert_eq!(enc.tokens.first().map(String::as_str), Some("[CLS]"));
    assert_eq!(enc.tokens.last().map(String::as_str), Some("[SEP]"));
    assert!(tokenizer.encode("  \n ").is_err());
}

#[test]
fn executorch_paths_match_python_for_every_sentence() {
    let reference = reference();
    for name in ["xnnpack", "portable"] {
        let mut backend = load(name);
        assert_matches_reference(backend.as_mut(), &reference, 0.99999, 1e-4);
    }
}

/// The int8 variant is an approximation: compared with Python's eager output by
/// cosine, it must stay above 0.98 on every sentence (about 0.999 is typical).
#[test]
fn int8_variant_stays_close_to_eager() {
    let reference = reference();
    let mut backend = load("xnnpack-int8");
    let mut cosines = Vec::new();
    for sentence in &reference.sentences {
        let out = embedding(backend.run(&input(&sentence.ids)).unwrap());
        let p = out.parity(&sentence.embedding()).unwrap();
        assert!(p.cosine >= 0.98, "xnnpack-int8 on {:?}: cosine {}", sentence.text, p.cosine);
        cosines.push(p.cosine);
    }
    cosines.sort_by(f64::total_cmp);
    // Quantization must have changed something: an exact match would mean the float program ran.
    assert!(cosines[cosines.len() - 1] < 0.999999, "int8 output equals the float output: is the program quantized?");
    println!("xnnpack-int8 vs Python eager: min cosine {:.5}, median {:.5}", cosines[0], cosines[cosines.len() / 2]);
}

/// The fixed-length variant pads to 128 tokens and masks the padding: it must
/// match Python like the dynamic program does, for short inputs and at exactly 128.
#[test]
fn static_variant_matches_python_and_the_dynamic_program() {
    let reference = reference();
    let mut fixed = load("xnnpack-static");
    assert_matches_reference(fixed.as_mut(), &reference, 0.99999, 1e-4);

    let mut dynamic = load("xnnpack");
    let tokenizer = models().load_tokenizer().unwrap();
    let full = tokenizer.encode(&"padding must not change the meaning ".repeat(40)).unwrap();
    assert_eq!(full.len(), MAX_SEQ_LEN);
    let p = embedding(fixed.run(&full).unwrap()).parity(&embedding(dynamic.run(&full).unwrap())).unwrap();
    assert!(p.cosine >= 0.99999 && p.max_abs_diff <= 1e-4, "at {MAX_SEQ_LEN} tokens: {p:?}");

    // Longer than the program's fixed length: an error naming the file, never a cut.
    let err = format!("{:#}", fixed.run(&input(&vec![1000; MAX_SEQ_LEN + 1])).unwrap_err());
    assert!(err.contains("xnnpack-static.pte") && err.contains("exactly 128"), "{err}");
}

/// libtorch and ExecuTorch's XNNPACK both export pthreadpool_*: prove that all
/// three paths live in one process and still agree with Python.
#[cfg(feature = "eager")]
#[test]
fn all_three_backends_in_one_process() {
    let reference = reference();
    backend::set_threads(2).unwrap();
    let mut loaded: Vec<Box<dyn Backend>> = ["eager", "portable", "xnnpack"].into_iter().map(load).collect();
    let short: Vec<_> = reference.sentences.iter().filter(|s| s.ids.len() <= 24).take(6).collect();
    assert!(short.len() >= 3);
    for _round in 0..2 {
        for backend in loaded.iter_mut() {
            for sentence in &short {
                let out = embedding(backend.run(&input(&sentence.ids)).unwrap());
                let p = out.parity(&sentence.embedding()).unwrap();
                assert!(p.cosine >= 0.99999 && p.max_abs_diff <= 1e-4, "{}: {:?} {p:?}", backend.describe(), sentence.text);
            }
        }
    }
    assert_eq!(backend::threads(), (2, 2));
}

/// ExecuTorch's BLAS calls (sgemm_ from bmm) land in libtorch's MKL in this
/// process; each forward runs them with one OpenMP thread. The caller's OpenMP
/// setting must come back unchanged, or eager on the same thread (as in
/// `runlens run`) would silently lose its threads.
#[cfg(feature = "eager")]
#[test]
fn a_forward_leaves_the_callers_openmp_threads_as_they_were() {
    std::thread::spawn(|| {
        backend::set_threads(2).unwrap();
        assert_eq!(runlens::ffi::openmp_threads(), Some(2), "libtorch brings OpenMP; set_threads sets it for this thread");
        let mut portable = load("portable");
        portable.run(&input(&[101, 7592, 2088, 102])).unwrap();
        assert_eq!(runlens::ffi::openmp_threads(), Some(2), "the forward must restore the caller's OpenMP threads");
    })
    .join()
    .unwrap();
}

#[test]
fn wrong_input_shape_is_an_error() {
    let mut xnnpack = load("xnnpack");
    let mut bad = input(&[101, 7592, 102]);
    bad.attention_mask.pop();
    let err = xnnpack.run(&bad).unwrap_err().to_string();
    assert!(err.contains("attention_mask"), "{err}");
    assert!(err.contains("input_ids has 3 values and attention_mask 2"), "the message says what is wrong with the shapes: {err}");
    // Longer than the exported maximum: refused before ExecuTorch sees it.
    let err = xnnpack.run(&input(&vec![1000; MAX_SEQ_LEN + 10])).unwrap_err().to_string();
    assert!(err.contains("xnnpack.pte"), "{err}");
    let too_long = format!("takes at most {MAX_SEQ_LEN} tokens and this input has {}", MAX_SEQ_LEN + 10);
    assert!(err.contains(&too_long), "the message names the limit and the length: {err}");
}

// ---- the binary, on bad input ----

fn runlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runlens")).args(args).output().expect("runlens starts")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A models directory whose `xnnpack.pte` is `bytes` and whose other files link to the real ones.
fn models_with_xnnpack(bytes: &[u8]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let real = models();
    for name in ["manifest.json", "tokenizer.json", "config.json", "model.safetensors", "portable.pte"] {
        std::os::unix::fs::symlink(real.require(name).unwrap(), tmp.path().join(name)).unwrap();
    }
    std::fs::write(tmp.path().join("xnnpack.pte"), bytes).unwrap();
    tmp
}

fn assert_clean_failure(out: &Output, what: &str) {
    // A signal (abort, segfault) leaves no exit code.
    assert_eq!(out.status.code(), Some(1), "{what}: {:?}, stderr: {}", out.status, stderr(out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e})"));
    let backends = json["backends"].as_array().unwrap();
    let xnnpack = backends.iter().find(|b| b["name"] == "xnnpack").unwrap();
    assert_eq!(xnnpack["ok"], false, "{what}");
    let error = xnnpack["error"].as_str().unwrap();
    assert!(error.contains("xnnpack.pte"), "{what}: error does not name the file: {error}");
    assert!(!stderr(out).contains("panicked"), "{what}: {}", stderr(out));
}

#[test]
fn corrupt_pte_files_are_errors_naming_the_file() {
    let real = std::fs::read(models().require("xnnpack.pte").unwrap()).unwrap();
    for (what, bytes) in common::corrupted_copies(&real) {
        let dir = models_with_xnnpack(&bytes);
        let out = runlens(&["run", "--json", "--backends", "xnnpack", "--models", dir.path().to_str().unwrap(), "Hello there"]);
        assert_clean_failure(&out, what);
    }
}

#[test]
fn missing_models_exit_2_naming_the_file_and_the_command() {
    let empty = tempfile::tempdir().unwrap();
    let out = runlens(&["run", "--models", empty.path().to_str().unwrap(), "hello"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("manifest.json") && err.contains("make models") && err.contains("export.py"), "{err}");

    let partial = models_with_xnnpack(b"");
    std::fs::remove_file(partial.path().join("portable.pte")).unwrap();
    let out = runlens(&["run", "--backends", "portable", "--models", partial.path().to_str().unwrap(), "hello"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("portable.pte"), "{}", stderr(&out));
}

#[test]
fn unknown_backend_is_a_usage_error_listing_valid_names() {
    let out = runlens(&["run", "--backends", "portable,tflite", "hello"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    // The names the manifest gives (eager first, in the full build).
    assert!(err.contains("tflite") && err.contains("portable, xnnpack, xnnpack-int8, xnnpack-static"), "{err}");
}

#[test]
fn empty_text_is_a_clear_error() {
    let root = models_root();
    let out = runlens(&["run", "--models", root.to_str().unwrap(), "   "]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("empty"), "{}", stderr(&out));
}

#[cfg(feature = "eager")]
#[test]
fn run_json_is_one_object_with_parity_against_eager() {
    let root = models_root();
    let long = "many words ".repeat(200);
    let out = runlens(&["run", "--json", "--threads", "2", "--models", root.to_str().unwrap(), &long]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("exactly one JSON object on stdout");
    assert_eq!(json["truncated"], true);
    assert_eq!(json["ids"].as_array().unwrap().len(), MAX_SEQ_LEN);
    assert_eq!(json["tokens"].as_array().unwrap().len(), MAX_SEQ_LEN);
    assert_eq!(json["reference"], "eager");
    let backends = json["backends"].as_array().unwrap();
    let names: Vec<&str> = backends.iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["eager", "portable", "xnnpack", "llamacpp-f32", "onnx"]);
    for b in backends {
        assert_eq!(b["ok"], true, "{b}");
        assert_eq!(b["embedding"].as_array().unwrap().len(), 384);
        assert!(b["latency_ms"].as_f64().unwrap() > 0.0);
        if b["name"] != "eager" {
            assert!(b["cosine_vs_reference"].as_f64().unwrap() >= 0.99999, "{b}");
            // ggml computes GELU through a float16 table: llama.cpp's float32 differs by up to 2e-4.
            let bound = if b["name"] == "llamacpp-f32" { 5e-4 } else { 1e-4 };
            assert!(b["max_abs_diff_vs_reference"].as_f64().unwrap() <= bound, "{b}");
        } else {
            assert!(b["cosine_vs_reference"].is_null());
        }
    }
}
