//! ONNX Runtime's columns (issue 41, the encoders' slice), on the files the
//! export writes beside the programs (`make models`, `make test-models`):
//! `model.onnx` (torch.onnx.export, float32) and `model.int8.onnx` (ONNX
//! Runtime's quantize_dynamic).
//!
//! - the manifest lists both in one `onnx` column, with their sha256s, and the
//!   graph's inputs are read from the file (BERT's token_type_ids, DistilBERT's none);
//! - MiniLM's float32 embedding equals transformers' (reference.json), the 8-bit
//!   one is bounded (the measured values are in the comments), and in `run --json`
//!   both carry their parity against eager;
//! - `bench` times the two columns;
//! - a damaged or mismatched `.onnx`, or a library that is not ONNX Runtime, is
//!   refused with its reason (runlens' own reading of the file first,
//!   `crate::onnx`) and the process lives; ONNX Runtime's own log never
//!   reaches the terminal. (`tests/corrupt_onnx.rs` mutates a hundred more.)
//!
//! (The tiny fill-mask and classification models' ONNX columns are checked
//! against transformers with every other column in tests/tasks.rs.)
//! Runs in the full and the lite build: ONNX Runtime needs no libtorch.

mod common;
use common::{corrupted_copies, cosine, model_dir, model_path, models, models_root, runlens};

use runlens::backend::{self, BackendSpec, Runtime};
use runlens::model::{Encoded, ModelDir, Reference};

const ENCODERS: [&str; 4] = ["tiny-bert-mlm", "tiny-distilbert-mlm", "tiny-bert-cls", "tiny-distilbert-cls"];

