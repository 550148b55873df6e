//! Per-operator times of an ONNX Runtime column, from ONNX Runtime's own
//! profiler, read as ETDump is read for a `.pte`: a separate session with the
//! profiler on ([`crate::backend::onnxruntime::profiled_runs`]), one warm-up
//! run and `runs` profiled ones, the profiler's JSON summed per operator.
//!
//! What ONNX Runtime 1.31 writes (`SessionOptions::EnableProfiling`): a JSON
//! array of Chrome trace events. Per `Run`, one `model_run` event (category
//! `Session`, its duration in µs) and inside it one `SequentialExecutor::Execute`;
//! per node run, an event of category `Node` named `{node}_kernel_time` whose
//! `args.op_name` is the operator the node runs *after* the graph optimizer
//! (`FusedMatMul`, `BiasGelu`, `LayerNormalization`, ...) and `args.provider`
//! the execution provider (`_fence_before` / `_fence_after` events, where
//! written, are not node runs). Durations are whole µs, as XNNPACK's are.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::aggregate::{OperatorKind, OperatorProfile};
use super::report::BackendProfile;
use super::{ProfileError, ProfiledRun};
use crate::tensor::Encoded;

/// What the report says made the numbers.
pub const PROFILER: &str = "ONNX Runtime's profiler";

#[derive(Debug, Deserialize)]
struct Event {
    #[serde(default)]
    cat: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    ts: u64,
    #[serde(default)]
    dur: u64,
    #[serde(default)]
    args: Args,
}

#[derive(Debug, Default, Deserialize)]
struct Args {
    #[serde(default)]
    op_name: Option<String>,
}

/// The profiled runs as ONNX Runtime timed them, for `--trace`'s timeline
/// (`crate::layers::timeline::onnx_process`): each run's window and its node
/// runs, in µs from the profiler's start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OnnxTrace {
    pub runs: Vec<(u64, u64)>,
    /// (operator, node, start, duration) of each node run inside those runs.
    pub nodes: Vec<(String, String, u64, u64)>,
}

/// Profiles the ONNX file at `path` on `input`: `runs` profiled runs after one
/// warm-up; a decoder's file driven as its column drives it (the prompt from an
/// empty cache, or, with [`ProfiledRun::DecodeStep`], one step a run after the
/// prompt and a warm-up step).
pub fn profile_file(name: &str, path: &Path, input: &Encoded, runs: u32, run: ProfiledRun) -> Result<(BackendProfile, OnnxTrace), ProfileError> {
    let file = path.display().to_string();
    if runs == 0 || runs > super::trace::MAX_RUNS {
        return Err(ProfileError::Runs { runs, max: super::trace::MAX_RUNS });
    }
    let onnx = crate::backend::onnxruntime::profiled_runs(path, input, runs, run).map_err(|e| ProfileError::OnnxRuntime(format!("{e:#}")))?;
    from_json(name, &file, &onnx, run.left_out()).map_err(|detail| ProfileError::OnnxRuntime(format!("{file}: ONNX Runtime's profile: {detail}")))
}

