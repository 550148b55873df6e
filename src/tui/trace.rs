//! An optional timing trace (`RUNLENS_TUI_TRACE=FILE`): one line per key, run
//! request, result and frame, microseconds since start. For measuring the time
//! from a keystroke to the result on screen; off unless asked for. The event
//! loop calls one method per thing it does; the words of each line are here.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

use super::{keys, Event};
use crate::app::App;
use crate::jobs::{JobDone, JobRequest};
use crate::schedule::{Request, WorkerEvent};

/// Environment variable naming a file to write a timing trace to (keys, runs, results, frames).
pub const TRACE_ENV: &str = "RUNLENS_TUI_TRACE";

pub(super) struct Trace {
    out: Option<BufWriter<File>>,
    start: Instant,
}

impl Trace {
    pub(super) fn from_env() -> anyhow::Result<Trace> {
        let out = match std::env::var_os(TRACE_ENV) {
            Some(path) if !path.is_empty() => {
                let path = PathBuf::from(path);
                let file = File::create(&path).with_context(|| format!("cannot create the trace file {} ({TRACE_ENV})", path.display()))?;
                Some(BufWriter::new(file))
            }
            _ => None,
        };
        Ok(Trace { out, start: Instant::now() })
    }

    /// An event as it arrives, before it is handled (`app` as it was then).
    pub(super) fn event(&mut self, event: &Event, app: &App) {
        if self.out.is_none() {
            return;
        }
        match event {
            Event::Key(key) if keys::is_suspend_key(key) => self.line(format_args!("suspend")),
            Event::Key(key) => self.line(format_args!("key {:?}", key.code)),
            Event::Worker(WorkerEvent::Loaded { kind, load_time, .. }) => self.line(format_args!("loaded {kind} load_us={}", load_time.as_micros())),
            Event::Worker(WorkerEvent::LoadFailed { kind, .. }) => self.line(format_args!("load failed {kind}")),
            Event::Worker(WorkerEvent::CorpusEmbedded { kind, elapsed, .. }) => self.line(format_args!("corpus {kind} run_us={}", elapsed.as_micros())),
            Event::Worker(WorkerEvent::Started { kind, generation, at }) => {
                let since = self.since(*at);
                self.line(format_args!("started {kind} gen={generation} at_us={since}"));
            }
            Event::Worker(WorkerEvent::Finished { kind, generation, elapsed, .. }) => self.line(format_args!(
                "result {kind} gen={generation} run_us={} current={}",
                elapsed.as_micros(),
                *generation == app.generation()
            )),
            Event::Job(JobDone::Profile(id, outcome)) => self.line(format_args!("profile done id={id} ok={}", outcome.is_ok())),
            Event::Job(JobDone::Layers(id, outcome)) => self.line(format_args!("layers done id={id} ok={}", outcome.is_ok())),
            Event::Signal(sig) if *sig == libc::SIGTSTP => self.line(format_args!("signal {sig}: suspend")),
            Event::Signal(sig) if *sig == libc::SIGCONT => self.line(format_args!("signal {sig}: resume")),
            Event::Signal(sig) => self.line(format_args!("signal {sig}: end")),
            _ => {}
        }
    }

    /// A request handed to the scheduler.
    pub(super) fn request(&mut self, request: &Request) {
        if let Request::Run(job) = request {
            self.line(format_args!("run gen={} tokens={}", job.generation, job.input.len()));
        }
    }

    /// A background job handed to its slot.
    pub(super) fn job(&mut self, request: &JobRequest) {
        match request {
            JobRequest::Profile(r) => self.line(format_args!("profile id={} tokens={}", r.id, r.input.len())),
            JobRequest::Layers(r) => self.line(format_args!("layers id={} tokens={}", r.id, r.input.len())),
            JobRequest::Coverage(_) => {}
        }
    }

    pub(super) fn draw(&mut self) {
        self.line(format_args!("draw"));
    }

    fn line(&mut self, what: std::fmt::Arguments) {
        if let Some(out) = &mut self.out {
            let _ = writeln!(out, "{} {what}", self.start.elapsed().as_micros());
        }
    }

    /// Microseconds from the start of the trace to `at`.
    fn since(&self, at: Instant) -> u128 {
        at.saturating_duration_since(self.start).as_micros()
    }

    pub(super) fn flush(&mut self) {
        if let Some(out) = &mut self.out {
            let _ = out.flush();
        }
    }
}
