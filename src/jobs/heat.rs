//! The status bar's heat reading: not a job (nobody asks for it) but a
//! sampler thread that reads [`crate::heat`] every [`HEAT_EVERY`].

use std::time::Duration;

use crate::heat::{HeatSample, HeatSource};
use crate::schedule::WORKER_THREAD_PREFIX;

/// How often the status bar's temperature, clock and throttling are read.
pub const HEAT_EVERY: Duration = Duration::from_secs(2);

/// Read the temperature, clock and throttling every [`HEAT_EVERY`] on a
/// background thread (`vcgencmd` is a process start) and hand each reading
/// to `send`; the thread ends when `send` returns `false` (the explorer ended).
pub fn spawn_sampler(send: impl Fn(HeatSample) -> bool + Send + 'static) {
    let source = HeatSource::from_env();
    let body = move || {
        while send(source.sample()) {
            std::thread::sleep(HEAT_EVERY);
        }
    };
    // Without the thread the status bar just shows no heat.
    let _ = std::thread::Builder::new().name(format!("{WORKER_THREAD_PREFIX}heat")).spawn(body);
}
