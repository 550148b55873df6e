//! `--trace FILE` (docs/trace.md): the timelines of a MiniLM profile, a tiny
//! GPT-2 generation and a tiny GPT-2 `layers` run are Chrome trace-event JSON
//! as Perfetto reads it (required fields; complete events properly nested and
//! in non-decreasing `ts` per thread, in file order: the file is not sorted
//! before checking; one process per column, named), and their times add up to
//! the totals the same invocation printed with `--json`. A `--trace` path that
//! cannot be written is an error (exit 2) before anything is loaded.
//!
//! Needs `models/minilm` and `models/tiny-gpt2` (`make models`, `make
//! test-models`). No test asserts a speed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::runlens;

fn model(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(name)
}

/// Runs `args` with `--json` output on stdout and `--trace` into a temporary
/// file (the last arguments are the subcommand's): (its JSON, the trace).
fn with_trace(model_dir: &Path, subcommand: &[&str]) -> (Value, Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.json");
    let mut args = vec!["--model", model_dir.to_str().unwrap(), "--threads", "1"];
    args.extend_from_slice(&subcommand[..1]);
    args.extend_from_slice(&["--json", "--trace", file.to_str().unwrap()]);
    args.extend_from_slice(&subcommand[1..]);
    let out = runlens(&args);
    assert!(out.status.success(), "runlens {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let text = std::fs::read_to_string(&file).unwrap();
    let trace: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("the trace is not JSON: {e}"));
    (report, trace)
}

/// A complete event and where it sits.
#[derive(Clone, Debug)]
struct Event {
    name: String,
    cat: String,
    pid: u64,
    ts: f64,
    dur: f64,
    args: Value,
    /// Names and categories of the events holding it, outermost first.
    parents: Vec<(String, String)>,
}

/// The trace checked as Perfetto's JSON importer reads it; its complete
/// events in file order, and the process names by pid.
struct Trace {
    events: Vec<Event>,
    processes: BTreeMap<u64, String>,
    /// `process_labels`: "traced (ETDump)", "traced (ONNX Runtime's profiler)", "timed".
    labels: BTreeMap<u64, String>,
    other: Value,
}

impl Trace {
    fn of(&self, process: &str) -> Vec<&Event> {
        let pid = self.processes.iter().find(|(_, n)| *n == process).map(|(p, _)| *p).unwrap_or_else(|| panic!("no process {process}"));
        self.events.iter().filter(|e| e.pid == pid).collect()
    }
}

/// µs of rounding allowed per event (the file keeps ns: 0.001 µs).
const ROUNDING_US: f64 = 0.0015;

fn check(v: &Value) -> Trace {
    assert!(v.is_object(), "the JSON Object Format");
    assert_eq!(v["displayTimeUnit"], "ms");
    assert!(v["otherData"].is_object());
    let events = v["traceEvents"].as_array().expect("traceEvents is an array");
    let mut processes = BTreeMap::new();
    let mut labels = BTreeMap::new();
    let mut threads: BTreeSet<(u64, u64)> = BTreeSet::new();
    // Per (pid, tid): the open events (end, name, cat) and the last ts, in ns
    // (the file keeps µs to the ns; integers, so that end == next start is exact).
    type Open = Vec<(i64, String, String)>;
    let mut stacks: BTreeMap<(u64, u64), (Open, i64)> = BTreeMap::new();
    let ns = |us: f64| (us * 1000.0).round() as i64;
    let mut out = Vec::new();
    for e in events {
        let name = e["name"].as_str().unwrap_or_else(|| panic!("an event without a name: {e}")).to_owned();
        let ph = e["ph"].as_str().unwrap_or_else(|| panic!("an event without ph: {e}"));
        let pid = e["pid"].as_u64().unwrap_or_else(|| panic!("an event without pid: {e}"));
        let tid = e["tid"].as_u64().unwrap_or_else(|| panic!("an event without tid: {e}"));
        match ph {
            "M" => {
                if name == "process_name" {
                    let n = e["args"]["name"].as_str().expect("process_name has args.name").to_owned();
                    assert!(processes.insert(pid, n).is_none(), "pid {pid} named twice");
                }
                if name == "process_labels" {
                    labels.insert(pid, e["args"]["labels"].as_str().expect("process_labels has args.labels").to_owned());
                }
                if name == "thread_name" {
                    assert!(e["args"]["name"].is_string(), "{e}");
                    threads.insert((pid, tid));
                }
            }
            "X" => {
                let ts = e["ts"].as_f64().unwrap_or_else(|| panic!("an X event without ts: {e}"));
                let dur = e["dur"].as_f64().unwrap_or_else(|| panic!("an X event without dur: {e}"));
                assert!(ts >= 0.0 && dur >= 0.0, "{e}");
                let cat = e["cat"].as_str().unwrap_or("").to_owned();
                let (stack, last) = stacks.entry((pid, tid)).or_insert((Vec::new(), 0));
                let (start, end) = (ns(ts), ns(ts) + ns(dur));
                assert!(start >= *last, "ts goes back on pid {pid} tid {tid} at {e} (after {last} ns)");
                *last = start;
                while stack.last().is_some_and(|(open_end, _, _)| start >= *open_end) {
                    stack.pop();
                }
                if let Some((open_end, parent, _)) = stack.last() {
                    assert!(end <= *open_end, "{name} at {ts}+{dur} overlaps the end of {parent} ({open_end} ns) on pid {pid}");
                }
                let parents = stack.iter().map(|(_, n, c)| (n.clone(), c.clone())).collect();
                out.push(Event { name: name.clone(), cat: cat.clone(), pid, ts, dur, args: e["args"].clone(), parents });
                stack.push((end, name, cat));
            }
            other => panic!("an event of phase {other:?}: only M and X are written"),
        }
    }
    for e in &out {
        assert!(processes.contains_key(&e.pid), "pid {} has no process_name", e.pid);
    }
    for (pid, tid) in stacks.keys() {
        assert!(threads.contains(&(*pid, *tid)), "pid {pid} tid {tid} has no thread_name");
    }
    Trace { events: out, processes, labels, other: v["otherData"].clone() }
}

