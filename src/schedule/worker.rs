//! The body of one worker thread: load the backend, then run whatever its
//! inbox holds, reporting every step to the sink. Panics in the backend are
//! caught and reported as errors, so one broken path never takes down the others.
//! A text-generation model runs the greedy loop, one `Token` report per token,
//! and stops between tokens once its input is superseded.

use std::any::Any;
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::inbox::{Inbox, Work};
use super::{Job, Loader, Shared, Sink, WorkerEvent};
use crate::backend::{Backend, BackendSpec};
use crate::generate::TokenStep;
use crate::task::{Embedding, Task, TaskContext, TaskOutput};

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
                (self.sink)(WorkerEvent::Loaded { kind: kind.clone(), description: backend.describe(), load_time });
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
                        .map(|s| match run_caught(backend.as_mut(), &self.ctx, s)? {
                            TaskOutput::Embedding(e) => Ok(e),
                            _ => Err("the corpus is embedded by feature-extraction models only".to_string()),
                        })
                        .collect();
                    drop(turn);
                    (self.sink)(WorkerEvent::CorpusEmbedded { kind: kind.clone(), outcome, elapsed: start.elapsed() });
                }
                Some(Work::Run(job)) => {
                    let at = Instant::now();
                    (self.sink)(WorkerEvent::Started { kind: kind.clone(), generation: job.generation, at });
                    let outcome = if self.ctx.task == Task::TextGeneration {
                        self.generate(backend.as_mut(), &job)
                    } else {
                        run_caught(backend.as_mut(), &self.ctx, &job.input)
                    };
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
    /// Greedy generation from the job's ids: every token reported as it comes;
    /// stops between tokens once a newer input (or a cancel) supersedes this one.
    fn generate(&self, backend: &mut dyn Backend, job: &Job) -> Result<TaskOutput, String> {
        let kind = &self.kind;
        let run = || -> anyhow::Result<TaskOutput> {
            let mut on_token = |step: &TokenStep| {
                (self.sink)(WorkerEvent::Token { kind: kind.clone(), generation: job.generation, step: step.clone() });
                if self.inbox.is_superseded() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            };
            crate::task::generation::generate(backend, self.ctx.generation()?, &job.input, &mut on_token).map(TaskOutput::Generation)
        };
        match catch_unwind(AssertUnwindSafe(run)) {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(payload) => Err(panic_message(payload)),
        }
    }
}

fn run_caught(backend: &mut dyn Backend, ctx: &TaskContext, input: &crate::model::Encoded) -> Result<TaskOutput, String> {
    match catch_unwind(AssertUnwindSafe(|| crate::backend::run_task(backend, ctx, input))) {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(payload) => Err(panic_message(payload)),
    }
}
