//! The command line: options shared by every subcommand and the TUI, and one
//! file per subcommand.

pub mod bench;
pub mod inspect;
pub mod profile;
pub mod run;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::backend::{self, BackendKind};
use crate::model::ModelDir;

#[derive(Debug, Parser)]
#[command(name = "runlens", version, about = "One model, three CPU runtimes side by side: PyTorch eager, ExecuTorch portable, ExecuTorch XNNPACK.", long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    /// What to do; with none, the live explorer (TUI) opens.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options every subcommand and the TUI share.
#[derive(Debug, Args, Clone)]
pub struct Common {
    /// Models directory (holding minilm/ or its files) [default: $RUNLENS_MODELS, else ./models]
    #[arg(long, global = true, value_name = "DIR")]
    pub models: Option<PathBuf>,
    /// Comma list of backends: eager, portable, xnnpack [default: all available]
    #[arg(long, global = true, value_name = "LIST", value_parser = parse_backends)]
    pub backends: Option<BackendList>,
    /// Threads for libtorch (intra-op) and ExecuTorch's pool (XNNPACK) [default: all cores]; bench takes a comma list (1,2,3,4) and sweeps them
    #[arg(long, global = true, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<ThreadList>,
    /// Characters the explorer draws with: unicode, console (the Linux text console's fonts, 16 colours) or ascii [default: from TERM: console for TERM=linux]
    #[arg(long, global = true, value_name = "SET", value_enum)]
    pub glyphs: Option<crate::ui::GlyphSet>,
}

/// The value of `--backends` (a newtype, so clap takes the list as one value).
#[derive(Debug, Clone)]
pub struct BackendList(pub Vec<BackendKind>);

/// The value of `--threads`: one count, or for `bench` a comma list to sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadList(pub Vec<usize>);

fn parse_threads(list: &str) -> Result<ThreadList, String> {
    let mut counts = Vec::new();
    for part in list.split(',') {
        let n: usize = part.trim().parse().map_err(|_| format!("{part:?} is not a thread count: give a number from 1 to 256, or for bench a comma list such as 1,2,3,4"))?;
        if !(1..=256).contains(&n) {
            return Err(format!("{n} threads: give 1 to 256"));
        }
        if !counts.contains(&n) {
            counts.push(n);
        }
    }
    Ok(ThreadList(counts))
}

fn parse_backends(list: &str) -> Result<BackendList, String> {
    backend::parse_list(list).map(BackendList)
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Tokenize TEXT and run it through each backend once; print outputs, latency and parity.
    Run(run::RunArgs),
    /// Read a .pte file and show how much of it is delegated (no runtime needed).
    Inspect(InspectArgs),
    /// Time every backend at several sequence lengths, optionally against the course's Python flow.
    Bench(bench::BenchArgs),
    /// Per-operator time of the ExecuTorch paths on TEXT, from a separate run with ExecuTorch's event tracer.
    Profile(profile::ProfileArgs),
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The .pte file to read.
    pub file: PathBuf,
}

impl Common {
    pub fn model_dir(&self) -> ModelDir {
        ModelDir::from_option(self.models.as_deref())
    }

    /// The thread count to use: `--threads` (the first of a list), else every core the process may use.
    pub fn thread_count(&self) -> usize {
        self.threads
            .as_ref()
            .and_then(|t| t.0.first().copied())
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
    }

    /// The thread counts `bench` sweeps: `--threads`' list, else [`Common::thread_count`].
    pub fn thread_counts(&self) -> Vec<usize> {
        match &self.threads {
            Some(list) if !list.0.is_empty() => list.0.clone(),
            _ => vec![self.thread_count()],
        }
    }

    /// A list of thread counts is for `bench` only.
    pub fn require_one_thread_count(&self) -> anyhow::Result<()> {
        if let Some(list) = &self.threads {
            anyhow::ensure!(list.0.len() <= 1, "--threads takes one number here; a list ({}) is for `runlens bench`", list.0.iter().map(usize::to_string).collect::<Vec<_>>().join(","));
        }
        Ok(())
    }

    /// The backends named, or those whose files are present; an error naming the
    /// first missing file when none is.
    pub fn backends(&self, dir: &ModelDir) -> anyhow::Result<Vec<BackendKind>> {
        if let Some(list) = &self.backends {
            return Ok(list.0.clone());
        }
        let available: Vec<BackendKind> = BackendKind::ALL.into_iter().filter(|k| backend::files_present(*k, dir).is_ok()).collect();
        if available.is_empty() {
            backend::files_present(BackendKind::Xnnpack, dir)?;
        }
        Ok(available)
    }
}
