//! From events to operators: each instruction event of a decoded ETDump is
//! mapped back to its instruction in the program ([`PlanInstructions`]), and
//! the times are summed per operator (kernel calls) and per delegate backend
//! (delegate calls), averaged over the traced runs.
//!
//! What ExecuTorch 1.5.1 records per `Method::execute` (one "Execute" block):
//! one `Method::execute` event; per instruction an `OPERATOR_CALL` or
//! `DELEGATE_CALL` event (`MOVE_CALL`, `JF_CALL`, `FREE_CALL` for the control
//! instructions) with its chain and instruction index; inside those, events
//! the kernels log themselves (`native_call_addmm.out`) and events a delegate
//! logs (with a delegate debug id: XNNPACK's per-node events). Only the
//! instruction events are summed into the operator rows, so nothing is
//! counted twice; the delegate's own events are summed separately, per
//! operator type, into [`DelegateOperatorProfile`] rows: what happens inside
//! a `DELEGATE_CALL`.
//!
//! XNNPACK (its `XNNProfiler` in 1.5.1) logs one event per XNNPACK operator of
//! a subgraph, named `"{operator name} #{n}"` (`n` counts that name within the
//! subgraph), with a duration XNNPACK measured in whole microseconds, rounded
//! down, and laid end to end from the start of the subgraph's run. So those
//! rows are lower bounds at 1 µs per call, and the part of a delegate call they
//! do not cover is the delegate's own work around its operators (arguments,
//! reshaping the runtime for this input's shape) plus that rounding.

use std::collections::BTreeMap;

use serde::Serialize;

use super::etdump::{DelegateEventId, EtDump, ProfileEvent};
use crate::pte::{Instruction, PlanInstructions};

/// The name of the event block `Method::execute` opens.
pub const EXECUTE_BLOCK: &str = "Execute";
/// The event around a whole `Method::execute`.
pub const EXECUTE_EVENT: &str = "Method::execute";
pub const KERNEL_EVENT: &str = "OPERATOR_CALL";
pub const DELEGATE_EVENT: &str = "DELEGATE_CALL";
/// Events of the control instructions (move, jump-if-false, free).
pub const CONTROL_EVENTS: [&str; 3] = ["MOVE_CALL", "JF_CALL", "FREE_CALL"];

/// ExecuTorch's ticks to nanoseconds: `ns = ticks * numerator / denominator`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickRatio {
    pub numerator: u64,
    pub denominator: u64,
}

impl TickRatio {
    /// Nanoseconds, the unit of the POSIX platform layer the wheel ships.
    pub const NANOSECONDS: TickRatio = TickRatio { numerator: 1, denominator: 1 };

    pub fn ms(self, ticks: u64) -> f64 {
        if self.denominator == 0 {
            return 0.0;
        }
        ticks as f64 * self.numerator as f64 / self.denominator as f64 / 1e6
    }
}

/// What an operator row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OperatorKind {
    /// `KernelCall` instructions of one operator, on the default CPU kernels.
    Kernel,
    /// `DelegateCall` instructions of one backend (XNNPACK subgraphs).
    Delegate,
}

/// One operator (or delegate backend) of one backend's profile.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OperatorProfile {
    /// `name[.overload]` as `inspect` lists it, or the delegate's backend id.
    pub name: String,
    pub kind: OperatorKind,
    /// Calls per run (instructions of this operator executed in one run).
    pub count: u64,
    /// Milliseconds per run, the mean over the traced runs.
    pub total_ms: f64,
    /// `total_ms` / the backend's `total_ms`.
    pub share: f64,
}

/// One operator type inside a delegate's calls (e.g. XNNPACK's
/// `Fully Connected (NC, F32) GEMM`), from the events the delegate logged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DelegateOperatorProfile {
    /// The delegate backend whose calls these events were logged in.
    pub delegate: String,
    /// The delegate's name for the operator, without its `#n` suffix.
    pub name: String,
    /// Calls per run, over all of the delegate's subgraphs.
    pub count: u64,
    /// Milliseconds per run, as the delegate measured them.
    pub total_ms: f64,
    /// `total_ms` / the backend's `total_ms` (the same base as the operator rows).
    pub share: f64,
}

