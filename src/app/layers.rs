//! The layers view (F6): each backend's time per module of the model for the
//! text that was current when it was asked for, from a separate measurement
//! (eager timed per module, the ExecuTorch columns traced), as `runlens layers`;
//! the measurement it asks for is [`crate::jobs::LayersRequest`].

use std::time::Instant;

use crate::layers::LayersReport;

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
