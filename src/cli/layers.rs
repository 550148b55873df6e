//! `runlens layers [--json] [--runs N] [--trace FILE] [--model-explorer DIR] TEXT`: where each runtime's time goes,
//! per module of the model (embeddings, each layer's attention, feed-forward
//! and norms, the head), eager and every ExecuTorch program side by side.

use anyhow::Context;
use clap::Args;

use super::Common;
use crate::backend::{self, BackendSpec};
use crate::layers::{self, DEFAULT_RUNS};

#[derive(Debug, Args)]
pub struct LayersArgs {
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also write the timed and traced runs as a timeline (Chrome trace-event JSON, for Perfetto): docs/trace.md.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// Timed (eager) and traced (ExecuTorch) runs to average, after one warm-up run.
    #[arg(long, default_value_t = DEFAULT_RUNS, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=crate::profile::trace::MAX_RUNS as i64))]
    pub runs: u32,
    /// Also write Model Explorer node data (time, gap against eager, where it
    /// ran) for each program's graph into DIR (docs/model-explorer.md).
    #[arg(long, value_name = "DIR")]
    pub model_explorer: Option<std::path::PathBuf>,
    /// The text to run (several words are joined with spaces).
    #[arg(required = true, num_args = 1.., value_name = "TEXT")]
    pub text: Vec<String>,
}

/// `--backends`, else eager (when it can run) and every program whose file is
/// present; a column that cannot be timed per module (llama.cpp's) is left out
/// with a note when not named.
fn specs(common: &Common, dir: &crate::model::ModelDir) -> anyhow::Result<Vec<BackendSpec>> {
    if common.backends.is_some() {
        return common.backends(dir);
    }
    // A program taking its cache as inputs runs a prompt through its method prefill, and its
    // sidecar describes forward (one token): no per-module times for it yet (docs/kv-cache.md).
    let caller_cache = |s: &BackendSpec| dir.manifest().programs.iter().any(|p| p.name == s.name && p.cache.as_deref() == Some("inputs"));
    let (present, untimed): (Vec<BackendSpec>, Vec<BackendSpec>) = common
        .catalog(dir)?
        .into_iter()
        .filter(|s| s.given || backend::files_present(s, dir).is_ok())
        .partition(|s| s.per_module_times().is_available() && !caller_cache(s));
    for s in &untimed {
        match s.per_module_times() {
            backend::Ability::NotAvailable(why) => eprintln!("note: {s} left out: {why}"),
            backend::Ability::Available => eprintln!(
                "note: {s} left out: per-module times are not available yet for a program taking its KV cache as inputs \
                 (its sidecar describes forward, one token; a prompt runs prefill)"
            ),
        }
    }
    anyhow::ensure!(!present.is_empty(), "{}: no backend can run; re-export the directory", dir.root().display());
    Ok(present)
}

pub fn run(common: &Common, args: &LayersArgs) -> anyhow::Result<()> {
    common.require_one_thread_count()?;
    let trace = super::open_trace(args.trace.as_deref())?;
    let setup = common.setup()?;
    let dir = &setup.dir;
    let specs = specs(common, dir)?;
    for spec in &specs {
        backend::files_present(spec, dir)?;
    }
    common.check_memory(dir, &specs, crate::memory::Holding::OneAtATime)?;
    if args.model_explorer.is_some() {
        layers::model_explorer::check_graphs(&specs)?;
    }
    let input = setup.encode(&args.text)?;
    common.set_threads()?;
    let mut timeline = super::timeline_for("layers", common, &setup, &input);
    let (report, times) =
        layers::layers_timed(&specs, dir, &input, args.runs, trace.is_some().then_some(&mut timeline)).context("cannot time the layers")?;
    if let Some(file) = trace {
        file.write(&timeline)?;
    }
    if let Some(out) = &args.model_explorer {
        let written = layers::model_explorer::write(out, &specs, &report, &times)?;
        for w in &written {
            let files: Vec<String> = w.files.iter().map(|f| f.display().to_string()).collect();
            eprintln!("{}: model-explorer {} --node_data_paths={}", w.program, w.graph.display(), files.join(","));
        }
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}
