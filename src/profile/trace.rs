//! The traced run: a `.pte` loaded a second time with ExecuTorch's ETDump
//! event tracer attached, run on one input, its dump decoded and mapped back
//! to the program's instructions. The backends that `run`, `bench` and the
//! explorer time are never loaded with the tracer.

use std::path::Path;

use super::aggregate::{aggregate, TickRatio};
use super::etdump;
use super::report::BackendProfile;
use super::ProfileError;
use crate::ffi::{self, EtModule};
use crate::model::Encoded;

/// Traced runs averaged by default (after one warm-up run whose events are dropped).
pub const DEFAULT_RUNS: u32 = 5;
/// Most traced runs: portable takes up to 1.4 s per run at 128 tokens.
pub const MAX_RUNS: u32 = 1000;

/// The ETDump of traced runs of one program, with what it maps back to.
pub struct Traced {
    pub file: String,
    pub report: crate::pte::CoverageReport,
    pub plan: crate::pte::PlanInstructions,
    pub dump: etdump::EtDump,
    pub ratio: TickRatio,
}

/// Runs the program at `path` on `input`: one warm-up run, then `runs` traced
/// runs, and decodes their ETDump. The file goes through runlens' own `.pte`
/// reader before ExecuTorch sees it.
/// A decoder with its KV cache inside takes `cache_position` [S] after `input_ids`.
pub(crate) fn takes_cache_position(report: &crate::pte::CoverageReport) -> bool {
    report.plan("forward").and_then(|p| p.input_shapes.get(1)).is_some_and(|s| s.sizes.len() == 1)
}

/// One forward on `input`: for a KV-cache decoder the prefill of the input
/// (positions 0..S), else ids and the mask when the program takes one.
pub(crate) fn run_once(module: &mut EtModule, kv_cache: bool, input: &Encoded, mask: Option<&[i64]>) -> Result<(), ffi::EtError> {
    let len = input.ids.len() as i64;
    if kv_cache {
        let positions: Vec<i64> = (0..len).collect();
        module.execute(&[ffi::LongTensor::new(&input.ids, &[1, len]), ffi::LongTensor::new(&positions, &[len])])?;
    } else {
        module.forward(&input.ids, mask)?;
    }
    Ok(())
}

pub fn trace_file(path: &Path, input: &Encoded, runs: u32) -> Result<Traced, ProfileError> {
    let file = path.display().to_string();
    if runs == 0 || runs > MAX_RUNS {
        return Err(ProfileError::Runs { runs, max: MAX_RUNS });
    }
    let (report, table) = crate::pte::read_program_file(path).map_err(|source| ProfileError::Program { file: file.clone(), source: Box::new(source) })?;
    let plan = table.plan("forward").ok_or_else(|| ProfileError::NoForward(file.clone()))?.clone();
    let (numerator, denominator) = ffi::ticks_to_ns_ratio()?;
    let ratio = TickRatio { numerator, denominator };

    // A program exported for a fixed length gets the input padded, as its backend does.
    let with_mask = report.plan("forward").is_some_and(|p| p.inputs >= 2);
    let padded;
    let input = match report.plan("forward").and_then(|p| p.fixed_seq_len()) {
        Some(len) => {
            padded = input.padded_to(len).map_err(|e| ProfileError::Input { file: file.clone(), detail: format!("{e:#}") })?;
            &padded
        }
        None => input,
    };
    crate::backend::probe::check(path).map_err(|e| ProfileError::Aborts(format!("{e:#}")))?;
    let mut module = EtModule::load(path, true)?;
    // The load itself fills a block ("Default": Method::init, Program::load_method);
    // it and the warm-up run are taken out and dropped.
    let _ = module.take_etdump();
    let mask = with_mask.then_some(input.attention_mask.as_slice());
    let kv_cache = takes_cache_position(&report);
    let forward = |module: &mut EtModule| run_once(module, kv_cache, input, mask);
    forward(&mut module)?;
    let _ = module.take_etdump();
    for _ in 0..runs {
        forward(&mut module)?;
    }
    let bytes = module.take_etdump()?;
    let dump = etdump::decode(&bytes).map_err(|source| ProfileError::Dump { file: file.clone(), source })?;
    Ok(Traced { file, report, plan, dump, ratio })
}

/// Profiles the program at `path` on `input` ([`trace_file`]), per operator.
/// `name` names the backend in the report.
pub fn profile_file(name: &str, path: &Path, input: &Encoded, runs: u32) -> Result<BackendProfile, ProfileError> {
    let Traced { file, plan, dump, ratio, .. } = trace_file(path, input, runs)?;
    let agg = aggregate(&dump, &plan, ratio).map_err(|detail| ProfileError::Mismatch { file: file.clone(), detail })?;
    Ok(BackendProfile {
        name: name.to_owned(),
        total_ms: agg.total_ms,
        operators: agg.operators,
        file,
        runs: agg.runs,
        execute_ms: agg.execute_ms,
        control_ms: agg.control_ms,
        instructions_per_run: agg.instructions_per_run,
        delegate_events_per_run: agg.delegate_events_per_run,
        delegate_operators: agg.delegate_operators,
    })
}
