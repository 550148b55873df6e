//! The event loop: hand the app's requests to the scheduler and the
//! background jobs, draw when something changed (within a frame budget),
//! then wait for the next [`Event`] and apply it to the app.
//!
//! Two channels feed it: the terminal's input (keys, pastes, resizes,
//! signals), which lives as long as the [`super::Explorer`], and this
//! session's own work (workers, jobs, heat), dropped with the session so that
//! no late report of one model reaches the next.
//!
//! F8's switch: once the app asks for it, the scheduler is closed (every
//! inbox shut: what waits is dropped, a generation stops at its next token)
//! and its threads are waited for, at most [`UNLOAD_WAIT`], on a blocking
//! thread while the loop goes on drawing "unloading…" and reading keys
//! (Ctrl-C still quits). A worker's backend is dropped when its thread ends,
//! so the memory is free before the next model loads; what cannot stop sooner
//! is a load or a single forward in progress, neither of which can be interrupted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use super::terminal::Screen;
use super::trace::Trace;
use super::{keys, Carry, Ended, Event, TuiOptions};
use crate::app::{self, Action, App, AppConfig, Tokenize};
use crate::backend::{self, BackendSpec};
use crate::corpus_cache::CorpusCache;
use crate::jobs::Jobs;
use crate::model::Encoded;
use crate::schedule::{Loader, Request, Scheduler, Sink, WorkerEvent};
use crate::ui;

/// Most frames drawn per second while work is in flight.
pub const FPS: f64 = 30.0;
/// How often elapsed times are redrawn while something loads or runs.
pub const TICK: Duration = Duration::from_millis(100);
/// Events taken in one go before the next frame (repeat mode sends many results).
const BATCH: usize = 512;
/// F8: how long a switch waits for the old model's workers to end (a load or
/// a forward in progress finishes first) before the next model is set up anyway.
pub const UNLOAD_WAIT: Duration = Duration::from_secs(20);

/// Set up the app, the workers and the background work, then run the loop.
pub(super) async fn session(
    screen: &mut Screen,
    input: &mut UnboundedReceiver<Event>,
    opts: &TuiOptions,
    threads: usize,
    trace: &mut Trace,
    carry: Carry,
) -> anyhow::Result<Ended> {
    // This session's work: dropped with it, so no late report reaches the next session.
    let (tx, mut work) = mpsc::unbounded_channel();

    let prompter = opts.prompter.clone();
    let tokenize: Tokenize = Box::new(move |text| prompter.encode(text));
    let config = AppConfig {
        kinds: opts.backends.clone(),
        threads,
        model: opts.models.model_name().to_string(),
        task: opts.ctx.task,
        corpus: app::corpus_sentences(),
        variants: opts.catalog.iter().filter(|k| k.given || backend::files_present(k, &opts.models).is_ok()).cloned().collect(),
    };
    // What each column will hold (shown while it loads), from the same estimate the memory check used.
    let needs = crate::memory::needs(&config.variants, &opts.models).into_iter().map(|n| (n.name, n.peak)).collect();
    let base = crate::memory::resident_now();
    let mut listed = opts.given_dirs.clone();
    listed.push(opts.models.root().to_path_buf());
    let list_models: app::ListModels = Box::new(move || crate::model::list_with(std::path::Path::new(crate::model::MODELS_ROOT), &listed));
    let mut app = App::new(config, tokenize, Instant::now())
        .with_prompter(opts.prompter.clone())
        .with_needs(needs, base)
        .with_model_list(list_models, opts.models.root().to_path_buf());
    app.set_text(&carry.text);
    if let Some(note) = carry.note {
        app.set_note(note);
    }
    if let Some((dir, message)) = carry.refused {
        app.switch_refused(&dir, message);
    }

    let dir = opts.models.clone();
    let admission = crate::memory::Admission::new(&opts.backends, dir.clone(), opts.memory_budget);
    let loader: Loader = Arc::new(move |kind| {
        admission.admit(kind)?;
        crate::task::load_backend(kind, &dir)
    });
    let worker_tx = tx.clone();
    let sink: Sink = Arc::new(move |event| {
        let _ = worker_tx.send(Event::Worker(event));
    });
    let ctx = Arc::new(opts.ctx.clone());
    let scheduler = Scheduler::start(&opts.backends, ctx, loader, sink).context("cannot start the worker threads")?;
    let job_tx = tx.clone();
    let jobs = Jobs::new(opts.models.clone(), move |done| {
        let _ = job_tx.send(Event::Job(done));
    });
    let heat_tx = tx.clone();
    crate::jobs::heat::spawn_sampler(move |sample| heat_tx.send(Event::Heat(sample)).is_ok());
    let corpus = CorpusCacheLink { cache: CorpusCache::from_env(&opts.models), asked: None, tx };

    let now = Instant::now();
    let frames = FrameBudget::new(now);
    let mut session = Session {
        screen,
        app,
        theme: opts.theme,
        scheduler: Some(scheduler),
        jobs: Some(jobs),
        unloading: None,
        corpus,
        trace,
        frames,
        dirty: true,
        last_tick: now,
    };
    let outcome = session.run(input, &mut work).await;
    session.trace.flush();
    outcome
}

