//! The layers view (F6): each backend's time per module of the model for the
//! text that was current when it was asked for, from a separate measurement
//! (eager timed per module, the ExecuTorch columns traced), as `runlens layers`.

use std::sync::Arc;
use std::time::Instant;

use crate::backend::BackendSpec;
use crate::layers::LayersReport;
use crate::model::Encoded;

/// The layers view (F6).
#[derive(Clone, Debug)]
pub struct LayersView {
    /// Which request this view waits for; older results are dropped.
    pub id: u64,
    pub text: String,
    pub state: LayersState,
}

#[derive(Clone, Debug)]
pub enum LayersState {
    Running { since: Instant },
    Ready(LayersReport),
    Failed(String),
}

/// A per-module measurement the app wants made off the UI thread (see [`super::App::take_layers_request`]).
#[derive(Clone, Debug)]
pub struct LayersRequest {
    pub id: u64,
    pub input: Arc<Encoded>,
    /// The columns on screen that did not fail, in their order.
    pub kinds: Vec<BackendSpec>,
}
