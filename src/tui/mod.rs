//! The live explorer: terminal set-up and teardown, and the event loop.
//!
//! Everything reaches the app as one [`Event`] on one channel: terminal input
//! (read by crossterm's `EventStream` on the tokio runtime), worker reports
//! (sent from the inference threads of [`crate::schedule`]) and app events
//! (the delegation coverage, read in the background; a profile's traced
//! run, made on a short-lived thread). Keys become
//! [`Action`]s; state changes only in [`App`]. The loop draws when something
//! changed, at most [`FPS`] frames a second, and sleeps while nothing does: no
//! timer runs while idle, only the debounce and, while work is in flight, a
//! [`TICK`] for elapsed times.
//!
//! Signals come in as events too: SIGTERM, SIGHUP, SIGQUIT and SIGINT restore
//! the terminal and end the explorer with 128 + the signal ([`Ended::Signal`]);
//! Ctrl-Z (a key in raw mode) and SIGTSTP restore it and stop the process, and
//! SIGCONT (`fg`) takes the terminal back and redraws everything ([`Screen`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::cursor::Show;
use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::terminal::{disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen};
use futures::StreamExt;
use ratatui::DefaultTerminal;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use crate::app::{self, Action, App, AppConfig, CoverageView, LayersRequest, ProfileRequest, Tokenize};
use crate::backend::{self, BackendSpec};
use crate::model::{ModelDir, TextTokenizer};
use crate::task::TaskContext;
use crate::profile::ProfileReport;
use crate::schedule::{Loader, Request, Scheduler, Sink, WorkerEvent, WORKER_THREAD_PREFIX};
use crate::ui;

/// Most frames drawn per second while work is in flight.
pub const FPS: f64 = 30.0;
/// How often elapsed times are redrawn while something loads or runs.
pub const TICK: Duration = Duration::from_millis(100);
/// Traced runs a profile (F4) averages, after its warm-up run.
pub const PROFILE_RUNS: u32 = 3;
/// How often the status bar's temperature, clock and throttling are read.
pub const HEAT_EVERY: Duration = Duration::from_secs(2);
/// Environment variable naming a file to write a timing trace to (keys, runs, results, frames).
pub const TRACE_ENV: &str = "RUNLENS_TUI_TRACE";

/// What `runlens` with no subcommand opens.
#[derive(Clone, Debug)]
pub struct TuiOptions {
    pub models: ModelDir,
    /// The columns, in order.
    pub backends: Vec<BackendSpec>,
    /// Every backend of the directory and `--program` (F5 cycles a column through those of its column).
    pub catalog: Vec<BackendSpec>,
    /// How outputs are read (mask token, labels, top-k).
    pub ctx: TaskContext,
    /// The thread count already applied (shown in the status bar); `None`: all cores.
    pub threads: Option<usize>,
    /// Glyphs and colours (`--glyphs`, else from `TERM`).
    pub theme: ui::Theme,
}

/// Everything the event loop reacts to.
#[derive(Debug)]
pub enum Event {
    /// A timer: debounce due, elapsed times to redraw, or a frame that was held back.
    Tick,
    Key(KeyEvent),
    Paste(String),
    Resize(u16, u16),
    Worker(WorkerEvent),
    App(AppEvent),
    /// A signal from [`SIGNALS`] arrived (its number).
    Signal(i32),
}

/// The signals the explorer handles: the first four end it (terminal
/// restored, exit status 128 + the signal), SIGTSTP suspends it, SIGCONT
/// resumes it.
pub const SIGNALS: [i32; 6] = [libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGINT, libc::SIGTSTP, libc::SIGCONT];

/// How the explorer ended (when it did not fail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The user quit.
    Quit,
    /// A signal ended it; the process should exit with 128 + this number.
    Signal(i32),
}

