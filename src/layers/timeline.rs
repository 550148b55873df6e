//! The timelines of `--trace FILE` ([`crate::timeline`]) from what `profile`
//! and `layers` already measured: an ExecuTorch program's traced runs (its
//! ETDump's events, each named by its operator and, through the sidecar, its
//! module), and eager's timed runs (its module scopes).

use serde_json::Value;

use super::executorch::xnodes_of;
use super::rows::{order_key, row_of};
use super::sidecar::Sidecar;
use crate::profile::aggregate::{delegate_operator_name, CONTROL_EVENTS, DELEGATE_EVENT, EXECUTE_BLOCK, EXECUTE_EVENT, KERNEL_EVENT};
use crate::profile::etdump::{DelegateEventId, ProfileEvent};
use crate::profile::Traced;
use crate::pte::{Instruction, XnnNode};
use crate::timeline::{nest, Process, Span, Thread};

/// Categories (`cat`) of the events; the instruction events (`kernel`,
/// `delegate`) add up to a program's total in `profile` and `layers`.
pub const CAT_RUN: &str = "run";
pub const CAT_KERNEL: &str = "kernel";
pub const CAT_DELEGATE: &str = "delegate";
pub const CAT_DELEGATE_OPERATOR: &str = "delegate operator";
pub const CAT_CONTROL: &str = "control";
pub const CAT_KERNEL_EVENT: &str = "kernel event";
pub const CAT_LAYER: &str = "layer";
pub const CAT_MODULE: &str = "module";

/// The program's sidecar at its usual place, if it is there and fits the program.
pub fn sidecar_for(traced: &Traced) -> Option<Sidecar> {
    let path = super::sidecar::path_for(std::path::Path::new(&traced.file));
    path.exists().then(|| Sidecar::read(&path, &traced.plan).ok()).flatten()
}

/// One program's traced runs as a process: per run (ETDump "Execute" block)
/// the `Method::execute` event holding its instruction events (kernel calls
/// named by operator, delegate calls by backend), each delegate call holding
/// the operators its delegate logged (XNNPACK's), with their module from the
/// sidecar when there is one; instructions of one layer in a row are held by
/// a `layer N` span. Time zero is the first traced run's start.
pub fn program_process(name: &str, traced: &Traced, sidecar: Option<&Sidecar>) -> Process {
    let plan = &traced.plan;
    let xnodes: Vec<Vec<XnnNode>> =
        traced.report.plan("forward").map(|p| p.blobs.iter().map(|b| b.xnodes.clone()).collect()).unwrap_or_default();
    let blocks: Vec<_> = traced.dump.runs.iter().filter(|b| b.name == EXECUTE_BLOCK).collect();
    let zero = blocks.iter().flat_map(|b| b.events.iter().map(|e| e.start)).min().unwrap_or(0);
    let ns = |ticks: u64| (traced.ratio.ms(ticks) * 1e6).round() as u64;
    let mut spans = Vec::new();
    for (run, block) in blocks.iter().enumerate() {
        let mut flat = Vec::new();
        // A delegate's operator events come before the DELEGATE_CALL that holds them.
        let mut inside: Vec<&ProfileEvent> = Vec::new();
        for event in &block.events {
            let at = |cat, name: String| Span::new(name, cat, ns(event.start.saturating_sub(zero)), ns(event.ticks()));
            if event.delegate_id.is_some() {
                inside.push(event);
                continue;
            }
            let site = event.instruction_ref();
            let mut span = match event.name.as_str() {
                EXECUTE_EVENT => at(CAT_RUN, EXECUTE_EVENT.to_owned()).arg("run", run),
                KERNEL_EVENT | DELEGATE_EVENT => {
                    let (chain, index) = site.unwrap_or((usize::MAX, usize::MAX));
                    let (cat, what) = match plan.get(chain, index) {
                        Some(Instruction::Kernel { op }) => (CAT_KERNEL, plan.operator(op).unwrap_or("?").to_owned()),
                        Some(Instruction::Delegate { delegate }) => {
                            let calls: Vec<&ProfileEvent> = inside.drain(..).filter(|e| e.instruction_ref() == site).collect();
                            let nodes = xnodes.get(delegate).map(Vec::as_slice).unwrap_or(&[]);
                            for (inner, node) in calls.iter().zip(xnodes_of(&calls, nodes)) {
                                flat.push(delegate_operator(inner, node, sidecar, ns(inner.start.saturating_sub(zero)), ns(inner.ticks())));
                            }
                            (CAT_DELEGATE, plan.delegate_backend(delegate).unwrap_or("?").to_owned())
                        }
                        _ => (CAT_KERNEL, event.name.clone()),
                    };
                    let mut span = at(cat, what).arg("chain", chain).arg("instruction", index);
                    if let Some(module) = sidecar.and_then(|s| s.instruction(chain, index)) {
                        span = span.arg("module", module).arg("row", row_of(module));
                    }
                    span
                }
                name if CONTROL_EVENTS.contains(&name) => at(CAT_CONTROL, name.to_owned()),
                name => at(CAT_KERNEL_EVENT, name.to_owned()),
            };
            if let (Some((chain, index)), false) = (site, span.args.contains_key("instruction")) {
                if event.name != EXECUTE_EVENT {
                    span = span.arg("chain", chain).arg("instruction", index);
                }
            }
            flat.push(span);
        }
        // Operator events of a delegate call the dump did not close: kept, unnamed by module.
        for inner in inside.drain(..) {
            flat.push(delegate_operator(inner, None, sidecar, ns(inner.start.saturating_sub(zero)), ns(inner.ticks())));
        }
        let mut roots = nest(flat, etdump_rank);
        for root in &mut roots {
            if root.cat == CAT_RUN {
                root.children = group_layers(std::mem::take(&mut root.children));
            }
        }
        spans.extend(roots);
    }
    let source = format!(
        "ExecuTorch's ETDump event tracer attached: {} traced runs after one warm-up run; times as the tracer measured them (the tracer adds its own work)",
        blocks.len()
    );
    Process { name: name.to_owned(), tracer: Some("ETDump"), source, threads: vec![Thread { name: "Method::execute (traced)".into(), spans }] }
}

