//! F6's job: time the columns per module (eager on its own copy of the model,
//! the programs traced; [`crate::layers::layers`]).

use std::sync::Arc;

use super::{BackgroundJob, Failure, JobDone};
use crate::backend::BackendSpec;
use crate::model::{Encoded, ModelDir};

/// A per-module measurement the app wants made off the UI thread.
#[derive(Clone, Debug)]
pub struct LayersRequest {
    /// Which view asked; the app drops results for any other.
    pub id: u64,
    pub input: Arc<Encoded>,
    /// The columns on screen that did not fail, in their order.
    pub kinds: Vec<BackendSpec>,
}

/// A [`LayersRequest`] with the model directory it is measured in.
pub(super) struct LayersJob {
    pub request: LayersRequest,
    pub models: ModelDir,
}

impl BackgroundJob for LayersJob {
    type Output = JobDone;

    fn run(&mut self) -> JobDone {
        let LayersRequest { id, input, kinds } = &self.request;
        let outcome = crate::layers::layers(kinds, &self.models, input, crate::layers::DEFAULT_RUNS, None).map_err(|e| format!("{e:#}"));
        JobDone::Layers(*id, outcome)
    }

    fn failed(&self, failure: Failure) -> JobDone {
        let message = match failure {
            Failure::Panicked => "the per-module run panicked".to_string(),
            Failure::NotStarted(e) => format!("cannot start the per-module run: {e}"),
        };
        JobDone::Layers(self.request.id, Err(message))
    }
}
