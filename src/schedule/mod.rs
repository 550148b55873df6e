//! Background inference, kept off the UI thread (gitui's `asyncgit` pattern).
//!
//! One std thread per backend loads it and then runs what its [`inbox`] holds.
//! The inbox has a single slot: a new input replaces the one still waiting
//! ("latest wins"), so a slow backend never builds a queue and never delays the
//! others. Every step is reported as a [`WorkerEvent`] carrying the input's
//! generation; the app drops results for text that is no longer current.
//! [`Request`] is how the app asks for work; [`Scheduler::handle`] carries it out
//! without ever blocking.

mod gate;
pub mod inbox;
mod worker;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::{Backend, BackendKind};
use crate::model::{Embedding, Encoded};

/// Worker threads are named `runlens-worker-<backend>`.
pub const WORKER_THREAD_PREFIX: &str = "runlens-worker-";

/// How a worker gets its backend (real: [`crate::backend::load`]; tests: fakes).
pub type Loader = Arc<dyn Fn(BackendKind) -> anyhow::Result<Box<dyn Backend>> + Send + Sync>;
/// Where workers report; called on the worker thread, so it must not block.
pub type Sink = Arc<dyn Fn(WorkerEvent) + Send + Sync>;

/// One input to run, tagged with the generation of the text it was made from.
#[derive(Clone, Debug)]
pub struct Job {
    pub generation: u64,
    pub input: Arc<Encoded>,
}

/// What a worker reports.
#[derive(Debug)]
pub enum WorkerEvent {
    Loaded { kind: BackendKind, description: String, load_time: Duration },
    LoadFailed { kind: BackendKind, error: String },
    /// A run began (it may have waited in serial mode).
    Started { kind: BackendKind, generation: u64, at: Instant },
    /// A run ended; `elapsed` is the time inside `Backend::run` only.
    Finished { kind: BackendKind, generation: u64, input: Arc<Encoded>, outcome: Result<Embedding, String>, elapsed: Duration },
    /// The corpus sentences, embedded in order.
    CorpusEmbedded { kind: BackendKind, outcome: Result<Vec<Embedding>, String>, elapsed: Duration },
}

impl WorkerEvent {
    pub fn kind(&self) -> BackendKind {
        match self {
            WorkerEvent::Loaded { kind, .. }
            | WorkerEvent::LoadFailed { kind, .. }
            | WorkerEvent::Started { kind, .. }
            | WorkerEvent::Finished { kind, .. }
            | WorkerEvent::CorpusEmbedded { kind, .. } => *kind,
        }
    }
}

/// What the app asks of the workers.
#[derive(Debug)]
pub enum Request {
    /// Run this input on every backend (replacing what waits).
    Run(Job),
    /// Drop every input still waiting (runs in progress finish and are then stale).
    Cancel,
    /// Embed the corpus on this backend before its next input.
    EmbedCorpus(BackendKind, Arc<Vec<Encoded>>),
    /// One backend at a time (true) or all at once.
    SetSerial(bool),
    /// Keep re-running the current input.
    SetRepeat(bool),
    /// Replace the backend of one column (the XNNPACK variant, F5), and give the
    /// new one the current input once it has loaded.
    Switch { from: BackendKind, to: BackendKind, job: Option<Job> },
}

/// State the workers share: the serial-mode gate and the repeat flag.
pub(crate) struct Shared {
    gate: gate::Gate,
    repeat: AtomicBool,
}

struct WorkerHandle {
    kind: BackendKind,
    inbox: Arc<inbox::Inbox>,
    thread: Option<JoinHandle<()>>,
}

/// The worker threads, one per backend.
pub struct Scheduler {
    workers: Vec<WorkerHandle>,
    shared: Arc<Shared>,
    loader: Loader,
    sink: Sink,
}

impl Scheduler {
    /// Start one worker per kind; each loads its backend with `loader` at once
    /// (in parallel) and reports to `sink`.
    pub fn start(kinds: &[BackendKind], loader: Loader, sink: Sink) -> std::io::Result<Scheduler> {
        let shared = Arc::new(Shared { gate: gate::Gate::default(), repeat: AtomicBool::new(false) });
        let mut scheduler = Scheduler { workers: Vec::with_capacity(kinds.len()), shared, loader, sink };
        for (index, &kind) in kinds.iter().enumerate() {
            // On error, dropping `scheduler` closes the workers started so far.
            let worker = scheduler.spawn(index, kind)?;
            scheduler.workers.push(worker);
        }
        Ok(scheduler)
    }