/// The loop's state: the app and everything it is connected to.
struct Session<'a> {
    screen: &'a mut Screen,
    app: App,
    theme: ui::Theme,
    /// `None` once F8's switch has stopped it.
    scheduler: Option<Scheduler>,
    jobs: Option<Jobs>,
    /// F8's switch: the wait for the old workers, on a blocking thread (true: all ended).
    unloading: Option<tokio::task::JoinHandle<bool>>,
    corpus: CorpusCacheLink,
    trace: &'a mut Trace,
    frames: FrameBudget,
    /// Something changed since the last frame.
    dirty: bool,
    /// When the elapsed times were last drawn.
    last_tick: Instant,
}

/// The end of the wait for the old workers (never, while there is none).
async fn unloaded(wait: &mut Option<tokio::task::JoinHandle<bool>>) -> bool {
    let Some(handle) = wait else { return std::future::pending().await };
    let all_ended = handle.await.unwrap_or(false);
    *wait = None;
    all_ended
}

impl Session<'_> {
    async fn run(&mut self, input: &mut UnboundedReceiver<Event>, work: &mut UnboundedReceiver<Event>) -> anyhow::Result<Ended> {
        loop {
            let now = Instant::now();
            self.app.set_now(now);
            self.hand_off_requests();
            if self.app.should_quit() {
                return Ok(Ended::Quit);
            }
            if self.app.switch_request().is_some() && self.unloading.is_none() {
                self.start_unloading();
            }
            self.draw_if_due(now)?;

            let tick_at = self.app.is_busy().then_some(self.last_tick + TICK);
            let frame_at = self.dirty.then(|| self.frames.next_at());
            let deadline = [self.app.next_deadline(), tick_at, frame_at].into_iter().flatten().min();
            let first = tokio::select! {
                event = input.recv() => match event {
                    Some(event) => event,
                    None => return Ok(Ended::Quit),
                },
                Some(event) = work.recv() => event,
                all = unloaded(&mut self.unloading) => Event::Unloaded(all),
                _ = tokio::time::sleep_until(deadline.unwrap_or(now).into()), if deadline.is_some() => Event::Tick,
            };
            self.app.set_now(Instant::now());
            // Take everything already waiting before drawing again.
            let mut next = Some(first);
            let mut handled = 0;
            while let Some(event) = next.take() {
                self.trace.event(&event, &self.app);
                if let Some(ended) = self.handle(event)? {
                    return Ok(ended);
                }
                handled += 1;
                if handled < BATCH {
                    next = input.try_recv().or_else(|_| work.try_recv()).ok();
                }
            }
            // A tick after a key: the debounce may already be due.
            self.dirty |= self.app.tick();
        }
    }

    /// What the app asked for: inference to the scheduler, the rest to its job slot.
    fn hand_off_requests(&mut self) {
        for request in self.app.drain_requests() {
            if let Request::EmbedCorpus(kind, corpus) = &request {
                if self.corpus.answer(kind, corpus) {
                    continue;
                }
            }
            self.trace.request(&request);
            if let Some(scheduler) = &mut self.scheduler {
                scheduler.handle(request);
            }
        }
        for request in self.app.drain_jobs() {
            self.trace.job(&request);
            if let Some(jobs) = &self.jobs {
                jobs.request(request);
            }
        }
    }

    /// F8's switch: stop every worker now (what waits is dropped, a generation
    /// stops at its next token) and wait for their threads, and for a job in
    /// flight, off the UI thread; [`Event::Unloaded`] says when.
    fn start_unloading(&mut self) {
        let scheduler = self.scheduler.take();
        let jobs = self.jobs.take();
        if let Some(scheduler) = &scheduler {
            scheduler.close();
        }
        self.unloading = Some(tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + UNLOAD_WAIT;
            let workers = scheduler.is_none_or(|s| s.shutdown(UNLOAD_WAIT));
            // A profile or layers run holds backends of its own.
            while jobs.as_ref().is_some_and(Jobs::is_busy) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            workers && !jobs.as_ref().is_some_and(Jobs::is_busy)
        }));
        self.dirty = true;
    }

    /// The old workers ended (or the wait ran out): show that the next model
    /// is being set up, and end the session with the switch.
    fn end_with_switch(&mut self, all_ended: bool) -> anyhow::Result<Option<Ended>> {
        let Some(app::SwitchRequest { dir, text }) = self.app.switch_request().cloned() else { return Ok(None) };
        self.app.set_unloaded();
        if self.screen.is_active() {
            self.screen.draw(&self.app, &self.theme)?;
        }
        Ok(Some(Ended::SwitchModel { dir, text, unloaded: all_ended }))
    }

    fn draw_if_due(&mut self, now: Instant) -> anyhow::Result<()> {
        if self.dirty && self.screen.is_active() && self.frames.try_take(now) {
            self.screen.draw(&self.app, &self.theme)?;
            self.trace.draw();
            self.dirty = false;
            self.last_tick = now; // this frame shows the elapsed times as of now
        }
        Ok(())
    }

    /// Apply one event; `Some` when it ends the explorer.
    fn handle(&mut self, event: Event) -> anyhow::Result<Option<Ended>> {
        match event {
            Event::Tick => {
                self.dirty |= self.app.tick();
                if self.app.is_loading() {
                    // A load's progress: the process's resident memory against what the columns will hold.
                    self.app.set_resident(crate::memory::resident_now());
                }
                if self.app.is_busy() && self.app.now() >= self.last_tick + TICK {
                    self.last_tick = self.app.now();
                    self.dirty = true;
                }
            }
            Event::Key(key) if keys::is_suspend_key(&key) => self.screen.suspend_job(),
            Event::Key(key) => {
                if let Some(action) = keys::key_action(&key, &self.app) {
                    self.app.apply(action);
                    self.dirty = true;
                }
            }
            Event::Paste(text) => {
                self.app.apply(Action::Paste(text));
                self.dirty = true;
            }
            Event::Resize(..) => self.dirty = true,
            Event::Worker(event) => {
                // A run starting changes only its state line: the next tick shows it, so
                // it does not spend a frame that the first results will want.
                let started = matches!(event, WorkerEvent::Started { .. });
                self.corpus.embedded(&event);
                self.app.on_worker(event);
                self.dirty |= !started;
            }
            Event::Job(done) => {
                self.app.on_job(done);
                self.dirty = true;
            }
            Event::Heat(sample) => {
                self.dirty |= self.app.heat() != Some(&sample);
                self.app.set_heat(sample);
            }
            Event::TerminalError(e) => anyhow::bail!("cannot read the terminal: {e}"),
            Event::Signal(libc::SIGTSTP) => self.screen.suspend(),
            Event::Signal(libc::SIGCONT) => {
                self.screen.resume()?;
                self.dirty = true;
            }
            Event::Signal(sig) => return Ok(Some(Ended::Signal(sig))),
            Event::Unloaded(all_ended) => return self.end_with_switch(all_ended),
        }
        Ok(None)
    }
}

