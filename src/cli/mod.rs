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
    /// Threads for libtorch (intra-op) and ExecuTorch's pool (XNNPACK) [default: all cores]
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,
    /// Characters the explorer draws with: unicode, console (the Linux text console's fonts, 16 colours) or ascii [default: from TERM: console for TERM=linux]
    #[arg(long, global = true, value_name = "SET", value_enum)]
    pub glyphs: Option<crate::ui::GlyphSet>,
}

/// The value of `--backends` (a newtype, so clap takes the list as one value).
#[derive(Debug, Clone)]
pub struct BackendList(pub Vec<BackendKind>);

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

    /// The thread count to use: `--threads`, else every core the process may use.
    pub fn thread_count(&self) -> usize {
        self.threads
            .map(|t| t as usize)
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
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