/// The instruction times of one program, averaged over its traced runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    /// Execute blocks found in the dump.
    pub runs: usize,
    /// Sum of the kernel and delegate instruction events per run, in ms.
    pub total_ms: f64,
    /// Largest share first, then by name.
    pub operators: Vec<OperatorProfile>,
    /// The `Method::execute` events per run, in ms (includes the time between
    /// instructions and the tracer's own work).
    pub execute_ms: Option<f64>,
    /// Control instructions (move, jump, free) per run, in ms: not in `total_ms`.
    pub control_ms: f64,
    /// Kernel and delegate instructions executed per run.
    pub instructions_per_run: u64,
    /// Events delegates logged from inside their calls, per run (not in the
    /// operator rows: their time is inside the `DELEGATE_CALL`).
    pub delegate_events_per_run: u64,
    /// Those events summed per delegate and operator type; largest first.
    pub delegate_operators: Vec<DelegateOperatorProfile>,
}

/// The operator type of a delegate event: its name without the `" #n"` that
/// XNNPACK appends, or the integer debug id when it has no name.
pub fn delegate_operator_name(event: &ProfileEvent) -> String {
    match &event.delegate_id {
        Some(DelegateEventId::Name(name)) => match name.rsplit_once(" #") {
            Some((base, n)) if !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base.to_owned(),
            _ => name.clone(),
        },
        Some(DelegateEventId::Int(id)) if event.name.is_empty() => format!("debug id {id}"),
        _ => event.name.clone(),
    }
}

fn per_run(n: u64, runs: usize) -> u64 {
    (n as f64 / runs as f64).round() as u64
}

/// Sums the instruction events of every Execute block of `dump` per operator
/// of `plan`. An instruction event that names no instruction of the plan, or
/// one of another kind, is an error: the dump is not of this program.
pub fn aggregate(dump: &EtDump, plan: &PlanInstructions, ratio: TickRatio) -> Result<Aggregate, String> {
    let mut rows: BTreeMap<(OperatorKind, &str), (u64, u64)> = BTreeMap::new();
    let mut inside: BTreeMap<(&str, String), (u64, u64)> = BTreeMap::new();
    let (mut runs, mut execute_ticks, mut execute_events, mut control_ticks) = (0usize, 0u64, 0u64, 0u64);
    let (mut instructions, mut delegate_events) = (0u64, 0u64);
    for block in dump.runs.iter().filter(|b| b.name == EXECUTE_BLOCK) {
        runs += 1;
        for event in &block.events {
            if event.delegate_id.is_some() {
                let delegate = delegate_of(event, plan)?;
                let row = inside.entry((delegate, delegate_operator_name(event))).or_insert((0, 0));
                row.0 += 1;
                row.1 += event.ticks();
                delegate_events += 1;
                continue;
            }
            let name = event.name.as_str();
            if name == EXECUTE_EVENT {
                execute_ticks += event.ticks();
                execute_events += 1;
                continue;
            }
            if CONTROL_EVENTS.contains(&name) {
                control_ticks += event.ticks();
                continue;
            }
            if name != KERNEL_EVENT && name != DELEGATE_EVENT {
                // A kernel's own event inside its OPERATOR_CALL (native_call_*), or
                // another event this version does not describe: not an instruction.
                continue;
            }
            let key = instruction_key(event, plan)?;
            let row = rows.entry(key).or_insert((0, 0));
            row.0 += 1;
            row.1 += event.ticks();
            instructions += 1;
        }
    }
    if runs == 0 || instructions == 0 {
        return Err(format!(
            "the ETDump holds no instruction events ({} event blocks, {runs} of them \"{EXECUTE_BLOCK}\"); was the program run with the tracer attached?",
            dump.runs.len()
        ));
    }
    let total_ticks: u64 = rows.values().map(|r| r.1).sum();
    let n = runs as f64;
    // Calls and ticks summed over the runs -> (calls per run, ms per run, share of the total).
    let per_run_row = |count: u64, ticks: u64| {
        let share = if total_ticks == 0 { 0.0 } else { ticks as f64 / total_ticks as f64 };
        (per_run(count, runs), ratio.ms(ticks) / n, share)
    };
    let mut operators: Vec<OperatorProfile> = rows
        .into_iter()
        .map(|((kind, name), (count, ticks))| {
            let (count, total_ms, share) = per_run_row(count, ticks);
            OperatorProfile { name: name.to_owned(), kind, count, total_ms, share }
        })
        .collect();
    operators.sort_by(|a, b| b.share.total_cmp(&a.share).then_with(|| a.name.cmp(&b.name)));
    let mut delegate_operators: Vec<DelegateOperatorProfile> = inside
        .into_iter()
        .map(|((delegate, name), (count, ticks))| {
            let (count, total_ms, share) = per_run_row(count, ticks);
            DelegateOperatorProfile { delegate: delegate.to_owned(), name, count, total_ms, share }
        })
        .collect();
    delegate_operators.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms).then_with(|| a.name.cmp(&b.name)));
    Ok(Aggregate {
        runs,
        total_ms: ratio.ms(total_ticks) / n,
        operators,
        execute_ms: (execute_events > 0).then(|| ratio.ms(execute_ticks) / n),
        control_ms: ratio.ms(control_ticks) / n,
        instructions_per_run: per_run(instructions, runs),
        delegate_events_per_run: per_run(delegate_events, runs),
        delegate_operators,
    })
}