impl Ended {
    /// The exit status for the process: 0, or 128 + the signal.
    pub fn exit_code(self) -> i32 {
        match self {
            Ended::Quit => 0,
            Ended::Signal(sig) => 128 + sig,
        }
    }
}

#[derive(Debug)]
pub enum AppEvent {
    /// The delegation coverage of a `.pte` was read.
    Coverage(BackendSpec, Result<CoverageView, String>),
    /// A profile's traced run finished (request id, report or error).
    Profile(u64, Result<ProfileReport, String>),
    /// A per-module measurement (F6) finished (request id, report or error).
    Layers(u64, Result<crate::layers::LayersReport, String>),
    /// A temperature / clock / throttling reading.
    Heat(crate::heat::HeatSample),
    /// Reading the terminal failed: the explorer ends with this error.
    TerminalError(String),
}

/// Run the explorer until the user quits or a signal ends it. Missing model
/// files are reported (naming `make models`) before the terminal is touched.
pub fn run(opts: TuiOptions) -> anyhow::Result<Ended> {
    anyhow::ensure!(
        !opts.backends.is_empty(),
        "no backend to run: pass --backends with one of {}",
        opts.catalog.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    let tokenizer = opts.models.load_tokenizer()?;
    for kind in opts.backends.iter().filter(|k| !k.given) {
        backend::files_present(kind, &opts.models)?;
    }
    let threads = opts.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let trace = Trace::from_env()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io() // the signal driver needs it
        .build()
        .context("cannot start the event loop")?;

    let mut screen = Screen::enter()?;
    quiet_background_panics();
    crate::ffi::set_abort_handler(restore_then_report_abort);
    let outcome = runtime.block_on(session(&mut screen, &opts, tokenizer, threads, trace));
    screen.leave();
    outcome
}

/// An ExecuTorch abort that runlens' probe could not foresee ends the process
/// (status 134): the terminal is restored first, so the report is readable.
fn restore_then_report_abort(report: &crate::ffi::AbortReport) {
    let _ = crossterm::execute!(std::io::stdout(), DisableBracketedPaste);
    ratatui::restore();
    backend::probe::report_abort(report);
}

/// The terminal while the explorer owns it: raw mode, the alternate screen,
/// bracketed paste, the cursor drawn by ratatui. Left on quit, on a signal and
/// for a suspend; taken back on resume.
pub struct Screen {
    terminal: DefaultTerminal,
    active: bool,
}

impl Screen {
    fn enter() -> anyhow::Result<Screen> {
        let terminal = ratatui::try_init().context("cannot set up the terminal (is this an interactive terminal?)")?;
        let _ = crossterm::execute!(std::io::stdout(), EnableBracketedPaste);
        Ok(Screen { terminal, active: true })
    }

    /// Give the terminal back as it was: raw mode off, main screen, cursor
    /// shown. Each step on its own (after a SIGHUP the terminal may be gone).
    fn leave(&mut self) {
        if !self.active {
            return;
        }
        self.active = false;
        let _ = disable_raw_mode();
        let _ = crossterm::execute!(std::io::stdout(), DisableBracketedPaste, LeaveAlternateScreen, Show);
    }

    /// Take the terminal again after a stop and make the next frame a full
    /// redraw. Raw mode is set afresh: the shell may have changed the modes
    /// while runlens was stopped.
    fn resume(&mut self) -> anyhow::Result<()> {
        let _ = disable_raw_mode();
        enable_raw_mode().context("cannot set the terminal to raw mode again")?;
        crossterm::execute!(std::io::stdout(), EnterAlternateScreen, EnableBracketedPaste).context("cannot take the terminal again")?;
        // `Terminal::clear` would ask the terminal for the cursor position, an answer that
        // the event reader takes; a resize to the current size clears without asking.
        let size = self.terminal.size().context("cannot read the terminal size")?;
        self.terminal.resize(ratatui::layout::Rect::new(0, 0, size.width, size.height)).context("cannot clear the terminal")?;
        self.active = true;
        Ok(())
    }

    /// Ctrl-Z or SIGTSTP: restore the terminal, then stop until `fg` (SIGCONT,
    /// which comes back as [`Event::Signal`] and calls [`Screen::resume`]).
    fn suspend(&mut self) {
        self.leave();
        // Nothing is drawn until the SIGCONT; if stopping fails, that resumes at once.
        if crate::ffi::process::stop_self().is_err() {
            let _ = self.resume();
        }
    }

    fn is_active(&self) -> bool {
        self.active
    }
}

/// Panics on worker threads are caught there and shown in their column; keep
/// the default hook (ratatui's, which restores the terminal) for all others.
/// Installed after `ratatui::init`, so it runs first.
fn quiet_background_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let background = std::thread::current().name().is_some_and(|n| n.starts_with(WORKER_THREAD_PREFIX));
        if !background {
            let _ = crossterm::execute!(std::io::stdout(), DisableBracketedPaste);
            previous(info);
        }
    }));
}

