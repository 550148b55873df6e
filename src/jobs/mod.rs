//! Background work besides inference, as one abstraction (gitui's
//! `AsyncSingleJob`): a [`JobSlot`] per kind of job, in which one job runs at
//! a time and the newest request wins: a request that waits behind the
//! running job is replaced by a newer one. Every result comes back as one
//! notification type, [`JobDone`], through the callback the slots were made
//! with (the explorer's event channel).
//!
//! The app asks for work as [`JobRequest`]s ([`crate::app::App::drain_jobs`]);
//! [`Jobs`] hands each to the slot of its kind.
//!
//! - [`profile`]: a traced run of the ExecuTorch columns (F4);
//! - [`layers`]: time per module of every column (F6);
//! - [`coverage`]: the delegation coverage of the `.pte` columns;
//! - [`heat`]: not a job but a sampler thread (temperature, clock, throttling).

pub mod coverage;
pub mod heat;
pub mod layers;
pub mod profile;

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use coverage::{CoverageRequest, CoverageView};
pub use layers::LayersRequest;
pub use profile::{ProfileRequest, PROFILE_RUNS};

use crate::backend::BackendSpec;
use crate::layers::LayersReport;
use crate::model::ModelDir;
use crate::profile::ProfileReport;
use crate::schedule::WORKER_THREAD_PREFIX;

/// Work the app wants done off the UI thread.
#[derive(Clone, Debug)]
pub enum JobRequest {
    Profile(ProfileRequest),
    Layers(LayersRequest),
    Coverage(CoverageRequest),
}

/// A background job finished: the one notification every job sends.
#[derive(Debug)]
pub enum JobDone {
    /// A profile's traced run (request id, report or error).
    Profile(u64, Result<ProfileReport, String>),
    /// A per-module measurement (request id, report or error).
    Layers(u64, Result<LayersReport, String>),
    /// The delegation coverage of each `.pte` asked for, or why it could not be read.
    Coverage(Vec<(BackendSpec, Result<CoverageView, String>)>),
}

/// Why a job has no result of its own.
#[derive(Debug)]
pub enum Failure<'a> {
    /// It panicked (the panic message went to the panic hook).
    Panicked,
    /// No thread could be started for it.
    NotStarted(&'a std::io::Error),
}

/// One kind of background work.
pub trait BackgroundJob: Send + 'static {
    type Output: Send + 'static;
    /// Do the work, on the slot's thread.
    fn run(&mut self) -> Self::Output;
    /// What to report instead when the work could not be done.
    fn failed(&self, failure: Failure) -> Self::Output;
}

/// Where a slot sends its results.
pub type Notify<T> = Arc<dyn Fn(T) + Send + Sync>;

/// One job of a kind in flight; the newest request waits for it, replacing
/// any older one that was waiting. The thread lives while there is work and
/// ends when there is none.
pub struct JobSlot<J: BackgroundJob> {
    /// The thread's name after [`WORKER_THREAD_PREFIX`] (its panics stay quiet).
    name: String,
    state: Arc<Mutex<SlotState<J>>>,
    notify: Notify<J::Output>,
}

struct SlotState<J> {
    /// The request that runs next.
    next: Option<J>,
    /// A thread is running jobs of this slot.
    running: bool,
}

impl<J: BackgroundJob> JobSlot<J> {
    pub fn new(name: &str, notify: Notify<J::Output>) -> JobSlot<J> {
        JobSlot { name: name.to_string(), state: Arc::new(Mutex::new(SlotState { next: None, running: false })), notify }
    }

    /// Ask for `job`: it starts at once when the slot is idle, else it runs
    /// after the job in flight. Returns the waiting request it replaced.
    pub fn request(&self, job: J) -> Option<J> {
        let mut state = lock(&self.state);
        let replaced = state.next.replace(job);
        if state.running {
            return replaced;
        }
        state.running = true;
        drop(state);
        let (state, notify) = (Arc::clone(&self.state), Arc::clone(&self.notify));
        let spawned = std::thread::Builder::new()
            .name(format!("{WORKER_THREAD_PREFIX}{}", self.name))
            .spawn(move || run_until_empty(&state, &*notify));
        if let Err(e) = spawned {
            let job = {
                let mut state = lock(&self.state);
                state.running = false;
                state.next.take()
            };
            if let Some(job) = job {
                (self.notify)(job.failed(Failure::NotStarted(&e)));
            }
        }
        replaced
    }

