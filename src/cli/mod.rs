//! The command line: options shared by every subcommand and the TUI, and one
//! file per subcommand.

pub mod bench;
pub mod footprint;
pub mod inspect;
pub mod layers;
pub mod profile;
pub mod run;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::backend::{self, BackendSpec};
use crate::model::{ManifestError, ModelDir, TextTokenizer};
use crate::task::TaskContext;

#[derive(Debug, Parser)]
#[command(name = "runlens", version, about = "A text model on three CPU runtimes side by side: PyTorch eager, ExecuTorch portable, ExecuTorch XNNPACK (and any .pte you add).", long_about = None)]
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
    /// Model directory, as python/export.py writes it (manifest.json, programs, tokenizer) [default: $RUNLENS_MODEL, else models/minilm]
    #[arg(long, global = true, value_name = "DIR", visible_alias = "models")]
    pub model: Option<PathBuf>,
    /// Comma list of backends by name: eager and the programs of the model directory (see `runlens inspect`) [default: eager and the first program of each column]
    #[arg(long, global = true, value_name = "LIST")]
    pub backends: Option<String>,
    /// Add a .pte file as one more ExecuTorch backend and column (repeatable), e.g. --program course=distilbert_xnnpack.pte
    #[arg(long = "program", global = true, value_name = "NAME=FILE.pte", value_parser = backend::parse_program)]
    pub programs: Vec<(String, PathBuf)>,
    /// Threads for libtorch (intra-op) and ExecuTorch's pool (XNNPACK) [default: all cores]; bench takes a comma list (1,2,3,4) and sweeps them
    #[arg(long, global = true, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<ThreadList>,
    /// fill-mask: how many tokens to show per mask
    #[arg(long, global = true, value_name = "K", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub top_k: u32,
    /// Characters the explorer draws with: unicode, console (the Linux text console's fonts, 16 colours) or ascii [default: from TERM: console for TERM=linux]
    #[arg(long, global = true, value_name = "SET", value_enum)]
    pub glyphs: Option<crate::ui::GlyphSet>,
}

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
    /// Time per module (embeddings, each layer's attention, feed-forward, norms, head) of every backend on TEXT, side by side.
    Layers(layers::LayersArgs),
    /// What each stack costs: disk, resident memory and time to the first result, Python and runlens (full and lite).
    Footprint(footprint::FootprintArgs),
    /// One stack for `footprint` to measure (waits on stdin between load and run).
    #[command(hide = true)]
    FootprintProbe(footprint::ProbeArgs),
    /// Internal: load a .pte and run it once, print the verdict as JSON (runlens' probe, see backend::probe).
    #[command(name = "probe-program", hide = true)]
    ProbeProgram(ProbeArgs),
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The .pte file to try.
    pub file: PathBuf,
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
    /// The model directory with its manifest read (exit 2 when it is missing or old).
    pub fn model_dir(&self) -> Result<ModelDir, ManifestError> {
        ModelDir::from_option(self.model.as_deref())
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


    /// Every backend the directory and `--program` offer.
    pub fn catalog(&self, dir: &ModelDir) -> anyhow::Result<Vec<BackendSpec>> {
        backend::catalog(dir, &self.programs)
    }

    /// The backends named with `--backends`, else the defaults; an error naming
    /// the first missing file when there are none.
    pub fn backends(&self, dir: &ModelDir) -> anyhow::Result<Vec<BackendSpec>> {
        let catalog = self.catalog(dir)?;
        if let Some(list) = &self.backends {
            // The lite build's catalog has no eager: say why, not "unknown backend".
            if !backend::HAS_EAGER && list.split(',').any(|n| n.trim() == backend::EAGER) {
                return Err(backend::UnknownBackend(backend::NotBuilt(backend::EAGER.to_string()).to_string()).into());
            }
            return backend::parse_list(list, &catalog).map_err(|e| backend::UnknownBackend(e).into());
        }
        let chosen = backend::defaults(&catalog);
        if chosen.is_empty() {
            match catalog.first() {
                Some(spec) => backend::files_present(spec, dir)?,
                None => anyhow::bail!("{}: the manifest lists no programs and no eager checkpoint; re-export the directory", dir.root().display()),
            }
        }
        Ok(chosen)
    }

    /// The task context of the directory (mask token, labels, top-k).
    pub fn task_context(&self, dir: &ModelDir, tokenizer: &TextTokenizer) -> anyhow::Result<TaskContext> {
        TaskContext::for_model(dir, tokenizer, self.top_k as usize)
    }
}