/// An ONNX Runtime column's profiled runs (`crate::profile::onnxruntime`) as
/// a process: each `model_run` a run, each node run inside it a kernel span
/// named by its operator (its node's name an argument), at ONNX Runtime's µs.
pub fn onnx_process(name: &str, trace: &crate::profile::onnxruntime::OnnxTrace) -> Process {
    let zero = trace.runs.first().map_or(0, |r| r.0);
    let ns = |us: u64| us.saturating_sub(zero) * 1000;
    let mut spans = Vec::new();
    for (run, &(start, end)) in trace.runs.iter().enumerate() {
        let mut span = Span::new("model_run", CAT_RUN, ns(start), (end - start) * 1000).arg("run", run);
        span.children = trace
            .nodes
            .iter()
            .filter(|(_, _, ts, _)| start <= *ts && *ts <= end)
            .map(|(op, node, ts, dur)| Span::new(op.clone(), CAT_KERNEL, ns(*ts), dur * 1000).arg("node", node.clone()))
            .collect();
        spans.push(span);
    }
    let source = format!(
        "ONNX Runtime's own profiler: {} profiled runs after one warm-up run; node times in whole µs as ONNX Runtime measured them",
        trace.runs.len()
    );
    Process { name: name.to_owned(), tracer: Some("ONNX Runtime's profiler"), source, threads: vec![Thread { name: "model_run (profiled)".into(), spans }] }
}

/// How ETDump events hold each other: a run its instructions, an instruction
/// what ran inside it (a kernel's own event, a delegate's operators).
fn etdump_rank(span: &Span) -> usize {
    match span.cat {
        CAT_RUN => 0,
        CAT_KERNEL | CAT_DELEGATE | CAT_CONTROL => 1,
        _ => 2,
    }
}

/// A delegate's operator event: XNNPACK's name (`Fully Connected (NC, F32) GEMM #3`),
/// the XNode it came from and that node's module.
fn delegate_operator(inner: &ProfileEvent, node: Option<&XnnNode>, sidecar: Option<&Sidecar>, start_ns: u64, dur_ns: u64) -> Span {
    let name = match &inner.delegate_id {
        Some(DelegateEventId::Name(n)) => n.clone(),
        _ => delegate_operator_name(inner),
    };
    let mut span = Span::new(name, CAT_DELEGATE_OPERATOR, start_ns, dur_ns).arg("operator", delegate_operator_name(inner));
    if let Some((chain, index)) = inner.instruction_ref() {
        span = span.arg("chain", chain).arg("instruction", index);
    }
    if let Some(node) = node {
        span = span.arg("debug_handle", node.debug_handle).arg("xnode", node.kind.clone());
        if let Some(module) = sidecar.and_then(|s| s.node(node.debug_handle)) {
            span = span.arg("module", module).arg("row", row_of(module));
        }
    }
    span
}