async fn session(
    screen: &mut Screen,
    opts: &TuiOptions,
    tokenizer: TextTokenizer,
    threads: usize,
    mut trace: Trace,
) -> anyhow::Result<Ended> {
    let (tx, rx) = mpsc::unbounded_channel();
    listen_for_signals(&tx)?;
    tokio::spawn(read_terminal(tx.clone()));

    let tokenize: Tokenize = Box::new(move |text| tokenizer.encode(text));
    let config = AppConfig {
        kinds: opts.backends.clone(),
        threads,
        model: opts.models.model_name().to_string(),
        task: opts.ctx.task,
        corpus: app::corpus_sentences(),
        variants: opts.catalog.iter().filter(|k| k.given || backend::files_present(k, &opts.models).is_ok()).cloned().collect(),
    };
    let app = App::new(config, tokenize, Instant::now());

    let dir = opts.models.clone();
    let loader: Loader = Arc::new(move |kind| backend::load(kind, &dir));
    let worker_tx = tx.clone();
    let sink: Sink = Arc::new(move |event| {
        let _ = worker_tx.send(Event::Worker(event));
    });
    let ctx = Arc::new(opts.ctx.clone());
    let mut scheduler = Scheduler::start(&opts.backends, ctx, loader, sink).context("cannot start the worker threads")?;
    spawn_coverage(&opts.backends, tx.clone());
    spawn_heat_sampler(tx.clone());
    let corpus_cache = crate::corpus_cache::CorpusCache::from_env(&opts.models);
    let background = Background { tx, corpus_cache, corpus_asked: Default::default(), models: opts.models.clone() };

    let outcome = event_loop(screen, app, opts.theme, &mut scheduler, &background, rx, &mut trace).await;
    trace.flush();
    outcome
}

/// Each of [`SIGNALS`] becomes an [`Event::Signal`]. From here on they no
/// longer have their default effect (ending or stopping the process): the
/// event loop restores the terminal first.
fn listen_for_signals(tx: &UnboundedSender<Event>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    for sig in SIGNALS {
        let mut stream = signal(SignalKind::from_raw(sig)).with_context(|| format!("cannot handle signal {sig}"))?;
        let tx = tx.clone();
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if tx.send(Event::Signal(sig)).is_err() {
                    return;
                }
            }
        });
    }
    Ok(())
}

/// Ctrl-Z: in raw mode the terminal sends it as a key instead of stopping the job.
fn is_suspend_key(key: &KeyEvent) -> bool {
    key.kind != KeyEventKind::Release && key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('z')
}

async fn read_terminal(tx: UnboundedSender<Event>) {
    let mut events = EventStream::new();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(crossterm::event::Event::Key(key)) => Event::Key(key),
            Ok(crossterm::event::Event::Paste(text)) => Event::Paste(text),
            Ok(crossterm::event::Event::Resize(w, h)) => Event::Resize(w, h),
            Ok(_) => continue,
            Err(e) => Event::App(AppEvent::TerminalError(e.to_string())),
        };
        let fatal = matches!(event, Event::App(AppEvent::TerminalError(_)));
        if tx.send(event).is_err() || fatal {
            return;
        }
    }
}

