//! The command line: its grammar ([`args`]), one file per subcommand, and the
//! set-up every subcommand and the explorer share, written once here
//! ([`Common::setup`]: the model directory, its prompter, the task context,
//! the backends, the threads).

pub mod args;
pub mod bench;
pub mod eval;
pub mod footprint;
pub mod gguf;
pub mod inspect;
pub mod layers;
pub mod memory;
pub mod profile;
pub mod report;
pub mod run;

pub use args::{parse_list, parse_program, Cli, Command, Common, InspectArgs, ProbeArgs, ThreadList, UnknownBackend};

use crate::backend::{self, BackendSpec};
use crate::model::{ManifestError, ModelDir, Prompter, TextTokenizer};
use crate::task::TaskContext;
use crate::tensor::Encoded;
use crate::timeline::{Timeline, TraceFile};

/// What every subcommand and the explorer set up the same way, in this order:
/// the model directory, how typed text reaches the model, what its task needs.
pub struct Setup {
    pub dir: ModelDir,
    /// The tokenizer, the chat template and `--prompt-format`.
    pub prompter: Prompter,
    pub ctx: TaskContext,
}

impl Setup {
    /// The text as the model is fed it (the words of the command line joined with spaces).
    pub fn encode(&self, words: &[String]) -> anyhow::Result<Encoded> {
        self.prompter.encode(&words.join(" "))
    }
}

/// `--trace FILE` created now, before any work, so a path that cannot be
/// written is an error (exit 2) before a model is loaded.
pub fn open_trace(path: Option<&std::path::Path>) -> Result<Option<TraceFile>, crate::timeline::TraceFileError> {
    path.map(TraceFile::create).transpose()
}

/// An empty timeline with what every trace says about its command.
pub fn timeline_for(command: &str, common: &Common, setup: &Setup, input: &Encoded) -> Timeline {
    let mut t = Timeline::new();
    t.about("runlens", env!("CARGO_PKG_VERSION"));
    t.about("command", command);
    t.about("model", setup.dir.model_name().to_string());
    t.about("task", setup.ctx.task.to_string());
    t.about("text", input.text.clone());
    t.about("tokens", input.len());
    t.about("threads", common.thread_count());
    t.about("time_unit", "ts and dur in microseconds, as measured (not rescaled); each process starts at 0");
    t
}

impl Common {
    /// The model directory, its prompter and the task context ([`Setup`]).
    pub fn setup(&self) -> anyhow::Result<Setup> {
        let dir = self.model_dir()?;
        let prompter = dir.prompter(self.prompt_format)?;
        let ctx = self.task_context(&dir, prompter.tokenizer())?;
        Ok(Setup { dir, prompter, ctx })
    }

    /// Every runtime's thread count ([`Common::thread_count`]); call before loading.
    pub fn set_threads(&self) -> anyhow::Result<()> {
        backend::set_threads(self.thread_count())
    }

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
            if let Some(missing) = list.split(',').find_map(|n| backend::not_built(n.trim())) {
                return Err(UnknownBackend(missing.to_string()).into());
            }
            let chosen = parse_list(list, &catalog).map_err(UnknownBackend)?;
            // A program given with --program but left out of --backends would silently not run.
            for given in catalog.iter().filter(|s| s.given && !chosen.iter().any(|c| c.name == s.name)) {
                eprintln!("note: --program {} is not in --backends {list}: add it there to run it", given.name);
            }
            return Ok(chosen);
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

    /// Refuse `specs` ([`crate::memory::NotEnoughMemory`], exit 2) when, held as
    /// the command holds them, they need more memory than this process may use;
    /// before any loads ([`crate::memory`]).
    pub fn check_memory(&self, dir: &ModelDir, specs: &[BackendSpec], holding: crate::memory::Holding) -> anyhow::Result<()> {
        let catalog = self.catalog(dir)?;
        crate::memory::check(specs, &catalog, dir, holding, self.memory_budget).map_err(Into::into)
    }

    /// The task context of the directory (mask token, labels, top-k).
    pub fn task_context(&self, dir: &ModelDir, tokenizer: &TextTokenizer) -> anyhow::Result<TaskContext> {
        TaskContext::for_model(dir, tokenizer, self.top_k as usize)
    }
}
