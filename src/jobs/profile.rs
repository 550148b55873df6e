//! F4's job: load the ExecuTorch programs again with ExecuTorch's tracer
//! (memory-mapped, so quick), run them and report per-operator times.

use std::sync::Arc;

use super::{BackgroundJob, Failure, JobDone};
use crate::backend::{BackendSpec, OutputKind};
use crate::tensor::Encoded;

/// Traced runs a profile (F4) averages, after its warm-up run.
pub const PROFILE_RUNS: u32 = 3;

/// A traced run the app wants made off the UI thread.
#[derive(Clone, Debug)]
pub struct ProfileRequest {
    /// Which view asked; the app drops results for any other.
    pub id: u64,
    pub input: Arc<Encoded>,
    /// The ExecuTorch columns that loaded or are loading.
    pub kinds: Vec<BackendSpec>,
    /// What the programs return (the directory's task's).
    pub output: OutputKind,
}

impl BackgroundJob for ProfileRequest {
    type Output = JobDone;

    fn run(&mut self) -> JobDone {
        let outcome = crate::profile::profile_backends(&self.kinds, &self.input, PROFILE_RUNS, crate::profile::ProfiledRun::Prompt, self.output, &mut |_, _| {}).map_err(|e| format!("{e:#}"));
        JobDone::Profile(self.id, outcome)
    }

    fn failed(&self, failure: Failure) -> JobDone {
        let message = match failure {
            Failure::Panicked => "the traced run panicked".to_string(),
            Failure::NotStarted(e) => format!("cannot start the traced run: {e}"),
        };
        JobDone::Profile(self.id, Err(message))
    }
}
