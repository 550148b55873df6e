//! The live explorer: the terminal, the keys and the event loop.
//!
//! Everything reaches the app as one [`Event`]: terminal input and signals
//! (`terminal.rs`) on the explorer's channel, and on the session's own, worker
//! reports (sent from the inference threads of [`crate::schedule`]),
//! background jobs' results ([`crate::jobs`]: the delegation coverage, a
//! profile's traced run, a per-module measurement) and heat readings. Keys become [`Action`](crate::app::Action)s (`keys.rs`);
//! state changes only in [`App`](crate::app::App). The loop (`event_loop.rs`)
//! draws when something changed, at most [`FPS`] frames a second, and sleeps
//! while nothing does: no timer runs while idle, only the debounce and, while
//! work is in flight, a [`TICK`] for elapsed times.
//!
//! Signals come in as events too: SIGTERM, SIGHUP, SIGQUIT and SIGINT restore
//! the terminal and end the explorer with 128 + the signal ([`Ended::Signal`]);
//! Ctrl-Z (a key in raw mode) and SIGTSTP restore it and stop the process, and
//! SIGCONT (`fg`) takes the terminal back and redraws everything ([`Screen`]).
//!
//! One [`Explorer`] holds the terminal, the event loop's runtime and the
//! terminal's input for the whole run; on it, one session per model
//! directory ([`Explorer::session`]). F8's switch ends a session with
//! [`Ended::SwitchModel`] once its workers have stopped; the caller sets up
//! the chosen directory (`src/main.rs`, as for `--model`) and starts the next
//! session on the same screen, the text carried over ([`Carry`]).

mod event_loop;
mod keys;
mod terminal;
mod trace;

use anyhow::Context;
use crossterm::event::KeyEvent;

pub use event_loop::{FPS, TICK, UNLOAD_WAIT};
pub use keys::key_action;
pub use terminal::{Screen, SIGNALS};
pub use trace::TRACE_ENV;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::backend::{self, BackendSpec};
use crate::heat::HeatSample;
use crate::jobs::JobDone;
use crate::model::ModelDir;
use crate::schedule::WorkerEvent;

use crate::model::Prompter;
use crate::task::TaskContext;
use crate::ui;

/// What `runlens` with no subcommand opens.
#[derive(Clone, Debug)]
pub struct TuiOptions {
    pub models: ModelDir,
    /// Typed text to ids: the tokenizer, the chat template, the prompt format (F7 switches it).
    pub prompter: Arc<Prompter>,
    /// The columns, in order.
    pub backends: Vec<BackendSpec>,
    /// Every backend of the directory and `--program` (F5 cycles a column through those of its column).
    pub catalog: Vec<BackendSpec>,
    /// How outputs are read (mask token, labels, top-k).
    pub ctx: TaskContext,
    /// The thread count already applied (shown in the status bar); `None`: all cores.
    pub threads: Option<usize>,
    /// Glyphs and colours (`--glyphs`, else from `TERM`).
    pub theme: ui::Theme,
    /// `--memory-budget`: what a column switched to later (F5) is checked against, else what is free then.
    pub memory_budget: Option<u64>,
    /// The directories given on the command line (`--model`): F8 lists them beside those under `models/`.
    pub given_dirs: Vec<PathBuf>,
}

impl TuiOptions {
    /// What must hold before a session opens: a column to run, and the files
    /// of each (a missing one named with `make models`).
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.backends.is_empty(),
            "no backend to run: pass --backends with one of {}",
            self.catalog.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
        );
        for kind in self.backends.iter().filter(|k| !k.given) {
            backend::files_present(kind, &self.models)?;
        }
        Ok(())
    }
}

/// What one session hands the next (F8's switch).
#[derive(Clone, Debug, Default)]
pub struct Carry {
    /// The text of the input line.
    pub text: String,
    /// A word for the status bar (what the set-up fell back to).
    pub note: Option<String>,
    /// A switch that did not happen: the directory chosen and why; the model
    /// list opens on it with the message.
    pub refused: Option<(PathBuf, String)>,
}

/// Everything the event loop reacts to.
#[derive(Debug)]
pub enum Event {
    /// A timer: debounce due, elapsed times to redraw, or a frame that was held back.
    Tick,
    Key(KeyEvent),
    Paste(String),
    Resize(u16, u16),
    Worker(WorkerEvent),
    /// A background job finished.
    Job(JobDone),
    /// A temperature / clock / throttling reading.
    Heat(HeatSample),
    /// Reading the terminal failed: the explorer ends with this error.
    TerminalError(String),
    /// A signal from [`SIGNALS`] arrived (its number).
    Signal(i32),
    /// The old model's workers ended after F8's switch (`false`: the wait for them ran out).
    Unloaded(bool),
}

/// How a session ended (when it did not fail).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The user quit.
    Quit,
    /// A signal ended it; the process should exit with 128 + this number.
    Signal(i32),
    /// F8: the user chose another model directory. This session's workers
    /// were told to stop and waited for (`unloaded`: all ended within
    /// [`UNLOAD_WAIT`]); `text` is the input line, to put back.
    SwitchModel { dir: PathBuf, text: String, unloaded: bool },
}

impl Ended {
    /// The exit status for the process: 0, or 128 + the signal.
    pub fn exit_code(&self) -> i32 {
        match self {
            Ended::Quit | Ended::SwitchModel { .. } => 0,
            Ended::Signal(sig) => 128 + sig,
        }
    }
}


/// The terminal, the event loop's runtime and the terminal's input, kept
/// across sessions: a switch of model never gives the terminal back to the
/// shell, and no key typed meanwhile is lost. Dropping it restores the terminal.
pub struct Explorer {
    screen: Screen,
    runtime: Option<tokio::runtime::Runtime>,
    /// Keys, pastes, resizes and signals ([`terminal::read_terminal`], [`terminal::listen_for_signals`]).
    input: UnboundedReceiver<Event>,
    trace: trace::Trace,
    sessions: u64,
}

impl Explorer {
    /// Take the terminal and start reading it.
    pub fn enter() -> anyhow::Result<Explorer> {
        let trace = trace::Trace::from_env()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .enable_io() // the signal driver needs it
            .build()
            .context("cannot start the event loop")?;
        let (tx, input) = tokio::sync::mpsc::unbounded_channel();
        let screen = Screen::enter()?;
        // From here on, dropping `explorer` restores the terminal.
        let explorer = Explorer { screen, runtime: Some(runtime), input, trace, sessions: 0 };
        if let Some(runtime) = &explorer.runtime {
            runtime.block_on(async {
                terminal::listen_for_signals(&tx)?;
                tokio::spawn(terminal::read_terminal(tx));
                anyhow::Ok(())
            })?;
        }
        Ok(explorer)
    }

    /// Run the explorer on `opts`' model until the user quits, a signal ends
    /// it or F8 chooses another model (its workers stopped by then).
    pub fn session(&mut self, opts: &TuiOptions, carry: Carry) -> anyhow::Result<Ended> {
        opts.check()?;
        let threads = opts.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        if self.sessions > 0 {
            // The model before may have left its frame (and a note on stderr): start clean.
            self.screen.clear()?;
        }
        self.sessions += 1;
        let Some(runtime) = &self.runtime else { anyhow::bail!("the event loop has stopped") };
        runtime.block_on(event_loop::session(&mut self.screen, &mut self.input, opts, threads, &mut self.trace, carry))
    }
}

impl Drop for Explorer {
    fn drop(&mut self) {
        self.screen.leave();
        // A wait for an old model's workers may still be on a blocking thread: do not wait for it.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

