//! The live explorer: the terminal, the keys and the event loop.
//!
//! Everything reaches the app as one [`Event`] on one channel: terminal input
//! and signals (`terminal.rs`), worker reports (sent from the inference threads
//! of [`crate::schedule`]), background jobs' results ([`crate::jobs`]: the
//! delegation coverage, a profile's traced run, a per-module measurement) and
//! heat readings. Keys become [`Action`](crate::app::Action)s (`keys.rs`);
//! state changes only in [`App`](crate::app::App). The loop (`event_loop.rs`)
//! draws when something changed, at most [`FPS`] frames a second, and sleeps
//! while nothing does: no timer runs while idle, only the debounce and, while
//! work is in flight, a [`TICK`] for elapsed times.
//!
//! Signals come in as events too: SIGTERM, SIGHUP, SIGQUIT and SIGINT restore
//! the terminal and end the explorer with 128 + the signal ([`Ended::Signal`]);
//! Ctrl-Z (a key in raw mode) and SIGTSTP restore it and stop the process, and
//! SIGCONT (`fg`) takes the terminal back and redraws everything ([`Screen`]).

mod event_loop;
mod keys;
mod terminal;
mod trace;

use anyhow::Context;
use crossterm::event::KeyEvent;

pub use event_loop::{FPS, TICK};
pub use keys::key_action;
pub use terminal::{Screen, SIGNALS};
pub use trace::TRACE_ENV;

use crate::backend::{self, BackendSpec};
use crate::heat::HeatSample;
use crate::jobs::JobDone;
use crate::model::ModelDir;
use crate::schedule::WorkerEvent;
use std::sync::Arc;

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
}

/// How the explorer ended (when it did not fail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The user quit.
    Quit,
    /// A signal ended it; the process should exit with 128 + this number.
    Signal(i32),
}

impl Ended {
    /// The exit status for the process: 0, or 128 + the signal.
    pub fn exit_code(self) -> i32 {
        match self {
            Ended::Quit => 0,
            Ended::Signal(sig) => 128 + sig,
        }
    }
}

/// Run the explorer until the user quits or a signal ends it. Missing model
/// files are reported (naming `make models`) before the terminal is touched.
pub fn run(opts: TuiOptions) -> anyhow::Result<Ended> {
    anyhow::ensure!(
        !opts.backends.is_empty(),
        "no backend to run: pass --backends with one of {}",
        opts.catalog.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    for kind in opts.backends.iter().filter(|k| !k.given) {
        backend::files_present(kind, &opts.models)?;
    }
    let threads = opts.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let trace = trace::Trace::from_env()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io() // the signal driver needs it
        .build()
        .context("cannot start the event loop")?;

    let mut screen = Screen::enter()?;
    let outcome = runtime.block_on(event_loop::session(&mut screen, &opts, threads, trace));
    screen.leave();
    outcome
}