fn names(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap().to_owned()).collect()
}

fn close(a: f64, b: f64, n: usize, what: &str) {
    // Each of n events rounded to the ns in the file, in ms here.
    let tolerance = 1e-9 * b.abs() + n as f64 * ROUNDING_US / 1000.0;
    assert!((a - b).abs() <= tolerance, "{what}: {a} vs {b} (tolerance {tolerance})");
}

/// Per run: the sum of a program's instruction events (kernel and delegate calls), in ms.
fn instruction_ms(events: &[&Event]) -> (f64, usize, usize) {
    let runs = events.iter().filter(|e| e.cat == "run").count();
    let calls: Vec<&&Event> = events.iter().filter(|e| e.cat == "kernel" || e.cat == "delegate").collect();
    (calls.iter().map(|e| e.dur).sum::<f64>() / 1000.0 / runs as f64, runs, calls.len())
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn other_names(t: &Trace, key: &str) -> Vec<String> {
    sorted(t.other[key].as_array().unwrap_or_else(|| panic!("otherData.{key}")).iter().map(|n| n.as_str().unwrap().to_owned()).collect())
}

#[test]
fn a_minilm_profile_trace_holds_every_instruction_with_the_profiles_totals() {
    let (report, v) = with_trace(&model("minilm"), &["profile", "--runs", "2", "Where does the time go?"]);
    let t = check(&v);
    let backends = names(&report["backends"]);
    assert_eq!(t.processes.values().cloned().collect::<Vec<_>>(), backends, "one process per column, in the report's order");
    assert_eq!(other_names(&t, "traced_processes"), sorted(backends.clone()));
    assert!(other_names(&t, "timed_processes").is_empty());
    assert_eq!(t.other["threads"], 1);
    assert_eq!(t.other["command"], "profile");
    for b in report["backends"].as_array().unwrap() {
        let name = b["name"].as_str().unwrap();
        let events = t.of(name);
        let (ms, runs, calls) = instruction_ms(&events);
        assert_eq!(runs as u64, b["runs"].as_u64().unwrap(), "{name}: one Method::execute (model_run) per traced run");
        assert_eq!(calls as u64, runs as u64 * b["instructions_per_run"].as_u64().unwrap(), "{name}: every instruction (node run), every run");
        close(ms, b["total_ms"].as_f64().unwrap(), calls, &format!("{name}: instruction time per run"));
        // An ONNX Runtime column's runs come from its own profiler: node runs inside each model_run.
        let onnx = b["profiler"] == "ONNX Runtime's profiler";
        let pid = t.processes.iter().find(|(_, n)| *n == name).map(|(p, _)| *p).unwrap();
        let tracer = if onnx { "ONNX Runtime's profiler" } else { "ETDump" };
        assert_eq!(t.labels[&pid], format!("traced ({tracer})"), "{name}: the label names the tracer its times come from");
        for e in events.iter().filter(|e| onnx && e.cat == "kernel") {
            assert!(e.args["node"].is_string() && e.parents.iter().any(|(n, c)| n == "model_run" && c == "run"), "{name}: {} outside a run", e.name);
        }
        for e in events.iter().filter(|_| !onnx) {
            if e.cat == "kernel" || e.cat == "delegate" {
                assert!(e.args["instruction"].is_u64() && e.args["chain"].is_u64(), "{name}: {} has no instruction", e.name);
                assert!(e.parents.iter().any(|(n, c)| n == "Method::execute" && c == "run"), "{name}: {} outside a run", e.name);
                assert!(e.args["module"].is_string(), "{name}: {} #{} has no module (the sidecar names every instruction)", e.name, e.args["instruction"]);
            }
            if e.cat == "layer" {
                let layer = e.args["layer"].as_u64().unwrap() as usize;
                assert_eq!(e.name, format!("layer {layer}"));
                let inside: Vec<&&Event> = events.iter().filter(|c| c.parents.last().is_some_and(|p| p.1 == "layer") && c.parents.len() == e.parents.len() + 1 && c.ts >= e.ts && c.ts < e.ts + e.dur + ROUNDING_US).collect();
                assert!(!inside.is_empty(), "{name}: an empty {}", e.name);
                for c in inside {
                    let row = c.args["row"].as_str().unwrap();
                    assert_eq!(runlens::layers::rows::order_key(row).1, layer, "{name}: {row} inside {}", e.name);
                }
            }
        }
        let kernels: f64 = b["operators"].as_array().unwrap().iter().filter(|o| o["kind"] == "kernel").map(|o| o["count"].as_u64().unwrap() as f64).sum();
        let kernel_events = events.iter().filter(|e| e.cat == "kernel").count() as f64 / runs as f64;
        assert_eq!(kernel_events, kernels, "{name}: kernel calls per run");
    }
    // XNNPACK's own operator events sit inside its delegate calls, with the XNode's debug handle and module.
    let xnnpack = t.of("xnnpack");
    let inner: Vec<&&Event> = xnnpack.iter().filter(|e| e.cat == "delegate operator").collect();
    assert!(!inner.is_empty(), "XNNPACK logged operators inside its calls");
    for e in &inner {
        assert_eq!(e.parents.last().map(|p| p.1.as_str()), Some("delegate"), "{} is not inside a delegate call", e.name);
    }
    let mapped = inner.iter().filter(|e| e.args["debug_handle"].is_u64() && e.args["module"].is_string()).count();
    assert_eq!(mapped, inner.len(), "every XNNPACK operator of MiniLM maps to an XNode and its module (layers: unmapped 0)");
    assert!(inner.iter().any(|e| e.name.starts_with("Fully Connected")), "the projections are XNNPACK GEMMs");
    assert!(xnnpack.iter().any(|e| e.cat == "layer"), "layers group their instructions");
}

#[test]
fn a_gpt2_generation_trace_holds_the_prefill_and_each_decode_step() {
    let (report, v) = with_trace(&model("tiny-gpt2"), &["run", "--max-new-tokens", "6", "Once upon a time"]);
    let t = check(&v);
    let backends = names(&report["backends"]);
    assert!(backends.len() >= 3, "eager and the programs: {backends:?}");
    assert_eq!(t.processes.values().cloned().collect::<Vec<_>>(), backends, "one process per column");
    assert_eq!(other_names(&t, "timed_processes"), sorted(backends.clone()), "nothing in `run` is traced");
    assert!(other_names(&t, "traced_processes").is_empty());
    for b in report["backends"].as_array().unwrap() {
        let name = b["name"].as_str().unwrap();
        assert_eq!(b["ok"], true, "{name}");
        let events = t.of(name);
        let generate: Vec<&&Event> = events.iter().filter(|e| e.name == "generate").collect();
        assert_eq!(generate.len(), 1, "{name}: one generation (--repeat 1)");
        close(generate[0].dur / 1000.0, b["latency_ms"].as_f64().unwrap(), 1, &format!("{name}: the generation"));
        let load = events.iter().find(|e| e.name == "load").expect("the load");
        assert!(load.ts + load.dur <= generate[0].ts + ROUNDING_US, "{name}: loaded before it generates");
        let steps: Vec<&&Event> = events.iter().filter(|e| e.cat == "step").collect();
        let token_ms: Vec<f64> = b["token_ms"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(steps.len(), token_ms.len(), "{name}: a step per new token");
        assert_eq!(token_ms.len(), b["generated_ids"].as_array().unwrap().len());
        for (k, (s, ms)) in steps.iter().zip(&token_ms).enumerate() {
            let expected = if k == 0 { "prefill".to_owned() } else { format!("decode step {k}") };
            assert_eq!(s.name, expected, "{name}");
            assert_eq!(s.parents, [("generate".to_owned(), "run".to_owned())], "{name}: {} inside the generation", s.name);
            close(s.dur / 1000.0, *ms, 1, &format!("{name}: {}", s.name));
            assert_eq!(s.args["id"], b["generated_ids"][k], "{name}: the token of {}", s.name);
        }
        close(steps[0].dur / 1000.0, b["ttft_ms"].as_f64().unwrap(), 1, &format!("{name}: prefill = TTFT"));
    }
}

#[test]
fn a_gpt2_layers_trace_nests_modules_in_their_layers_with_the_layers_totals() {
    let (report, v) = with_trace(&model("tiny-gpt2"), &["layers", "--runs", "2", "Once upon a time"]);
    let t = check(&v);
    let backends = names(&report["backends"]);
    assert_eq!(t.processes.values().cloned().collect::<Vec<_>>(), backends, "one process per column");
    // Eager (and its quantized variants) is timed, not traced, where this build has it (the lite build has not).
    let is_eager = |b: &String| b == "eager" || b.starts_with("eager-");
    let timed: Vec<String> = if cfg!(feature = "eager") { sorted(backends.iter().filter(|b| is_eager(b)).cloned().collect()) } else { Vec::new() };
    assert!(!cfg!(feature = "eager") || timed.contains(&"eager".to_string()), "{timed:?}");
    assert_eq!(other_names(&t, "timed_processes"), timed);
    assert_eq!(other_names(&t, "traced_processes"), sorted(backends.iter().filter(|b| !is_eager(b)).cloned().collect()));
    for b in report["backends"].as_array().unwrap() {
        let name = b["name"].as_str().unwrap();
        let events = t.of(name);
        let total = b["total_ms"].as_f64().unwrap();
        if name == "eager" || name.starts_with("eager-") {
            let forwards: Vec<&&Event> = events.iter().filter(|e| e.name == "forward").collect();
            assert_eq!(forwards.len(), 2, "{name}: one forward per timed run");
            close(forwards.iter().map(|e| e.dur).sum::<f64>() / 1000.0 / 2.0, total, 2, &format!("{name}: mean forward"));
            let attn = events.iter().filter(|e| e.name == "h.0.attn").collect::<Vec<_>>();
            assert_eq!(attn.len(), 2);
            for e in attn {
                let held: Vec<&str> = e.parents.iter().map(|p| p.0.as_str()).collect();
                assert_eq!(held, ["forward", "h.0"], "{name}: a layer holds its modules");
            }
            // Each module's own time (its wall time minus its children's) adds up to the layers row.
            let own = |row: &str| -> f64 {
                let mut sum = 0.0;
                for e in events.iter().filter(|e| e.args["row"] == row) {
                    let children: f64 = events.iter().filter(|c| c.parents.len() == e.parents.len() + 1 && c.ts >= e.ts && c.ts < e.ts + e.dur && c.parents.last().is_some_and(|p| p.0 == e.name)).map(|c| c.dur).sum();
                    sum += e.dur - children;
                }
                sum / 1000.0 / 2.0
            };
            let row = report["rows"].as_array().unwrap().iter().find(|r| r["module"] == "h.0.attn").expect("a row h.0.attn");
            close(own("h.0.attn"), row["times_ms"][name].as_f64().unwrap(), 8, &format!("{name}: h.0.attn"));
        } else {
            let (ms, runs, calls) = instruction_ms(&events);
            assert_eq!(runs, 2, "{name}");
            close(ms, total, calls, &format!("{name}: instruction time per run"));
        }
    }
}

#[test]
fn a_trace_path_that_cannot_be_written_fails_before_anything_loads() {
    // The model directory does not exist either: the trace file is checked first.
    for subcommand in ["profile", "layers", "run"] {
        let out = runlens(&["--model", "/nonexistent/model", subcommand, "--trace", "/nonexistent/dir/x.json", "hello"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{subcommand}: {stderr}");
        assert!(stderr.contains("--trace /nonexistent/dir/x.json") && stderr.contains("No such file"), "{subcommand}: {stderr}");
        assert!(!stderr.contains("/nonexistent/model"), "{subcommand}: the model was looked at first: {stderr}");
        assert!(out.stdout.is_empty(), "{subcommand}: ran something: {}", String::from_utf8_lossy(&out.stdout));
    }
    let dir = tempfile::tempdir().unwrap();
    let out = runlens(&["--model", model("minilm").to_str().unwrap(), "run", "--trace", dir.path().to_str().unwrap(), "hello"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&dir.path().display().to_string()) && stderr.contains("directory"), "{stderr}");
    assert!(out.stdout.is_empty(), "a directory as --trace ran something");
}
