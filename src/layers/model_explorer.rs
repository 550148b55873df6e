//! `runlens layers --model-explorer DIR`: node-data files for Google's Model
//! Explorer (docs/model-explorer.md). Each ExecuTorch program's edge graph is
//! `<program>.graph.json` next to its `.pte` (written at export by
//! `python/runlens_export/model_explorer.py` with Model Explorer's own PyTorch
//! adapter; its node ids are the edge graph's node names). The sidecar names,
//! for every instruction, the node it was emitted from; a delegate call is its
//! `executorch_call_delegate` node. So each instruction's time, its module's
//! gap and where it ran land on one node of that graph.
//!
//! Per program, in DIR: the graph itself (`<program>.graph.json`, copied) and
//!   `<program>.time.json`   ms per run of each node (sum of its instructions)
//!   `<program>.gap.json`    max |diff| of the node's module output against eager
//!   `<program>.where.json`  1 = a delegate (XNNPACK) ran it, 0 = the default kernels
//! each a Model Explorer "model node data" document:
//! `{"graph": {"results": {"<node id>": {"value": v, ...}}, "gradient" | "thresholds": [...]}}`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;
use serde_json::{json, Value};

use super::report::LayersReport;
use super::rows::row_of;
use super::sidecar::{self, Sidecar};
use super::InstructionTimes;
use crate::backend::BackendSpec;
use crate::pte::{Instruction, PlanInstructions};

/// What a node of the graph was run by.
pub const DEFAULT_KERNELS: &str = "default kernels";
/// Colours of "where it ran": the delegate's and the default kernels'.
pub const DELEGATE_COLOR: &str = "#2e7d32";
pub const KERNELS_COLOR: &str = "#9e9e9e";
/// The command that writes the graph files.
pub const EXPORT_COMMAND: &str =
    "python/export.py (with Model Explorer's package installed in its Python: pip install ai-edge-model-explorer)";

/// `xnnpack.pte` -> `xnnpack.graph.json`, where the export writes it.
pub fn graph_path(program: &Path) -> PathBuf {
    program.with_extension("graph.json")
}

/// A program has no graph file beside it (exit code 2, as for a missing file).
#[derive(Debug, thiserror::Error)]
#[error("{program}: no Model Explorer graph {} beside {}; it is written by {EXPORT_COMMAND}: re-export the model directory", graph.display(), pte.display())]
pub struct NoGraph {
    pub program: String,
    pub graph: PathBuf,
    pub pte: PathBuf,
}

/// Every program of `specs` has its graph file; else [`NoGraph`] for the first
/// that lacks it (checked before anything runs).
pub fn check_graphs(specs: &[BackendSpec]) -> Result<(), NoGraph> {
    for spec in specs {
        let Some(pte) = spec.pte_file() else { continue };
        let graph = graph_path(pte);
        if !graph.is_file() {
            return Err(NoGraph { program: spec.name.clone(), graph, pte: pte.to_path_buf() });
        }
    }
    Ok(())
}

/// The graph collection the export wrote: its graph id and node ids.
#[derive(Debug, Deserialize)]
struct GraphCollection {
    graphs: Vec<GraphDoc>,
}

#[derive(Debug, Deserialize)]
struct GraphDoc {
    id: String,
    nodes: Vec<NodeDoc>,
}

#[derive(Debug, Deserialize)]
struct NodeDoc {
    id: String,
}

/// One program's graph: its id and its nodes' ids.
#[derive(Debug)]
pub struct Graph {
    pub id: String,
    pub nodes: std::collections::HashSet<String>,
}

impl Graph {
    pub fn read(path: &Path) -> anyhow::Result<Graph> {
        let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let doc: GraphCollection = serde_json::from_slice(&text).map_err(|e| {
            anyhow::anyhow!("{} is not a Model Explorer graph collection: {e}; re-export with {EXPORT_COMMAND}", path.display())
        })?;
        let [graph] = <[GraphDoc; 1]>::try_from(doc.graphs)
            .map_err(|g| anyhow::anyhow!("{} holds {} graphs, not one; re-export with {EXPORT_COMMAND}", path.display(), g.len()))?;
        Ok(Graph { id: graph.id, nodes: graph.nodes.into_iter().map(|n| n.id).collect() })
    }
}

/// One node's values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeValues {
    pub ms: f64,
    /// The delegate's backend (`XnnpackBackend`) when a delegate call ran it.
    pub delegate: Option<String>,
    /// The row of the node's module (for its gap).
    pub row: String,
}

/// A program's nodes: (node id, values) in the order they first ran.
#[derive(Debug, Default)]
pub struct ProgramNodes {
    pub nodes: Vec<(String, NodeValues)>,
    /// Time of instructions that name no node of the graph (ms per run).
    pub unplaced_ms: f64,
}