/// The layer a span's row is in (`order_key`'s layer rows), if any.
fn layer_of(span: &Span) -> Option<usize> {
    let row = span.args.get("row").and_then(Value::as_str)?;
    let (kind, n, _) = order_key(row);
    (kind == 2).then_some(n)
}

/// Consecutive spans of one layer wrapped in a `layer N` span (from the
/// first's start to the last's end); the others stay as they are.
fn group_layers(spans: Vec<Span>) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    let mut open: Option<(usize, Span)> = None;
    for span in spans {
        let layer = layer_of(&span);
        match (&mut open, layer) {
            (Some((n, group)), Some(l)) if *n == l => {
                group.dur_ns = span.end_ns().max(group.end_ns()) - group.start_ns;
                group.children.push(span);
                continue;
            }
            _ => {}
        }
        if let Some((_, group)) = open.take() {
            out.push(group);
        }
        match layer {
            Some(l) => {
                let mut group = Span::new(format!("layer {l}"), CAT_LAYER, span.start_ns, span.dur_ns).arg("layer", l);
                group.children.push(span);
                open = Some((l, group));
            }
            None => out.push(span),
        }
    }
    if let Some((_, group)) = open {
        out.push(group);
    }
    out
}

/// Sum of a process's instruction events (kernel and delegate calls) per run,
/// in ms: the same total as `profile`'s and `layers`' for the program.
pub fn instruction_ms_per_run(process: &Process) -> f64 {
    let spans: Vec<&Span> = process.threads.iter().flat_map(|t| t.spans.iter().flat_map(Span::walk)).collect();
    let runs = spans.iter().filter(|s| s.cat == CAT_RUN).count().max(1);
    let ns: u64 = spans.iter().filter(|s| s.cat == CAT_KERNEL || s.cat == CAT_DELEGATE).map(|s| s.dur_ns).sum();
    ns as f64 / 1e6 / runs as f64
}

/// One of eager's timed forwards, in ns.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedForward {
    /// From the first timed run's start.
    pub start_ns: u64,
    pub dur_ns: u64,
    /// Each module scope: (path, start from this run's start, wall time).
    pub scopes: Vec<(String, u64, u64)>,
}

/// Eager's timed runs as a process: per run a `forward` span holding its
/// module scopes as they nest (`encoder` > `encoder.layer.0` > ...), times
/// from the same timing as `layers`' table.
pub fn eager_process(name: &str, runs: &[TimedForward]) -> Process {
    let mut spans = Vec::new();
    for (k, TimedForward { start_ns: start, dur_ns, scopes }) in runs.iter().enumerate() {
        let mut flat = vec![Span::new("forward", CAT_RUN, *start, *dur_ns).arg("run", k)];
        for (path, at, wall) in scopes {
            let span = Span::new(path.clone(), CAT_MODULE, start + at, *wall).arg("row", row_of(path));
            flat.push(span);
        }
        spans.extend(nest(flat, |s| if s.cat == CAT_RUN { 0 } else { 1 + s.name.matches('.').count() }));
    }
    let source = "runlens' own timing of eager's module scopes (wall time of each module's forward), no tracer".to_owned();
    Process { name: name.to_owned(), tracer: None, source, threads: vec![Thread { name: "forward (timed)".into(), spans }] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_spans_of_a_layer_are_grouped() {
        let s = |row: &str, start| Span::new(row, CAT_KERNEL, start, 10).arg("row", row);
        let grouped = group_layers(vec![
            s("embeddings", 0),
            s("encoder.layer.0.attention.self", 10),
            s("encoder.layer.0.output", 20),
            s("encoder.layer.1.attention.self", 30),
            Span::new("XnnpackBackend", CAT_DELEGATE, 40, 5),
        ]);
        let names: Vec<(&str, usize, u64, u64)> =
            grouped.iter().map(|g| (g.name.as_str(), g.children.len(), g.start_ns, g.dur_ns)).collect();
        assert_eq!(names, [("embeddings", 0, 0, 10), ("layer 0", 2, 10, 20), ("layer 1", 1, 30, 10), ("XnnpackBackend", 0, 40, 5)]);
    }
}
