//! `runlens inspect [--json] FILE.pte`: delegation coverage read from the file,
//! and what of it the runtime linked into runlens has no kernel for.
//! `runlens inspect [--json] FILE.gguf`: a GGUF's header as runlens reads it
//! (`cli::gguf`). `runlens inspect [--json] FILE.onnx`: an ONNX file as runlens
//! reads it (`crate::onnx`: IR version, opsets, producer, the graph's inputs and
//! outputs, its operators by count). `runlens inspect [--json] DIR`: what a model directory holds (its manifest:
//! model, task, context, the weights' files and dtypes, the programs).

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::backend::executorch::MissingKernels;
use crate::pte::{self, CoverageReport};

/// `inspect --json`: the coverage report's fields, and `missing_kernels`.
#[derive(Serialize)]
struct Inspection<'a> {
    #[serde(flatten)]
    report: &'a CoverageReport,
    /// One entry per method that calls something this runlens lacks (empty: it can run every method).
    missing_kernels: Vec<MissingJson>,
}

#[derive(Serialize)]
struct MissingJson {
    method: String,
    operators: Vec<String>,
    backends: Vec<String>,
}

/// `inspect DIR --json`: the model directory as its manifest describes it.
#[derive(Serialize)]
struct DirJson<'a> {
    dir: String,
    model: &'a str,
    task: &'a str,
    architecture: Option<&'a str>,
    model_type: Option<&'a str>,
    max_seq_len: usize,
    /// The checkpoint's dtype and what the float columns compute in (null in older manifests).
    source_dtype: Option<&'a str>,
    compute_dtype: Option<&'a str>,
    /// Eager's weights: the file (or index) first, then the shards it names.
    weights: Vec<String>,
    weight_bytes: u64,
    programs: Vec<ProgramJson<'a>>,
}

#[derive(Serialize)]
struct ProgramJson<'a> {
    name: &'a str,
    file: &'a str,
    title: &'a str,
    bytes: Option<u64>,
    quantization: Option<String>,
}

/// Describes the model directory `root`: one line each for the model, the weights, every program.
fn describe_dir(root: &Path, json: bool) -> anyhow::Result<()> {
    let dir = crate::model::ModelDir::open(root)?;
    let m = dir.manifest();
    let size = |p: &Path| std::fs::metadata(p).ok().map(|m| m.len());
    let weights = dir.weight_files().unwrap_or_default();
    let weight_bytes = weights.iter().filter_map(|f| size(f)).sum::<u64>();
    let name = |p: &Path| p.strip_prefix(dir.root()).unwrap_or(p).display().to_string();
    let programs: Vec<ProgramJson> = m
        .programs
        .iter()
        .map(|p| ProgramJson { name: &p.name, file: &p.file, title: &p.title, bytes: size(&dir.root().join(&p.file)), quantization: p.quantization_summary() })
        .collect();
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    if json {
        let out = DirJson {
            dir: dir.root().display().to_string(),
            model: &m.model,
            task: m.task.name(),
            architecture: m.architecture.as_deref(),
            model_type: m.model_type.as_deref(),
            max_seq_len: m.max_seq_len,
            source_dtype: m.source_dtype.as_deref(),
            compute_dtype: m.compute_dtype.as_deref(),
            weights: weights.iter().map(|f| name(f)).collect(),
            weight_bytes,
            programs,
        };
        println!("{}", serde_json::to_string(&out)?);
        return Ok(());
    }
    let arch = match (&m.architecture, &m.model_type) {
        (Some(a), Some(t)) => format!(" · {a} ({t})"),
        (Some(a), None) | (None, Some(a)) => format!(" · {a}"),
        (None, None) => String::new(),
    };
    println!("{} · {}{arch} · {} tokens at most", m.model, m.task, m.max_seq_len);
    let files = match weights.as_slice() {
        [] => format!("{} (missing)", dir.weights_name()),
        [one] => name(one),
        [index, shards @ ..] => format!("{} and {} shards", name(index), shards.len()),
    };
    let dtypes = m.dtypes().map(|d| format!(", {d}")).unwrap_or_default();
    println!("eager weights: {files}, {}{dtypes}", mb(weight_bytes));
    for p in &programs {
        let bytes = p.bytes.map_or("missing".to_string(), mb);
        let scheme = p.quantization.as_deref().map(|q| format!(" · {q}")).unwrap_or_default();
        println!("program {}: {} ({bytes}) · {}{scheme}", p.name, p.file, p.title);
    }
    Ok(())
}

