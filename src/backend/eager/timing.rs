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
pub use crate::backend::ROOT_MODULE as ROOT;
/// One forward timed per module: the plain data of `crate::backend`, so that
/// who reads it imports no runtime.
pub use crate::backend::ModuleTimes;

struct Frame {
    path: String,
    start: Instant,
    children: Duration,
    /// Whether a scope ran inside this one (only leaves keep their outputs).
    nested: bool,
}

/// What a scope's closure returns, as far as the recorder keeps it.
pub trait ScopeOutput {
    /// A copy of the output tensor (later in-place operations must not change it).
    fn snapshot(&self) -> Option<tch::Tensor>;
}

impl ScopeOutput for tch::Result<tch::Tensor> {
    fn snapshot(&self) -> Option<tch::Tensor> {
        self.as_ref().ok().and_then(|t| t.f_detach_copy().ok())
    }
}

#[derive(Default)]
struct Recorder {
    stack: Vec<Frame>,
    /// Own time by path, in the order each path first finished.
    spans: Vec<(String, Duration)>,
    /// Keep the outputs of leaf scopes ([`record_outputs`]).
    keep_outputs: bool,
    outputs: Vec<(String, tch::Tensor)>,
    /// Every scope as it ran: (path, start, wall), in the order they finished.
    scopes: Vec<(String, Instant, Duration)>,
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
pub fn scope<T: ScopeOutput>(name: &str, f: impl FnOnce() -> T) -> T {
    let entered = RECORDER.with(|r| {
        let mut r = r.borrow_mut();
        let Some(rec) = r.as_mut() else { return false };
        let path = match rec.stack.last() {
            Some(parent) if !parent.path.is_empty() => format!("{}.{name}", parent.path),
            _ => name.to_owned(),
        };
        if let Some(parent) = rec.stack.last_mut() {
            parent.nested = true;
        }
        rec.stack.push(Frame { path, start: Instant::now(), children: Duration::ZERO, nested: false });
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
                    if rec.keep_outputs && !frame.nested {
                        if let Some(t) = out.snapshot() {
                            rec.outputs.push((frame.path.clone(), t));
                        }
                    }
                    rec.scopes.push((frame.path.clone(), frame.start, wall));
                    rec.add(frame.path, wall.saturating_sub(frame.children));
                }
            }
        });
    }
    out
}

/// Runs `f` with per-module timing on this thread.
pub fn record<T>(f: impl FnOnce() -> T) -> (T, ModuleTimes) {
    let (out, times, _) = run(false, f);
    (out, times)
}

/// Runs `f` keeping the output of every innermost scope (a copy), by path, in order.
pub fn record_outputs<T>(f: impl FnOnce() -> T) -> (T, Vec<(String, tch::Tensor)>) {
    let (out, _, outputs) = run(true, f);
    (out, outputs)
}

fn run<T>(keep_outputs: bool, f: impl FnOnce() -> T) -> (T, ModuleTimes, Vec<(String, tch::Tensor)>) {
    RECORDER.with(|r| {
        *r.borrow_mut() = Some(Recorder {
            stack: vec![Frame { path: ROOT.to_owned(), start: Instant::now(), children: Duration::ZERO, nested: false }],
            spans: Vec::new(),
            keep_outputs,
            outputs: Vec::new(),
            scopes: Vec::new(),
        })
    });
    let out = f();
    let mut rec = RECORDER.with(|r| r.borrow_mut().take()).unwrap_or_default();
    let (total, root_own, started) = match rec.stack.first() {
        Some(root) => {
            let wall = root.start.elapsed();
            (wall, wall.saturating_sub(root.children), root.start)
        }
        None => (Duration::ZERO, Duration::ZERO, Instant::now()),
    };
    rec.spans.push((ROOT.to_owned(), root_own));
    let scopes = rec.scopes.into_iter().map(|(path, start, wall)| (path, start.saturating_duration_since(started), wall)).collect();
    (out, ModuleTimes { spans: rec.spans, total, started, scopes }, rec.outputs)
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
        let ok = |ms| -> tch::Result<tch::Tensor> {
            spin(ms);
            Ok(tch::Tensor::from_slice(&[ms as f32]))
        };
        let ((), times) = record(|| {
            let _ = scope("encoder", || {
                let _ = ok(2);
                let _ = scope("layer.0", || ok(3));
                scope("layer.0", || ok(1))
            });
            spin(1);
        });
        let paths: Vec<&str> = times.spans.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["encoder.layer.0", "encoder", ROOT]);
        let sum: Duration = times.spans.iter().map(|(_, d)| *d).sum();
        let diff = times.total.abs_diff(sum);
        assert!(diff < Duration::from_micros(50), "{sum:?} vs {:?}", times.total);
        assert!(times.spans[0].1 >= Duration::from_millis(4));
        // Every scope as it ran (for --trace): each inside the run, the later `layer.0` after the first.
        let scopes: Vec<&str> = times.scopes.iter().map(|(p, _, _)| p.as_str()).collect();
        assert_eq!(scopes, ["encoder.layer.0", "encoder.layer.0", "encoder"]);
        let (_, first_at, first_wall) = &times.scopes[0];
        let (_, second_at, _) = &times.scopes[1];
        assert!(*first_wall >= Duration::from_millis(3) && *second_at >= *first_at + *first_wall, "{:?}", times.scopes);
        assert!(times.scopes.iter().all(|(_, at, wall)| *at + *wall <= times.total), "{:?}", times.scopes);
        // Outside `record` a scope only runs its closure.
        assert_eq!(scope("x", || ok(0)).unwrap().size(), [1]);
        // Only the innermost scopes keep their outputs.
        let (_, outputs) = record_outputs(|| scope("a", || scope("b", || ok(0))));
        let paths: Vec<&str> = outputs.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["a.b"]);
    }
}
