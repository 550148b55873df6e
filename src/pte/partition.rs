//! The partition map of a plan: its instructions in execution order as a strip
//! of runs, where each delegate call is one run and consecutive kernel calls
//! form one run between them. Every change of run is a boundary (a tensor
//! handed between the default kernels and a delegate, or between two delegate
//! calls); the operators of a kernel run that sits between two delegate calls
//! are what breaks the delegated graph apart.
//!
//! ```text
//! kernels ×24 │ XnnpackBackend │ kernels ×6 │ XnnpackBackend │ ...
//! ```
//! Control instructions (move, jump, free) are left out of the strip.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::instructions::{Instruction, PlanInstructions};

/// One run of the strip.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartitionRun {
    /// `"kernels"` or `"delegate"`.
    pub kind: RunKind,
    /// Chain and position of its first instruction.
    pub chain: usize,
    pub first: usize,
    /// Calls in the run (1 for a delegate run).
    pub calls: u64,
    /// The backend id of a delegate run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// A kernel run's operators, `name[.overload]` with their calls.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub operators: BTreeMap<String, u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    Kernels,
    Delegate,
}

/// The strip of one plan and what it adds up to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PartitionMap {
    pub runs: Vec<PartitionRun>,
    /// `runs.len() - 1` (0 for an empty plan): each change from one run to the next.
    pub boundaries: u64,
    pub kernel_calls: u64,
    pub delegate_calls: u64,
    /// Kernel runs (stretches of consecutive kernel calls).
    pub kernel_runs: u64,
    /// Operators of the kernel runs that lie between two delegate calls, with
    /// their calls: what splits the delegated graph.
    pub breaks: BTreeMap<String, u64>,
}

impl PartitionMap {
    /// The strip of `plan`, chain by chain.
    pub fn of(plan: &PlanInstructions) -> PartitionMap {
        let mut runs: Vec<PartitionRun> = Vec::new();
        let (mut kernel_calls, mut delegate_calls) = (0, 0);
        for (c, chain) in plan.chains.iter().enumerate() {
            for (i, instruction) in chain.iter().enumerate() {
                match *instruction {
                    Instruction::Kernel { op } => {
                        kernel_calls += 1;
                        let name = plan.operator(op).unwrap_or("?").to_owned();
                        match runs.last_mut() {
                            Some(run) if run.kind == RunKind::Kernels => {
                                run.calls += 1;
                                *run.operators.entry(name).or_insert(0) += 1;
                            }
                            _ => runs.push(PartitionRun {
                                kind: RunKind::Kernels,
                                chain: c,
                                first: i,
                                calls: 1,
                                backend: None,
                                operators: BTreeMap::from([(name, 1)]),
                            }),
                        }
                    }
                    Instruction::Delegate { delegate } => {
                        delegate_calls += 1;
                        runs.push(PartitionRun {
                            kind: RunKind::Delegate,
                            chain: c,
                            first: i,
                            calls: 1,
                            backend: Some(plan.delegate_backend(delegate).unwrap_or("?").to_owned()),
                            operators: BTreeMap::new(),
                        });
                    }
                    _ => {}
                }
            }
        }
        let mut breaks = BTreeMap::new();
        for (k, run) in runs.iter().enumerate() {
            let between = k > 0 && k + 1 < runs.len() && run.kind == RunKind::Kernels;
            if between && runs[k - 1].kind == RunKind::Delegate && runs[k + 1].kind == RunKind::Delegate {
                for (name, n) in &run.operators {
                    *breaks.entry(name.clone()).or_insert(0) += n;
                }
            }
        }
        PartitionMap {
            boundaries: runs.len().saturating_sub(1) as u64,
            kernel_runs: runs.iter().filter(|r| r.kind == RunKind::Kernels).count() as u64,
            runs,
            kernel_calls,
            delegate_calls,
            breaks,
        }
    }

    /// The breaking operators, most calls first.
    pub fn breaks_by_count(&self) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> = self.breaks.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v
    }

    /// One cell per instruction in order, `true` for a delegate call, squeezed
    /// into `width` cells (a cell is delegated when most of its calls are).
    pub fn cells(&self, width: usize) -> Vec<bool> {
        let calls: Vec<bool> = self
            .runs
            .iter()
            .flat_map(|r| std::iter::repeat_n(r.kind == RunKind::Delegate, r.calls as usize))
            .collect();
        squeeze(&calls, width)
    }
}

