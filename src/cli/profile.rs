//! `runlens profile [--json] [--runs N] TEXT`: where the ExecuTorch and ONNX
//! Runtime columns spend their time, per operator, from a separate run with
//! ExecuTorch's ETDump tracer attached or ONNX Runtime's profiler on.

use anyhow::Context;
use clap::Args;

use super::Common;
use crate::backend::{self, Ability, BackendSpec};
use crate::layers;
use crate::profile::{self, DEFAULT_RUNS};

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also write the traced runs as a timeline (Chrome trace-event JSON, for Perfetto): docs/trace.md.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// Traced runs to average, after one warm-up run.
    #[arg(long, default_value_t = DEFAULT_RUNS, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=profile::trace::MAX_RUNS as i64))]
    pub runs: u32,
    /// A decoder's decode steps instead of its prompt: after the prompt and one warm-up
    /// step, each traced run is one step, fed the previous step's greedy token.
    #[arg(long)]
    pub decode: bool,
    /// The text to embed, or a decoder's prompt (several words are joined with spaces).
    #[arg(required = true, num_args = 1.., value_name = "TEXT")]
    pub text: Vec<String>,
}

/// The columns to profile: those named with `--backends` (each an ExecuTorch
/// program or an ONNX file), else every such file of the directory that is present.
fn specs(common: &Common, dir: &crate::model::ModelDir) -> anyhow::Result<Vec<BackendSpec>> {
    let catalog = common.catalog(dir)?;
    if common.backends.is_some() {
        let chosen = common.backends(dir)?;
        for s in &chosen {
            if let Ability::NotAvailable(why) = s.per_operator_times() {
                let programs: Vec<&str> = catalog.iter().filter(|s| s.per_operator_times().is_available()).map(|s| s.name.as_str()).collect();
                anyhow::bail!("{s} has no per-operator profile: {why}; --backends takes {}", programs.join(", "));
            }
        }
        return Ok(chosen);
    }
    let present: Vec<BackendSpec> = catalog
        .into_iter()
        .filter(|s| s.per_operator_times().is_available() && (s.given || backend::files_present(s, dir).is_ok()))
        .collect();
    anyhow::ensure!(!present.is_empty(), "{}: no ExecuTorch program or ONNX file is present; re-export the directory", dir.root().display());
    Ok(present)
}

pub fn run(common: &Common, args: &ProfileArgs) -> anyhow::Result<()> {
    let trace = super::open_trace(args.trace.as_deref())?;
    let setup = common.setup()?;
    let dir = &setup.dir;
    let specs = specs(common, dir)?;
    for spec in &specs {
        backend::files_present(spec, dir)?;
    }
    common.check_memory(dir, &specs, crate::memory::Holding::OneAtATime)?;
    let input = setup.encode(&args.text)?;
    common.set_threads()?;
    let mut timeline = super::timeline_for("profile", common, &setup, &input);
    let mut on_traced = |spec: &BackendSpec, traced: profile::TracedRuns<'_>| {
        if trace.is_none() {
            return;
        }
        match traced {
            profile::TracedRuns::Program(traced) => {
                let sidecar = layers::timeline::sidecar_for(traced);
                timeline.processes.push(layers::timeline::program_process(&spec.name, traced, sidecar.as_ref()));
            }
            profile::TracedRuns::OnnxRuntime(runs) => timeline.processes.push(layers::timeline::onnx_process(&spec.name, runs)),
        }
    };
    let run = if args.decode { profile::ProfiledRun::DecodeStep } else { profile::ProfiledRun::Prompt };
    let report = profile::profile_backends(&specs, &input, args.runs, run, dir.task().output(), &mut on_traced).context("cannot profile")?;
    if let Some(file) = trace {
        file.write(&timeline)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}
