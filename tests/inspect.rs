//! `runlens inspect` on the exported MiniLM programs: the Rust reader must
//! agree with ExecuTorch's own Python deserializer (`tests/python/pte_counts.py`,
//! run by the export step, writes `*.counts.json` next to each `.pte`), and
//! damaged copies of the real files must give errors, not crashes.

use std::path::{Path, PathBuf};
use std::process::Command;

use runlens::pte::{self, CoverageReport};
use serde_json::Value;

const TOP_FIELDS: [&str; 5] = [
    "size_bytes",
    "program_bytes",
    "segment_count",
    "constant_bytes",
    "delegate_blob_bytes",
];
const PLAN_FIELDS: [&str; 10] = [
    "name",
    "inputs",
    "outputs",
    "instructions",
    "kernel_calls",
    "delegate_calls",
    "operators",
    "delegates",
    "xnnpack_nodes",
    "coverage",
];

fn minilm_dir() -> PathBuf {
    let models = std::env::var_os("RUNLENS_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"));
    models.join("minilm")
}

/// A file the export writes; missing means the models were not exported.
fn model_file(name: &str) -> PathBuf {
    let path = minilm_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `make models` (or set RUNLENS_MODELS to a models directory that has minilm/{name})",
        path.display()
    );
    path
}

fn report(name: &str) -> CoverageReport {
    let path = model_file(&format!("{name}.pte"));
    pte::inspect_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn python_counts(name: &str) -> Value {
    let path = model_file(&format!("{name}.counts.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn same(field: &str, ours: &Value, theirs: &Value) -> bool {
    if field == "coverage" {
        match (ours.as_f64(), theirs.as_f64()) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-12,
            _ => false,
        }
    } else {
        ours == theirs
    }
}

/// Every field both sides compute, one by one, naming the first that differs.
fn compare_with_python(name: &str) -> CoverageReport {
    let report = report(name);
    compare_json_with_python(name, &serde_json::to_value(&report).unwrap());
    report
}

/// [`compare_with_python`] for a report as JSON (`runlens inspect --json`'s).
fn compare_json_with_python(name: &str, ours: &Value) {
    let theirs = python_counts(name);
    for field in TOP_FIELDS {
        let t = theirs
            .get(field)
            .unwrap_or_else(|| panic!("{name}.counts.json lacks {field}"));
        assert!(
            same(field, &ours[field], t),
            "{name}: {field}: Rust {} vs Python {t}",
            ours[field]
        );
    }
    let (our_plans, their_plans) = (
        ours["plans"].as_array().unwrap(),
        theirs["plans"].as_array().unwrap(),
    );
    assert_eq!(
        our_plans.len(),
        their_plans.len(),
        "{name}: number of plans"
    );
    assert!(!our_plans.is_empty(), "{name}: no plans");
    for (o, t) in our_plans.iter().zip(their_plans) {
        for field in PLAN_FIELDS {
            let tv = t
                .get(field)
                .unwrap_or_else(|| panic!("{name}.counts.json: a plan lacks {field}"));
            assert!(
                same(field, &o[field], tv),
                "{name}: plan {}: {field}: Rust {} vs Python {tv}",
                o["name"],
                o[field]
            );
        }
    }
}

#[test]
fn variant_counts_match_executorchs_python_deserializer() {
    let dynamic = report("xnnpack");
    let int8 = compare_with_python("xnnpack-int8");
    let fixed = compare_with_python("xnnpack-static");
    let plan = |r: &CoverageReport| r.plan("forward").expect("a forward method").clone();
    let (dynamic, int8, fixed) = (plan(&dynamic), plan(&int8), plan(&fixed));
    // The shapes as stored: dynamic programs keep their upper bound, the static one its exact length.
    assert_eq!(dynamic.fixed_seq_len(), None);
    assert_eq!(int8.fixed_seq_len(), None);
    assert_eq!(fixed.fixed_seq_len(), Some(128));
    assert!(fixed.input_shapes.iter().all(|s| !s.dynamic && s.sizes == [1, 128]), "{:?}", fixed.input_shapes);
    // int8: the quantized linear layers are inside the delegate, none left on the default kernels.
    assert!(int8.delegate_calls > 0);
    assert!(!int8.operators.keys().any(|op| op.starts_with("quantized_decomposed::")), "{:?}", int8.operators);
    assert!(int8.xnnpack_nodes.keys().any(|n| n.contains("Convert")), "dynamic quantization converts activations inside XNNPACK: {:?}", int8.xnnpack_nodes);
}

#[test]
fn portable_counts_match_executorchs_python_deserializer() {
    let r = compare_with_python("portable");
    let forward = r.plan("forward").expect("a forward method");
    assert_eq!(forward.delegate_calls, 0);
    assert!(forward.xnnpack_nodes.is_empty());
    assert_eq!(forward.kernel_calls, forward.instructions);
    assert_eq!(forward.coverage, 0.0);
}

#[test]
fn xnnpack_counts_match_executorchs_python_deserializer() {
    let r = compare_with_python("xnnpack");
    let forward = r.plan("forward").expect("a forward method");
    assert!(forward.delegate_calls > 0);
    assert_eq!(
        forward.delegates.get(pte::XNNPACK_BACKEND_ID),
        Some(&forward.delegate_calls)
    );
    assert!(forward.xnnpack_node_total() > 0 && forward.coverage > 0.0 && forward.coverage < 1.0);
    let portable = report("portable");
    assert!(forward.kernel_calls < portable.plans[0].kernel_calls);
}

// ---------------------------------------------------------------- partition map

#[test]
fn partition_map_counts_equal_the_delegate_and_kernel_calls() {
    for name in ["portable", "xnnpack", "xnnpack-int8", "xnnpack-static"] {
        let r = report(name);
        let plan = r.plan("forward").expect("a forward method");
        let map = &plan.partition;
        assert_eq!(map.kernel_calls, plan.kernel_calls, "{name}");
        assert_eq!(map.delegate_calls, plan.delegate_calls, "{name}");
        let in_runs: u64 = map.runs.iter().map(|r| r.calls).sum();
        assert_eq!(in_runs, plan.kernel_calls + plan.delegate_calls, "{name}");
        assert_eq!(map.boundaries + 1, map.runs.len() as u64, "{name}");
        let delegate_runs = map.runs.iter().filter(|r| r.kind == pte::RunKind::Delegate).count() as u64;
        assert_eq!(delegate_runs, plan.delegate_calls, "{name}: each delegate call is one run");
        // Python's operator counts, summed over the runs, are inspect's.
        let mut ops = std::collections::BTreeMap::new();
        for run in &map.runs {
            for (op, n) in &run.operators {
                *ops.entry(op.clone()).or_insert(0u64) += n;
            }
        }
        assert_eq!(ops, plan.operators, "{name}");
    }
    let portable = report("portable");
    let map = &portable.plans[0].partition;
    assert_eq!((map.runs.len(), map.boundaries, map.kernel_runs), (1, 0, 1), "no delegate: one kernel run");
    assert!(map.breaks.is_empty());
    // MiniLM's dynamic XNNPACK program: the views and the layer norms split the graph.
    let xnnpack = report("xnnpack");
    let breaks = &xnnpack.plans[0].partition.breaks;
    assert!(breaks.contains_key("aten::native_layer_norm.out"), "{breaks:?}");
    assert!(breaks.contains_key("executorch_prim::et_view.default"), "{breaks:?}");
}

// ---------------------------------------------------------------- bad input

fn xnnpack_bytes() -> Vec<u8> {
    std::fs::read(model_file("xnnpack.pte")).unwrap()
}

#[test]
fn truncated_real_file_is_an_error() {
    let bytes = xnnpack_bytes();
    let r = pte::inspect_bytes("x", &bytes).unwrap();
    let program = r.program_bytes as usize;
    let mut cuts = vec![0, 3, 4, 7, 8, 11, 12, 15, 16, 23, 24, 31, 32, 39, 40, 100];
    cuts.extend([
        program / 2,
        program - 1,
        program,
        program + 1,
        bytes.len() / 2,
        bytes.len() - 1,
    ]);
    for len in cuts {
        let err = pte::inspect_bytes("x", &bytes[..len]);
        assert!(err.is_err(), "a {len}-byte prefix was accepted");
    }
}

#[test]
fn wrong_magic_and_bad_offsets_in_real_file_are_errors() {
    let good = xnnpack_bytes();
    let len = good.len() as u64;
    let mut cases: Vec<(&str, usize, Vec<u8>)> = vec![
        ("file identifier", 4, b"ET13".to_vec()),
        ("extended header magic", 8, b"eh01".to_vec()),
        ("header length", 12, 4u32.to_le_bytes().to_vec()),
    ];
    for (what, at, v) in [
        ("program size", 16, len + 1),
        ("segment base", 24, len + 1),
        ("segment data size", 32, len),
    ] {
        cases.push((what, at, v.to_le_bytes().to_vec()));
    }
    for (what, at, patch) in cases {
        let mut bytes = good.clone();
        bytes[at..at + patch.len()].copy_from_slice(&patch);
        assert!(
            pte::inspect_bytes("x", &bytes).is_err(),
            "bad {what} was accepted"
        );
    }
}

#[test]
fn flipped_bytes_in_real_program_never_panic() {
    let mut bytes = xnnpack_bytes();
    let program = pte::inspect_bytes("x", &bytes).unwrap().program_bytes as usize;
    // Every 3rd byte of the program flatbuffer, and the start of the segments.
    let positions = (0..program)
        .step_by(3)
        .chain(program..(program + 4096).min(bytes.len()));
    for i in positions {
        bytes[i] ^= 0xff;
        let _ = pte::inspect_bytes("x", &bytes);
        bytes[i] ^= 0xff;
    }
}

// ---------------------------------------------------------------- the command

fn runlens(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_runlens"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn inspect_json_prints_exactly_one_object() {
    let path = model_file("xnnpack.pte");
    let out = runlens(&["inspect", "--json", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut objects = serde_json::Deserializer::from_str(&stdout).into_iter::<Value>();
    let printed = objects.next().expect("one JSON object").unwrap();
    assert!(
        objects.next().is_none(),
        "more than one JSON value on stdout"
    );
    assert_eq!(printed["file"], path.display().to_string());
    // The report's fields, and what this runlens lacks to run it: nothing.
    let mut printed = printed;
    assert_eq!(printed["missing_kernels"], serde_json::json!([]), "{printed}");
    printed.as_object_mut().unwrap().remove("missing_kernels");
    let expected = serde_json::to_value(pte::inspect_file(&path).unwrap()).unwrap();
    assert_eq!(printed, expected);
    // What was printed against an independent reading of the same file:
    // ExecuTorch's Python deserializer (tests/python/pte_counts.py).
    compare_json_with_python("xnnpack", &printed);
    assert!(printed["plans"][0]["delegate_calls"].as_u64() > Some(0), "{printed}");
}

#[test]
fn inspect_table_shows_coverage() {
    let path = model_file("xnnpack.pte");
    let out = runlens(&["inspect", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "method \"forward\"",
        "coverage",
        "XnnpackBackend",
        "XNNFullyConnected",
        "delegate blobs",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
}

#[test]
fn inspect_bad_files_exit_1_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.pte");
    std::fs::write(&garbage, b"this is not a program at all").unwrap();
    let missing = dir.path().join("missing.pte");
    for path in [&garbage, &missing] {
        let out = runlens(&["inspect", "--json", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", path.display());
        assert!(out.stdout.is_empty(), "stdout must stay empty on error");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(path.to_str().unwrap()),
            "stderr does not name the file: {stderr}"
        );
    }
}