/// `inspect --json` of an ONNX file: runlens' reading of it, and the graph
/// ONNX Runtime's optimizer made of it (or why there is none).
#[derive(Serialize)]
struct OnnxInspection<'a> {
    #[serde(flatten)]
    file: &'a crate::onnx::OnnxModel,
    optimized: Option<OptimizedGraph<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    optimized_error: Option<String>,
}

#[derive(Serialize)]
struct OptimizedGraph<'a> {
    /// ONNX Runtime's version, whose optimizer made it.
    onnxruntime: String,
    nodes: usize,
    operators: &'a [(String, usize)],
}

/// An ONNX file's header and graph as runlens reads them, before ONNX Runtime;
/// then its operators after ONNX Runtime's graph optimizer (what "delegation"
/// means for ONNX Runtime: the fused kernels it runs instead), counted beside
/// the file's.
fn inspect_onnx(file: &Path, json: bool) -> anyhow::Result<()> {
    let m = crate::onnx::read_path(file)?;
    let optimized = crate::backend::onnxruntime::optimized_graph(file);
    let version = crate::backend::onnxruntime::library::version().unwrap_or_else(|| "?".to_string());
    if json {
        let (graph, error) = match &optimized {
            Ok(o) => (Some(OptimizedGraph { onnxruntime: version, nodes: o.nodes, operators: &o.operators }), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        println!("{}", serde_json::to_string_pretty(&OnnxInspection { file: &m, optimized: graph, optimized_error: error })?);
        return Ok(());
    }
    let opsets = m.opsets.iter().map(|(d, v)| format!("{d} {v}")).collect::<Vec<_>>().join(", ");
    let producer = if m.producer.is_empty() { "an unnamed producer" } else { m.producer.as_str() };
    println!("{}: ONNX IR {}, opsets {opsets}, from {producer}", file.display(), m.ir_version);
    println!("  inputs:  {}", m.describe_inputs());
    println!("  outputs: {}", m.describe_outputs());
    if m.subgraph_nodes > 0 {
        println!(
            "  {} of its {} nodes are inside subgraphs (an If's branches, each counted, though a run takes one), counted below with the rest",
            m.subgraph_nodes, m.nodes
        );
    }
    let Ok(after) = &optimized else {
        println!("  {} nodes, {} initializers; operators by count:", m.nodes, m.initializers);
        for (op, n) in &m.operators {
            println!("    {n:>5}  {op}");
        }
        if let Err(e) = &optimized {
            println!("  after ONNX Runtime's graph optimizer: not shown: {e:#}");
        }
        return Ok(());
    };
    println!(
        "  {} nodes, {} initializers; operators by count, in the file and after ONNX Runtime {version}'s graph optimizer \
         (every level, CPU execution provider: {} nodes):",
        m.nodes, m.initializers, after.nodes
    );
    println!("    {:>5}  {:>5}  operator", "file", "after");
    let count = |ops: &[(String, usize)], op: &str| ops.iter().find(|(o, _)| o == op).map_or(0, |(_, n)| *n);
    let mut rows: Vec<&str> = m.operators.iter().map(|(o, _)| o.as_str()).collect();
    rows.extend(after.operators.iter().map(|(o, _)| o.as_str()).filter(|o| count(&m.operators, o) == 0));
    for op in rows {
        let (before, now) = (count(&m.operators, op), count(&after.operators, op));
        let mark = if before == 0 { "  (fused in)" } else if now == 0 { "  (fused away)" } else { "" };
        println!("    {before:>5}  {now:>5}  {op}{mark}");
    }
    Ok(())
}

/// Prints the coverage table of `file`, or with `json` exactly one JSON object;
/// a model directory is described instead.
pub fn run(file: &Path, json: bool) -> anyhow::Result<()> {
    if file.is_dir() {
        return describe_dir(file, json);
    }
    if crate::backend::is_gguf(file) {
        return super::gguf::inspect(file, json);
    }
    if crate::backend::is_onnx(file) {
        return inspect_onnx(file, json);
    }
    let report =
        pte::inspect_file(file).with_context(|| format!("cannot inspect {}", file.display()))?;
    let missing: Vec<(String, MissingKernels)> = report
        .plans
        .iter()
        .map(|plan| (plan.name.clone(), MissingKernels::of(plan)))
        .filter(|(_, m)| !m.is_empty())
        .collect();
    if json {
        let missing_kernels = missing
            .into_iter()
            .map(|(method, m)| MissingJson { method, operators: m.operators, backends: m.backends })
            .collect();
        println!("{}", serde_json::to_string(&Inspection { report: &report, missing_kernels })?);
    } else {
        print!("{report}");
        for (method, m) in &missing {
            println!("\nrunlens cannot run method {method} of this program: {m}.\n  {}", m.advice());
        }
    }
    Ok(())
}
