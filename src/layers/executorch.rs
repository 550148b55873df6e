//! An ExecuTorch program's traced runs per module: each instruction event of
//! the ETDump goes to its instruction's module (from the sidecar); a delegate
//! call is split further: XNNPACK's per-operator events inside it (which carry
//! no debug handle) are lined up with the XNodes of the call's blob in order,
//! each XNode names the edge-graph node it came from (`XNode.debug_handle`),
//! and the sidecar names that node's module. The part of a delegate call its
//! operator events do not cover (the delegate's own work, XNNPACK's rounding
//! to whole microseconds) stays with the call's own module. So the rows add up
//! to the sum of the instruction events, the same total as `runlens profile`.
//!
//! What cannot be mapped (an instruction the sidecar lacks, an operator event
//! no XNode fits) is counted as unmapped, never dropped.

use std::collections::BTreeMap;

use super::rows::row_of;
use super::sidecar::Sidecar;
use crate::profile::aggregate::{delegate_operator_name, TickRatio, DELEGATE_EVENT, EXECUTE_BLOCK, KERNEL_EVENT};
use crate::profile::etdump::{EtDump, ProfileEvent};
use crate::pte::{Instruction, PlanInstructions, XnnNode};

/// Per-module times of one program, per run.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramLayers {
    /// Rows in the order they first ran: (row, ms per run).
    pub rows: Vec<(String, f64)>,
    /// The kernel and delegate instruction events per run (rows + unmapped).
    pub total_ms: f64,
    pub unmapped_count: u64,
    pub unmapped_ms: f64,
    pub runs: usize,
}

/// How rows are named: by module through a sidecar, or by instruction without one.
pub enum Naming<'a> {
    Modules(&'a Sidecar),
    /// `#5 aten::embedding.out`: one row per instruction.
    Instructions,
}

/// `XNNFullyConnected` -> `fully connected`: the words XNNPACK's operator
/// names start with, lower case.
fn xnode_words(kind: &str) -> String {
    let kind = kind.strip_prefix("XNN").unwrap_or(kind);
    let kind = kind.strip_prefix("Static").unwrap_or(kind);
    let mut words = String::new();
    for (i, c) in kind.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            words.push(' ');
        }
        words.push(c.to_ascii_lowercase());
    }
    words.trim_end_matches(|c: char| c.is_ascii_digit()).to_owned()
}

/// Whether XNNPACK's operator `event` (`Fully Connected (NC, F32) GEMM`) can
/// come from an XNode of `kind`.
pub fn xnode_fits(kind: &str, event: &str) -> bool {
    let event = event.to_ascii_lowercase();
    let event = event.strip_prefix("static ").unwrap_or(&event);
    let words = xnode_words(kind);
    let synonyms: &[&str] = match words.as_str() {
        "reshape" | "expand dims" | "flatten" => &["copy", "reshape"],
        "div" => &["divide"],
        "concatenate" => &["concatenate", "copy"],
        _ => &[],
    };
    event.starts_with(&words) || synonyms.iter().any(|s| event.starts_with(s))
}

/// The XNode each of one delegate call's operator events (in the order it
/// logged them) came from: the blob's XNodes are walked in order, each event
/// taking the next XNode its name fits ([`xnode_fits`]); `None` when none fits.
pub fn xnodes_of<'n>(calls: &[&ProfileEvent], nodes: &'n [XnnNode]) -> Vec<Option<&'n XnnNode>> {
    let mut next = 0usize;
    calls
        .iter()
        .map(|inner| {
            let name = delegate_operator_name(inner);
            let found = nodes[next.min(nodes.len())..].iter().position(|n| xnode_fits(&n.kind, &name))?;
            let node = &nodes[next + found];
            next += found + 1;
            Some(node)
        })
        .collect()
}

struct Acc<'a> {
    order: Vec<String>,
    ticks: BTreeMap<String, u64>,
    unmapped_count: u64,
    unmapped_ticks: u64,
    naming: &'a Naming<'a>,
}

impl Acc<'_> {
    fn add(&mut self, row: String, ticks: u64) {
        if !self.ticks.contains_key(&row) {
            self.order.push(row.clone());
        }
        *self.ticks.entry(row).or_insert(0) += ticks;
    }

    fn unmapped(&mut self, ticks: u64) {
        self.unmapped_count += 1;
        self.unmapped_ticks += ticks;
    }

    fn instruction_row(&self, plan: &PlanInstructions, chain: usize, index: usize) -> Option<String> {
        match self.naming {
            Naming::Modules(sidecar) => sidecar.instruction(chain, index).map(row_of),
            Naming::Instructions => Some(format!("#{index} {}", plan.describe(chain, index)?)),
        }
    }
}

