//! Numeric gap per module: each ExecuTorch program's output of a module
//! against eager's. ExecuTorch's outputs come from one run with the ETDump
//! tracer logging intermediate outputs into a debug buffer: every kernel
//! call's output, and a delegate call's outputs as one (the modules inside an
//! XNNPACK subgraph have no output of their own there; the row of the
//! subgraph's last node gets the call's output, and says so). Eager's are the
//! outputs of its innermost module scopes.
//!
//! A row is compared where both sides have a float output of the same number
//! of elements (ExecuTorch keeps the batch dimension of one, eager drops it).

use std::collections::BTreeMap;
use std::path::Path;

use super::report::Gap;
use super::rows::row_of;
use super::sidecar::Sidecar;
use crate::backend::OutputKind;
use crate::model::Encoded;
use crate::profile::aggregate::EXECUTE_BLOCK;
use crate::profile::{etdump, ProfileError};
use crate::pte::Instruction;

/// One module's output as a runtime produced it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleOutput {
    pub values: Vec<f32>,
    /// Where it was taken: `"kernel"` (the module's last kernel call),
    /// `"delegate call"` (the output of the XNNPACK call the module ends in) or
    /// `"module"` (an eager column's module, its own output).
    pub at: &'static str,
}

/// Outputs by row: for each row, every float output it produced, last first.
pub type RowOutputs = BTreeMap<String, Vec<ModuleOutput>>;

/// Runs the program at `path` once with intermediate outputs logged and
/// groups them by row through `sidecar`.
pub fn program_outputs(path: &Path, input: &Encoded, sidecar: &Sidecar, output: OutputKind) -> Result<RowOutputs, ProfileError> {
    let file = path.display().to_string();
    // The load's own block stays in the dump: taking the dump now would end the
    // tracer's buffer, and the next block would start without the debug buffer.
    let mut program = crate::profile::trace::open(path, output, true)?;
    // The buffer grows as the run logs; reserving the program's estimate up
    // front saves regrowing it (a GPT-2's portable LM head alone logs its
    // 154 MB transposed weight twice). Only the pages a run writes are resident.
    let reserve = usize::try_from(program.instructions.logged_output_bytes).unwrap_or(usize::MAX);
    program.module_mut().log_outputs(reserve)?;
    program.forward(input).map_err(|e| ProfileError::Input { file: file.clone(), detail: format!("{e:#}") })?;
    let bytes = program.module_mut().take_etdump()?;
    let buffer = program.module_mut().debug_buffer()?;
    let plan = &program.instructions;
    let coverage = program.coverage.plan("forward").ok_or_else(|| ProfileError::NoForward(file.clone()))?;
    let dump = etdump::decode(&bytes).map_err(|source| ProfileError::Dump { file: file.clone(), source })?;
    let block = dump
        .runs
        .iter()
        .rev()
        .find(|b| b.name == EXECUTE_BLOCK)
        .ok_or_else(|| ProfileError::Mismatch { file: file.clone(), detail: "the traced run logged no Execute block".into() })?;
    let mut rows: RowOutputs = BTreeMap::new();
    for out in block.outputs.iter().filter(|o| !o.in_delegate) {
        let (Ok(chain), Ok(index)) = (usize::try_from(out.chain), usize::try_from(out.instruction)) else { continue };
        let (module_path, at) = match plan.get(chain, index) {
            Some(Instruction::Kernel { .. }) => (sidecar.instruction(chain, index), "kernel"),
            Some(Instruction::Delegate { delegate }) => {
                // The call's output is its subgraph's last node's.
                let last = coverage.blobs.get(delegate).and_then(|b| b.xnodes.last());
                (last.and_then(|n| sidecar.node(n.debug_handle)).or_else(|| sidecar.instruction(chain, index)), "delegate call")
            }
            _ => (None, ""),
        };
        let (Some(module_path), Some(values)) = (module_path, out.floats(&buffer)) else { continue };
        rows.entry(row_of(module_path)).or_default().insert(0, ModuleOutput { values, at });
    }
    Ok(rows)
}