/// Read the temperature, clock and throttling every [`HEAT_EVERY`] on a
/// background thread (`vcgencmd` is a process start); ends with the explorer.
fn spawn_heat_sampler(tx: UnboundedSender<Event>) {
    let source = crate::heat::HeatSource::from_env();
    let body = move || loop {
        if tx.send(Event::App(AppEvent::Heat(source.sample()))).is_err() {
            return;
        }
        std::thread::sleep(HEAT_EVERY);
    };
    // Without the thread the status bar just shows no heat.
    let _ = std::thread::Builder::new().name(format!("{WORKER_THREAD_PREFIX}heat")).spawn(body);
}

/// Read each `.pte`'s delegation coverage on a background thread.
fn spawn_coverage(kinds: &[BackendSpec], tx: UnboundedSender<Event>) {
    let kinds: Vec<BackendSpec> = kinds.iter().filter(|k| k.pte_file().is_some()).cloned().collect();
    if kinds.is_empty() {
        return;
    }
    let body = move || {
        for kind in kinds {
            let coverage = std::panic::catch_unwind(|| read_coverage(&kind))
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the .pte reader panicked")))
                .map_err(|e| format!("{e:#}"));
            if tx.send(Event::App(AppEvent::Coverage(kind, coverage))).is_err() {
                return;
            }
        }
    };
    // Without the thread there is just no coverage panel; nothing else depends on it.
    let _ = std::thread::Builder::new().name(format!("{WORKER_THREAD_PREFIX}coverage")).spawn(body);
}

/// The delegation coverage of `kind`'s `.pte` as the TUI shows it, from runlens'
/// own reader (`crate::pte`): the `forward` plan (else the first). Runs on a
/// background thread.
fn read_coverage(kind: &BackendSpec) -> anyhow::Result<CoverageView> {
    let path = kind.pte_file().context("not an ExecuTorch path")?;
    let report = crate::pte::inspect_file(path).with_context(|| format!("cannot read {}", path.display()))?;
    let plan = report
        .plan("forward")
        .or_else(|| report.plans.first())
        .with_context(|| format!("{} has no execution plan", path.display()))?;
    Ok(CoverageView {
        coverage: plan.coverage,
        kernel_calls: plan.kernel_calls as usize,
        delegate_calls: plan.delegate_calls as usize,
        top_operators: plan.operators_by_count().into_iter().map(|(name, n)| (name.to_string(), n as usize)).collect(),
        file_bytes: report.size_bytes,
        strip: plan.partition.cells(usize::MAX),
        boundaries: plan.partition.boundaries as usize,
        breaks: plan.partition.breaks_by_count().into_iter().map(|(name, n)| (name.to_string(), n as usize)).collect(),
    })
}

/// Starts the traced runs of profiles (F4), each on its own short-lived thread.
/// Work the event loop starts off the UI thread besides inference: traced
/// profile runs and re-reading a `.pte`'s coverage; results come back as [`AppEvent`]s.
struct Background {
    tx: UnboundedSender<Event>,
    /// The corpus embeddings of earlier starts ([`crate::corpus_cache`]).
    corpus_cache: crate::corpus_cache::CorpusCache,
    /// The corpus last sent to a worker to embed, kept to store its result.
    corpus_asked: std::cell::RefCell<Option<(BackendSpec, Arc<Vec<crate::model::Encoded>>)>>,
    /// The model directory, for the layers view's own eager model.
    models: ModelDir,
}