/// Sums the events of every Execute block of `dump` per row. `xnodes[k]` are
/// the XNodes of delegate `k`'s blob (empty when it is not XNNPACK's).
pub fn program_layers(
    dump: &EtDump,
    plan: &PlanInstructions,
    xnodes: &[Vec<XnnNode>],
    naming: &Naming<'_>,
    ratio: TickRatio,
) -> Result<ProgramLayers, String> {
    let mut acc = Acc { order: Vec::new(), ticks: BTreeMap::new(), unmapped_count: 0, unmapped_ticks: 0, naming };
    let (mut runs, mut total_ticks) = (0usize, 0u64);
    for block in dump.runs.iter().filter(|b| b.name == EXECUTE_BLOCK) {
        runs += 1;
        // A delegate's operator events come before the DELEGATE_CALL event that encloses them.
        let mut inside: Vec<&ProfileEvent> = Vec::new();
        for event in &block.events {
            if event.delegate_id.is_some() {
                inside.push(event);
                continue;
            }
            if event.name != KERNEL_EVENT && event.name != DELEGATE_EVENT {
                continue;
            }
            let (chain, index) = event
                .instruction_ref()
                .ok_or_else(|| format!("a {} event has no instruction", event.name))?;
            let instruction = plan
                .get(chain, index)
                .ok_or_else(|| format!("a {} event names chain {chain} instruction {index}, which method {:?} lacks", event.name, plan.name))?;
            let ticks = event.ticks();
            total_ticks += ticks;
            let own_row = acc.instruction_row(plan, chain, index);
            let mut covered = 0u64;
            if let (Instruction::Delegate { delegate }, Naming::Modules(sidecar)) = (instruction, naming) {
                let nodes = xnodes.get(delegate).map(Vec::as_slice).unwrap_or(&[]);
                let calls: Vec<&ProfileEvent> = inside.iter().copied().filter(|e| e.instruction_ref() == Some((chain, index))).collect();
                for (inner, node) in calls.iter().zip(xnodes_of(&calls, nodes)) {
                    let t = inner.ticks().min(ticks - covered);
                    covered += t;
                    match node.and_then(|n| sidecar.node(n.debug_handle)) {
                        Some(module) => acc.add(row_of(module), t),
                        None => acc.unmapped(t),
                    }
                }
            }
            inside.clear();
            match own_row {
                Some(row) => acc.add(row, ticks - covered),
                None => acc.unmapped(ticks - covered),
            }
        }
    }
    if runs == 0 || total_ticks == 0 {
        return Err(format!(
            "the ETDump holds no instruction events ({} event blocks); was the program run with the tracer attached?",
            dump.runs.len()
        ));
    }
    let n = runs as f64;
    let rows = acc.order.iter().map(|row| (row.clone(), ratio.ms(acc.ticks[row]) / n)).collect();
    Ok(ProgramLayers {
        rows,
        total_ms: ratio.ms(total_ticks) / n,
        unmapped_count: (acc.unmapped_count as f64 / n).round() as u64,
        unmapped_ms: ratio.ms(acc.unmapped_ticks) / n,
        runs,
    })
}

