//! The per-operator profile view (F4); the traced run it asks for is
//! [`crate::jobs::ProfileRequest`].

use std::time::Instant;

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