/// The corpus embeddings of earlier starts ([`crate::corpus_cache`]) between
/// the app and the scheduler: a cached embedding answers the app's request at
/// once, and a fresh one is stored for the next start.
struct CorpusCacheLink {
    cache: CorpusCache,
    /// The corpus last sent to a worker to embed, kept to store its result.
    asked: Option<(BackendSpec, Arc<Vec<Encoded>>)>,
    tx: UnboundedSender<Event>,
}

impl CorpusCacheLink {
    /// A cached embedding of the corpus answers the request at once (no
    /// corpus work at start-up); `false`: the worker must embed it.
    fn answer(&mut self, kind: &BackendSpec, corpus: &Arc<Vec<Encoded>>) -> bool {
        if let Some(embeddings) = self.cache.load(kind, corpus) {
            let event = WorkerEvent::CorpusEmbedded { kind: kind.clone(), outcome: Ok(embeddings), elapsed: Duration::ZERO };
            return self.tx.send(Event::Worker(event)).is_ok();
        }
        self.asked = Some((kind.clone(), Arc::clone(corpus)));
        false
    }

    /// A worker embedded the corpus: keep it for the next start.
    fn embedded(&self, event: &WorkerEvent) {
        if let WorkerEvent::CorpusEmbedded { kind, outcome: Ok(embeddings), elapsed } = event {
            if let Some((asked_kind, corpus)) = &self.asked {
                if asked_kind == kind && !elapsed.is_zero() {
                    self.cache.store(kind, corpus, embeddings);
                }
            }
        }
    }
}

/// A token bucket: bursts of a few frames (a key echo and the first results
/// show at once), on average at most [`FPS`].
struct FrameBudget {
    tokens: f64,
    last: Instant,
}

impl FrameBudget {
    const BURST: f64 = 3.0;

    fn new(now: Instant) -> FrameBudget {
        FrameBudget { tokens: Self::BURST, last: now }
    }

    fn refill(&mut self, now: Instant) {
        self.tokens = (self.tokens + now.saturating_duration_since(self.last).as_secs_f64() * FPS).min(Self::BURST);
        self.last = now;
    }

    fn try_take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// When the next frame may be drawn.
    fn next_at(&self) -> Instant {
        self.last + Duration::from_secs_f64((1.0 - self.tokens).max(0.0) / FPS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_in_short_bursts_then_at_most_30_a_second() {
        let t0 = Instant::now();
        let mut budget = FrameBudget::new(t0);
        assert!(budget.try_take(t0) && budget.try_take(t0) && budget.try_take(t0));
        assert!(!budget.try_take(t0), "the burst is spent");
        let next = budget.next_at();
        assert!(next > t0 && next <= t0 + Duration::from_millis(34), "{:?}", next - t0);
        assert!(budget.try_take(t0 + Duration::from_millis(34)));
        // Over one second of constant demand: about 30 frames.
        let mut drawn = 0;
        let mut t = t0 + Duration::from_millis(34);
        while t < t0 + Duration::from_millis(1034) {
            t += Duration::from_millis(1);
            if budget.try_take(t) {
                drawn += 1;
            }
        }
        assert!((29..=31).contains(&drawn), "{drawn} frames");
    }
}