/// The per-operator profile of a profiler's JSON: the node runs inside each
/// `model_run` but the first `left_out` (the warm-up; a decoder's prompt and
/// warm-up step), summed per operator, per run; and those runs.
pub fn from_json(name: &str, file: &str, json: &[u8], left_out: usize) -> Result<(BackendProfile, OnnxTrace), String> {
    let events: Vec<Event> = serde_json::from_slice(json).map_err(|e| format!("not the profiler's JSON array: {e}"))?;
    let mut windows: Vec<(u64, u64)> = events.iter().filter(|e| e.cat == "Session" && e.name == "model_run").map(|e| (e.ts, e.ts + e.dur)).collect();
    windows.sort_unstable();
    if windows.len() <= left_out {
        return Err(format!("{} model_run events, expected {left_out} left out and at least one profiled run", windows.len()));
    }
    let runs = windows.len() - left_out;
    let profiled = &windows[left_out..];
    let inside = |ts: u64| profiled.iter().any(|&(start, end)| start <= ts && ts <= end);
    // operator -> (node runs, µs) over the profiled runs
    let mut per_op: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut trace = OnnxTrace { runs: profiled.to_vec(), nodes: Vec::new() };
    for e in events.iter().filter(|e| e.cat == "Node" && e.name.ends_with("_kernel_time") && inside(e.ts)) {
        let op = e.args.op_name.clone().unwrap_or_else(|| "(unnamed)".to_string());
        trace.nodes.push((op.clone(), e.name.trim_end_matches("_kernel_time").to_string(), e.ts, e.dur));
        let row = per_op.entry(op).or_default();
        row.0 += 1;
        row.1 += e.dur;
    }
    if per_op.is_empty() {
        return Err("no node ran inside the profiled runs".to_string());
    }
    let per_run = |us: u64| us as f64 / 1e3 / runs as f64;
    let total_ms: f64 = per_run(per_op.values().map(|v| v.1).sum());
    let mut operators: Vec<OperatorProfile> = per_op
        .into_iter()
        .map(|(op, (n, us))| OperatorProfile {
            name: op,
            kind: OperatorKind::Kernel,
            count: n / runs as u64,
            total_ms: per_run(us),
            share: if total_ms > 0.0 { per_run(us) / total_ms } else { 0.0 },
        })
        .collect();
    operators.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms).then_with(|| a.name.cmp(&b.name)));
    let run_ms = profiled.iter().map(|(s, e)| (e - s) as f64 / 1e3).sum::<f64>() / runs as f64;
    let profile = BackendProfile {
        name: name.to_string(),
        total_ms,
        instructions_per_run: operators.iter().map(|o| o.count).sum(),
        operators,
        file: file.to_string(),
        runs,
        execute_ms: Some(run_ms),
        control_ms: 0.0,
        delegate_events_per_run: 0,
        delegate_operators: Vec::new(),
        profiler: PROFILER.to_string(),
    };
    Ok((profile, trace))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, op: &str, ts: u64, dur: u64) -> String {
        format!(r#"{{"cat":"Node","pid":1,"tid":1,"dur":{dur},"ts":{ts},"ph":"X","name":"{name}_kernel_time","args":{{"op_name":"{op}","provider":"CPUExecutionProvider"}}}}"#)
    }

    fn session(name: &str, ts: u64, dur: u64) -> String {
        format!(r#"{{"cat":"Session","pid":1,"tid":1,"dur":{dur},"ts":{ts},"ph":"X","name":"{name}","args":{{}}}}"#)
    }

    /// The warm-up run is dropped, each profiled run's nodes summed per
    /// operator and averaged per run; fences and session events are not nodes.
    #[test]
    fn node_runs_are_summed_per_operator_per_run_without_the_warm_up() {
        let events = [
            session("model_loading_uri", 0, 50),
            session("model_run", 100, 100),
            node("/a/MatMul", "MatMul", 110, 70), // the warm-up: dropped
            session("model_run", 300, 40),
            node("/a/MatMul", "MatMul", 305, 20),
            node("/a/Gelu", "BiasGelu", 330, 4),
            r#"{"cat":"Node","dur":0,"ts":331,"name":"/a/Gelu_fence_after","args":{"op_name":"BiasGelu"}}"#.to_string(),
            session("model_run", 400, 60),
            node("/a/MatMul", "MatMul", 405, 40),
            node("/a/Gelu", "BiasGelu", 450, 6),
        ];
        let json = format!("[{}]", events.join(","));
        let (p, trace) = from_json("onnx", "m.onnx", json.as_bytes(), 1).unwrap();
        assert_eq!(trace.runs, [(300, 340), (400, 460)]);
        assert_eq!(trace.nodes[0], ("MatMul".to_string(), "/a/MatMul".to_string(), 305, 20));
        assert_eq!(trace.nodes.len(), 4);
        assert_eq!(p.runs, 2);
        let rows: Vec<(&str, u64, f64)> = p.operators.iter().map(|o| (o.name.as_str(), o.count, o.total_ms)).collect();
        assert_eq!(rows, [("MatMul", 1, 0.030), ("BiasGelu", 1, 0.005)]);
        assert!((p.total_ms - 0.035).abs() < 1e-12 && (p.execute_ms.unwrap() - 0.050).abs() < 1e-12, "{p:?}");
        assert!((p.operators[0].share - 30.0 / 35.0).abs() < 1e-12);
        assert_eq!(p.instructions_per_run, 2);
        assert_eq!(p.profiler, PROFILER);
        // A profile without a profiled run, or not the profiler's JSON, is an error that says so.
        let one = format!("[{},{}]", session("model_run", 0, 10), node("x", "Add", 1, 1));
        assert!(from_json("onnx", "m.onnx", one.as_bytes(), 1).unwrap_err().contains("1 model_run events"));
        assert!(from_json("onnx", "m.onnx", b"{\"not\": 1}", 1).unwrap_err().starts_with("not the profiler's JSON array"));
        // A decoder's steps: the prompt's run and the warm-up step are both left out.
        let (steps, trace) = from_json("onnx", "m.onnx", json.as_bytes(), 2).unwrap();
        assert_eq!((steps.runs, trace.runs.as_slice()), (1, &[(400, 460)][..]));
        assert_eq!(steps.operators.iter().map(|o| o.total_ms).collect::<Vec<_>>(), [0.040, 0.006]);
        assert!(from_json("onnx", "m.onnx", json.as_bytes(), 3).unwrap_err().contains("3 model_run events, expected 3 left out"));
    }
}