/// `calls` (one flag per call, `true` for a delegate call) squeezed into at
/// most `width` cells; a cell is delegated when most of its calls are.
pub fn squeeze(calls: &[bool], width: usize) -> Vec<bool> {
    if width == 0 || calls.is_empty() {
        return Vec::new();
    }
    if calls.len() <= width {
        return calls.to_vec();
    }
    (0..width)
        .map(|c| {
            let a = c * calls.len() / width;
            let b = ((c + 1) * calls.len() / width).clamp(a + 1, calls.len());
            let part = &calls[a..b];
            2 * part.iter().filter(|d| **d).count() >= part.len()
        })
        .collect()
}

impl fmt::Display for PartitionMap {
    /// `kernels ×24 │ XnnpackBackend │ kernels ×6 │ ...`, runs of more than a
    /// line wrapped, then the breaks.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  partition      {} runs ({} delegate calls, {} kernel runs), {} boundaries",
            self.runs.len(),
            self.delegate_calls,
            self.kernel_runs,
            self.boundaries
        )?;
        let mut line = String::from("   ");
        for (k, run) in self.runs.iter().enumerate() {
            let cell = match run.kind {
                RunKind::Kernels => format!("K{}", run.calls),
                RunKind::Delegate => "D".to_owned(),
            };
            if line.len() + cell.len() + 1 > 78 {
                writeln!(f, "{line}")?;
                line = String::from("   ");
            }
            line.push(' ');
            line.push_str(&cell);
            if k + 1 == self.runs.len() {
                writeln!(f, "{line}")?;
            }
        }
        writeln!(f, "    (D: one delegate call; Kn: n kernel calls in a row)")?;
        let breaks = self.breaks_by_count();
        if breaks.is_empty() {
            writeln!(f, "  breaks: none")?;
        } else {
            writeln!(f, "  breaks (operators on the default kernels between two delegate calls):")?;
            let width = breaks.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
            for (name, n) in breaks {
                writeln!(f, "    {name:<width$}  {n:>5}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(chain: Vec<Instruction>) -> PlanInstructions {
        PlanInstructions::forward(&["aten::view", "aten::native_layer_norm.out"], chain)
    }

    #[test]
    fn no_delegate_is_one_kernel_run() {
        let k = |op| Instruction::Kernel { op };
        let map = PartitionMap::of(&plan(vec![k(0), k(1), Instruction::Free, k(0)]));
        assert_eq!(map.runs.len(), 1);
        assert_eq!((map.boundaries, map.kernel_calls, map.delegate_calls, map.kernel_runs), (0, 3, 0, 1));
        assert!(map.breaks.is_empty());
        assert_eq!(map.cells(10), vec![false; 3]);
    }

    #[test]
    fn kernel_runs_between_delegates_are_the_breaks() {
        let (k, d) = (|op| Instruction::Kernel { op }, Instruction::Delegate { delegate: 0 });
        let map = PartitionMap::of(&plan(vec![k(0), d, k(0), k(1), Instruction::Move, d, d, k(1)]));
        let kinds: Vec<(RunKind, u64)> = map.runs.iter().map(|r| (r.kind, r.calls)).collect();
        assert_eq!(
            kinds,
            [(RunKind::Kernels, 1), (RunKind::Delegate, 1), (RunKind::Kernels, 2), (RunKind::Delegate, 1), (RunKind::Delegate, 1), (RunKind::Kernels, 1)]
        );
        assert_eq!((map.boundaries, map.kernel_calls, map.delegate_calls, map.kernel_runs), (5, 4, 3, 3));
        assert_eq!(map.breaks, BTreeMap::from([("aten::view".to_owned(), 1), ("aten::native_layer_norm.out".to_owned(), 1)]));
        assert_eq!(map.runs[2].first, 2);
        assert_eq!(map.cells(7), vec![false, true, false, false, true, true, false]);
        assert_eq!(map.cells(2).len(), 2);
        let text = map.to_string();
        assert!(text.contains("5 boundaries") && text.contains("K1 D K2 D D K1"), "{text}");
    }
}
