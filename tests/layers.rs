//! `runlens layers` on the exported MiniLM programs: every instruction and
//! every XNNPACK operator event maps to a module through the export's sidecar
//! (unmapped 0), each backend's rows add up to its traced (or timed) run, a
//! program without a sidecar gets instruction rows, said plainly, and a damaged
//! sidecar is an error naming the file; float programs match eager module by
//! module (cosine 1e-5), the int8 program drifts from a named module on.
//!
//! Needs the model files with their sidecars: `make models`. No test asserts a speed.

mod common;
use common::models_root;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const TEXT: &str = "Layer by layer, where does the time go?";

fn runlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runlens")).args(args).output().expect("runlens starts")
}

fn layers(extra: &[&str]) -> Value {
    let root = models_root();
    let mut args = vec!["--model", root.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["layers", "--json", "--runs", "2", TEXT]);
    let out = runlens(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "runlens {args:?} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn row_sum(v: &Value, backend: &str) -> f64 {
    v["rows"].as_array().unwrap().iter().filter_map(|r| r["times_ms"][backend].as_f64()).sum()
}

fn total(v: &Value, backend: &str) -> f64 {
    v["backends"].as_array().unwrap().iter().find(|b| b["name"] == backend).unwrap()["total_ms"].as_f64().unwrap()
}

// Times and gaps against eager: the full build (the lite one has no eager path).
#[cfg(feature = "eager")]
#[test]
fn every_event_of_minilm_maps_to_a_module_and_rows_add_up() {
    let programs = ["portable", "xnnpack", "xnnpack-int8", "xnnpack-static"];
    let v = layers(&["--backends", "eager,portable,xnnpack,xnnpack-int8,xnnpack-static"]);
    assert_eq!(v["text"], TEXT);
    let modules: Vec<&str> = v["rows"].as_array().unwrap().iter().map(|r| r["module"].as_str().unwrap()).collect();
    for i in 0..6 {
        for part in ["attention.self", "attention.output", "attention.output.LayerNorm", "intermediate", "output", "output.LayerNorm"] {
            let row = format!("encoder.layer.{i}.{part}");
            assert!(modules.contains(&row.as_str()), "{row} missing from {modules:?}");
        }
    }
    assert!(modules.contains(&"embeddings") && modules.contains(&"head"), "{modules:?}");
    assert!(modules.iter().all(|m| !m.starts_with('#')), "rows are modules, not instructions: {modules:?}");
    for name in programs {
        let u = &v["unmapped"][name];
        assert_eq!(u["count"], 0, "{name}: every instruction and XNNPACK event maps to a module: {u}");
        assert_eq!(u["ms"].as_f64(), Some(0.0), "{name}");
        let (sum, total) = (row_sum(&v, name), total(&v, name));
        // The rows split the instruction events' ticks exactly; only float sums differ.
        assert!(total > 0.0 && (sum - total).abs() <= 1e-9 * total.max(1.0), "{name}: rows {sum} vs run {total}");
        // Each layer's attention and feed-forward take time on every runtime.
        for i in 0..6 {
            for part in ["attention.self", "intermediate"] {
                let row = format!("encoder.layer.{i}.{part}");
                let ms = v["rows"].as_array().unwrap().iter().find(|r| r["module"] == row.as_str()).unwrap()["times_ms"][name].as_f64();
                assert!(ms.is_some_and(|ms| ms > 0.0), "{name}: {row} has no time: {ms:?}");
            }
        }
    }
    let (sum, total) = (row_sum(&v, "eager"), total(&v, "eager"));
    assert!((sum - total).abs() <= 1e-6 * total, "eager: module times {sum} vs its run {total}");
    assert_eq!(v["unmapped"]["eager"]["count"], 0);

    // Numeric gap against eager: float programs agree module by module, int8 drifts.
    let gap = |row: &Value, name: &str| row["gap"][name]["cosine"].as_f64();
    for name in ["portable", "xnnpack", "xnnpack-static"] {
        let compared: Vec<(&str, f64)> =
            v["rows"].as_array().unwrap().iter().filter_map(|r| Some((r["module"].as_str()?, gap(r, name)?))).collect();
        // The static program runs the input padded to 128 tokens: only the pooled output has eager's shape.
        let least = if name == "xnnpack-static" { 1 } else { 13 };
        assert!(compared.len() >= least, "{name}: embeddings, each layer's norms and the head at least: {compared:?}");
        for (row, cosine) in &compared {
            assert!(*cosine >= 1.0 - 1e-5, "{name}: {row} cosine {cosine}");
        }
        assert!(v["drift"][name]["first"].is_null(), "{name}: {}", v["drift"][name]);
    }
    // The drift is judged on kernel outputs (a delegate call's output need not be its module's).
    let int8: Vec<(&str, f64)> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["gap"]["xnnpack-int8"]["at"] == "kernel")
        .filter_map(|r| Some((r["module"].as_str()?, gap(r, "xnnpack-int8")?)))
        .collect();
    let first = v["drift"]["xnnpack-int8"]["first"].as_str().expect("int8 drifts somewhere");
    let threshold = v["drift"]["xnnpack-int8"]["threshold"].as_f64().unwrap();
    let at_first = int8.iter().find(|(r, _)| *r == first).unwrap().1;
    assert!(1.0 - at_first > threshold, "the first drifting module {first} is above the threshold: {at_first}");
    // Before it, int8 is as close as the float programs (the embeddings are not quantized).
    let before: Vec<&(&str, f64)> = int8.iter().take_while(|(r, _)| *r != first).collect();
    assert!(before.iter().all(|(_, c)| 1.0 - c <= threshold), "{before:?}");
    assert_eq!(int8.first().map(|r| r.0), Some("embeddings"));
}