    /// Start the worker of column `index`, which loads `kind` at once.
    fn spawn(&self, index: usize, kind: BackendKind) -> std::io::Result<WorkerHandle> {
        let inbox = Arc::new(inbox::Inbox::default());
        let body = worker::Worker {
            index,
            kind,
            inbox: inbox.clone(),
            shared: self.shared.clone(),
            loader: self.loader.clone(),
            sink: self.sink.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("{WORKER_THREAD_PREFIX}{}", kind.name()))
            .spawn(move || body.main())?;
        Ok(WorkerHandle { kind, inbox, thread: Some(thread) })
    }

    /// Replace the worker of `from` by a new one that loads `to` (F5 in the
    /// explorer). The old worker ends after the run it is in, unwaited for; its
    /// late reports carry `from` and are ignored by the app. `job`, if any, waits
    /// in the new worker's inbox until its backend has loaded.
    pub fn switch(&mut self, from: BackendKind, to: BackendKind, job: Option<Job>) -> std::io::Result<()> {
        let Some(index) = self.workers.iter().position(|w| w.kind == from) else { return Ok(()) };
        let fresh = self.spawn(index, to)?;
        let old = std::mem::replace(&mut self.workers[index], fresh);
        old.inbox.close();
        if let Some(job) = job {
            self.workers[index].inbox.put(job);
        }
        Ok(())
    }

    /// Carry out one request; never waits for a run.
    pub fn handle(&mut self, request: Request) {
        match request {
            Request::Run(job) => self.submit(job),
            Request::Cancel => self.cancel(),
            Request::EmbedCorpus(kind, sentences) => {
                if let Some(w) = self.workers.iter().find(|w| w.kind == kind) {
                    w.inbox.put_corpus(sentences);
                }
            }
            Request::SetSerial(serial) => self.shared.gate.set_serial(serial),
            Request::SetRepeat(repeat) => self.shared.repeat.store(repeat, Ordering::Relaxed),
            Request::Switch { from, to, job } => {
                if let Err(e) = self.switch(from, to, job) {
                    (self.sink)(WorkerEvent::LoadFailed { kind: to, error: format!("cannot start a worker thread: {e}") });
                }
            }
        }
    }

    /// Give every worker `job`, replacing the input it has waiting. The fastest
    /// path is woken first, so that its result is not the one kept waiting for a core.
    pub fn submit(&self, job: Job) {
        let mut order: Vec<&WorkerHandle> = self.workers.iter().collect();
        order.sort_by_key(|w| match w.kind {
            k if k.is_xnnpack() => 0,
            BackendKind::Portable => 2,
            _ => 1,
        });
        for w in order {
            w.inbox.put(job.clone());
        }
    }

    pub fn submit_to(&self, kind: BackendKind, job: Job) {
        if let Some(w) = self.workers.iter().find(|w| w.kind == kind) {
            w.inbox.put(job);
        }
    }

    pub fn cancel(&self) {
        for w in &self.workers {
            w.inbox.clear();
        }
    }

    pub fn is_serial(&self) -> bool {
        self.shared.gate.is_serial()
    }

    pub fn is_repeat(&self) -> bool {
        self.shared.repeat.load(Ordering::Relaxed)
    }

    /// Close every inbox; workers end after the run they are in. Does not wait.
    pub fn close(&self) {
        for w in &self.workers {
            w.inbox.close();
        }
        self.shared.gate.close();
    }

    /// Close, then wait up to `timeout` for the workers to end; `true` when all did.
    pub fn shutdown(mut self, timeout: Duration) -> bool {
        self.close();
        let deadline = Instant::now() + timeout;
        for w in &mut self.workers {
            let Some(thread) = w.thread.take() else { continue };
            while !thread.is_finished() {
                if Instant::now() >= deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = thread.join();
        }
        true
    }
}

impl Drop for Scheduler {
    /// Workers are told to stop but not waited for: a portable run may take a
    /// second and quitting must not.
    fn drop(&mut self) {
        self.close();
    }
}
