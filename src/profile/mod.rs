//! Per-operator profiles (`runlens profile`, F4 in the explorer): for an
//! ExecuTorch program, a separate run with ExecuTorch's ETDump event tracer
//! attached ([`trace`]), the dump decoded ([`etdump`]), each event mapped
//! back to its instruction and summed per operator ([`aggregate`]); for an
//! ONNX file, ONNX Runtime's own profiler read the same way ([`onnxruntime`]);
//! and the report with its table ([`report`]).

pub mod aggregate;
pub mod etdump;
#[allow(
    clippy::all,
    clippy::pedantic,
    dead_code,
    unused_imports,
    missing_docs,
    non_camel_case_types,
    rustdoc::all
)]
pub mod generated;
pub mod onnxruntime;
pub mod report;
pub mod trace;

pub use crate::backend::ProfiledRun;
pub use aggregate::{DelegateOperatorProfile, OperatorKind, OperatorProfile};
pub use report::{BackendProfile, ProfileReport};
pub use trace::{profile_file, profile_of, trace_file, Traced, DEFAULT_RUNS};

/// What a profiled column's runs were, for `--trace`: a program's ETDump, or ONNX Runtime's own profile.
pub enum TracedRuns<'a> {
    Program(&'a Traced),
    OnnxRuntime(&'a onnxruntime::OnnxTrace),
}

use crate::backend::BackendSpec;
use crate::model::Encoded;

/// Why a profile could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{file}: not a readable ExecuTorch program (re-export it with `make models`)")]
    Program {
        file: String,
        #[source]
        source: Box<crate::pte::PteError>,
    },
    #[error("{0}: the program has no method \"forward\"")]
    NoForward(String),
    #[error(transparent)]
    Runtime(#[from] crate::ffi::EtError),
    #[error("{file}: cannot decode the ETDump of the traced run")]
    Dump {
        file: String,
        #[source]
        source: etdump::DumpError,
    },
    #[error("{file}: the ETDump does not match the program: {detail}")]
    Mismatch { file: String, detail: String },
    #[error("{file}: {detail}")]
    Input { file: String, detail: String },
    /// runlens' probe saw ExecuTorch abort on the program (the message names the file).
    #[error("{0}")]
    Aborts(String),
    /// The program calls operators or delegates runlens has no kernel for (the message names them and the file).
    #[error("{0}")]
    MissingKernels(String),
    /// ONNX Runtime's profiled session or its profile (the message names the file).
    #[error("{0}")]
    OnnxRuntime(String),
    #[error("the number of traced runs must be between 1 and {max}, not {runs}")]
    Runs { runs: u32, max: u32 },
}

/// Profiles each ExecuTorch program and ONNX file of `specs` on `input`, each
/// profiled run as `run` says; an error for a column without per-operator
/// times (eager, llama.cpp).
/// `on_traced` is given each column's traced runs as they are decoded (for
/// `--trace`: the same runs as the report's).
pub fn profile_backends(
    specs: &[BackendSpec],
    input: &Encoded,
    runs: u32,
    run: ProfiledRun,
    output: crate::backend::OutputKind,
    on_traced: &mut dyn FnMut(&BackendSpec, TracedRuns<'_>),
) -> anyhow::Result<ProfileReport> {
    if run == ProfiledRun::DecodeStep {
        anyhow::ensure!(
            output == crate::backend::OutputKind::NextToken,
            "--decode profiles a decoder's steps; this directory's model is not a text-generation one"
        );
    }
    let mut backends = Vec::new();
    for spec in specs {
        spec.per_operator_times().check()?;
        if let Some(path) = spec.onnx_file() {
            let (profile, trace) = onnxruntime::profile_file(&spec.name, path, input, runs, run)?;
            on_traced(spec, TracedRuns::OnnxRuntime(&trace));
            backends.push(profile);
            continue;
        }
        let Some(path) = spec.pte_file() else {
            anyhow::bail!("{spec} has no ExecuTorch program to profile; name ExecuTorch backends with --backends");
        };
        if !path.is_file() {
            return Err(crate::model::ModelsMissing { path: path.to_path_buf() }.into());
        }
        let traced = trace_file(path, input, runs, run, output)?;
        backends.push(profile_of(&spec.name, &traced)?);
        on_traced(spec, TracedRuns::Program(&traced));
    }
    Ok(ProfileReport { text: input.text.clone(), tokens: input.len(), run, backends })
}
