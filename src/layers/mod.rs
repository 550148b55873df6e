//! Layer by layer (`runlens layers`): where each runtime's time goes, per
//! module of the model, side by side. Eager times its own modules (each
//! module's own forward, asked of the backend: [`crate::backend::Backend::run_timed_per_module`]); each
//! ExecuTorch program from a traced run's ETDump, its instruction events and
//! XNNPACK's per-operator events mapped to modules through the program's
//! sidecar ([`sidecar`], written at export). The rows ([`rows`]) are the same
//! for every runtime: embeddings, each layer's attention, feed-forward and
//! norms, the head.

pub mod executorch;
pub mod gap;
pub mod model_explorer;
pub mod report;
pub mod rows;
pub mod sidecar;
pub mod timeline;

use anyhow::Context;

pub use report::{BackendLayers, LayersReport};

use crate::backend::{BackendSpec, OutputKind, ROOT_MODULE};
use crate::model::ModelDir;
use crate::tensor::Encoded;
use crate::timeline::Timeline;
use executorch::{program_layers, Naming};
use sidecar::Sidecar;

/// Traced runs averaged by default, after one warm-up run.
pub const DEFAULT_RUNS: u32 = 3;

/// Each instruction's ms per run, `((chain, index), ms)`, of one program's traced runs.
pub type InstructionTimes = Vec<((usize, usize), f64)>;

/// One ExecuTorch program per module: a traced run mapped through its sidecar
/// (`<program>.modules.json` next to it), or per instruction without one.
/// With `trace`, its traced runs are added to it as a process.
pub fn program(spec: &BackendSpec, input: &Encoded, runs: u32, output: OutputKind, trace: Option<&mut Timeline>) -> anyhow::Result<BackendLayers> {
    program_timed(spec, input, runs, output, trace).map(|(layers, _)| layers)
}

/// [`program`], and the same runs' time per instruction.
fn program_timed(
    spec: &BackendSpec,
    input: &Encoded,
    runs: u32,
    output: OutputKind,
    trace: Option<&mut Timeline>,
) -> anyhow::Result<(BackendLayers, InstructionTimes)> {
    let path = spec.pte_file().with_context(|| format!("{spec} is not an ExecuTorch program"))?;
    let traced = crate::profile::trace_file(path, input, runs, crate::profile::ProfiledRun::Prompt, output)?;
    let side_path = sidecar::path_for(path);
    let sidecar = if side_path.exists() { Some(Sidecar::read(&side_path, &traced.plan)?) } else { None };
    if let Some(trace) = trace {
        trace.processes.push(timeline::program_process(&spec.name, &traced, sidecar.as_ref()));
    }
    let xnodes: Vec<Vec<crate::pte::XnnNode>> = traced
        .report
        .plan("forward")
        .map(|p| p.blobs.iter().map(|b| b.xnodes.clone()).collect())
        .unwrap_or_default();
    let naming = match &sidecar {
        Some(s) => Naming::Modules(s),
        None => Naming::Instructions,
    };
    let layers = program_layers(&traced.dump, &traced.plan, &xnodes, &naming, traced.ratio)
        .map_err(|detail| crate::profile::ProfileError::Mismatch { file: traced.file.clone(), detail })?;
    let note = sidecar.is_none().then(|| {
        format!("no sidecar {}: rows are instructions, not modules (re-export with python/export.py to get one)", side_path.display())
    });
    let times = executorch::instruction_times(&traced.dump, traced.ratio);
    let layers = BackendLayers {
        name: spec.name.clone(),
        total_ms: layers.total_ms,
        rows: layers.rows,
        unmapped_count: layers.unmapped_count,
        unmapped_ms: layers.unmapped_ms,
        runs: layers.runs,
        note,
    };
    Ok((layers, times))
}

/// Each row's output, flattened.
pub type EagerOutputs = std::collections::BTreeMap<String, Vec<f32>>;

