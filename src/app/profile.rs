//! The per-operator profile view (F4) and the traced run it asks for.

use std::sync::Arc;
use std::time::Instant;

use crate::backend::BackendSpec;
use crate::model::Encoded;
use crate::profile::ProfileReport;

/// The per-operator profile view (F4): a separate traced run of the
/// ExecuTorch columns on the text that was current when it was asked for.
#[derive(Clone, Debug)]
pub struct ProfileView {
    /// Which request this view waits for; older results are dropped.
    pub id: u64,
    pub text: String,
    pub state: ProfileState,
}

#[derive(Clone, Debug)]
pub enum ProfileState {
    Running { since: Instant },
    Ready(ProfileReport),
    Failed(String),
}

/// A traced run the app wants made off the UI thread (see [`App::take_profile_request`]).
#[derive(Clone, Debug)]
pub struct ProfileRequest {
    pub id: u64,
    pub input: Arc<Encoded>,
    /// The ExecuTorch columns that loaded or are loading.
    pub kinds: Vec<BackendSpec>,
}
