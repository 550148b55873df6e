//! Time per module of the eager model (`runlens layers`). The model's forward
//! methods wrap their submodules in [`scope`]; while [`record`] runs on the
//! same thread, each scope adds its own time (its wall time minus its child
//! scopes') to the path of names that leads to it, `encoder.layer.0.attention.self`,
//! mirroring the checkpoint keys. Outside [`record`] a scope is one
//! thread-local check. libtorch's CPU operators return when done, so wall time
//! is the operators' time.

use std::cell::RefCell;
use std::time::{Duration, Instant};

/// The path of the time outside every scope: the model's own work (input
/// checks, the attention mask) and the caller's.
pub const ROOT: &str = "";

struct Frame {
    path: String,
    start: Instant,
    children: Duration,
}

#[derive(Default)]
struct Recorder {
    stack: Vec<Frame>,
    /// Own time by path, in the order each path first finished.
    spans: Vec<(String, Duration)>,
}

impl Recorder {
    fn add(&mut self, path: String, own: Duration) {
        match self.spans.iter_mut().find(|(p, _)| *p == path) {
            Some((_, d)) => *d += own,
            None => self.spans.push((path, own)),
        }
    }
}

thread_local! {
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// Runs `f` as the submodule `name` of the scope around it.
pub fn scope<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let entered = RECORDER.with(|r| {
        let mut r = r.borrow_mut();
        let Some(rec) = r.as_mut() else { return false };
        let path = match rec.stack.last() {
            Some(parent) if !parent.path.is_empty() => format!("{}.{name}", parent.path),
            _ => name.to_owned(),
        };
        rec.stack.push(Frame { path, start: Instant::now(), children: Duration::ZERO });
        true
    });
    let out = f();
    if entered {
        RECORDER.with(|r| {
            let mut r = r.borrow_mut();
            if let Some(rec) = r.as_mut() {
                if let Some(frame) = rec.stack.pop() {
                    let wall = frame.start.elapsed();
                    if let Some(parent) = rec.stack.last_mut() {
                        parent.children += wall;
                    }
                    rec.add(frame.path, wall.saturating_sub(frame.children));
                }
            }
        });
    }
    out
}

/// One forward, timed per module: each path's own time, in the order the
/// paths first finished, the outside ([`ROOT`]) last; they add up to `total`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleTimes {
    pub spans: Vec<(String, Duration)>,
    pub total: Duration,
}

/// Runs `f` with per-module timing on this thread.
pub fn record<T>(f: impl FnOnce() -> T) -> (T, ModuleTimes) {
    RECORDER.with(|r| {
        *r.borrow_mut() = Some(Recorder {
            stack: vec![Frame { path: ROOT.to_owned(), start: Instant::now(), children: Duration::ZERO }],
            spans: Vec::new(),
        })
    });
    let out = f();
    let mut rec = RECORDER.with(|r| r.borrow_mut().take()).unwrap_or_default();
    let (total, root_own) = match rec.stack.first() {
        Some(root) => {
            let wall = root.start.elapsed();
            (wall, wall.saturating_sub(root.children))
        }
        None => (Duration::ZERO, Duration::ZERO),
    };
    rec.spans.push((ROOT.to_owned(), root_own));
    (out, ModuleTimes { spans: rec.spans, total })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_times_add_up_to_the_run() {
        let spin = |ms| {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(ms) {}
        };
        let ((), times) = record(|| {
            scope("encoder", || {
                spin(2);
                scope("layer.0", || spin(3));
                scope("layer.0", || spin(1));
            });
            spin(1);
        });
        let paths: Vec<&str> = times.spans.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["encoder.layer.0", "encoder", ROOT]);
        let sum: Duration = times.spans.iter().map(|(_, d)| *d).sum();
        let diff = times.total.abs_diff(sum);
        assert!(diff < Duration::from_micros(50), "{sum:?} vs {:?}", times.total);
        assert!(times.spans[0].1 >= Duration::from_millis(4));
        // Outside `record` a scope only runs its closure.
        assert_eq!(scope("x", || 7), 7);
    }
}