impl Background {
    /// A cached embedding of the corpus answers the request at once (no
    /// corpus work at start-up); `false`: the worker must embed it.
    fn answer_corpus(&self, kind: &BackendSpec, corpus: &Arc<Vec<crate::model::Encoded>>) -> bool {
        if let Some(embeddings) = self.corpus_cache.load(kind, corpus) {
            let event = WorkerEvent::CorpusEmbedded { kind: kind.clone(), outcome: Ok(embeddings), elapsed: Duration::ZERO };
            return self.tx.send(Event::Worker(event)).is_ok();
        }
        *self.corpus_asked.borrow_mut() = Some((kind.clone(), Arc::clone(corpus)));
        false
    }

    /// A worker embedded the corpus: keep it for the next start.
    fn corpus_embedded(&self, event: &WorkerEvent) {
        if let WorkerEvent::CorpusEmbedded { kind, outcome: Ok(embeddings), elapsed } = event {
            let asked = self.corpus_asked.borrow();
            if let Some((asked_kind, corpus)) = asked.as_ref() {
                if asked_kind == kind && !elapsed.is_zero() {
                    self.corpus_cache.store(kind, corpus, embeddings);
                }
            }
        }
    }

    /// The delegation coverage of `kind`'s program (after F5 switched a column to it).
    fn read_coverage(&self, kind: &BackendSpec) {
        spawn_coverage(std::slice::from_ref(kind), self.tx.clone());
    }

    /// Loads the programs again with ExecuTorch's tracer (memory-mapped, so
    /// quick), runs them and sends the report back as an [`AppEvent::Profile`].
    /// Times the columns per module (eager on its own copy of the model, the
    /// programs traced; [`crate::layers::layers`]) and sends the report back
    /// as an [`AppEvent::Layers`].
    fn layers(&self, request: LayersRequest) {
        let (tx, id, models) = (self.tx.clone(), request.id, self.models.clone());
        let body = move || {
            let outcome = std::panic::catch_unwind(|| crate::layers::layers(&request.kinds, &models, &request.input, crate::layers::DEFAULT_RUNS))
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the per-module run panicked")))
                .map_err(|e| format!("{e:#}"));
            let _ = tx.send(Event::App(AppEvent::Layers(request.id, outcome)));
        };
        let spawned = std::thread::Builder::new().name(format!("{WORKER_THREAD_PREFIX}layers")).spawn(body);
        if let Err(e) = spawned {
            let _ = self.tx.send(Event::App(AppEvent::Layers(id, Err(format!("cannot start the per-module run: {e}")))));
        }
    }

    fn profile(&self, request: ProfileRequest) {
        let (tx, id) = (self.tx.clone(), request.id);
        let body = move || {
            let outcome = std::panic::catch_unwind(|| crate::profile::profile_backends(&request.kinds, &request.input, PROFILE_RUNS))
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the traced run panicked")))
                .map_err(|e| format!("{e:#}"));
            let _ = tx.send(Event::App(AppEvent::Profile(request.id, outcome)));
        };
        let spawned = std::thread::Builder::new().name(format!("{WORKER_THREAD_PREFIX}profile")).spawn(body);
        if let Err(e) = spawned {
            let _ = self.tx.send(Event::App(AppEvent::Profile(id, Err(format!("cannot start the traced run: {e}")))));
        }
    }
}