/// A backend that times its own modules (eager), per module: one warm-up run,
/// then `runs` timed runs averaged; then one run keeping each innermost
/// module's output (for the gaps). With `trace`, the timed runs are added to
/// it as a process. Asked of the loaded backend ([`crate::backend::Backend::run_timed_per_module`]):
/// one that cannot says so.
pub fn own_modules(spec: &BackendSpec, dir: &ModelDir, input: &Encoded, runs: u32, trace: Option<&mut Timeline>) -> anyhow::Result<(BackendLayers, EagerOutputs)> {
    let watch = crate::memory::measured::watch(spec);
    let mut backend = crate::task::load_backend(spec, dir)?;
    let cannot = || anyhow::anyhow!("{spec}: {} cannot time its own modules", spec.runtime());
    backend.run(input)?;
    // The load and the first run (the modules' outputs kept below are layers' own).
    crate::memory::measured::finish(watch, spec, dir, "runlens layers");
    let mut order: Vec<String> = Vec::new();
    let mut sums: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
    let mut total = 0.0;
    let mut timed = Vec::new();
    let mut first: Option<std::time::Instant> = None;
    for _ in 0..runs.max(1) {
        let times = backend.run_timed_per_module(input).ok_or_else(cannot)??;
        total += times.total.as_secs_f64() * 1e3;
        let zero = *first.get_or_insert(times.started);
        let ns = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let scopes = times.scopes.iter().map(|(path, at, wall)| (path.clone(), ns(*at), ns(*wall))).collect();
        timed.push(timeline::TimedForward { start_ns: ns(times.started.saturating_duration_since(zero)), dur_ns: ns(times.total), scopes });
        for (path, own) in times.spans {
            let row = if path == ROOT_MODULE { rows::MODEL_ROW.to_owned() } else { rows::row_of(&path) };
            if !sums.contains_key(&row) {
                order.push(row.clone());
            }
            *sums.entry(row).or_insert(0.0) += own.as_secs_f64() * 1e3;
        }
    }
    let n = f64::from(runs.max(1));
    let kept = backend.run_keeping_module_outputs(input).ok_or_else(cannot)??;
    let mut outputs = EagerOutputs::new();
    for (path, values) in kept {
        outputs.insert(rows::row_of(&path), values);
    }
    let layers = BackendLayers {
        name: spec.name.clone(),
        total_ms: total / n,
        rows: order.iter().map(|r| (r.clone(), sums[r] / n)).collect(),
        unmapped_count: 0,
        unmapped_ms: 0.0,
        runs: runs.max(1) as usize,
        note: None,
    };
    if let Some(trace) = trace {
        trace.processes.push(timeline::eager_process(&spec.name, &timed));
    }
    Ok((layers, outputs))
}

/// Every backend of `specs` per module on `input`; with `trace`, each
/// backend's timed or traced runs are added to it as a process, in order.
pub fn layers(specs: &[BackendSpec], dir: &ModelDir, input: &Encoded, runs: u32, trace: Option<&mut Timeline>) -> anyhow::Result<LayersReport> {
    layers_timed(specs, dir, input, runs, trace).map(|(report, _)| report)
}

/// [`layers`], and each program's time per instruction from the same runs, by backend name.
pub fn layers_timed(
    specs: &[BackendSpec],
    dir: &ModelDir,
    input: &Encoded,
    runs: u32,
    mut trace: Option<&mut Timeline>,
) -> anyhow::Result<(LayersReport, std::collections::BTreeMap<String, InstructionTimes>)> {
    let mut times = std::collections::BTreeMap::new();
    let output = dir.task().output();
    let mut backends = Vec::new();
    // float32 eager's outputs, the reference of the gaps.
    let mut reference: Option<EagerOutputs> = None;
    // Eager's quantized columns' outputs, compared with the reference once it is there.
    let mut quantized_eager: Vec<(String, EagerOutputs)> = Vec::new();
    for spec in specs {
        spec.per_module_times().check().with_context(|| format!("{spec}: cannot time it per module"))?;
        // A program is traced; any other column that can (per_module_times above) times its own modules.
        let layers = match spec.pte_file() {
            Some(_) => program_timed(spec, input, runs, output, trace.as_deref_mut()).map(|(layers, t)| {
                times.insert(spec.name.clone(), t);
                layers
            }),
            None => own_modules(spec, dir, input, runs, trace.as_deref_mut()).map(|(layers, outputs)| {
                // float32 eager's: a quantized eager column is compared, not compared with.
                if spec.is_quantized() {
                    quantized_eager.push((spec.name.clone(), outputs));
                } else {
                    reference = Some(outputs);
                }
                layers
            }),
        };
        backends.push(layers.with_context(|| format!("{spec}: cannot time it per module"))?);
    }
    let mut report = LayersReport::new(input.text.clone(), dir.manifest().model.clone(), backends);
    // The gaps need float32 eager's outputs, and a program's sidecar or a quantized eager column's own.
    if let Some(reference) = &reference {
        for (name, outputs) in &quantized_eager {
            for (row, g) in gap::module_gaps(reference, outputs) {
                report.gaps.insert((row, name.clone()), g);
            }
        }
        for spec in specs {
            // Eager's own outputs are the reference, or compared above; only a program has a sidecar.
            let Some(path) = spec.pte_file() else { continue };
            let side_path = sidecar::path_for(path);
            if !side_path.exists() {
                continue;
            }
            let (coverage, table) = crate::pte::read_program_file(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            // A decoder's window program (no cache) runs the text left-padded to its window:
            // its intermediate outputs hold the padding's positions first, and do not line
            // up with eager's prefill position by position.
            let window = coverage.plan("forward").and_then(|p| p.fixed_seq_len()).is_some();
            if window && output == OutputKind::NextToken {
                continue;
            }
            let plan = table.plan("forward").with_context(|| format!("{}: no method forward", path.display()))?;
            let sidecar = Sidecar::read(&side_path, plan)?;
            let outputs = gap::program_outputs(path, input, &sidecar, output).with_context(|| format!("{spec}: cannot log its intermediate outputs"))?;
            for (row, g) in gap::row_gaps(reference, &outputs) {
                report.gaps.insert((row, spec.name.clone()), g);
            }
        }
    }
    Ok((report, times))
}