/// A directory with `name.pte` linked to MiniLM's XNNPACK program and, when
/// given, `name.modules.json` holding `sidecar`.
fn linked_program(dir: &Path, name: &str, sidecar: Option<&[u8]>) -> PathBuf {
    let real = std::fs::canonicalize(models_root().join("xnnpack.pte")).unwrap();
    let link = dir.join(format!("{name}.pte"));
    std::os::unix::fs::symlink(real, &link).unwrap();
    if let Some(bytes) = sidecar {
        std::fs::write(dir.join(format!("{name}.modules.json")), bytes).unwrap();
    }
    link
}

#[test]
fn a_program_without_a_sidecar_gets_instruction_rows_said_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let link = linked_program(dir.path(), "bare", None);
    let program = format!("bare={}", link.display());
    let v = layers(&["--program", &program, "--backends", "bare"]);
    let backend = &v["backends"][0];
    assert_eq!(backend["rows_are"], "instructions");
    assert!(backend["note"].as_str().unwrap().contains("no sidecar"), "{backend}");
    let first = v["rows"][0]["module"].as_str().unwrap();
    assert!(first.starts_with('#'), "{first}");
    assert_eq!(v["unmapped"]["bare"]["count"], 0);
    let (sum, total) = (row_sum(&v, "bare"), total(&v, "bare"));
    assert!((sum - total).abs() <= 1e-9 * total.max(1.0));
}