    /// Is a job of this slot running or waiting?
    pub fn is_busy(&self) -> bool {
        lock(&self.state).running
    }
}

/// The slot's thread: run the waiting job until none waits.
fn run_until_empty<J: BackgroundJob>(state: &Mutex<SlotState<J>>, notify: &(dyn Fn(J::Output) + Send + Sync)) {
    loop {
        let mut job = {
            let mut state = lock(state);
            match state.next.take() {
                Some(job) => job,
                None => {
                    state.running = false;
                    return;
                }
            }
        };
        let output = std::panic::catch_unwind(AssertUnwindSafe(|| job.run())).unwrap_or_else(|_| job.failed(Failure::Panicked));
        notify(output);
    }
}

/// A slot's state stays consistent across a panic (it is only ever set whole).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The explorer's background jobs: one slot per kind.
pub struct Jobs {
    profile: JobSlot<ProfileRequest>,
    layers: JobSlot<layers::LayersJob>,
    coverage: JobSlot<CoverageRequest>,
    /// The model directory, for the layers view's own eager model.
    models: ModelDir,
}

impl Jobs {
    pub fn new(models: ModelDir, notify: impl Fn(JobDone) + Send + Sync + 'static) -> Jobs {
        let notify: Notify<JobDone> = Arc::new(notify);
        Jobs {
            profile: JobSlot::new("profile", Arc::clone(&notify)),
            layers: JobSlot::new("layers", Arc::clone(&notify)),
            coverage: JobSlot::new("coverage", notify),
            models,
        }
    }

    /// Is a job of any kind running or waiting? (F8's switch waits for them: a
    /// profile or layers run holds backends of its own.)
    pub fn is_busy(&self) -> bool {
        self.profile.is_busy() || self.layers.is_busy() || self.coverage.is_busy()
    }

