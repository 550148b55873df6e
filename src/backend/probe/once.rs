//! Each runtime's "load and run once", the child's work: peers, one function
//! each, chosen by the [`Load`]. Each reads the file with runlens' own reader
//! first, as the load in the parent does, then hands it to its runtime.

use std::path::Path;

use super::{probe_inputs, Load};

/// Why the child's load or run did not succeed, when the runtime said so
/// (an abort or a crash says nothing here: the child is gone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The file is refused (by runlens' reader or the runtime): the load here would fail the same way.
    Load(String),
    /// It loaded; the run on the probe's input failed.
    Run(String),
    /// The runtime could not start (its library): nothing is known of the file.
    Runtime(String),
}

/// Load `path` as `load` says and run it once.
pub fn load_and_run(path: &Path, load: &Load) -> Result<(), Refusal> {
    match load {
        Load::Executorch => executorch(path),
        Load::LlamaCpp { max_len, pooled } => crate::backend::llamacpp::load_and_run_once(path, *max_len as usize, *pooled),
        Load::OnnxRuntime => crate::backend::onnxruntime::load_and_run_once(path),
    }
}

/// A `.pte`: runlens' reader, then ExecuTorch with a tracer (so an abort names
/// its instruction), `forward` once on [`probe_inputs`].
fn executorch(path: &Path) -> Result<(), Refusal> {
    let coverage = crate::pte::inspect_file(path).map_err(|e| Refusal::Load(format!("{}: {e}", path.display())))?;
    let plan = coverage.plan("forward").or_else(|| coverage.plans.first());
    let mut module = crate::ffi::EtModule::load(path, true).map_err(|e| Refusal::Load(e.message))?;
    // input_ids (with attention_mask, or cache_position for a KV-cache decoder, when it takes one).
    let inputs = probe_inputs(plan);
    let tensors: Vec<crate::ffi::LongTensor> = inputs.iter().map(|(data, sizes)| crate::ffi::LongTensor::new(data, sizes)).collect();
    module.execute(&tensors).map(drop).map_err(|e| Refusal::Run(e.message))
}
