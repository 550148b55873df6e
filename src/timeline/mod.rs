//! A timeline of what runlens timed (`--trace FILE` on `profile`, `layers`
//! and `run`), written as Chrome's trace-event JSON ("JSON Object Format":
//! `{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}`),
//! which Perfetto (ui.perfetto.dev) and `chrome://tracing` open.
//!
//! Plain data, importing nothing of runlens: a [`Timeline`] of processes (one
//! per column: eager, each program), each of threads, each of [`Span`]s that
//! hold the spans inside them. Written as complete events (`ph: "X"`, `ts` and
//! `dur` in µs) depth first, so on every thread the events are in
//! non-decreasing `ts` order and properly nested, as Perfetto's JSON importer
//! requires; `M` events name the processes and threads and sort them.

mod file;

pub use file::{TraceFile, TraceFileError};

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Map, Value};

/// One timed interval and what ran inside it.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub name: String,
    /// The trace's category (`cat`): `kernel`, `delegate`, `xnnpack`, `module`, ...
    pub cat: &'static str,
    /// From the process's zero, in ns.
    pub start_ns: u64,
    pub dur_ns: u64,
    pub args: Map<String, Value>,
    pub children: Vec<Span>,
}

impl Span {
    pub fn new(name: impl Into<String>, cat: &'static str, start_ns: u64, dur_ns: u64) -> Span {
        Span { name: name.into(), cat, start_ns, dur_ns, args: Map::new(), children: Vec::new() }
    }

    /// With one more argument (`args` in the file).
    pub fn arg(mut self, key: &str, value: impl Into<Value>) -> Span {
        self.args.insert(key.to_owned(), value.into());
        self
    }

    pub fn end_ns(&self) -> u64 {
        self.start_ns + self.dur_ns
    }

    /// This span and every span inside it, depth first.
    pub fn walk(&self) -> Vec<&Span> {
        let mut out = vec![self];
        for c in &self.children {
            out.extend(c.walk());
        }
        out
    }
}

/// Flat spans (each with no children yet) nested by their intervals: a span
/// goes inside the latest open one that contains it and has a lower `rank`
/// (a run 0, an instruction 1, what runs inside it 2; spans of one rank never
/// hold each other, so XNNPACK's operators logged end to end from one start
/// stay siblings). Ties keep the given order, lower ranks first. A span that
/// ends after its holder, or a sibling that starts before the previous one
/// ends (clocks that disagree by a tick), is cut short and marked `"cut_ns"`
/// in its args, so the result always nests.
pub fn nest(flat: Vec<Span>, rank: impl Fn(&Span) -> usize) -> Vec<Span> {
    let mut keyed: Vec<(usize, usize, Span)> = flat.into_iter().enumerate().map(|(i, s)| (rank(&s), i, s)).collect();
    keyed.sort_by(|a, b| a.2.start_ns.cmp(&b.2.start_ns).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    let mut roots: Vec<Span> = Vec::new();
    let mut stack: Vec<(usize, Span)> = Vec::new();
    fn cut(span: &mut Span, end: u64) {
        if span.end_ns() > end {
            let by = span.end_ns() - end;
            span.dur_ns -= by;
            let before = span.args.get("cut_ns").and_then(Value::as_u64).unwrap_or(0);
            span.args.insert("cut_ns".into(), (before + by).into());
        }
    }
    fn close(stack: &mut Vec<(usize, Span)>, roots: &mut Vec<Span>) {
        let (_, done) = stack.pop().expect("a span to close");
        match stack.last_mut() {
            Some((_, parent)) => parent.children.push(done),
            None => roots.push(done),
        }
    }
    for (r, _, mut span) in keyed {
        while let Some((top_rank, top)) = stack.last_mut() {
            if span.start_ns >= top.end_ns() {
                close(&mut stack, &mut roots);
            } else if *top_rank >= r {
                // A sibling still running when this one starts.
                cut(top, span.start_ns);
                close(&mut stack, &mut roots);
            } else {
                break;
            }
        }
        if let Some((_, top)) = stack.last() {
            cut(&mut span, top.end_ns());
        }
        stack.push((r, span));
    }
    while !stack.is_empty() {
        close(&mut stack, &mut roots);
    }
    roots
}

/// One thread of a process: what runs one after the other.
#[derive(Clone, Debug, PartialEq)]
pub struct Thread {
    pub name: String,
    /// Top-level spans, in time order, each nested.
    pub spans: Vec<Span>,
}

/// One column of runlens (eager, a program).
#[derive(Clone, Debug, PartialEq)]
pub struct Process {
    pub name: String,
    /// The tracer its times come from, when a runtime's own one was attached
    /// (ExecuTorch's ETDump, ONNX Runtime's profiler: each adds its own work),
    /// or None for plain timing.
    pub tracer: Option<&'static str>,
    /// What its times are, for a person reading the file.
    pub source: String,
    pub threads: Vec<Thread>,
}

/// Everything one command timed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    pub processes: Vec<Process>,
    /// `otherData`: the command, model, text, thread count, ...
    pub about: Map<String, Value>,
}

#[derive(Serialize)]
struct Document<'a> {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<Value>,
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
    #[serde(rename = "otherData")]
    other_data: &'a Map<String, Value>,
}