/// Cosine similarity and largest absolute difference (`task::cosine`,
/// `task::max_abs_diff`); None when the lengths differ or there is
/// nothing. A NaN on either side makes both NaN, and an infinity the cosine
/// NaN: never a gap that passes.
pub fn gap(reference: &[f32], other: &[f32]) -> Option<Gap> {
    Some(Gap { cosine: crate::task::cosine(reference, other)?, max_abs_diff: crate::task::max_abs_diff(reference, other)?, at: "" })
}

/// The gap of every row both sides have: eager's output against the program's
/// latest output of that row with as many elements.
pub fn row_gaps(eager: &BTreeMap<String, Vec<f32>>, program: &RowOutputs) -> BTreeMap<String, Gap> {
    let mut gaps = BTreeMap::new();
    for (row, reference) in eager {
        let Some(outputs) = program.get(row) else { continue };
        if let Some(out) = outputs.iter().find(|o| o.values.len() == reference.len()) {
            if let Some(g) = gap(reference, &out.values) {
                gaps.insert(row.clone(), Gap { at: out.at, ..g });
            }
        }
    }
    gaps
}

/// The gaps of a quantized eager column's modules against float32 eager's, row by row:
/// each module's own output (`"module"`), as the two ran the same modules.
pub fn module_gaps(eager: &BTreeMap<String, Vec<f32>>, other: &BTreeMap<String, Vec<f32>>) -> BTreeMap<String, Gap> {
    let mut gaps = BTreeMap::new();
    for (row, reference) in eager {
        if let Some(g) = other.get(row).and_then(|values| gap(reference, values)) {
            gaps.insert(row.clone(), Gap { at: "module", ..g });
        }
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_gaps_compare_the_rows_both_ran() {
        let eager = BTreeMap::from([("head".to_owned(), vec![1.0, 2.0]), ("wte".to_owned(), vec![1.0])]);
        let quantized = BTreeMap::from([("head".to_owned(), vec![1.0, 2.5]), ("other".to_owned(), vec![1.0])]);
        let gaps = module_gaps(&eager, &quantized);
        assert_eq!(gaps.keys().collect::<Vec<_>>(), ["head"]);
        assert_eq!((gaps["head"].at, gaps["head"].max_abs_diff), ("module", 0.5));
    }

    #[test]
    fn cosine_and_max_difference() {
        let g = gap(&[1.0, 0.0, 2.0], &[1.0, 0.0, 2.0]).unwrap();
        assert!((g.cosine - 1.0).abs() < 1e-12 && g.max_abs_diff == 0.0);
        let g = gap(&[1.0, 0.0], &[0.0, 1.0]).unwrap();
        assert!(g.cosine.abs() < 1e-12 && g.max_abs_diff == 1.0);
        assert!(gap(&[1.0], &[1.0, 2.0]).is_none());
        let eager = BTreeMap::from([("head".to_owned(), vec![1.0, 2.0])]);
        let program = RowOutputs::from([(
            "head".to_owned(),
            vec![ModuleOutput { values: vec![1.0], at: "kernel" }, ModuleOutput { values: vec![1.0, 2.5], at: "delegate call" }],
        )]);
        let gaps = row_gaps(&eager, &program);
        assert_eq!(gaps["head"].at, "delegate call");
        assert_eq!(gaps["head"].max_abs_diff, 0.5);
    }

    #[test]
    fn a_nan_anywhere_is_a_nan_gap() {
        // Wherever the NaN sits in the fold, on either side.
        for (a, b) in [([f32::NAN, 1.0, 2.0], [1.0, 1.0, 2.0]), ([1.0, 1.0, 2.0], [1.0, 1.0, f32::NAN]), ([1.0, f32::NAN, 2.0], [1.0, 5.0, 2.0])] {
            let g = gap(&a, &b).unwrap();
            assert!(g.cosine.is_nan() && g.max_abs_diff.is_nan(), "{a:?} vs {b:?}: {g:?}");
        }
        let g = gap(&[f32::INFINITY, 1.0], &[1.0, 1.0]).unwrap();
        assert!(g.cosine.is_nan() && g.max_abs_diff == f64::INFINITY, "{g:?}");
    }
}