/// The key bindings. Plain characters are text, so commands use Ctrl or F keys;
/// `q` and `?` act as commands only while the input is empty.
pub fn key_action(key: &KeyEvent, app: &App) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    if ctrl && matches!(key.code, KeyCode::Char('c')) {
        return Some(Action::Quit);
    }
    if app.show_help() {
        // Any key closes the help.
        return Some(Action::CloseHelp);
    }
    if app.profile().is_some() && key.code == KeyCode::Esc {
        return Some(Action::CloseProfile);
    }
    if app.layers().is_some() && key.code == KeyCode::Esc {
        return Some(Action::CloseLayers);
    }
    let empty = app.input().is_empty();
    Some(match key.code {
        KeyCode::Char('u') if ctrl => Action::Clear,
        KeyCode::Char('s') if ctrl => Action::ToggleSerial,
        KeyCode::Char('r') if ctrl => Action::ToggleRepeat,
        KeyCode::Char('a') if ctrl => Action::Home,
        KeyCode::Char('e') if ctrl => Action::End,
        KeyCode::F(1) => Action::ToggleHelp,
        KeyCode::F(2) => Action::ToggleSerial,
        KeyCode::F(3) => Action::ToggleRepeat,
        KeyCode::F(4) => Action::ToggleProfile,
        KeyCode::F(5) => Action::NextVariant,
        KeyCode::F(6) => Action::ToggleLayers,
        KeyCode::Esc => Action::Quit,
        KeyCode::Char('q') if empty && !ctrl && !alt => Action::Quit,
        KeyCode::Char('?') if empty && !ctrl && !alt => Action::ToggleHelp,
        KeyCode::Char(c) if !ctrl && !alt => Action::Insert(c),
        KeyCode::Enter => Action::RunNow,
        KeyCode::Backspace => Action::Backspace,
        KeyCode::Delete => Action::Delete,
        KeyCode::Left => Action::Left,
        KeyCode::Right => Action::Right,
        KeyCode::Home => Action::Home,
        KeyCode::End => Action::End,
        _ => return None,
    })
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

