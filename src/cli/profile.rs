//! `runlens profile [--json] [--runs N] TEXT`: where the ExecuTorch paths spend
//! their time, per operator, from a separate run with the ETDump tracer attached.

use anyhow::Context;
use clap::Args;

use super::Common;
use crate::backend::{self, BackendKind};
use crate::model::SentenceTokenizer;
use crate::profile::{self, DEFAULT_RUNS};

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Traced runs to average, after one warm-up run.
    #[arg(long, default_value_t = DEFAULT_RUNS, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=profile::trace::MAX_RUNS as i64))]
    pub runs: u32,
    /// The text to embed (several words are joined with spaces).
    #[arg(required = true, num_args = 1.., value_name = "TEXT")]
    pub text: Vec<String>,
}

/// The ExecuTorch paths to profile: those named with `--backends` (each must
/// have a `.pte`), else every ExecuTorch path whose file is present.
fn kinds(common: &Common, dir: &crate::model::ModelDir) -> anyhow::Result<Vec<BackendKind>> {
    if let Some(list) = &common.backends {
        if let Some(k) = list.0.iter().find(|k| k.pte_file().is_none()) {
            anyhow::bail!("{k} has no ExecuTorch program to profile; --backends takes {}", profile::executorch_kinds());
        }
        return Ok(list.0.clone());
    }
    let present: Vec<BackendKind> =
        BackendKind::ALL.into_iter().filter(|k| k.pte_file().is_some() && backend::files_present(*k, dir).is_ok()).collect();
    if present.is_empty() {
        backend::files_present(BackendKind::Xnnpack, dir)?;
    }
    Ok(present)
}

pub fn run(common: &Common, args: &ProfileArgs) -> anyhow::Result<()> {
    let dir = common.model_dir();
    let kinds = kinds(common, &dir)?;
    for &kind in &kinds {
        backend::files_present(kind, &dir)?;
    }
    let tokenizer = SentenceTokenizer::load(&dir.tokenizer()?)?;
    let input = tokenizer.encode(&args.text.join(" "))?;
    backend::set_threads(common.thread_count())?;
    let report = profile::profile_backends(&dir, &kinds, &input, args.runs).context("cannot profile")?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}