fn spec(dir: &ModelDir, name: &str) -> BackendSpec {
    backend::catalog(dir, &[]).unwrap().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{}: no backend {name}", dir.root().display()))
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn sha256(path: &std::path::Path) -> String {
    use sha2::Digest;
    let bytes = std::fs::read(path).unwrap();
    sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_manifest_lists_model_onnx_and_its_8bit_copy_in_one_column() {
    for dir in ENCODERS.iter().map(|m| model_dir(m)).chain([models()]) {
        let root = dir.root().display().to_string();
        for (name, file, quantized) in [("onnx", "model.onnx", false), ("onnx-int8", "model.int8.onnx", true)] {
            let s = spec(&dir, name);
            assert_eq!(s.runtime(), Runtime::OnnxRuntime, "{root}/{name}");
            assert_eq!(s.column, "onnx", "{root}: F5 cycles the two in one column");
            assert_eq!(s.is_quantized(), quantized, "{root}/{name}");
            let path = s.onnx_file().unwrap();
            assert_eq!(path.file_name().unwrap(), file);
            let entry = dir.manifest().programs.iter().find(|p| p.name == name).unwrap();
            assert_eq!(entry.runtime.as_deref(), Some("onnxruntime"));
            assert_eq!(dir.manifest().sha256.get(file), Some(&sha256(path)), "{root}/{file}: its sha256 in the manifest");
        }
        // 8-bit weights: about a quarter of the float32 file (MiniLM 22.9 MB against 90.4 MB).
        let size = |n: &str| std::fs::metadata(spec(&dir, n).onnx_file().unwrap()).unwrap().len() as f64;
        assert!(size("onnx-int8") < 0.4 * size("onnx"), "{root}: int8 {} float {}", size("onnx-int8"), size("onnx"));
        // The graph's inputs, read from the file: BERT has token types, DistilBERT none.
        let b = runlens::task::load_backend(&spec(&dir, "onnx"), &dir).unwrap_or_else(|e| panic!("{root}: {e:#}"));
        let described = b.describe();
        let bert = !root.contains("distilbert");
        assert_eq!(described.contains("token_type_ids"), bert, "{root}: {described}");
        assert!(described.contains("input_ids, attention_mask"), "{described}");
    }
}

/// MiniLM in ONNX Runtime: `last_hidden_state` mean-pooled and L2-normalised
/// by runlens, against transformers' embedding of each reference sentence.
#[test]
fn minilm_embeddings_in_onnx_runtime_match_transformers() {
    let dir = models();
    let reference = Reference::load(&dir.reference().unwrap()).unwrap();
    // (name, lowest cosine, largest |diff| to transformers over the sentences): measured on
    // x86-64, float32 cosine 1 - 2e-13, |diff| 1.3e-7; int8 lowest cosine 0.9690 (per-channel
    // weights, activations per tensor: python/runlens_export/onnx_files.py).
    for (name, min_cosine, max_diff) in [("onnx", 0.99999, 1e-4), ("onnx-int8", 0.95, 0.1)] {
        let mut b = runlens::task::load_backend(&spec(&dir, name), &dir).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let (mut worst, mut widest) = (f64::INFINITY, 0f64);
        for s in &reference.sentences {
            let out = b.run(&Encoded::from_ids(&s.ids)).unwrap();
            assert_eq!(out.shape, [1, s.embedding.len()], "{name}");
            let norm: f32 = out.data.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{name}: L2-normalised, norm {norm}");
            worst = worst.min(cosine(&out.data, &s.embedding));
            widest = widest.max(out.data.iter().zip(&s.embedding).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max));
        }
        eprintln!("MiniLM {name}: lowest cosine to transformers {worst:.7}, max|diff| {widest:.1e} over {} sentences", reference.sentences.len());
        assert!(worst >= min_cosine && widest <= max_diff, "{name}: lowest cosine {worst} (bound {min_cosine}), max|diff| {widest} (bound {max_diff})");
        if name == "onnx-int8" {
            assert!(worst < 0.9999, "{name}: as close as float32 ({worst}): are its weights 8-bit?");
        }
    }
}

/// `run --json` with eager as the reference: each ONNX column's parity is in its object.
#[cfg(feature = "eager")]
#[test]
fn run_json_gives_the_onnx_columns_parity_against_eager() {
    let root = models_root();
    let out = runlens(&["--models", root.to_str().unwrap(), "--threads", "2", "--backends", "eager,onnx,onnx-int8", "run", "--json", "A kitten is sleeping on the sofa"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["reference"], "eager");
    for (name, bound) in [("onnx", 0.99999), ("onnx-int8", 0.95)] {
        let row = json["backends"].as_array().unwrap().iter().find(|b| b["name"] == name).unwrap_or_else(|| panic!("no {name}: {json}"));
        assert_eq!(row["ok"], true, "{row}");
        let cos = row["parity"]["cosine"].as_f64().unwrap_or_else(|| panic!("{name} has no parity: {row}"));
        assert!(cos >= bound && cos <= 1.0 + 1e-9, "{name}: cosine to eager {cos}");
        assert!(row["latency_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{row}");
    }
}

/// `bench` times both ONNX columns at each length.
#[test]
fn bench_times_the_onnx_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("bench.json");
    let out = runlens(&[
        "--models", root_str().as_str(), "--threads", "2", "--backends", "onnx,onnx-int8", "bench", "--seq-lens", "8,32", "--iters", "3",
        "--warmup", "1", "--max-seconds", "1", "--json", json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let results = report["results"].as_array().unwrap();
    for name in ["onnx", "onnx-int8"] {
        for len in [8, 32] {
            let row = results.iter().find(|r| r["backend"] == name && r["seq_len"] == len).unwrap_or_else(|| panic!("no {name}@{len}: {report}"));
            let (min, p50, max) = (row["min_ms"].as_f64().unwrap(), row["p50_ms"].as_f64().unwrap(), row["max_ms"].as_f64().unwrap());
            assert!(0.0 < min && min <= p50 && p50 <= max, "{name}@{len}: {row}");
        }
    }
}

fn root_str() -> String {
    models_root().display().to_string()
}

/// `runlens --model DIR --program x=FILE --backends x run --json TEXT`: exit 1
/// (the process alive, one JSON object) and the reason, or a clean run.
fn run_program(dir: &str, file: &std::path::Path, text: &str) -> (Option<i32>, serde_json::Value, String) {
    let program = format!("x={}", file.display());
    let out = runlens(&["--model", dir, "--threads", "1", "--program", &program, "--backends", "x", "run", "--json", text]);
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{}: not one JSON object ({e}): {}", file.display(), stderr(&out)));
    (out.status.code(), json, stderr(&out))
}

/// Damaged and mismatched `.onnx` files: each refused with its reason by
/// runlens' reading of the file and its graph (or ONNX Runtime's parser), never a crash.
#[test]
fn damaged_or_mismatched_onnx_files_are_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let real = std::fs::read(spec(&models(), "onnx").onnx_file().unwrap()).unwrap();
    let root = root_str();
    let refused = |file: &std::path::Path, dir: &str, needles: &[&str]| {
        let (code, json, err) = run_program(dir, file, "A kitten is sleeping [MASK] the sofa");
        assert_eq!(code, Some(1), "{}: {json} {err}", file.display());
        let row = &json["backends"][0];
        assert_eq!(row["ok"], false, "{}: {row}", file.display());
        let why = row["error"].as_str().unwrap_or_default();
        assert!(why.contains(&file.display().to_string()), "the error names the file: {why}");
        assert!(needles.iter().any(|n| why.contains(n)), "{}: expected one of {needles:?} in {why}", file.display());
    };
    for (what, bytes) in corrupted_copies(&real) {
        let file = tmp.path().join(format!("{}.onnx", what.replace(' ', "-")));
        std::fs::write(&file, bytes).unwrap();
        if what == "flipped bytes" {
            // Flipped bytes may still parse as a graph: a clean error or a clean run.
            let (code, json, err) = run_program(&root, &file, "A kitten");
            assert!(matches!(code, Some(0) | Some(1)), "{what}: exit {code:?}: {json} {err}");
            continue;
        }
        refused(&file, &root, &["not an ONNX model: ", "ONNX Runtime cannot load it"]);
    }
    let empty = tmp.path().join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    refused(&empty, &root, &["not an ONNX model: the file is empty"]);
    // A missing file is named before anything loads, as a missing .pte is (exit 2).
    let gone = tmp.path().join("gone.onnx");
    let out = runlens(&["--model", &root, "--program", &format!("x={}", gone.display()), "--backends", "x", "run", "--json", "A kitten"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("missing model file {}", gone.display())), "{}", stderr(&out));
    // A fill-mask graph (logits) where an embedding is asked, and the other way round.
    let mlm = model_dir("tiny-distilbert-mlm");
    refused(spec(&mlm, "onnx").onnx_file().unwrap(), &root, &["no output last_hidden_state (its outputs: logits)"]);
    refused(spec(&models(), "onnx").onnx_file().unwrap(), mlm.root().to_str().unwrap(), &["no output logits (its outputs: last_hidden_state)"]);
    // `inspect` reads the graph (tests/corrupt_onnx.rs checks what it shows); a damaged file is named.
    let out = runlens(&["inspect", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{}: not an ONNX model: the file is empty", empty.display())), "{}", stderr(&out));
}

/// A file that is not ONNX Runtime in the library's place (ExecuTorch's own
/// library here), and a name that holds no file: the ONNX columns say so, the
/// others run.
#[test]
fn a_library_that_is_not_onnx_runtime_fails_the_column_not_the_process() {
    let root = root_str();
    let not_ort = std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/lib"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|python| python.path().join("site-packages/executorch/lib/libexecutorch.so"))
        .filter(|p| p.is_file());
    let mut cases = vec![("/nonexistent/libonnxruntime.so".to_string(), "not a file")];
    if let Some(lib) = &not_ort {
        cases.push((lib.display().to_string(), "OrtGetApiBase"));
    }
    for (lib, needle) in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_runlens"))
            .env("RUNLENS_ONNXRUNTIME_LIB", &lib)
            .args(["--models", &root, "--threads", "1", "--backends", "xnnpack,onnx", "run", "--json", "A kitten"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{lib}: {}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = |name: &str| json["backends"].as_array().unwrap().iter().find(|b| b["name"] == name).unwrap().clone();
        assert_eq!(row("xnnpack")["ok"], true, "{json}");
        let why = row("onnx")["error"].as_str().unwrap_or_default().to_string();
        assert!(why.contains(needle) && why.contains("onnxruntime==1.31.1"), "{lib}: {why}");
    }
}

/// ONNX Runtime prints its log to stderr unless it is given a logger; runlens
/// gives it one, so even `ORT_LOG=verbose` (what makes its default logger say
/// everything) puts nothing on the terminal, on a good file and a damaged one.
#[test]
fn onnx_runtime_log_stays_off_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let cut = tmp.path().join("cut.onnx");
    let real = std::fs::read(spec(&models(), "onnx").onnx_file().unwrap()).unwrap();
    std::fs::write(&cut, &real[..real.len() / 2]).unwrap();
    let program = format!("cut={}", cut.display());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runlens"))
        .env("ORT_LOG", "verbose")
        .args(["--models", &root_str(), "--threads", "1", "--program", &program, "--backends", "onnx,onnx-int8,cut", "run", "A kitten"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "the damaged file fails its column: {err}");
    assert!(!err.contains(":onnxruntime:") && !err.contains("[I:") && !err.contains("[W:"), "ONNX Runtime's log reached the terminal:\n{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("onnx-int8"), "{}", String::from_utf8_lossy(&out.stdout));
}

/// The probe's child loads and runs an ONNX file before this process does, and
/// measures its peak: after one `run`, `memory --json` has a measured peak for
/// the column (the child's, under the file's SHA-256), at least the file's
/// weights; with the probe off, the run measures it in this process instead.
#[test]
fn the_probes_child_runs_an_onnx_file_first_and_its_peak_is_what_memory_uses() {
    let root = model_path("tiny-bert-cls");
    for probe in ["1", "0"] {
        let cache = tempfile::tempdir().unwrap();
        let with = |args: &[&str]| {
            std::process::Command::new(env!("CARGO_BIN_EXE_runlens"))
                .args(["--model", &root, "--threads", "1", "--backends", "onnx-int8"])
                .args(args)
                .env("RUNLENS_CACHE_DIR", cache.path())
                .env("RUNLENS_PROBE", probe)
                .output()
                .unwrap()
        };
        let measured = || {
            let out = with(&["memory", "--json"]);
            assert!(out.status.success(), "{}", stderr(&out));
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let column = report["columns"].as_array().unwrap().iter().find(|c| c["name"] == "onnx-int8").cloned().unwrap();
            column["measured_peak"].as_u64()
        };
        assert_eq!(measured(), None, "a fresh cache holds no measurement");
        let out = with(&["run", "A kitten"]);
        assert!(out.status.success(), "RUNLENS_PROBE={probe}: {}", stderr(&out));
        let verdicts: Vec<String> = std::fs::read_dir(cache.path().join("probe"))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".json")).collect())
            .unwrap_or_default();
        assert_eq!(verdicts.iter().any(|n| n.contains("-onnxruntime-")), probe == "1", "RUNLENS_PROBE={probe}: verdicts {verdicts:?}");
        let file = std::path::Path::new(&root).join("model.int8.onnx");
        let weights = std::fs::metadata(&file).unwrap().len();
        let peak = measured().unwrap_or_else(|| panic!("RUNLENS_PROBE={probe}: no measured peak after a run"));
        assert!(peak >= weights, "RUNLENS_PROBE={probe}: measured {peak} bytes, less than the file's {weights}");
    }
}

/// The layout the hub's sentence-transformers repositories ship: a directory's
/// `onnx/` folder offers each file as a variant of the ONNX column (F5), pooled
/// as the directory's `modules.json` and `1_Pooling/config.json` say (the CLS
/// token here, where MiniLM's own files pool the mean), giving the embedding
/// ONNX Runtime's Python package gives on the same file
/// (tests/python/st_onnx_layout.py).
#[test]
fn an_onnx_folder_as_the_hub_ships_it_gives_the_onnx_columns_variants() {
    let tmp = tempfile::tempdir().unwrap();
    let st = tmp.path().join("st");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let made = std::process::Command::new(repo.join(".venv/bin/python"))
        .arg(repo.join("tests/python/st_onnx_layout.py"))
        .args(["--model", models().root().to_str().unwrap(), "--out", st.to_str().unwrap()])
        .output()
        .expect("the venv's python runs");
    assert!(made.status.success(), "{}", stderr(&made));
    let dir = ModelDir::open(&st).unwrap();
    let catalog = backend::catalog(&dir, &[]).unwrap();
    let column: Vec<&str> = catalog.iter().filter(|s| s.column == "onnx").map(|s| s.name.as_str()).collect();
    assert_eq!(column, ["onnx", "onnx-int8", "onnx/model", "onnx/model_qint8_arm64"], "the folder's files join the ONNX column, after the export's");
    let hub = |name: &str| catalog.iter().find(|s| s.name == name).unwrap().clone();
    assert_eq!(backend::variants(&catalog, &hub("onnx")).len(), 4, "F5 cycles all four");
    assert!(!hub("onnx/model").is_quantized() && hub("onnx/model_qint8_arm64").is_quantized(), "what the file names say");

    let python: serde_json::Value = serde_json::from_slice(&std::fs::read(st.join("st_embeddings.json")).unwrap()).unwrap();
    let sentences: Vec<Vec<i64>> = serde_json::from_value(python["sentences"].clone()).unwrap();
    let mut mean = runlens::task::load_backend(&hub("onnx"), &dir).unwrap();
    // (name, lowest cosine to ONNX Runtime's Python package on the same file)
    for (name, bound) in [("onnx/model", 0.99999), ("onnx/model_qint8_arm64", 0.9999)] {
        let expected: Vec<Vec<f32>> = serde_json::from_value(python["embeddings"][name].clone()).unwrap();
        let mut b = runlens::task::load_backend(&hub(name), &dir).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let (mut worst, mut least_like_mean) = (f64::INFINITY, f64::INFINITY);
        for (ids, want) in sentences.iter().zip(&expected) {
            let out = b.run(&Encoded::from_ids(ids)).unwrap();
            worst = worst.min(cosine(&out.data, want));
            least_like_mean = least_like_mean.min(cosine(&out.data, &mean.run(&Encoded::from_ids(ids)).unwrap().data));
        }
        eprintln!("{name}: lowest cosine to ONNX Runtime's Python package {worst:.7}; to the mean-pooled column {least_like_mean:.4}");
        assert!(worst >= bound, "{name}: lowest cosine {worst} to ONNX Runtime's Python package on the same file (bound {bound})");
        assert!(least_like_mean < 0.99, "{name}: as close to the mean-pooled embedding as {least_like_mean}: was 1_Pooling/config.json's CLS read?");
    }
    // By name on the command line, like any column.
    let out = runlens(&["--model", st.to_str().unwrap(), "--threads", "1", "--backends", "onnx,onnx/model_qint8_arm64", "run", "--json", "A kitten is sleeping on the sofa"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = json["backends"].as_array().unwrap().iter().find(|b| b["name"] == "onnx/model_qint8_arm64").unwrap_or_else(|| panic!("{json}"));
    assert_eq!(row["ok"], true, "{row}");
}

/// `profile` reads ONNX Runtime's own profiler as it reads ETDump: per
/// operator, after ONNX Runtime's graph optimizer (its fused kernels), and
/// `inspect` counts the operators in the file and after that optimizer.
#[test]
fn profile_and_inspect_show_the_operators_onnx_runtime_runs() {
    let root = root_str();
    let out = runlens(&["--models", root.as_str(), "--threads", "1", "--backends", "onnx,onnx-int8", "profile", "--json", "--runs", "2", "A kitten is sleeping on the sofa"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (name, fused) in [("onnx", "FusedMatMul"), ("onnx-int8", "DynamicQuantizeMatMul")] {
        let b = json["backends"].as_array().unwrap().iter().find(|b| b["name"] == name).unwrap_or_else(|| panic!("no {name}: {json}"));
        assert_eq!(b["profiler"], "ONNX Runtime's profiler", "{b}");
        assert_eq!(b["runs"], 2, "the warm-up run is not counted: {b}");
        let ops = b["operators"].as_array().unwrap();
        let share: f64 = ops.iter().map(|o| o["share"].as_f64().unwrap()).sum();
        assert!((share - 1.0).abs() < 1e-9, "{name}: shares sum to {share}");
        assert!(ops.iter().any(|o| o["name"] == fused), "{name}: no {fused}, which only ONNX Runtime's optimizer makes: {b}");
        let (total, run) = (b["total_ms"].as_f64().unwrap(), b["execute_ms"].as_f64().unwrap());
        assert!(0.0 < total && total <= run, "{name}: node times {total} ms inside model_run {run} ms");
    }
    // The 8-bit file's MatMulInteger nodes are fused away into ONNX Runtime's own kernels.
    let file = spec(&models(), "onnx-int8").onnx_file().unwrap().to_path_buf();
    let out = runlens(&["inspect", "--json", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let count = |ops: &serde_json::Value, op: &str| ops.as_array().unwrap().iter().find(|o| o[0] == op).map_or(0, |o| o[1].as_u64().unwrap());
    let after = &json["optimized"];
    assert!(count(&json["operators"], "MatMulInteger") > 0 && count(&after["operators"], "MatMulInteger") == 0, "{json}");
    assert!(count(&after["operators"], "com.microsoft:DynamicQuantizeMatMul") > 0, "{after}");
    assert!(after["nodes"].as_u64().unwrap() < json["nodes"].as_u64().unwrap(), "fewer nodes after fusing: {after}");
    let text = String::from_utf8_lossy(&runlens(&["inspect", file.to_str().unwrap()]).stdout).into_owned();
    assert!(text.contains("com.microsoft:DynamicQuantizeMatMul  (fused in)") && text.contains("MatMulInteger  (fused away)"), "{text}");
    // A decoder's file too: its RMS norms fused by ONNX Runtime's optimizer.
    let file = spec(&model_dir("tiny-llama"), "onnx-int8").onnx_file().unwrap().to_path_buf();
    let out = runlens(&["inspect", "--json", file.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(count(&json["optimized"]["operators"], "SimplifiedLayerNormalization") > 0, "{json}");
    assert_eq!(json["subgraph_nodes"], 0, "{json}");
}

const DECODERS: [&str; 4] = ["tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-qwen3"];

/// A decoder's ONNX files (python/runlens_export/onnx_decoder.py): the KV
/// cache as inputs and outputs, one ONNX Runtime run a token. The float32
/// file's greedy ids equal transformers' on every prompt (tests/generation.rs
/// checks every float column so; here the one-run-a-token drive and the 8-bit
/// copy): its 8-bit copy stays near it, and `bench` gives its decode rows with
/// the bytes a token reads.
#[test]
fn decoders_run_one_onnx_runtime_call_a_token_with_their_cache_in_and_out() {
    use runlens::task::generation::generate;
    use std::ops::ControlFlow;
    for model in DECODERS {
        let dir = model_dir(model);
        let reference = Reference::load(&dir.reference().unwrap()).unwrap();
        for name in ["onnx", "onnx-int8"] {
            let entry = dir.manifest().programs.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{model}: no {name}"));
            assert_eq!(entry.cache.as_deref(), Some("past-present"), "{model}/{name}");
        }
        let ctx = runlens::task::TaskContext::for_model(&dir, &dir.load_tokenizer().unwrap(), 5).unwrap().with_max_new_tokens(8);
        let ctx = ctx.generation().unwrap().clone();
        let mut float = runlens::task::load_backend(&spec(&dir, "onnx"), &dir).unwrap_or_else(|e| panic!("{model}: {e:#}"));
        assert!(float.describe().contains("past keys and values in and out"), "{}", float.describe());
        let mut int8 = runlens::task::load_backend(&spec(&dir, "onnx-int8"), &dir).unwrap_or_else(|e| panic!("{model}: {e:#}"));
        let mut worst = f64::INFINITY;
        for s in reference.sentences.iter().take(3) {
            let f = generate(float.as_mut(), &ctx, &Encoded::from_ids(&s.ids), &mut |_| ControlFlow::Continue(())).unwrap();
            assert_eq!(f.ids, s.generated_ids[..f.ids.len()], "{model}/onnx on {:?}", s.text);
            let q = generate(int8.as_mut(), &ctx, &Encoded::from_ids(&s.ids), &mut |_| ControlFlow::Continue(())).unwrap();
            worst = worst.min(cosine(&q.first_logits, &f.first_logits));
        }
        eprintln!("{model}/onnx-int8: first-logits cosine to onnx, lowest {worst:.4}");
        assert!((0.9..0.999_999).contains(&worst), "{model}/onnx-int8: first-logits cosine {worst} to float32 (8-bit weights move it a little)");
        // The bytes a token reads: the weights but the embedding table (tied heads counted).
        let bytes = float.weight_bytes_per_token().unwrap();
        let file = std::fs::metadata(spec(&dir, "onnx").onnx_file().unwrap()).unwrap().len();
        assert!(bytes > 0 && bytes < file, "{model}: {bytes} bytes a token, file {file}");
        // The 8-bit file's linear layers are 8-bit: MatMulInteger, and well under half the
        // float bytes a token (a decoder's copy once quantized only its embedding table:
        // its MatMuls read their weights through Transpose nodes the quantizer passed over).
        let read = |name: &str| runlens::onnx::read_path(spec(&dir, name).onnx_file().unwrap()).unwrap();
        let (f_graph, q_graph) = (read("onnx"), read("onnx-int8"));
        let count = |g: &runlens::onnx::OnnxModel, op: &str| g.operators.iter().find(|(o, _)| o == op).map_or(0, |(_, n)| *n);
        let layers = dir.model_config().unwrap().layers.unwrap() as usize;
        assert!(count(&q_graph, "MatMulInteger") >= 4 * layers, "{model}: {:?}", q_graph.operators);
        assert!(2 * q_graph.weight_bytes_per_token < f_graph.weight_bytes_per_token, "{model}: 8-bit {} bytes a token, float {}", q_graph.weight_bytes_per_token, f_graph.weight_bytes_per_token);
    }
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("bench.json");
    let out = runlens(&[
        "--model", model_dir("tiny-llama").root().to_str().unwrap(), "--threads", "1", "--backends", "onnx,onnx-int8,llamacpp-f32", "bench", "--gen-tokens", "4",
        "--prompt-lens", "4", "--iters", "2", "--warmup", "0", "--max-seconds", "1", "--python", "--json", json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(!stderr(&out).contains("the Python counterparts failed"), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = report["results"].as_array().unwrap();
    for name in ["onnx", "onnx-int8", "python-onnx", "python-onnx-int8"] {
        let row = rows.iter().find(|r| r["backend"] == name).unwrap_or_else(|| panic!("no {name}: {report}"));
        assert_eq!(row["cache"], "past-present", "{row}");
        for key in ["ttft_ms", "prompt_tokens_per_s", "decode_tokens_per_s"] {
            assert!(row[key].as_f64().is_some_and(|v| v > 0.0), "{name}: {key} in {row}");
        }
        assert!(row["weight_bytes_per_token"].as_u64().is_some_and(|b| b > 0), "{row}");
        // runlens' rows are set against ONNX Runtime's Python package on the same file.
        assert_eq!(row["decode_speedup_vs_python"].is_f64(), !name.starts_with("python-"), "{row}");
    }
    // llama.cpp has no Python row, and naming it does not fail the Python side.
    assert!(rows.iter().any(|r| r["backend"] == "llamacpp-f32") && !rows.iter().any(|r| r["backend"] == "python-llamacpp-f32"), "{report}");
    assert!(report["machine"]["versions"]["onnxruntime"].is_string(), "{}", report["machine"]);
}

/// Optimum's merged decoder file, laid out as the hub ships it
/// (tests/python/merged_decoder.py: tiny-llama's model.onnx twice under an `If` on
/// `use_cache_branch`, the branch without a cache ignoring the pasts, the weights in
/// external data beside the file) joins as a `--program`: the flag false for the
/// prompt and true for each token after it (false there makes the file's run fail),
/// transformers' greedy ids on every prompt; and from a model directory's onnx/
/// folder, as a variant of the ONNX column.
#[test]
fn optimum_s_merged_decoder_with_external_data_runs_as_a_program() {
    use runlens::task::generation::generate;
    use std::ops::ControlFlow;
    let dir = model_dir("tiny-llama");
    let file = std::path::PathBuf::from(model_path("optimum-merged")).join("decoder_model_merged.onnx");
    let data = file.with_file_name("decoder_model_merged.onnx_data");
    assert!(data.exists(), "{}: run `make test-models`", data.display());
    let graph = runlens::onnx::read_path(&file).unwrap();
    let own = runlens::onnx::read_path(spec(&dir, "onnx").onnx_file().unwrap()).unwrap();
    // One If at the top; its two branches, each the whole decoder, counted with it.
    let count = |g: &runlens::onnx::OnnxModel, op: &str| g.operators.iter().find(|(o, _)| o == op).map_or(0, |(_, n)| *n);
    assert_eq!((count(&graph, "If"), graph.nodes - graph.subgraph_nodes), (1, 1), "one If at the top: {:?}", graph.operators);
    assert!(count(&own, "MatMul") > 0 && count(&graph, "MatMul") == 2 * count(&own, "MatMul"), "{:?} against {:?}", graph.operators, own.operators);
    assert_eq!(own.subgraph_nodes, 0);
    assert!(std::fs::metadata(&file).unwrap().len() < std::fs::metadata(&data).unwrap().len(), "the weights are in the external data");
    assert_eq!(graph.weight_bytes_per_token, own.weight_bytes_per_token, "the weights a token reads, counted in every graph the file holds, the embedding table left out");

    let merged = BackendSpec::program("merged", &file);
    let mut b = runlens::task::load_backend(&merged, &dir).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(b.describe().contains("past keys and values in and out"), "{}", b.describe());
    let reference = Reference::load(&dir.reference().unwrap()).unwrap();
    let ctx = runlens::task::TaskContext::for_model(&dir, &dir.load_tokenizer().unwrap(), 5).unwrap().with_max_new_tokens(8);
    let ctx = ctx.generation().unwrap().clone();
    for s in reference.sentences.iter().take(3) {
        let g = generate(b.as_mut(), &ctx, &Encoded::from_ids(&s.ids), &mut |_| ControlFlow::Continue(())).unwrap_or_else(|e| panic!("{e:#}"));
        assert!(g.ids.len() > 1, "a token after the prompt's: {:?}", g.ids);
        assert_eq!(g.ids, s.generated_ids[..g.ids.len()], "merged on {:?}", s.text);
    }

    // In the hub's layout, the file in the model directory's onnx/ folder: a variant of the
    // ONNX column (F5), named by its path, giving the export's own file's ids.
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(dir.root()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, tmp.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::create_dir(tmp.path().join("onnx")).unwrap();
    for f in [&file, &data] {
        std::fs::copy(f, tmp.path().join("onnx").join(f.file_name().unwrap())).unwrap();
    }
    let hub = runlens::model::ModelDir::open(tmp.path()).unwrap();
    let variant = spec(&hub, "onnx/decoder_model_merged");
    assert_eq!(variant.column, spec(&hub, "onnx").column, "a variant of the ONNX column");
    let out = runlens(&["--model", tmp.path().to_str().unwrap(), "--threads", "1", "--backends", "onnx,onnx/decoder_model_merged", "run", "--json", "--max-new-tokens", "8", "Hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids = |name: &str| json["backends"].as_array().unwrap().iter().find(|b| b["name"] == name).map(|b| b["generated_ids"].clone()).unwrap_or_else(|| panic!("no {name}: {json}"));
    assert!(ids("onnx").as_array().is_some_and(|a| a.len() > 1), "{json}");
    assert_eq!(ids("onnx/decoder_model_merged"), ids("onnx"), "{json}");
}

/// transformers.js' float16 decoder file (tests/python/fp16_decoder.py: tiny-llama's
/// model.onnx through ONNX Runtime's float16 converter, its caches and logits float16
/// too): the column feeds float16 pasts and widens the logits, and stays with the
/// float32 file, teacher-forced, on two prompts.
#[test]
fn a_float16_decoder_file_runs_with_its_float16_cache() {
    let dir = model_dir("tiny-llama");
    let file = std::path::PathBuf::from(model_path("onnx-fp16")).join("model_fp16.onnx");
    assert!(file.exists(), "{}: run `make test-models`", file.display());
    let b = runlens::task::load_backend(&BackendSpec::program("f16", &file), &dir).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(b.describe().contains("float16"), "{}", b.describe());
    let program = format!("f16={}", file.display());
    for text in ["Hello", "The capital of France is"] {
        let out = runlens(&["--model", dir.root().to_str().unwrap(), "--program", &program, "--threads", "1", "--backends", "onnx,f16", "run", "--json", "--max-new-tokens", "16", text]);
        assert!(out.status.success(), "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = json["backends"].as_array().unwrap().iter().find(|b| b["name"] == "f16").unwrap_or_else(|| panic!("{json}"));
        assert_eq!(row["ok"], true, "{row}");
        let parity = &row["parity"];
        assert!(parity["first_logits_cosine"].as_f64().unwrap() > 0.9999, "{text:?}: {parity}");
        assert_eq!((parity["top1_agreement"].as_f64(), parity["top1_positions"].as_u64()), (Some(1.0), Some(16)), "{text:?}: {parity}");
    }
}

/// `profile` on a decoder's ONNX file drives it as its column does, beside the
/// same model's XNNPACK program: each run the prompt from an empty cache, or with
/// `--decode` one step after it (the prompt's run and a warm-up step left out);
/// `--decode` where there is no decoder, or past the positions, is an error that says so.
#[test]
fn profile_runs_a_decoder_s_onnx_file_on_its_prompt_and_its_decode_steps() {
    let dir = model_dir("tiny-llama");
    let model = dir.root().to_str().unwrap();
    for (args, run, runs) in [(&["--runs", "2"][..], "prompt", 2), (&["--decode", "--runs", "3"][..], "decode-step", 3)] {
        let mut argv = vec!["--model", model, "--threads", "1", "--backends", "onnx,xnnpack", "profile", "--json"];
        argv.extend_from_slice(args);
        argv.push("Hello there");
        let out = runlens(&argv);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["run"], run, "{json}");
        for (name, profiler) in [("onnx", "ONNX Runtime's profiler"), ("xnnpack", "ExecuTorch's ETDump")] {
            let b = json["backends"].as_array().unwrap().iter().find(|b| b["name"] == name).unwrap_or_else(|| panic!("no {name}: {json}"));
            assert_eq!((b["profiler"].as_str(), b["runs"].as_u64()), (Some(profiler), Some(runs)), "{args:?}: {b}");
            let share: f64 = b["operators"].as_array().unwrap().iter().map(|o| o["share"].as_f64().unwrap()).sum();
            assert!((share - 1.0).abs() < 1e-9, "{name}: shares sum to {share}");
        }
        let onnx = json["backends"].as_array().unwrap().iter().find(|b| b["name"] == "onnx").unwrap();
        assert!(onnx["operators"].as_array().unwrap().iter().any(|o| o["name"] == "MatMul"), "{onnx}");
    }
    let text = String::from_utf8_lossy(&runlens(&["--model", model, "--threads", "1", "--backends", "onnx", "profile", "--decode", "--runs", "2", "Hello"]).stdout).into_owned();
    assert!(text.contains("Each run is one decode step after the prompt"), "{text}");
    // Past the decoder's positions: the step that does not fit is named, not a crash.
    let out = runlens(&["--model", model, "--threads", "1", "--backends", "xnnpack", "profile", "--decode", "--runs", "1000", "Hello"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("1000 decode steps and a warm-up step after a") && stderr(&out).contains("ask fewer --runs"), "{}", stderr(&out));
    // An encoder has no decode step.
    let out = runlens(&["--models", root_str().as_str(), "--threads", "1", "--backends", "onnx", "profile", "--decode", "a cat"]);
    assert!(!out.status.success() && stderr(&out).contains("--decode profiles a decoder's steps"), "{}", stderr(&out));
}
