//! `runlens layers --model-explorer DIR` on the tiny models' programs and
//! MiniLM's: what it writes is read back with Model Explorer's own package
//! (tests/model_explorer_check.py, through the venv's Python: the graph into its
//! `GraphCollection`, each node-data file into its `GraphNodeData`, strictly),
//! and every node id of the node data is a node of the graph the export wrote
//! with Model Explorer's PyTorch adapter. Each instruction of the `.pte` (read
//! by runlens' own reader, not the sidecar) lands on a node whose label is its
//! operator, or `executorch_call_delegate` for a delegate call; delegated nodes
//! are marked 1 (XNNPACK) and kernel calls 0 (default kernels); the nodes' times
//! add up to the layers total of the same run. Skips with a message when the
//! package is absent (`pip install ai-edge-model-explorer`).
//!
//! Needs the model directories exported with the package installed
//! (`make models`, `make test-models`). No test asserts a speed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use runlens::pte::Instruction;
use serde_json::Value;

mod common;
use common::runlens;

const TEXT: &str = "the cat sat on the mat";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    root().join(".venv/bin/python")
}

/// Whether Model Explorer's package imports in the venv; says why not when it does not.
fn package_present() -> bool {
    let ok = Command::new(python()).args(["-c", "import model_explorer, dacite"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: Model Explorer's package is not installed in {} (pip install ai-edge-model-explorer)", python().display());
    }
    ok
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("runlens-model-explorer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `aten::addmm.out` -> `addmm`; `executorch_prim::et_view.default` -> `et_view`.
fn op_base(op: &str) -> &str {
    let name = op.split("::").nth(1).unwrap_or(op);
    name.split('.').next().unwrap_or(name)
}

/// Whether a graph node labelled `label` (the adapter's: `aten.addmm`,
/// `dim_order_ops._to_dim_order_copy`, `<built-in function add>`, `output`) is operator `op`.
fn label_is(label: &str, op: &str) -> bool {
    let base = op_base(op);
    let label_base = label.rsplit('.').next().unwrap_or(label);
    label_base == base
        || (base == "et_view" && label_base == "view_copy")
        || label.ends_with(&format!(" {base}>"))
        // A buffer's write-back (a KV cache) is the graph's output in the edge graph.
        || (base == "copy_" && label == "output")
}

fn total(v: &Value, backend: &str) -> f64 {
    v["backends"].as_array().unwrap().iter().find(|b| b["name"] == backend).unwrap()["total_ms"].as_f64().unwrap()
}

/// Runs `layers --model-explorer` on `model` and checks every program of `programs`.
fn check(model: &str, programs: &[&str], extra: &[&str]) {
    let dir = root().join("models").join(model);
    let out_dir = scratch(model);
    let mut args = vec!["--model", dir.to_str().unwrap(), "--threads", "1"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["layers", "--json", "--runs", "1", "--model-explorer", out_dir.to_str().unwrap(), TEXT]);
    let out = runlens(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "runlens {args:?} failed: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    for program in programs {
        assert!(stderr.contains(&format!("{program}: model-explorer ")), "{model}: no command to open {program}: {stderr}");
    }

    let checked = Command::new(python()).arg(root().join("tests/model_explorer_check.py")).arg(&out_dir).args(programs).output().unwrap();
    assert!(checked.status.success(), "{model}: Model Explorer's package cannot read the files: {}", String::from_utf8_lossy(&checked.stderr));
    let report: Value = serde_json::from_slice(&checked.stdout).unwrap();

    for program in programs {
        let r = &report[*program];
        let labels: BTreeMap<String, String> =
            r["labels"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned())).collect();
        for kind in ["time", "gap", "where"] {
            let missing = r["files"][kind]["missing"].as_array().unwrap();
            assert!(missing.is_empty(), "{model}/{program}.{kind}: node ids not in the graph: {missing:?}");
        }
        let results = |kind: &str| -> BTreeMap<String, f64> {
            r["files"][kind]["results"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_f64().unwrap())).collect()
        };
        let (time, where_, gap) = (results("time"), results("where"), results("gap"));

        // Each instruction of the program, as runlens' own reader sees it, against its node.
        let pte = dir.join(format!("{program}.pte"));
        let (_, table) = runlens::pte::read_program_file(&pte).unwrap();
        let plan = table.plan("forward").unwrap();
        let sidecar: Value = serde_json::from_slice(&std::fs::read(dir.join(format!("{program}.modules.json"))).unwrap()).unwrap();
        let mut nodes = BTreeSet::new();
        let (mut delegated, mut kernels) = (0, 0);
        for entry in sidecar["instructions"].as_array().unwrap() {
            let (chain, index) = (entry["chain"].as_u64().unwrap() as usize, entry["index"].as_u64().unwrap() as usize);
            let node = entry["node"].as_str().unwrap_or_else(|| panic!("{model}/{program}: instruction {index} names no node: {entry}"));
            let label = labels.get(node).unwrap_or_else(|| panic!("{model}/{program}: node {node} of instruction {index} is not in the graph"));
            nodes.insert(node.to_owned());
            match plan.get(chain, index) {
                Some(Instruction::Delegate { delegate }) => {
                    assert_eq!(plan.delegate_backend(delegate), Some("XnnpackBackend"));
                    assert_eq!(label, "executorch_call_delegate", "{model}/{program}: delegate call {index} is on node {node}");
                    assert_eq!(where_.get(node), Some(&1.0), "{model}/{program}: delegated node {node} is not marked XNNPACK");
                    delegated += 1;
                }
                Some(Instruction::Kernel { op }) => {
                    let op = plan.operator(op).unwrap();
                    assert!(label_is(label, op), "{model}/{program}: kernel call {index} ({op}) is on node {node} labelled {label}");
                    assert_eq!(where_.get(node), Some(&0.0), "{model}/{program}: kernel node {node} is not marked default kernels");
                    kernels += 1;
                }
                other => panic!("{model}/{program}: the sidecar lists instruction {index}, which is {other:?}"),
            }
        }
        assert!(kernels > 0, "{model}/{program}: no kernel call");
        if program.starts_with("xnnpack") {
            assert!(delegated > 0, "{model}/{program}: no delegate call");
        } else {
            assert_eq!(delegated, 0, "{model}/{program}");
        }
        // Every node with data is an instruction's node, and every instruction's node has a time.
        let keys = |m: &BTreeMap<String, f64>| m.keys().cloned().collect::<BTreeSet<_>>();
        assert_eq!(keys(&where_), nodes, "{model}/{program}: where-it-ran nodes");
        assert_eq!(keys(&time), nodes, "{model}/{program}: timed nodes");
        assert!(keys(&gap).is_subset(&nodes), "{model}/{program}: gap nodes");

        // The nodes' times are the layers total of the same run.
        let sum: f64 = time.values().sum();
        let layers_total = total(&v, program);
        assert!(layers_total > 0.0 && (sum - layers_total).abs() <= 1e-9 * layers_total, "{model}/{program}: nodes {sum} ms vs layers {layers_total} ms");
        // Gaps against eager where layers measured them (the full build has eager).
        #[cfg(feature = "eager")]
        if !program.ends_with("-nocache") {
            assert!(!gap.is_empty(), "{model}/{program}: no gap against eager on any node");
        }
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn tiny_bert_node_data_resolves_in_its_graphs() {
    if package_present() {
        check("tiny-bert-mlm", &["portable", "xnnpack"], &[]);
    }
}

#[test]
fn tiny_gpt2_node_data_resolves_in_its_graphs() {
    if package_present() {
        check("tiny-gpt2", &["portable", "xnnpack", "portable-nocache", "xnnpack-nocache"], &[]);
    }
}

#[test]
fn minilm_node_data_resolves_in_its_graphs() {
    // MiniLM is `make run`'s model: exported before `make test` installed the
    // package (a `make run` first), it has no graphs; a clean `make test` exports it after.
    if !root().join("models/minilm/portable.graph.json").is_file() {
        eprintln!("SKIPPED: models/minilm was exported without Model Explorer's package: `make clean-models test` exports it with its graphs");
        return;
    }
    if package_present() {
        // The programs, and eager (the gaps' reference) where this build has it.
        let backends = if cfg!(feature = "eager") { "eager,portable,xnnpack,xnnpack-int8,xnnpack-static" } else { "portable,xnnpack,xnnpack-int8,xnnpack-static" };
        check("minilm", &["portable", "xnnpack", "xnnpack-int8", "xnnpack-static"], &["--backends", backends]);
    }
}

/// Programs without their graph files (an export without the package): an
/// error naming the first one and the export command, before anything runs
/// (DIR is not even created). Needs no package.
#[test]
fn a_program_without_its_graph_is_a_clear_error() {
    let real = root().join("models/tiny-bert-mlm");
    let copy = scratch("no-graph");
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(&real).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_owned();
        if !name.to_string_lossy().ends_with(".graph.json") {
            std::os::unix::fs::symlink(&path, copy.join(name)).unwrap();
        }
    }
    let out_dir = copy.join("out");
    let out = runlens(&["--model", copy.to_str().unwrap(), "layers", "--model-explorer", out_dir.to_str().unwrap(), TEXT]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a missing file is exit code 2: {stderr}");
    assert!(stderr.contains("portable.graph.json") && stderr.contains("python/export.py"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out_dir.exists(), "DIR was created before the check");
    let _ = std::fs::remove_dir_all(&copy);
}