/// Each kernel and delegate instruction's time per run, `((chain, index), ms)` in
/// the order they first ran: the same events [`program_layers`] sums, by instruction
/// (a delegate call whole, its operator events inside), so they add up to its total.
pub fn instruction_times(dump: &EtDump, ratio: TickRatio) -> Vec<((usize, usize), f64)> {
    let mut order: Vec<(usize, usize)> = Vec::new();
    let mut ticks: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    let mut runs = 0usize;
    for block in dump.runs.iter().filter(|b| b.name == EXECUTE_BLOCK) {
        runs += 1;
        for event in block.events.iter().filter(|e| e.delegate_id.is_none() && (e.name == KERNEL_EVENT || e.name == DELEGATE_EVENT)) {
            let Some(at) = event.instruction_ref() else { continue };
            if !ticks.contains_key(&at) {
                order.push(at);
            }
            *ticks.entry(at).or_insert(0) += event.ticks();
        }
    }
    let n = runs.max(1) as f64;
    order.into_iter().map(|at| (at, ratio.ms(ticks[&at]) / n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::etdump::{DelegateEventId, RunBlock};

    #[test]
    fn xnnpack_operator_names_fit_their_xnodes() {
        assert!(xnode_fits("XNNFullyConnected", "Fully Connected (NC, F32) GEMM"));
        assert!(xnode_fits("XNNFullyConnected", "Fully Connected (NC, QD8, F32, QC8W) GEMM"));
        assert!(xnode_fits("XNNStaticTranspose", "Transpose (ND, X32)"));
        assert!(xnode_fits("XNNStaticReshape", "Copy (NC, X32)"));
        assert!(xnode_fits("XNNStaticReshape", "Static Reshape (NC)"));
        assert!(xnode_fits("XNNBatchMatrixMultiply", "Batch Matrix Multiply (NC, F32) GEMM"));
        assert!(xnode_fits("XNNConvert", "Convert (NC, F32, QD8)"));
        assert!(!xnode_fits("XNNMultiply", "Batch Matrix Multiply (NC, F32) GEMM"));
        assert!(!xnode_fits("XNNAdd", "Softmax (NC, F32)"));
    }

    #[test]
    fn delegate_calls_split_by_node_and_rows_add_up() {
        let plan = PlanInstructions::forward(&["aten::native_layer_norm.out"], vec![Instruction::Delegate { delegate: 0 }, Instruction::Kernel { op: 0 }]);
        let sidecar_text = br#"{"runlens_modules": 1, "instructions": [
            {"chain": 0, "index": 0, "op": "delegate XnnpackBackend", "module": "bert.encoder.layer.0.attention.self"},
            {"chain": 0, "index": 1, "op": "aten::native_layer_norm.out", "module": "bert.encoder.layer.0.attention.output.LayerNorm"}],
            "nodes": [{"handle": 1, "module": "bert.encoder.layer.0.attention.self.query"},
                      {"handle": 2, "module": "bert.encoder.layer.0.attention.self"},
                      {"handle": 3, "module": "bert.encoder.layer.0.attention.output.dense"}]}"#;
        let sidecar = Sidecar::parse(std::path::Path::new("s.json"), sidecar_text, &plan).unwrap();
        let node = |kind: &str, h| XnnNode { kind: kind.into(), debug_handle: h };
        // The reshape (handle 2) runs no operator of its own: it is skipped.
        let xnodes = vec![vec![node("XNNFullyConnected", 1), node("XNNStaticReshape", 2), node("XNNFullyConnected", 3)]];
        let ev = |name: &str, i, s, e| ProfileEvent { name: name.into(), chain: 0, instruction: i, delegate_id: None, start: s, end: e };
        let inner = |name: &str, s, e| ProfileEvent { delegate_id: Some(DelegateEventId::Name(name.into())), ..ev("", 0, s, e) };
        let block = RunBlock {
            name: EXECUTE_BLOCK.into(),
            events: vec![
                inner("Fully Connected (NC, F32) GEMM #1", 0, 10),
                inner("Fully Connected (NC, F32) GEMM #2", 10, 16),
                inner("Softmax (NC, F32) #1", 16, 17),
                ev(DELEGATE_EVENT, 0, 0, 20),
                ev(KERNEL_EVENT, 1, 20, 25),
            ],
            other_events: 0,
            outputs: vec![],
        };
        let dump = EtDump { version: 0, runs: vec![block.clone(), block] };
        let ms = TickRatio { numerator: 1_000_000, denominator: 1 };
        let l = program_layers(&dump, &plan, &xnodes, &Naming::Modules(&sidecar), ms).unwrap();
        assert_eq!(
            l.rows,
            [
                ("encoder.layer.0.attention.self".to_owned(), 10.0 + 3.0),
                ("encoder.layer.0.attention.output".to_owned(), 6.0),
                ("encoder.layer.0.attention.output.LayerNorm".to_owned(), 5.0),
            ]
        );
        assert_eq!((l.unmapped_count, l.unmapped_ms), (1, 1.0), "the softmax fits no XNode left");
        let sum: f64 = l.rows.iter().map(|r| r.1).sum::<f64>() + l.unmapped_ms;
        assert_eq!((sum, l.total_ms, l.runs), (25.0, 25.0, 2));
        let by_instruction = program_layers(&dump, &plan, &xnodes, &Naming::Instructions, ms).unwrap();
        assert_eq!(by_instruction.rows[0], ("#0 delegate 0, XnnpackBackend".to_owned(), 20.0));
        assert_eq!(by_instruction.unmapped_count, 0);
    }
}