/// The delegate backend a delegate-logged event belongs to: the one of the
/// `DelegateCall` instruction it was logged in.
fn delegate_of<'p>(event: &ProfileEvent, plan: &'p PlanInstructions) -> Result<&'p str, String> {
    let (chain, index) = event
        .instruction_ref()
        .ok_or_else(|| format!("a delegate's event {:?} has no instruction", delegate_operator_name(event)))?;
    match plan.get(chain, index) {
        Some(Instruction::Delegate { delegate }) => plan.delegate_backend(delegate),
        _ => None,
    }
    .ok_or_else(|| {
        format!(
            "a delegate's event {:?} names chain {chain} instruction {index}, which is not a delegate call of method {:?}",
            delegate_operator_name(event),
            plan.name
        )
    })
}

/// The row an instruction event belongs to.
fn instruction_key<'p>(event: &ProfileEvent, plan: &'p PlanInstructions) -> Result<(OperatorKind, &'p str), String> {
    let (chain, index) = event.instruction_ref().ok_or_else(|| {
        format!("a {} event has no instruction (chain {}, instruction {})", event.name, event.chain, event.instruction)
    })?;
    let instruction = plan.get(chain, index).ok_or_else(|| {
        format!(
            "a {} event names chain {chain} instruction {index}, but method {:?} has {} chains and {} instructions",
            event.name,
            plan.name,
            plan.chains.len(),
            plan.instruction_count()
        )
    })?;
    match (event.name.as_str(), instruction) {
        (KERNEL_EVENT, Instruction::Kernel { op }) => plan.operator(op).map(|name| (OperatorKind::Kernel, name)),
        (DELEGATE_EVENT, Instruction::Delegate { delegate }) => {
            plan.delegate_backend(delegate).map(|name| (OperatorKind::Delegate, name))
        }
        _ => None,
    }
    .ok_or_else(|| format!("a {} event names chain {chain} instruction {index}, which is a {instruction:?}", event.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::etdump::{DelegateEventId, RunBlock};

    fn plan() -> PlanInstructions {
        let chain = vec![
            Instruction::Kernel { op: 0 },
            Instruction::Delegate { delegate: 0 },
            Instruction::Kernel { op: 1 },
            Instruction::Kernel { op: 0 },
            Instruction::Free,
        ];
        PlanInstructions::forward(&["aten::addmm.out", "aten::native_layer_norm.out"], chain)
    }

    fn event(name: &str, instruction: i32, start: u64, end: u64) -> ProfileEvent {
        ProfileEvent { name: name.into(), chain: 0, instruction, delegate_id: None, start, end }
    }

    fn block(scale: u64) -> RunBlock {
        let inside = |name: &str, start, end| ProfileEvent {
            delegate_id: Some(DelegateEventId::Name(name.into())),
            ..event("", 1, start, end)
        };
        RunBlock {
            name: EXECUTE_BLOCK.into(),
            events: vec![
                event(KERNEL_EVENT, 0, 0, 10 * scale),
                event("native_call_addmm.out", 0, 1, 9),
                inside("Add (ND) #1", 12, 16),
                inside("Fully Connected (NC, F32) GEMM #1", 16, 26),
                inside("Add (ND) #2", 26, 27),
                event(DELEGATE_EVENT, 1, 10, 40 * scale),
                event(KERNEL_EVENT, 2, 40, 45),
                event(KERNEL_EVENT, 3, 45, 55),
                event("FREE_CALL", 4, 55, 57),
                ProfileEvent { chain: -1, instruction: 0, ..event(EXECUTE_EVENT, 0, 0, 60) },
            ],
            other_events: 0,
            outputs: vec![],
        }
    }

    #[test]
    fn sums_instruction_events_per_operator_and_averages_runs() {
        let dump = EtDump { version: 0, runs: vec![block(1), block(1)] };
        let a = aggregate(&dump, &plan(), TickRatio { numerator: 1_000_000, denominator: 1 }).unwrap();
        assert_eq!(a.runs, 2);
        assert_eq!(a.total_ms, 55.0);
        assert_eq!(a.execute_ms, Some(60.0));
        assert_eq!(a.control_ms, 2.0);
        assert_eq!((a.instructions_per_run, a.delegate_events_per_run), (4, 3));
        let inside: Vec<(&str, &str, u64, f64)> =
            a.delegate_operators.iter().map(|o| (o.delegate.as_str(), o.name.as_str(), o.count, o.total_ms)).collect();
        assert_eq!(
            inside,
            [("XnnpackBackend", "Fully Connected (NC, F32) GEMM", 1, 10.0), ("XnnpackBackend", "Add (ND)", 2, 5.0)],
            "grouped per operator type without the #n, largest first"
        );
        assert_eq!(a.delegate_operators[0].share, 10.0 / 55.0, "a share of the backend's total, like the operator rows");
        let rows: Vec<(&str, OperatorKind, u64, f64)> =
            a.operators.iter().map(|o| (o.name.as_str(), o.kind, o.count, o.total_ms)).collect();
        assert_eq!(
            rows,
            [
                ("XnnpackBackend", OperatorKind::Delegate, 1, 30.0),
                ("aten::addmm.out", OperatorKind::Kernel, 2, 20.0),
                ("aten::native_layer_norm.out", OperatorKind::Kernel, 1, 5.0),
            ]
        );
        let shares: f64 = a.operators.iter().map(|o| o.share).sum();
        assert!((shares - 1.0).abs() < 1e-12, "{shares}");
    }

    #[test]
    fn delegate_operator_names_lose_only_a_numeric_suffix() {
        let named = |name: &str| ProfileEvent { delegate_id: Some(DelegateEventId::Name(name.into())), ..event("", 1, 0, 1) };
        assert_eq!(delegate_operator_name(&named("Transpose (ND, X32) #12")), "Transpose (ND, X32)");
        assert_eq!(delegate_operator_name(&named("Softmax #a")), "Softmax #a");
        assert_eq!(delegate_operator_name(&named(" #3")), " #3");
        assert_eq!(delegate_operator_name(&named("Gelu #")), "Gelu #");
        let int = ProfileEvent { delegate_id: Some(DelegateEventId::Int(7)), ..event("", 1, 0, 1) };
        assert_eq!(delegate_operator_name(&int), "debug id 7");
    }

    #[test]
    fn events_that_do_not_fit_the_program_are_errors() {
        let mut dump = EtDump { version: 0, runs: vec![block(1)] };
        dump.runs[0].events.push(event(KERNEL_EVENT, 1, 0, 1));
        let err = aggregate(&dump, &plan(), TickRatio::NANOSECONDS).unwrap_err();
        assert!(err.contains("instruction 1") && err.contains("Delegate"), "{err}");
        dump.runs[0].events.pop();
        dump.runs[0].events.push(event(DELEGATE_EVENT, 77, 0, 1));
        let err = aggregate(&dump, &plan(), TickRatio::NANOSECONDS).unwrap_err();
        assert!(err.contains("instruction 77"), "{err}");
        // A delegate's own event must sit inside a delegate call.
        dump.runs[0].events.pop();
        dump.runs[0].events.push(ProfileEvent { delegate_id: Some(DelegateEventId::Name("Add (ND) #1".into())), ..event("", 0, 0, 1) });
        let err = aggregate(&dump, &plan(), TickRatio::NANOSECONDS).unwrap_err();
        assert!(err.contains("\"Add (ND)\"") && err.contains("instruction 0") && err.contains("not a delegate call"), "{err}");
        let empty = EtDump { version: 0, runs: vec![RunBlock { name: "Default".into(), events: vec![], other_events: 0, outputs: vec![] }] };
        assert!(aggregate(&empty, &plan(), TickRatio::NANOSECONDS).unwrap_err().contains("no instruction events"));
    }
}
