//! Background inference, kept off the UI thread (gitui's `asyncgit` pattern).
//!
//! One std thread per backend loads it and then runs what its [`inbox`] holds.
//! The inbox has a single slot: a new input replaces the one still waiting
//! ("latest wins"), so a slow backend never builds a queue and never delays the
//! others. Every step is reported as a [`WorkerEvent`] carrying the input's
//! generation; the app drops results for text that is no longer current.
//! For text generation the worker runs [`crate::task::generation::greedy`] and reports
//! every token as it comes ([`WorkerEvent::Token`]); a newer input or a cancel
//! stops it between two tokens.
//! [`Request`] is how the app asks for work; [`Scheduler::handle`] carries it out
//! without ever blocking.

mod gate;
pub mod inbox;
mod worker;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::{Backend, BackendSpec};
use crate::model::Encoded;
use crate::task::{Embedding, TaskContext, TaskOutput};

/// Worker threads are named `runlens-worker-<backend>`.
pub const WORKER_THREAD_PREFIX: &str = "runlens-worker-";

/// How a worker gets its backend (real: [`crate::backend::load`]; tests: fakes).
pub type Loader = Arc<dyn Fn(&BackendSpec) -> anyhow::Result<Box<dyn Backend>> + Send + Sync>;
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
    /// `weight_bytes`: what a decode step reads, as the loaded backend counts it (a decoder).
    Loaded { kind: BackendSpec, description: String, load_time: Duration, weight_bytes: Option<u64> },
    LoadFailed { kind: BackendSpec, error: String },
    /// A run began (it may have waited in serial mode).
    Started { kind: BackendSpec, generation: u64, at: Instant },
    /// One new token of a generation in progress (text-generation), in order.
    Token { kind: BackendSpec, generation: u64, step: crate::task::generation::TokenStep },
    /// A run ended; `elapsed` is the time inside `Backend::run` and the task's reading of its output.
    Finished { kind: BackendSpec, generation: u64, input: Arc<Encoded>, outcome: Result<TaskOutput, String>, elapsed: Duration },
    /// The corpus sentences, embedded in order.
    CorpusEmbedded { kind: BackendSpec, outcome: Result<Vec<Embedding>, String>, elapsed: Duration },
    /// A teacher-forced pass ended (text-generation parity, [`Request::TeacherForce`]).
    TeacherForced { kind: BackendSpec, generation: u64, outcome: Result<crate::task::generation::Top1Agreement, String> },
}

impl WorkerEvent {
    pub fn kind(&self) -> &BackendSpec {
        match self {
            WorkerEvent::Loaded { kind, .. }
            | WorkerEvent::LoadFailed { kind, .. }
            | WorkerEvent::Started { kind, .. }
            | WorkerEvent::Token { kind, .. }
            | WorkerEvent::Finished { kind, .. }
            | WorkerEvent::CorpusEmbedded { kind, .. }
            | WorkerEvent::TeacherForced { kind, .. } => kind,
        }
    }
}

/// What the app asks of the workers.
#[derive(Debug)]
pub enum Request {
    /// Run this input on every backend (replacing what waits).
    Run(Job),
    /// Drop every input still waiting (runs in progress finish and are then
    /// stale; a generation in progress stops at its next token).
    Cancel,
    /// Embed the corpus on this backend before its next input.
    EmbedCorpus(BackendSpec, Arc<Vec<Encoded>>),
    /// One backend at a time (true) or all at once.
    SetSerial(bool),
    /// Keep re-running the current input.
    SetRepeat(bool),
    /// Feed this backend the job's prompt and the reference column's new ids,
    /// once no input waits for it: its top-1 agreement (text-generation).
    TeacherForce(BackendSpec, inbox::TeacherJob),
    /// Replace the backend of one column (the XNNPACK variant, F5), and give the
    /// new one the current input once it has loaded.
    Switch { from: BackendSpec, to: BackendSpec, job: Option<Job> },
}

/// State the workers share: the serial-mode gate and the repeat flag.
pub(crate) struct Shared {
    gate: gate::Gate,
    repeat: AtomicBool,
}

struct WorkerHandle {
    kind: BackendSpec,
    inbox: Arc<inbox::Inbox>,
    thread: Option<JoinHandle<()>>,
}

/// The worker threads, one per backend.
pub struct Scheduler {
    workers: Vec<WorkerHandle>,
    shared: Arc<Shared>,
    loader: Loader,
    sink: Sink,
    ctx: Arc<TaskContext>,
}

impl Scheduler {
    /// Start one worker per kind; each loads its backend with `loader` at once
    /// (in parallel), reads its outputs with `ctx` and reports to `sink`.
    pub fn start(kinds: &[BackendSpec], ctx: Arc<TaskContext>, loader: Loader, sink: Sink) -> std::io::Result<Scheduler> {
        let shared = Arc::new(Shared { gate: gate::Gate::default(), repeat: AtomicBool::new(false) });
        let mut scheduler = Scheduler { workers: Vec::with_capacity(kinds.len()), shared, loader, sink, ctx };
        for (index, kind) in kinds.iter().enumerate() {
            // On error, dropping `scheduler` closes the workers started so far.
            let worker = scheduler.spawn(index, kind.clone())?;
            scheduler.workers.push(worker);
        }
        Ok(scheduler)
    }

    /// Start the worker of column `index`, which loads `kind` at once.
    fn spawn(&self, index: usize, kind: BackendSpec) -> std::io::Result<WorkerHandle> {
        let inbox = Arc::new(inbox::Inbox::default());
        let body = worker::Worker {
            index,
            kind: kind.clone(),
            inbox: inbox.clone(),
            shared: self.shared.clone(),
            loader: self.loader.clone(),
            sink: self.sink.clone(),
            ctx: self.ctx.clone(),
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
    pub fn switch(&mut self, from: BackendSpec, to: BackendSpec, job: Option<Job>) -> std::io::Result<()> {
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
            Request::TeacherForce(kind, work) => {
                if let Some(w) = self.workers.iter().find(|w| w.kind == kind) {
                    w.inbox.put_teacher(work);
                }
            }
            Request::SetSerial(serial) => self.shared.gate.set_serial(serial),
            Request::SetRepeat(repeat) => self.shared.repeat.store(repeat, Ordering::Relaxed),
            Request::Switch { from, to, job } => {
                if let Err(e) = self.switch(from, to.clone(), job) {
                    (self.sink)(WorkerEvent::LoadFailed { kind: to, error: format!("cannot start a worker thread: {e}") });
                }
            }
        }
    }

    /// Give every worker `job`, replacing the input it has waiting. The fastest
    /// path is woken first, so that its result is not the one kept waiting for a core.
    pub fn submit(&self, job: Job) {
        let mut order: Vec<&WorkerHandle> = self.workers.iter().collect();
        order.sort_by_key(|w| start_order(&w.kind));
        for w in order {
            w.inbox.put(job.clone());
        }
    }

    pub fn submit_to(&self, kind: &BackendSpec, job: Job) {
        if let Some(w) = self.workers.iter().find(|w| w.kind == *kind) {
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

/// Who is woken first (`BackendSpec::start_order`): the fast columns, then
/// eager, then programs without a delegate (the portable path, slow).
fn start_order(spec: &BackendSpec) -> u8 {
    spec.start_order()
}

impl Drop for Scheduler {
    /// Workers are told to stop but not waited for: a portable run may take a
    /// second and quitting must not.
    fn drop(&mut self) {
        self.close();
    }
}