async fn event_loop(
    screen: &mut Screen,
    mut app: App,
    theme: ui::Theme,
    scheduler: &mut Scheduler,
    background: &Background,
    mut rx: UnboundedReceiver<Event>,
    trace: &mut Trace,
) -> anyhow::Result<Ended> {
    let mut frames = FrameBudget::new(Instant::now());
    let mut dirty = true;
    let mut last_tick = Instant::now();
    loop {
        let now = Instant::now();
        app.set_now(now);
        for request in app.drain_requests() {
            match &request {
                Request::Run(job) => trace.line(format_args!("run gen={} tokens={}", job.generation, job.input.len())),
                // The column of the new variant shows that program's delegation coverage.
                Request::Switch { to, .. } => background.read_coverage(to),
                Request::EmbedCorpus(kind, corpus) if background.answer_corpus(kind, corpus) => continue,
                _ => {}
            }
            scheduler.handle(request);
        }
        if let Some(request) = app.take_profile_request() {
            trace.line(format_args!("profile id={} tokens={}", request.id, request.input.len()));
            background.profile(request);
        }
        if let Some(request) = app.take_layers_request() {
            trace.line(format_args!("layers id={} tokens={}", request.id, request.input.len()));
            background.layers(request);
        }
        if app.should_quit() {
            return Ok(Ended::Quit);
        }
        // While suspended (between Ctrl-Z and the stop taking effect) nothing is drawn.
        if dirty && screen.is_active() && frames.try_take(now) {
            screen.terminal.draw(|frame| ui::draw_with(frame, &app, &theme)).context("cannot draw")?;
            trace.line(format_args!("draw"));
            dirty = false;
            last_tick = now; // this frame shows the elapsed times as of now
        }

        let tick_at = app.is_busy().then_some(last_tick + TICK);
        let frame_at = dirty.then(|| frames.next_at());
        let deadline = [app.next_deadline(), tick_at, frame_at].into_iter().flatten().min();
        let first = tokio::select! {
            event = rx.recv() => match event {
                Some(event) => event,
                None => return Ok(Ended::Quit),
            },
            _ = tokio::time::sleep_until(deadline.unwrap_or(now).into()), if deadline.is_some() => Event::Tick,
        };
        app.set_now(Instant::now());
        // Take everything already waiting before drawing again (repeat mode sends many results).
        let mut next = Some(first);
        let mut handled = 0;
        while let Some(event) = next.take() {
            match event {
                Event::Tick => {
                    dirty |= app.tick();
                    if app.is_busy() && app.now() >= last_tick + TICK {
                        last_tick = app.now();
                        dirty = true;
                    }
                }
                Event::Key(key) if is_suspend_key(&key) => {
                    trace.line(format_args!("suspend"));
                    // Restore first, then stop the job as the terminal would (the SIGTSTP
                    // comes back to runlens as an event and stops it).
                    screen.leave();
                    if crate::ffi::process::suspend_process_group().is_err() {
                        screen.suspend();
                    }
                }
                Event::Key(key) => {
                    trace.line(format_args!("key {:?}", key.code));
                    if let Some(action) = key_action(&key, &app) {
                        app.apply(action);
                        dirty = true;
                    }
                }
                Event::Paste(text) => {
                    app.apply(Action::Paste(text));
                    dirty = true;
                }
                Event::Resize(..) => dirty = true,
                Event::Worker(event) => {
                    match &event {
                        WorkerEvent::Loaded { kind, load_time, .. } => trace.line(format_args!("loaded {kind} load_us={}", load_time.as_micros())),
                        WorkerEvent::LoadFailed { kind, .. } => trace.line(format_args!("load failed {kind}")),
                        WorkerEvent::CorpusEmbedded { kind, elapsed, .. } => trace.line(format_args!("corpus {kind} run_us={}", elapsed.as_micros())),
                        _ => {}
                    }
                    if let WorkerEvent::Started { kind, generation, at } = &event {
                        let since = trace.since(*at);
                        trace.line(format_args!("started {kind} gen={generation} at_us={since}"));
                    }
                    if let WorkerEvent::Finished { kind, generation, elapsed, .. } = &event {
                        trace.line(format_args!(
                            "result {kind} gen={generation} run_us={} current={}",
                            elapsed.as_micros(),
                            *generation == app.generation()
                        ));
                    }
                    // A run starting changes only its state line: the next tick shows it, so
                    // it does not spend a frame that the first results will want.
                    let started = matches!(event, WorkerEvent::Started { .. });
                    background.corpus_embedded(&event);
                    app.on_worker(event);
                    dirty |= !started;
                }
                Event::App(AppEvent::Coverage(kind, coverage)) => {
                    app.set_coverage(&kind, coverage);
                    dirty = true;
                }
                Event::App(AppEvent::Heat(sample)) => {
                    dirty |= app.heat() != Some(&sample);
                    app.set_heat(sample);
                }
                Event::App(AppEvent::Profile(id, outcome)) => {
                    trace.line(format_args!("profile done id={id} ok={}", outcome.is_ok()));
                    app.on_profile(id, outcome);
                    dirty = true;
                }
                Event::App(AppEvent::Layers(id, outcome)) => {
                    trace.line(format_args!("layers done id={id} ok={}", outcome.is_ok()));
                    app.on_layers(id, outcome);
                    dirty = true;
                }
                Event::App(AppEvent::TerminalError(e)) => anyhow::bail!("cannot read the terminal: {e}"),
                Event::Signal(sig) if sig == libc::SIGTSTP => {
                    trace.line(format_args!("signal {sig}: suspend"));
                    screen.suspend();
                }
                Event::Signal(sig) if sig == libc::SIGCONT => {
                    trace.line(format_args!("signal {sig}: resume"));
                    screen.resume()?;
                    dirty = true;
                }
                Event::Signal(sig) => {
                    trace.line(format_args!("signal {sig}: end"));
                    return Ok(Ended::Signal(sig));
                }
            }
            handled += 1;
            if handled < 512 {
                next = rx.try_recv().ok();
            }
        }
        // A tick after a key: the debounce may already be due.
        dirty |= app.tick();
    }
}

/// An optional timing trace (`RUNLENS_TUI_TRACE=FILE`): one line per key, run
/// request, result and frame, microseconds since start. For measuring the time
/// from a keystroke to the result on screen; off unless asked for.
struct Trace {
    out: Option<BufWriter<File>>,
    start: Instant,
}

