//! Start-up: the explorer's backends load at the same time, one worker thread
//! each (`Scheduler::start`), not one after another. Named fakes whose loader
//! records when it began and ended; each waits (up to [`MEET`]) until all have
//! begun, so loads run one after another would not overlap and fail here.
//! What must stay serial happens before the workers start: the thread counts of
//! libtorch and of ExecuTorch's shared pool (`backend::set_threads`, in main).

use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use runlens::backend::{Backend, BackendSpec};
mod common;
use common::named;
use runlens::model::Encoded;
use runlens::schedule::{Loader, Scheduler, Sink, WorkerEvent};
use runlens::task::{OutputTensor, Task, TaskContext};

/// How long a fake load waits for the others to begin.
const MEET: Duration = Duration::from_secs(5);
const WAIT: Duration = Duration::from_secs(30);

struct Fake(BackendSpec);

impl Backend for Fake {
    fn describe(&self) -> String {
        format!("fake {}", self.0)
    }
    fn run(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor> {
        Ok(OutputTensor::new(vec![1, input.ids.len()], input.ids.iter().map(|&i| i as f32).collect()))
    }
}

/// When each load began and ended.
#[derive(Default)]
struct Intervals {
    begun: Mutex<Vec<(BackendSpec, Instant)>>,
    ended: Mutex<Vec<(BackendSpec, Instant)>>,
    changed: Condvar,
}

fn recording_loader(intervals: &Arc<Intervals>, expected: usize) -> Loader {
    let intervals = intervals.clone();
    Arc::new(move |kind: &BackendSpec| {
        let deadline = Instant::now() + MEET;
        let mut begun = intervals.begun.lock().unwrap();
        begun.push((kind.clone(), Instant::now()));
        intervals.changed.notify_all();
        while begun.len() < expected {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            begun = intervals.changed.wait_timeout(begun, left).unwrap().0;
        }
        drop(begun);
        std::thread::sleep(Duration::from_millis(20));
        intervals.ended.lock().unwrap().push((kind.clone(), Instant::now()));
        Ok(Box::new(Fake(kind.clone())) as Box<dyn Backend>)
    })
}

fn channel_sink() -> (Sink, Receiver<WorkerEvent>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    (Arc::new(move |e| drop(tx.lock().unwrap().send(e))), rx)
}

#[test]
fn the_backends_load_at_the_same_time() {
    let kinds: Vec<BackendSpec> = ["eager", "portable", "xnnpack"].into_iter().map(named).collect();
    let intervals = Arc::new(Intervals::default());
    let (sink, rx) = channel_sink();
    let ctx = Arc::new(TaskContext::plain(Task::FeatureExtraction));
    let scheduler = Scheduler::start(&kinds, ctx, recording_loader(&intervals, kinds.len()), sink).unwrap();
    let deadline = Instant::now() + WAIT;
    let mut loaded = Vec::new();
    while loaded.len() < kinds.len() {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(WorkerEvent::Loaded { kind, .. }) => loaded.push(kind),
            Ok(WorkerEvent::LoadFailed { kind, error }) => panic!("{kind} failed to load: {error}"),
            Ok(_) => {}
            Err(_) => panic!("timed out waiting for the loads; loaded so far: {loaded:?}"),
        }
    }
    assert!(scheduler.shutdown(WAIT));

    let begun = intervals.begun.lock().unwrap().clone();
    let ended = intervals.ended.lock().unwrap().clone();
    let interval = |kind: &BackendSpec| {
        let at = |v: &[(BackendSpec, Instant)]| v.iter().find(|(k, _)| k == kind).map(|(_, t)| *t).unwrap();
        (at(&begun), at(&ended))
    };
    for (i, a) in kinds.iter().enumerate() {
        for b in &kinds[i + 1..] {
            let ((a0, a1), (b0, b1)) = (interval(a), interval(b));
            assert!(
                a0 < b1 && b0 < a1,
                "the loads of {a} and {b} did not overlap: loads are serialised again ({a} {:?}..{:?}, {b} {:?}..{:?} after the first began)",
                a0 - begun[0].1,
                a1 - begun[0].1,
                b0 - begun[0].1,
                b1 - begun[0].1
            );
        }
    }
    // Each load waited for the others to begin, not for MEET to pass.
    let longest = kinds.iter().map(|k| interval(k).1 - interval(k).0).max().unwrap();
    assert!(longest < MEET, "a load waited {longest:?} for the others to begin: they did not begin together");
}