    /// Start `request` in the slot of its kind (or queue it there, newest wins).
    pub fn request(&self, request: JobRequest) {
        match request {
            JobRequest::Profile(request) => drop(self.profile.request(request)),
            JobRequest::Layers(request) => drop(self.layers.request(layers::LayersJob { request, models: self.models.clone() })),
            JobRequest::Coverage(request) => drop(self.coverage.request(request)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::{self, Receiver, Sender};
    use std::time::Duration;

    /// A guard against a hung test, not a timing assertion.
    const WAIT: Duration = Duration::from_secs(20);

    /// How many fake jobs run at once, and the most there ever were.
    #[derive(Default)]
    struct FakeLog {
        running: AtomicUsize,
        most: AtomicUsize,
    }

    /// A fake job: says it started, waits for its gate to open (if it has
    /// one), then reports its number; `panics` makes it panic instead.
    struct FakeJob {
        id: u32,
        gate: Option<Receiver<()>>,
        started: Sender<u32>,
        log: Arc<FakeLog>,
        panics: bool,
    }

    impl BackgroundJob for FakeJob {
        type Output = Result<u32, String>;

        fn run(&mut self) -> Result<u32, String> {
            let now = self.log.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.log.most.fetch_max(now, Ordering::SeqCst);
            let _ = self.started.send(self.id);
            if let Some(gate) = &self.gate {
                let _ = gate.recv_timeout(WAIT);
            }
            self.log.running.fetch_sub(1, Ordering::SeqCst);
            if self.panics {
                panic!("fake job {} panicked", self.id);
            }
            Ok(self.id)
        }

        fn failed(&self, failure: Failure) -> Result<u32, String> {
            Err(format!("fake job {}: {failure:?}", self.id))
        }
    }

    struct FakeSlot {
        slot: JobSlot<FakeJob>,
        done: Receiver<Result<u32, String>>,
        started_tx: Sender<u32>,
        started: Receiver<u32>,
        log: Arc<FakeLog>,
    }

    impl FakeSlot {
        fn new() -> FakeSlot {
            let (done_tx, done) = mpsc::channel();
            let done_tx = Mutex::new(done_tx);
            let notify: Notify<Result<u32, String>> = Arc::new(move |out| {
                let _ = lock(&done_tx).send(out);
            });
            let (started_tx, started) = mpsc::channel();
            FakeSlot { slot: JobSlot::new("fake", notify), done, started_tx, started, log: Arc::default() }
        }

        /// A job that runs until the returned sender opens its gate.
        fn gated(&self, id: u32) -> (FakeJob, Sender<()>) {
            let (open, gate) = mpsc::channel();
            (FakeJob { id, gate: Some(gate), started: self.started_tx.clone(), log: Arc::clone(&self.log), panics: false }, open)
        }

        fn quick(&self, id: u32) -> FakeJob {
            FakeJob { id, gate: None, started: self.started_tx.clone(), log: Arc::clone(&self.log), panics: false }
        }

        fn next_done(&self) -> Result<u32, String> {
            self.done.recv_timeout(WAIT).expect("a job reports")
        }
    }

    #[test]
    fn one_job_runs_at_a_time_and_the_newest_waiting_request_wins() {
        let fake = FakeSlot::new();
        let (first, open_first) = fake.gated(1);
        assert!(fake.slot.request(first).is_none());
        assert_eq!(fake.started.recv_timeout(WAIT), Ok(1), "an idle slot starts the job at once");
        assert!(fake.slot.is_busy());

        // While 1 runs: 2 waits, then 3 replaces it, then 4 replaces 3.
        let (second, _open_second) = fake.gated(2);
        assert!(fake.slot.request(second).is_none(), "nothing waited before");
        let (third, _open_third) = fake.gated(3);
        assert_eq!(fake.slot.request(third).map(|j| j.id), Some(2), "the waiting request is replaced");
        let (fourth, open_fourth) = fake.gated(4);
        assert_eq!(fake.slot.request(fourth).map(|j| j.id), Some(3));
        assert!(fake.started.try_recv().is_err(), "nothing else starts while 1 runs");

        open_first.send(()).unwrap();
        assert_eq!(fake.next_done(), Ok(1));
        assert_eq!(fake.started.recv_timeout(WAIT), Ok(4), "the newest request runs next");
        open_fourth.send(()).unwrap();
        assert_eq!(fake.next_done(), Ok(4));
        assert_eq!(fake.log.most.load(Ordering::SeqCst), 1, "never two jobs at once");
    }

    #[test]
    fn an_idle_slot_runs_each_new_request() {
        let fake = FakeSlot::new();
        for id in 1..=3 {
            fake.slot.request(fake.quick(id));
            assert_eq!(fake.next_done(), Ok(id));
        }
        assert_eq!(fake.log.most.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_coverage_job_reports_a_missing_program_by_name() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let slot = JobSlot::new("coverage", Arc::new(move |done| {
            let _ = lock(&tx).send(done);
        }));
        // `named` points at `xnnpack.pte` in the working directory, which is not there.
        let kind = crate::backend::named("xnnpack");
        slot.request(CoverageRequest { kinds: vec![kind.clone()] });
        match rx.recv_timeout(WAIT).expect("the coverage job reports") {
            JobDone::Coverage(read) => {
                assert_eq!(read.len(), 1);
                assert_eq!(read[0].0, kind);
                let error = read[0].1.as_ref().expect_err("xnnpack.pte does not exist here");
                assert!(error.contains("xnnpack.pte"), "{error}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_panicking_job_reports_a_failure_and_the_slot_goes_on() {
        let fake = FakeSlot::new();
        let mut job = fake.quick(7);
        job.panics = true;
        fake.slot.request(job);
        assert_eq!(fake.next_done(), Err("fake job 7: Panicked".to_string()));
        fake.slot.request(fake.quick(8));
        assert_eq!(fake.next_done(), Ok(8), "the slot is not left busy");
    }
}