#[test]
fn a_damaged_sidecar_is_an_error_naming_the_file() {
    let real = std::fs::read(models_root().join("xnnpack.modules.json")).expect("make models writes the sidecars");
    let dir = tempfile::tempdir().unwrap();
    let half = &real[..real.len() / 2];
    let other = std::fs::read(models_root().join("portable.modules.json")).unwrap();
    for (name, bytes) in [("half", half), ("garbage", &b"\x00\xffnot json"[..]), ("other", &other[..])] {
        let link = linked_program(dir.path(), name, Some(bytes));
        let root = models_root();
        let program = format!("{name}={}", link.display());
        let out = runlens(&["--model", root.to_str().unwrap(), "--program", &program, "--backends", name, "layers", "--runs", "1", TEXT]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && out.status.code().is_some(), "{name}: an error exit, not a crash: {stderr}");
        assert!(stderr.contains(&format!("{name}.modules.json")) && stderr.contains("re-export"), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// GPT-2 is a peer: its KV-cache programs are traced on the prefill of the
/// text, every event maps to `wte`, `wpe`, a block's `ln_1`, `attn`, `ln_2`,
/// `mlp` or the `head` (`ln_f` and the LM head), and the float programs agree
/// with eager module by module. The window programs (no cache) are timed on
/// their padded window and have no gap. Needs `make test-models` (models/tiny-gpt2).
#[test]
fn gpt2_kv_programs_map_to_its_blocks_on_the_prefill() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tiny-gpt2");
    let out = runlens(&["--model", dir.to_str().unwrap(), "layers", "--json", "--runs", "1", "the cat sat on the mat"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let modules: Vec<&str> = v["rows"].as_array().unwrap().iter().map(|r| r["module"].as_str().unwrap()).collect();
    let n_layer = 2; // tests/python/tiny_checkpoint.py --arch gpt2 --size tiny
    let mut want = vec!["model".to_string(), "wte".into(), "wpe".into()];
    for i in 0..n_layer {
        want.extend(["ln_1", "attn", "ln_2", "mlp"].iter().map(|p| format!("h.{i}.{p}")));
        want.push(format!("h.{i}"));
    }
    want.push("head".into());
    assert_eq!(modules, want, "rows in table order");
    for name in ["portable", "xnnpack", "portable-nocache", "xnnpack-nocache"] {
        assert_eq!(v["unmapped"][name]["count"], 0, "{name}: {}", v["unmapped"][name]);
        let (sum, total) = (row_sum(&v, name), total(&v, name));
        assert!(total > 0.0 && (sum - total).abs() <= 1e-9 * total.max(1.0), "{name}: rows {sum} vs run {total}");
    }
    assert!(v["rows"].as_array().unwrap().iter().all(|r| r["gap"].get("xnnpack-nocache").is_none()), "no gap for a window program");
    // Eager's times and the gaps against it: the full build (the lite one has no eager path).
    #[cfg(feature = "eager")]
    gpt2_against_eager(&v, n_layer);
}

/// The Llama family's rows (src/arch/llama.rs): the export's paths (under the
/// cache wrapper's `model.` and LlamaForCausalLM's own) and eager's scopes meet
/// in `embed_tokens`, each layer's norms, attention (Qwen3's q/k norms inside
/// it) and MLP, and the head; the KV programs' rows add up to their runs.
#[test]
fn llama_family_programs_map_to_its_layers_on_the_prefill() {
    for name in ["tiny-llama", "tiny-qwen3"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(name);
        let out = runlens(&["--model", dir.to_str().unwrap(), "--prompt-format", "raw", "layers", "--json", "--runs", "1", "the cat sat on the mat"]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let modules: Vec<&str> = v["rows"].as_array().unwrap().iter().map(|r| r["module"].as_str().unwrap()).collect();
        let n_layer = 2; // tests/python/tiny_decoders.py
        let mut want = vec!["model".to_string(), "embed_tokens".into()];
        for i in 0..n_layer {
            want.extend(["input_layernorm", "self_attn", "post_attention_layernorm", "mlp"].iter().map(|p| format!("layers.{i}.{p}")));
            want.push(format!("layers.{i}"));
        }
        want.push("head".into());
        assert_eq!(modules, want, "{name}: rows in table order");
        for backend in ["portable", "xnnpack"] {
            assert_eq!(v["unmapped"][backend]["count"], 0, "{name}/{backend}: {}", v["unmapped"][backend]);
            let (sum, total) = (row_sum(&v, backend), total(&v, backend));
            assert!(total > 0.0 && (sum - total).abs() <= 1e-9 * total.max(1.0), "{name}/{backend}: rows {sum} vs run {total}");
        }
        #[cfg(feature = "eager")]
        {
            let (sum, total) = (row_sum(&v, "eager"), total(&v, "eager"));
            assert!((sum - total).abs() <= 1e-6 * total, "{name}/eager: module times {sum} vs its run {total}");
            for row in v["rows"].as_array().unwrap() {
                if let Some(cosine) = row["gap"]["portable"]["cosine"].as_f64() {
                    assert!(cosine >= 1.0 - 1e-5, "{name}/portable: {} cosine {cosine}", row["module"]);
                }
            }
            let compared = v["rows"].as_array().unwrap().iter().filter(|r| r["gap"]["portable"]["at"] == "kernel").count();
            assert!(compared > 4 * n_layer, "{name}/portable: embed_tokens and each layer's modules at least: {compared}");
        }
    }
}

/// Eager's quantized columns are compared with float32 eager module by module
/// (their own outputs, `"at": "module"`): the token embedding stays float and
/// agrees; the quantized linear layers drift, 4-bit further than 8-bit at the head.
#[cfg(feature = "eager")]
#[test]
fn quantized_eager_columns_get_a_gap_per_module() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tiny-llama");
    let out = runlens(&[
        "--model", dir.to_str().unwrap(), "--backends", "eager,eager-int8,eager-int4", "--prompt-format", "raw",
        "layers", "--json", "--runs", "1", "the cat sat on the mat",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let gap = |module: &str, name: &str| rows.iter().find(|r| r["module"] == module).map(|r| r["gap"][name].clone()).unwrap_or(Value::Null);
    for name in ["eager-int8", "eager-int4"] {
        let compared: Vec<&Value> = rows.iter().filter(|r| r["gap"][name]["at"] == "module").collect();
        assert!(compared.len() >= 9, "{name}: embed_tokens, each layer's modules and the head: {}", compared.len());
        assert!(gap("embed_tokens", name)["cosine"].as_f64().unwrap() > 1.0 - 1e-6, "{name}: the float embedding agrees");
        let first = v["drift"][name]["first"].as_str().unwrap_or_else(|| panic!("{name} drifts somewhere: {}", v["drift"]));
        assert_ne!(first, "embed_tokens", "{name}");
        assert!(gap("head", name)["cosine"].as_f64().unwrap() < 1.0 - 1e-4, "{name}: the quantized head drifts");
    }
    let head = |name: &str| gap("head", name)["cosine"].as_f64().unwrap();
    assert!(head("eager-int4") < head("eager-int8"), "4-bit {} drifts further than 8-bit {}", head("eager-int4"), head("eager-int8"));
    assert!(v["drift"].get("eager").is_none(), "the reference is not compared with itself");
}

#[cfg(feature = "eager")]
fn gpt2_against_eager(v: &Value, n_layer: usize) {
    let (sum, total) = (row_sum(v, "eager"), total(v, "eager"));
    assert!((sum - total).abs() <= 1e-6 * total, "eager: module times {sum} vs its run {total}");
    for name in ["portable", "xnnpack"] {
        for row in v["rows"].as_array().unwrap() {
            if let Some(cosine) = row["gap"][name]["cosine"].as_f64() {
                assert!(cosine >= 1.0 - 1e-5, "{name}: {} cosine {cosine}", row["module"]);
            }
        }
        let compared = v["rows"].as_array().unwrap().iter().filter(|r| r["gap"][name]["at"] == "kernel").count();
        assert!(compared >= 2 + 2 * n_layer, "{name}: wte, wpe and each block's norms at least: {compared}");
    }
}

/// The tracer's debug buffer grows as a run logs: ExecuTorch's own fixed
/// buffer ends the process when a tensor does not fit, which is what a
/// GPT-2-sized portable program did to `layers` (its LM head logs the 154 MB
/// transposed embedding, twice). Here every program runs at its longest input
/// with a buffer reserved far too small (4 KiB): the run completes, every
/// logged tensor lies inside what the shim hands back, and the program's own
/// estimate (`PlanInstructions::logged_output_bytes`, what `layers` reserves)
/// is within a factor of three of what the run used.
#[test]
fn the_debug_buffer_grows_past_what_was_reserved() {
    use runlens::ffi::{EtModule, LongTensor};
    use runlens::profile::etdump;
    let gpt2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tiny-gpt2");
    let cases = [
        (models_root().join("portable.pte"), false),
        (models_root().join("xnnpack.pte"), false),
        (gpt2.join("portable.pte"), true),
        (gpt2.join("xnnpack.pte"), true),
    ];
    let tiny_mlm = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tiny-distilbert-mlm");
    let mlm = [(tiny_mlm.join("portable.pte"), false), (tiny_mlm.join("xnnpack.pte"), false)];
    for (path, kv_cache) in cases.into_iter().chain(mlm) {
        let (report, table) = runlens::pte::read_program_file(&path).unwrap();
        let bound = table.plan("forward").unwrap().logged_output_bytes;
        // At the longest input the program takes, where the bound is tightest:
        // every activation at its full size.
        let len = *report.plan("forward").unwrap().input_shapes[0].sizes.last().unwrap();
        let ids: Vec<i64> = (0..len).map(|i| 100 + i % 200).collect();
        let mut module = EtModule::load(&path, true).unwrap();
        module.log_outputs(4096).unwrap();
        if kv_cache {
            // key_positions [F], when the program takes it: F = its bound, L, with the
            // len new tokens at the end, the largest scores.
            let plan = report.plan("forward").unwrap();
            let filled = plan.input_shapes.get(2).map(|s| s.sizes[0]);
            let inputs = runlens::backend::probe::kv_cache_inputs(ids.clone(), filled.map_or(0, |f| f - len), filled.is_some());
            let tensors: Vec<LongTensor> = inputs.iter().map(|(data, sizes)| LongTensor::new(data, sizes)).collect();
            module.execute(&tensors).unwrap();
        } else {
            module.forward(&ids, Some(&vec![1; ids.len()])).unwrap();
        }
        let dump = etdump::decode(&module.take_etdump().unwrap()).unwrap();
        let buffer = module.debug_buffer().unwrap();
        let ends: Vec<u64> = dump
            .runs
            .iter()
            .flat_map(|b| &b.outputs)
            .filter_map(|o| Some(u64::try_from(o.offset).ok()? + o.numel()? as u64 * runlens::pte::element_bytes(o.scalar_type)))
            .collect();
        let used = ends.iter().copied().max().unwrap_or(0);
        let name = path.display();
        assert!(!ends.is_empty() && used > 4096 && used <= buffer.len() as u64, "{name}: {} outputs end at {used}, {} bytes handed back", ends.len(), buffer.len());
        assert!(bound >= used / 3 && bound <= used * 3, "{name}: the estimate {bound} is not within 3x of the {used} bytes used");
        eprintln!("{name}: {} outputs, {used} bytes (estimate {bound})", ends.len());
    }
}
