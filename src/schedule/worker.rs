//! The body of one worker thread: load the backend, then run whatever its
//! inbox holds, reporting every step to the sink. Panics in the backend are
//! caught and reported as errors, so one broken path never takes down the others.
//! Every input goes through the task's one driver ([`crate::task::run`]); a
//! generation reports each token as it comes and stops between tokens once its
//! input is superseded.

use std::any::Any;
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::inbox::{Inbox, Work};
use super::{Job, Loader, Shared, Sink, WorkerEvent};
use crate::backend::{Backend, BackendSpec};
use crate::task::{Embedding, TaskContext, TaskOutput, TokenStep};

pub(super) struct Worker {
    pub index: usize,
    pub kind: BackendSpec,
    pub inbox: Arc<Inbox>,
    pub shared: Arc<Shared>,
    pub loader: Loader,
    pub sink: Sink,
    pub ctx: Arc<TaskContext>,
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    format!("panicked: {text}")
}

impl Worker {
    pub fn main(self) {
        let kind = self.kind.clone();
        let start = Instant::now();
        let loaded = catch_unwind(AssertUnwindSafe(|| (self.loader)(&kind)));
        let load_time = start.elapsed();
        let mut backend = match loaded {
            Ok(Ok(backend)) => {
                (self.sink)(WorkerEvent::Loaded {
                    kind: kind.clone(),
                    description: backend.describe(),
                    load_time,
                    weight_bytes: backend.weight_bytes_per_token(),
                });
                backend
            }
            Ok(Err(e)) => return (self.sink)(WorkerEvent::LoadFailed { kind, error: format!("{e:#}") }),
            Err(payload) => return (self.sink)(WorkerEvent::LoadFailed { kind, error: panic_message(payload) }),
        };
        while self.inbox.wait() {
            let turn = self.shared.gate.enter(self.index);
            match self.inbox.take() {
                None => continue,
                Some(Work::Corpus(sentences)) => {
                    let start = Instant::now();
                    let outcome: Result<Vec<Embedding>, String> = sentences
                        .iter()
                        .map(|s| match caught(|| crate::task::run_quietly(backend.as_mut(), &self.ctx, s))? {
                            TaskOutput::Embedding(e) => Ok(e),
                            _ => Err("the corpus is embedded by feature-extraction models only".to_string()),
                        })
                        .collect();
                    drop(turn);
                    (self.sink)(WorkerEvent::CorpusEmbedded { kind: kind.clone(), outcome, elapsed: start.elapsed() });
                }
                Some(Work::TeacherForce(work)) => {
                    // A newer input (or a cancel) stops the pass between two steps; nothing is reported then.
                    let outcome = caught(|| {
                        let mut stop = || self.inbox.is_superseded();
                        crate::task::generation::parity::teacher_forced_on(backend.as_mut(), &kind.name, &work.job.input.ids, &work.reference, &mut stop)
                    });
                    drop(turn);
                    if let Some(outcome) = outcome.transpose() {
                        (self.sink)(WorkerEvent::TeacherForced { kind: kind.clone(), generation: work.job.generation, outcome });
                    }
                }
                Some(Work::Run(job)) => {
                    let at = Instant::now();
                    (self.sink)(WorkerEvent::Started { kind: kind.clone(), generation: job.generation, at });
                    let outcome = self.run(backend.as_mut(), &job);
                    let elapsed = at.elapsed();
                    drop(turn);
                    let ok = outcome.is_ok();
                    (self.sink)(WorkerEvent::Finished {
                        kind: kind.clone(),
                        generation: job.generation,
                        input: job.input.clone(),
                        outcome,
                        elapsed,
                    });
                    // Repeat mode: run the same input again unless a newer one came in.
                    if ok && self.shared.repeat.load(Ordering::Relaxed) {
                        self.inbox.offer(job);
                    }
                }
            }
        }
    }
}

impl Worker {
    /// The job's input through the task: a generation's every token reported
    /// as it comes, stopping between tokens once a newer input (or a cancel)
    /// supersedes this one.
    fn run(&self, backend: &mut dyn Backend, job: &Job) -> Result<TaskOutput, String> {
        let kind = &self.kind;
        caught(|| {
            let mut on_token = |step: &TokenStep| {
                (self.sink)(WorkerEvent::Token { kind: kind.clone(), generation: job.generation, step: step.clone() });
                if self.inbox.is_superseded() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            };
            crate::task::run(backend, &self.ctx, &job.input, &mut on_token)
        })
    }
}

/// `f`'s outcome, its error or panic as a message.
fn caught<T>(f: impl FnOnce() -> anyhow::Result<T>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(payload) => Err(panic_message(payload)),
    }
}