/// Puts each instruction's time on its node.
pub fn program_nodes(times: &InstructionTimes, plan: &PlanInstructions, sidecar: &Sidecar, graph: &Graph) -> anyhow::Result<ProgramNodes> {
    let mut out = ProgramNodes::default();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for &((chain, instr), ms) in times {
        let Some(node) = sidecar.graph_node(chain, instr) else {
            out.unplaced_ms += ms;
            continue;
        };
        anyhow::ensure!(
            graph.nodes.contains(node),
            "{}: instruction {instr} of chain {chain} comes from node {node:?}, which the graph lacks; re-export the model directory",
            sidecar.file.display()
        );
        let delegate = match plan.get(chain, instr) {
            Some(Instruction::Delegate { delegate }) => Some(plan.delegate_backend(delegate).unwrap_or("delegate").to_owned()),
            _ => None,
        };
        let k = *index.entry(node.to_owned()).or_insert_with(|| {
            let row = row_of(sidecar.instruction(chain, instr).unwrap_or(""));
            out.nodes.push((node.to_owned(), NodeValues { ms: 0.0, delegate: delegate.clone(), row }));
            out.nodes.len() - 1
        });
        out.nodes[k].1.ms += ms;
    }
    Ok(out)
}

fn node_data(graph_id: &str, results: serde_json::Map<String, Value>, scale: Value) -> Value {
    let mut graph = serde_json::Map::new();
    graph.insert("results".into(), Value::Object(results));
    if let Value::Object(scale) = scale {
        graph.extend(scale);
    }
    json!({ graph_id: graph })
}

/// Light to dark red: more time, or a larger gap, is darker.
fn gradient() -> Value {
    json!({"gradient": [{"stop": 0, "bgColor": "#fff5f0"}, {"stop": 0.5, "bgColor": "#fb6a4a"}, {"stop": 1, "bgColor": "#67000d"}]})
}

/// `<program>.time.json`: ms per run of each node.
pub fn time_data(graph_id: &str, nodes: &ProgramNodes) -> Value {
    let results = nodes.nodes.iter().map(|(id, v)| (id.clone(), json!({"value": v.ms}))).collect();
    node_data(graph_id, results, gradient())
}

/// `<program>.where.json`: 1 where a delegate ran the node, 0 on the default kernels.
pub fn where_data(graph_id: &str, nodes: &ProgramNodes) -> Value {
    let results = nodes
        .nodes
        .iter()
        .map(|(id, v)| {
            let (value, color) = if v.delegate.is_some() { (1, DELEGATE_COLOR) } else { (0, KERNELS_COLOR) };
            (id.clone(), json!({"value": value, "bgColor": color}))
        })
        .collect();
    let thresholds = json!({"thresholds": [{"value": 0, "bgColor": KERNELS_COLOR}, {"value": 1, "bgColor": DELEGATE_COLOR}]});
    node_data(graph_id, results, thresholds)
}

/// `<program>.gap.json`: the max |diff| against eager of the output of each
/// node's module (the gap `runlens layers` measures per row); nodes whose
/// module has no measured gap are left out.
pub fn gap_data(graph_id: &str, nodes: &ProgramNodes, report: &LayersReport, backend: &str) -> Value {
    let results = nodes
        .nodes
        .iter()
        .filter_map(|(id, v)| report.gaps.get(&(v.row.clone(), backend.to_owned())).map(|g| (id.clone(), json!({"value": g.max_abs_diff}))))
        .collect();
    node_data(graph_id, results, gradient())
}

/// What was written for one program.
#[derive(Debug)]
pub struct Written {
    pub program: String,
    pub graph: PathBuf,
    pub files: Vec<PathBuf>,
}