/// ns -> µs, the unit of `ts` and `dur`, kept to the ns.
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl Timeline {
    pub fn new() -> Timeline {
        Timeline::default()
    }

    /// Adds a fact to `otherData`.
    pub fn about(&mut self, key: &str, value: impl Into<Value>) {
        self.about.insert(key.to_owned(), value.into());
    }

    /// The trace-event JSON object: metadata events first, then each thread's
    /// complete events depth first. `pid` is the process's place + 1, `tid`
    /// the thread's place + 1. `otherData` also lists the traced and the timed
    /// processes.
    pub fn to_json(&self) -> Value {
        let mut events = Vec::new();
        for (p, process) in self.processes.iter().enumerate() {
            let pid = p + 1;
            events.push(json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": process.name}}));
            events.push(json!({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": p}}));
            let label = process.tracer.map_or_else(|| "timed".to_owned(), |t| format!("traced ({t})"));
            events.push(json!({"name": "process_labels", "ph": "M", "pid": pid, "tid": 0, "args": {"labels": label}}));
            for (t, thread) in process.threads.iter().enumerate() {
                let tid = t + 1;
                events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": thread.name}}));
                events.push(json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": t}}));
            }
        }
        for (p, process) in self.processes.iter().enumerate() {
            for (t, thread) in process.threads.iter().enumerate() {
                for span in &thread.spans {
                    for s in span.walk() {
                        let mut e = json!({
                            "name": s.name, "cat": s.cat, "ph": "X", "pid": p + 1, "tid": t + 1,
                            "ts": us(s.start_ns), "dur": us(s.dur_ns),
                        });
                        if !s.args.is_empty() {
                            e["args"] = Value::Object(s.args.clone());
                        }
                        events.push(e);
                    }
                }
            }
        }
        let mut other = self.about.clone();
        let names = |traced: bool| -> Vec<&str> {
            self.processes.iter().filter(|p| p.tracer.is_some() == traced).map(|p| p.name.as_str()).collect()
        };
        other.insert("traced_processes".into(), json!(names(true)));
        other.insert("timed_processes".into(), json!(names(false)));
        let sources: BTreeMap<&str, &str> = self.processes.iter().map(|p| (p.name.as_str(), p.source.as_str())).collect();
        other.insert("sources".into(), json!(sources));
        serde_json::to_value(Document { trace_events: events, display_time_unit: "ms", other_data: &other }).expect("JSON values serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nest_puts_each_span_in_the_latest_that_holds_it() {
        let rank = |s: &Span| usize::from(s.cat == "k") + 2 * usize::from(s.cat == "x");
        let flat = vec![
            Span::new("inner", "x", 12, 3),
            Span::new("call", "k", 10, 10),
            Span::new("run", "r", 0, 100),
            Span::new("next", "k", 20, 5),
            Span::new("late", "k", 95, 10),
            Span::new("after", "r", 200, 1),
            // Logged end to end from one start: siblings, in the given order.
            Span::new("copy", "x", 21, 0),
            Span::new("gemm", "x", 21, 3),
        ];
        let roots = nest(flat, rank);
        assert_eq!(roots.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["run", "after"]);
        let run = &roots[0];
        assert_eq!(run.children.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["call", "next", "late"]);
        assert_eq!(run.children[0].children[0].name, "inner");
        assert_eq!(run.children[1].children.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["copy", "gemm"]);
        // "late" ran past its parent's end: cut, and said so.
        assert_eq!((run.children[2].dur_ns, run.children[2].args.get("cut_ns")), (5, Some(&json!(5))));
        // A span of the same rank that starts inside another cuts it short.
        let overlapping = nest(vec![Span::new("a", "k", 0, 10), Span::new("b", "k", 5, 10)], rank);
        assert_eq!(overlapping.iter().map(|s| (s.name.as_str(), s.dur_ns)).collect::<Vec<_>>(), [("a", 5), ("b", 10)]);
        assert_eq!(overlapping[0].args.get("cut_ns"), Some(&json!(5)));
    }

    #[test]
    fn json_has_metadata_then_complete_events_in_order() {
        let mut t = Timeline::new();
        t.about("threads", 2);
        let mut run = Span::new("run", "run", 1000, 5000);
        run.children.push(Span::new("op", "kernel", 1500, 1).arg("instruction", 3));
        t.processes.push(Process { name: "xnnpack".into(), tracer: Some("ETDump"), source: "ETDump".into(), threads: vec![Thread { name: "execute".into(), spans: vec![run] }] });
        let v = t.to_json();
        let events = v["traceEvents"].as_array().unwrap();
        assert_eq!(events[0], json!({"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "xnnpack"}}));
        let x: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 2);
        assert_eq!((x[0]["ts"].as_f64(), x[0]["dur"].as_f64()), (Some(1.0), Some(5.0)));
        assert_eq!((x[1]["ts"].as_f64(), x[1]["dur"].as_f64(), &x[1]["args"]["instruction"]), (Some(1.5), Some(0.001), &json!(3)));
        assert_eq!(v["otherData"]["traced_processes"], json!(["xnnpack"]));
        assert_eq!(v["otherData"]["threads"], json!(2));
        assert_eq!(v["displayTimeUnit"], "ms");
    }
}
