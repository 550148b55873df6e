//! What `runlens profile` reports, its JSON and its table.

use std::fmt;

use serde::Serialize;

use super::aggregate::{DelegateOperatorProfile, OperatorKind, OperatorProfile};

/// A per-operator profile of the ExecuTorch paths for one text. Serializes to
/// the JSON of `runlens profile --json`: `text` and `backends` are the
/// documented fields, the others are extras.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProfileReport {
    pub text: String,
    /// Tokens of the input, `[CLS]` and `[SEP]` included.
    pub tokens: usize,
    /// What one profiled run is: `prompt` (the input whole) or `decode-step`.
    pub run: super::ProfiledRun,
    pub backends: Vec<BackendProfile>,
}

/// One ExecuTorch path, traced separately from any timed run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BackendProfile {
    /// The backend's name (`portable`, `xnnpack`, ...).
    pub name: String,
    /// Kernel and delegate instructions per run, in ms (mean of the traced runs).
    pub total_ms: f64,
    /// Largest share first.
    pub operators: Vec<OperatorProfile>,
    pub file: String,
    /// Traced runs averaged (after one untraced-for-the-report warm-up).
    pub runs: usize,
    /// `Method::execute` per run, in ms: the instructions plus the runtime's
    /// and the tracer's work between them.
    pub execute_ms: Option<f64>,
    /// Move, jump and free instructions per run, in ms (not in `total_ms`).
    pub control_ms: f64,
    pub instructions_per_run: u64,
    /// Events the delegate logged inside its calls, per run (their time is
    /// part of the delegate rows).
    pub delegate_events_per_run: u64,
    /// Inside the delegate calls: the delegate's own per-operator timings
    /// (XNNPACK's, in whole µs), summed per operator type; largest first.
    pub delegate_operators: Vec<DelegateOperatorProfile>,
    /// What measured it: ExecuTorch's ETDump tracer, or ONNX Runtime's profiler
    /// (whose rows are nodes after its graph optimizer, `execute_ms` its `model_run`).
    pub profiler: String,
}

impl BackendProfile {
    /// Calls and time of one kind of row together: (calls per run, share).
    pub fn kind_total(&self, kind: OperatorKind) -> (u64, f64) {
        self.operators.iter().filter(|o| o.kind == kind).fold((0, 0.0), |(n, s), o| (n + o.count, s + o.share))
    }

    /// The operator types logged inside `delegate`'s calls, largest first.
    pub fn inside<'a>(&'a self, delegate: &'a str) -> impl Iterator<Item = &'a DelegateOperatorProfile> + 'a {
        self.delegate_operators.iter().filter(move |d| d.delegate == delegate)
    }

    /// The part of `delegate`'s calls its own operator timings do not cover,
    /// in ms per run (None when it logged no events).
    pub fn outside_operators_ms(&self, delegate: &OperatorProfile) -> Option<f64> {
        let logged: f64 = self.inside(&delegate.name).map(|d| d.total_ms).sum();
        (self.inside(&delegate.name).next().is_some()).then(|| (delegate.total_ms - logged).max(0.0))
    }

    /// One line for the top row, e.g. "36 x aten::addmm.out = 91% of portable time".
    pub fn headline(&self) -> Option<String> {
        let top = self.operators.first()?;
        let what = match top.kind {
            OperatorKind::Kernel => top.name.clone(),
            OperatorKind::Delegate => format!("{} subgraphs", top.name),
        };
        Some(format!("{} x {what} = {:.0}% of {} time", top.count, 100.0 * top.share, self.name))
    }
}

fn percent(share: f64) -> String {
    format!("{:.1}%", 100.0 * share)
}

impl fmt::Display for ProfileReport {
    /// The human table of `runlens profile`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:?}: {} tokens", self.text, self.tokens)?;
        if self.run == super::ProfiledRun::DecodeStep {
            writeln!(f, "Each run is one decode step after the prompt (the prompt's run and a warm-up step left out), fed the previous step's greedy token.")?;
        }
        writeln!(
            f,
            "A separate traced run (ExecuTorch's ETDump event tracer attached, or ONNX Runtime's own profiler); latencies from `run`, `bench` and the explorer are never taken with it."
        )?;
        for b in &self.backends {
            writeln!(f)?;
            let onnx = b.profiler == super::onnxruntime::PROFILER;
            let (steps, whole) = if onnx { ("node runs", "model_run") } else { ("instructions", "Method::execute") };
            let execute = b.execute_ms.map_or(String::new(), |ms| format!(", {whole} {ms:.3} ms"));
            writeln!(
                f,
                "{} ({}): {:.3} ms per run in {} {steps}{execute}; mean of {} traced runs ({})",
                b.name, b.file, b.total_ms, b.instructions_per_run, b.runs, b.profiler
            )?;
            if onnx {
                writeln!(f, "  operators as ONNX Runtime's graph optimizer left them (`runlens inspect {}` counts them before and after)", b.file)?;
            }
            if let Some(line) = b.headline() {
                writeln!(f, "  {line}")?;
            }
            let width = b.operators.iter().map(|o| o.name.len()).max().unwrap_or(8).max(8);
            writeln!(f, "  {:<width$}  {:<8}  {:>5}  {:>10}  {:>6}", "operator", "kind", "calls", "ms/run", "share")?;
            for o in &b.operators {
                let kind = match o.kind {
                    OperatorKind::Kernel => "kernel",
                    OperatorKind::Delegate => "delegate",
                };
                writeln!(f, "  {:<width$}  {kind:<8}  {:>5}  {:>10.3}  {:>6}", o.name, o.count, o.total_ms, percent(o.share))?;
            }
            let (kernels, kernel_share) = b.kind_total(OperatorKind::Kernel);
            let (delegates, delegate_share) = b.kind_total(OperatorKind::Delegate);
            if delegates > 0 {
                writeln!(
                    f,
                    "  delegate calls: {delegates} = {}; kernel calls on the default kernels: {kernels} = {}",
                    percent(delegate_share),
                    percent(kernel_share)
                )?;
            }
            for d in b.operators.iter().filter(|o| o.kind == OperatorKind::Delegate) {
                let Some(outside) = b.outside_operators_ms(d) else { continue };
                writeln!(f)?;
                writeln!(f, "  inside the {} calls, by the delegate's own timings (whole µs per operator, rounded down):", d.name)?;
                let width = b.inside(&d.name).map(|o| o.name.len()).max().unwrap_or(8).max(8);
                writeln!(f, "    {:<width$}  {:>5}  {:>10}  {:>6}", "operator", "calls", "ms/run", "share")?;
                for o in b.inside(&d.name) {
                    writeln!(f, "    {:<width$}  {:>5}  {:>10.3}  {:>6}", o.name, o.count, o.total_ms, percent(o.share))?;
                }
                let share = if b.total_ms > 0.0 { outside / b.total_ms } else { 0.0 };
                writeln!(
                    f,
                    "    {:<width$}  {:>5}  {:>10.3}  {:>6}   (arguments, reshaping for this length, µs rounding)",
                    "outside its operators",
                    d.count,
                    outside,
                    percent(share)
                )?;
            }
            if b.control_ms > 0.0 {
                writeln!(f, "  control instructions (move, jump, free): {:.3} ms per run, not in the total", b.control_ms)?;
            }
        }
        Ok(())
    }
}