fn write_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    let text = serde_json::to_string(value)? + "\n";
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes the node data of every program of `specs` into `out` (created if
/// missing), with a copy of each program's graph.
pub fn write(
    out: &Path,
    specs: &[BackendSpec],
    report: &LayersReport,
    times: &BTreeMap<String, InstructionTimes>,
) -> anyhow::Result<Vec<Written>> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create the directory {}", out.display()))?;
    let mut written = Vec::new();
    for spec in specs {
        let Some(pte) = spec.pte_file() else { continue };
        let Some(times) = times.get(&spec.name) else {
            continue;
        };
        let graph_file = graph_path(pte);
        let graph = Graph::read(&graph_file)?;
        let (_, table) = crate::pte::read_program_file(pte).map_err(|e| anyhow::anyhow!("{}: {e}", pte.display()))?;
        let plan = table.plan("forward").with_context(|| format!("{}: no method forward", pte.display()))?;
        let side = sidecar::path_for(pte);
        anyhow::ensure!(side.is_file(), "{spec}: no sidecar {}; re-export the model directory with python/export.py", side.display());
        let sidecar = Sidecar::read(&side, plan)?;
        let nodes = program_nodes(times, plan, &sidecar, &graph)?;
        anyhow::ensure!(
            !nodes.nodes.is_empty(),
            "{}: names no graph node for any instruction (written before runlens recorded them); re-export the model directory",
            side.display()
        );
        let stem = pte.file_stem().and_then(|s| s.to_str()).unwrap_or(&spec.name).to_owned();
        let copy = out.join(format!("{stem}.graph.json"));
        if std::fs::canonicalize(&graph_file).ok() != std::fs::canonicalize(&copy).ok() {
            std::fs::copy(&graph_file, &copy).with_context(|| format!("cannot copy {} to {}", graph_file.display(), copy.display()))?;
        }
        let mut files = Vec::new();
        for (kind, value) in [
            ("time", time_data(&graph.id, &nodes)),
            ("gap", gap_data(&graph.id, &nodes, report, &spec.name)),
            ("where", where_data(&graph.id, &nodes)),
        ] {
            let path = out.join(format!("{stem}.{kind}.json"));
            write_json(&path, &value)?;
            files.push(path);
        }
        written.push(Written { program: spec.name.clone(), graph: copy, files });
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> PlanInstructions {
        PlanInstructions::forward(&["aten::embedding.out", "executorch_prim::et_view.default"], vec![Instruction::Kernel { op: 0 }, Instruction::Delegate { delegate: 0 }, Instruction::Kernel { op: 1 }])
    }

    fn sidecar(third_node: &str) -> Sidecar {
        let text = format!(
            r#"{{"runlens_modules": 1, "instructions": [
            {{"chain": 0, "index": 0, "op": "aten::embedding.out", "module": "bert.embeddings.word_embeddings", "node": "aten_embedding_default"}},
            {{"chain": 0, "index": 1, "op": "delegate XnnpackBackend", "module": "bert.encoder.layer.0.attention.self", "node": "executorch_call_delegate"}},
            {{"chain": 0, "index": 2, "op": "executorch_prim::et_view.default", "module": "bert.encoder.layer.0.attention.self", "node": {third_node}}}],
            "nodes": []}}"#
        );
        Sidecar::parse(Path::new("x.modules.json"), text.as_bytes(), &plan()).unwrap()
    }

    fn graph() -> Graph {
        let nodes =
            ["input_ids", "aten_embedding_default", "lowered_module_0", "executorch_call_delegate", "aten_view_copy_default", "output"];
        Graph { id: "graph".into(), nodes: nodes.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn instruction_times_land_on_their_nodes_and_add_up() {
        let times = vec![((0, 0), 1.5), ((0, 1), 4.0), ((0, 2), 0.25), ((0, 1), 2.0)];
        let nodes = program_nodes(&times, &plan(), &sidecar("\"aten_view_copy_default\""), &graph()).unwrap();
        let ids: Vec<&str> = nodes.nodes.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["aten_embedding_default", "executorch_call_delegate", "aten_view_copy_default"]);
        assert_eq!(nodes.nodes[1].1.ms, 6.0);
        assert_eq!(nodes.nodes[1].1.delegate.as_deref(), Some("XnnpackBackend"));
        assert_eq!(nodes.nodes[0].1.delegate, None);
        assert_eq!(nodes.nodes[0].1.row, "embeddings");
        let total: f64 = nodes.nodes.iter().map(|(_, v)| v.ms).sum();
        assert_eq!(total + nodes.unplaced_ms, 7.75);
        let where_ = where_data("graph", &nodes);
        assert_eq!(where_["graph"]["results"]["executorch_call_delegate"]["value"], 1);
        assert_eq!(where_["graph"]["results"]["aten_embedding_default"]["value"], 0);
        let time = time_data("graph", &nodes);
        assert_eq!(time["graph"]["results"]["aten_embedding_default"]["value"], 1.5);
        assert!(time["graph"]["gradient"].is_array());
    }

    #[test]
    fn a_node_the_graph_lacks_is_an_error_and_a_missing_name_is_unplaced() {
        let times = vec![((0, 0), 1.0), ((0, 2), 2.0)];
        let err = program_nodes(&times, &plan(), &sidecar("\"aten_view_copy_default_9\""), &graph()).unwrap_err().to_string();
        assert!(err.contains("aten_view_copy_default_9") && err.contains("re-export"), "{err}");
        let nodes = program_nodes(&times, &plan(), &sidecar("null"), &graph()).unwrap();
        assert_eq!((nodes.nodes.len(), nodes.unplaced_ms), (1, 2.0));
    }
}