impl Trace {
    fn from_env() -> anyhow::Result<Trace> {
        let out = match std::env::var_os(TRACE_ENV) {
            Some(path) if !path.is_empty() => {
                let path = PathBuf::from(path);
                let file = File::create(&path).with_context(|| format!("cannot create the trace file {} ({TRACE_ENV})", path.display()))?;
                Some(BufWriter::new(file))
            }
            _ => None,
        };
        Ok(Trace { out, start: Instant::now() })
    }

    fn line(&mut self, what: std::fmt::Arguments) {
        if let Some(out) = &mut self.out {
            let _ = writeln!(out, "{} {what}", self.start.elapsed().as_micros());
        }
    }

    /// Microseconds from the start of the trace to `at`.
    fn since(&self, at: Instant) -> u128 {
        at.saturating_duration_since(self.start).as_micros()
    }

    fn flush(&mut self) {
        if let Some(out) = &mut self.out {
            let _ = out.flush();
        }
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

    #[test]
    fn keys_map_to_actions_and_letters_are_text() {
        let config = AppConfig {
            kinds: vec![crate::backend::named("xnnpack")],
            threads: 1,
            model: "m".into(),
            task: crate::task::Task::FeatureExtraction,
            corpus: vec![],
            variants: vec![],
        };
        let mut app = App::new(config, Box::new(|t: &str| anyhow::bail!("no tokenizer for {t}")), Instant::now());
        let key = |code, modifiers| KeyEvent::new(code, modifiers);
        let none = KeyModifiers::NONE;
        let ctrl = KeyModifiers::CONTROL;
        assert_eq!(key_action(&key(KeyCode::Char('q'), none), &app), Some(Action::Quit));
        assert_eq!(key_action(&key(KeyCode::Char('?'), none), &app), Some(Action::ToggleHelp));
        app.apply(Action::Insert('a'));
        assert_eq!(key_action(&key(KeyCode::Char('q'), none), &app), Some(Action::Insert('q')), "q is text once there is text");
        assert_eq!(key_action(&key(KeyCode::Char('?'), none), &app), Some(Action::Insert('?')));
        assert_eq!(key_action(&key(KeyCode::Esc, none), &app), Some(Action::Quit));
        assert_eq!(key_action(&key(KeyCode::Char('c'), ctrl), &app), Some(Action::Quit));
        assert_eq!(key_action(&key(KeyCode::Char('s'), ctrl), &app), Some(Action::ToggleSerial));
        assert_eq!(key_action(&key(KeyCode::F(3), none), &app), Some(Action::ToggleRepeat));
        assert_eq!(key_action(&key(KeyCode::Char('u'), ctrl), &app), Some(Action::Clear));
        assert_eq!(key_action(&key(KeyCode::Enter, none), &app), Some(Action::RunNow));
        assert_eq!(key_action(&key(KeyCode::F(4), none), &app), Some(Action::ToggleProfile));
        app.apply(Action::ToggleProfile);
        assert_eq!(key_action(&key(KeyCode::Esc, none), &app), Some(Action::CloseProfile), "Esc closes the profile first");
        assert_eq!(key_action(&key(KeyCode::F(4), none), &app), Some(Action::ToggleProfile));
        assert_eq!(key_action(&key(KeyCode::Char('x'), none), &app), Some(Action::Insert('x')), "typing goes on under the profile");
        app.apply(Action::CloseProfile);
        app.apply(Action::ToggleHelp);
        assert_eq!(key_action(&key(KeyCode::Esc, none), &app), Some(Action::CloseHelp), "Esc closes the help first");
        assert_eq!(key_action(&key(KeyCode::Char('x'), none), &app), Some(Action::CloseHelp));
        assert_eq!(key_action(&key(KeyCode::Char('c'), ctrl), &app), Some(Action::Quit));
    }
}
