//! The traced run: a `.pte` loaded a second time with ExecuTorch's ETDump
//! event tracer attached, run on one input, its dump decoded and mapped back
//! to the program's instructions. The backends that `run`, `bench` and the
//! explorer time are never loaded with the tracer.

use std::path::Path;

use super::aggregate::{aggregate, TickRatio};
use super::etdump;
use super::report::BackendProfile;
use super::ProfileError;
use crate::backend::executorch::{OpenError, Program};
use crate::backend::OutputKind;
use super::ProfiledRun;
use crate::ffi;
use crate::tensor::{argmax, Encoded};

/// What the report says made the numbers.
pub const PROFILER: &str = "ExecuTorch's ETDump";

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

/// Runs the program at `path` on `input` as its column does (the one
/// driver, [`Program`], loaded with the tracer, to return `output`): one
/// warm-up run, then `runs` traced runs, and decodes their ETDump. With
/// [`ProfiledRun::DecodeStep`] (a decoder's program), the prompt's run and a
/// warm-up step first, then `runs` steps, each fed the last one's greedy token.
pub fn trace_file(path: &Path, input: &Encoded, runs: u32, run: ProfiledRun, output: OutputKind) -> Result<Traced, ProfileError> {
    let file = path.display().to_string();
    if runs == 0 || runs > MAX_RUNS {
        return Err(ProfileError::Runs { runs, max: MAX_RUNS });
    }
    let (numerator, denominator) = ffi::ticks_to_ns_ratio()?;
    let ratio = TickRatio { numerator, denominator };
    let mut program = open(path, output, true)?;
    // The load itself fills a block ("Default": Method::init, Program::load_method);
    // it and the warm-up run are taken out and dropped.
    let _ = program.module_mut().take_etdump();
    let failed = |e: anyhow::Error| ProfileError::Input { file: file.clone(), detail: format!("{e:#}") };
    match run {
        ProfiledRun::Prompt => {
            let forward = |program: &mut Program| program.forward(input).map(drop).map_err(failed);
            forward(&mut program)?;
            let _ = program.module_mut().take_etdump();
            for _ in 0..runs {
                forward(&mut program)?;
            }
        }
        ProfiledRun::DecodeStep => {
            let (need, holds) = (input.len() + runs as usize + 1, program.convention.max_len);
            if need > holds {
                return Err(ProfileError::Input {
                    file,
                    detail: format!(
                        "{runs} decode steps and a warm-up step after a {}-token prompt need {need} positions and the program holds {holds}: \
                         ask fewer --runs or give a shorter prompt",
                        input.len()
                    ),
                });
            }
            let mut token = argmax(&program.prefill(&input.ids).map_err(failed)?).map_err(failed)?;
            token = argmax(&program.step(token).map_err(failed)?).map_err(failed)?;
            let _ = program.module_mut().take_etdump();
            for _ in 0..runs {
                token = argmax(&program.step(token).map_err(failed)?).map_err(failed)?;
            }
        }
    }
    let bytes = program.module_mut().take_etdump()?;
    let dump = etdump::decode(&bytes).map_err(|source| ProfileError::Dump { file: file.clone(), source })?;
    // A program taking its cache as inputs runs a prompt through its method prefill.
    let Program { coverage: report, instructions, prefill_instructions, .. } = program;
    let plan = match run {
        ProfiledRun::Prompt => prefill_instructions.unwrap_or(instructions),
        ProfiledRun::DecodeStep => instructions,
    };
    Ok(Traced { file, report, plan, dump, ratio })
}

/// [`Program::open`], its errors as a profile's.
pub(crate) fn open(path: &Path, output: OutputKind, traced: bool) -> Result<Program, ProfileError> {
    Program::open(path, output, traced).map_err(|e| match e {
        OpenError::Unreadable { file, source } => ProfileError::Program { file, source },
        OpenError::NoForward(file) => ProfileError::NoForward(file),
        e @ OpenError::CannotDrive { .. } => ProfileError::Input { file: path.display().to_string(), detail: e.to_string() },
        OpenError::Aborts(message) => ProfileError::Aborts(message),
        e @ OpenError::MissingKernels { .. } => ProfileError::MissingKernels(e.to_string()),
        OpenError::Runtime(e) => ProfileError::Runtime(e),
    })
}

/// Profiles the program at `path` on `input` ([`trace_file`]), per operator.
/// `name` names the backend in the report.
pub fn profile_file(name: &str, path: &Path, input: &Encoded, runs: u32, output: OutputKind) -> Result<BackendProfile, ProfileError> {
    profile_of(name, &trace_file(path, input, runs, ProfiledRun::Prompt, output)?)
}

/// The per-operator profile of a traced run ([`trace_file`]).
pub fn profile_of(name: &str, traced: &Traced) -> Result<BackendProfile, ProfileError> {
    let agg = aggregate(&traced.dump, &traced.plan, traced.ratio).map_err(|detail| ProfileError::Mismatch { file: traced.file.clone(), detail })?;
    Ok(BackendProfile {
        name: name.to_owned(),
        total_ms: agg.total_ms,
        operators: agg.operators,
        file: traced.file.clone(),
        runs: agg.runs,
        execute_ms: agg.execute_ms,
        control_ms: agg.control_ms,
        instructions_per_run: agg.instructions_per_run,
        delegate_events_per_run: agg.delegate_events_per_run,
        delegate_operators: agg.delegate_operators,
        profiler: PROFILER.to_string(),
    })
}
