//! The explorer's state and every change to it. Knows nothing about terminals:
//! the event loop ([`crate::tui`]) turns keys into [`Action`]s and worker
//! reports into [`App::on_worker`]; what the app wants done in the background
//! is queued as [`Request`]s that the loop hands to the scheduler. Drawing
//! ([`crate::ui`]) reads an `&App` only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::BackendKind;
use crate::model::{Embedding, Encoded, Parity};
use crate::profile::ProfileReport;
use crate::schedule::{Job, Request, WorkerEvent};
use crate::stats::LatencyStats;

/// How long typing must pause before the text runs (Enter runs at once).
pub const DEBOUNCE: Duration = Duration::from_millis(120);

/// The model every backend runs.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// The sentences the nearest-sentence lookup picks from (`assets/corpus.txt`, one a line).
pub const CORPUS: &str = include_str!("../assets/corpus.txt");

/// The corpus as a list: blank lines and `#` comments left out.
pub fn corpus_sentences() -> Vec<String> {
    CORPUS.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect()
}

/// Text to model input (the real tokenizer, or a fake in tests).
pub type Tokenize = Box<dyn Fn(&str) -> anyhow::Result<Encoded> + Send>;

/// What the app is started with.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// The columns, in order.
    pub kinds: Vec<BackendKind>,
    /// Threads of libtorch and ExecuTorch's pool (shown only; set before start).
    pub threads: usize,
    pub model: String,
    pub corpus: Vec<String>,
    /// The XNNPACK programs present in the models directory, which F5 cycles
    /// the XNNPACK column through (in [`BackendKind::XNNPACK_VARIANTS`] order).
    pub xnnpack_variants: Vec<BackendKind>,
}

/// Everything the user can ask for; keys map to these in [`crate::tui`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Insert(char),
    Paste(String),
    Backspace,
    Delete,
    Left,
    Right,
    Home,
    End,
    /// Ctrl-U: clear the input line.
    Clear,
    /// Enter: run the current text now.
    RunNow,
    ToggleHelp,
    CloseHelp,
    ToggleSerial,
    ToggleRepeat,
    /// F5: show the next XNNPACK export variant in the XNNPACK column.
    NextVariant,
    /// F4: open (and start) or close the per-operator profile of the current text.
    ToggleProfile,
    CloseProfile,
    Quit,
}

/// The input line: text and a cursor counted in characters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputLine {
    text: String,
    cursor: usize,
}

impl InputLine {
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The cursor as a character index (0 = before the first character).
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    fn byte_at(&self, chars: usize) -> usize {
        self.text.char_indices().nth(chars).map_or(self.text.len(), |(i, _)| i)
    }

    fn len(&self) -> usize {
        self.text.chars().count()
    }

    pub fn insert(&mut self, c: char) {
        let at = self.byte_at(self.cursor);
        self.text.insert(at, c);
        self.cursor += 1;
    }

    /// Insert pasted text: line breaks and tabs become spaces, other control characters are dropped.
    pub fn insert_str(&mut self, s: &str) {
        let clean: String = s
            .chars()
            .filter_map(|c| match c {
                '\r' | '\n' | '\t' => Some(' '),
                c if c.is_control() => None,
                c => Some(c),
            })
            .collect();
        let at = self.byte_at(self.cursor);
        self.text.insert_str(at, &clean);
        self.cursor += clean.chars().count();
    }

    pub fn backspace(&mut self) -> bool {
        if self.cursor == 0 {
            return false;
        }
        self.cursor -= 1;
        let at = self.byte_at(self.cursor);
        self.text.remove(at);
        true
    }

    pub fn delete(&mut self) -> bool {
        if self.cursor >= self.len() {
            return false;
        }
        let at = self.byte_at(self.cursor);
        self.text.remove(at);
        true
    }

    pub fn left(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub fn right(&mut self) {
        self.cursor = (self.cursor + 1).min(self.len());
    }

    pub fn home(&mut self) {
        self.cursor = 0;
    }

    pub fn end(&mut self) {
        self.cursor = self.len();
    }

    pub fn clear(&mut self) -> bool {
        let had = !self.text.is_empty();
        self.text.clear();
        self.cursor = 0;
        had
    }
}

/// Delegation coverage of one `.pte`, as the TUI shows it. Filled from the
/// `inspect` library's report by [`crate::tui`] (see `read_coverage` there).
#[derive(Clone, Debug, PartialEq)]
pub struct CoverageView {
    /// Share of the program's work handed to the delegate, 0..=1.
    pub coverage: f64,
    /// Instructions that call a kernel of the default CPU library.
    pub kernel_calls: usize,
    /// Instructions that call a delegate (XNNPACK subgraphs).
    pub delegate_calls: usize,
    /// Operators left on the default kernels, most calls first.
    pub top_operators: Vec<(String, usize)>,
    pub file_bytes: u64,
}

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
    pub kinds: Vec<BackendKind>,
}

/// Where a backend's loading stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    Loading,
    Ready,
    Failed(String),
}

/// The corpus sentence closest to an embedding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Nearest {
    pub index: usize,
    pub cosine: f64,
}

/// A finished run, kept as the column's output.
#[derive(Clone, Debug)]
pub struct Output {
    pub generation: u64,
    pub input: Arc<Encoded>,
    pub embedding: Embedding,
    pub norm: f64,
    pub elapsed: Duration,
    pub nearest: Option<Nearest>,
}

/// One backend's column.
#[derive(Clone, Debug)]
pub struct Column {
    pub kind: BackendKind,
    pub phase: Phase,
    pub description: Option<String>,
    pub load_time: Option<Duration>,
    /// Generation of the input handed to the worker and not started yet.
    pub pending: Option<u64>,
    /// Generation and start of the run in progress.
    pub running: Option<(u64, Instant)>,
    pub output: Option<Output>,
    /// The latest run of the current text failed: generation and message.
    pub run_error: Option<(u64, String)>,
    pub stats: LatencyStats,
    /// Results that came back for text no longer current (not shown, not counted).
    pub stale_dropped: u64,
    /// For `.pte` paths: `None` while being read.
    pub coverage: Option<Result<CoverageView, String>>,
}

impl Column {
    /// A column whose backend has just started loading.
    pub fn loading(kind: BackendKind) -> Column {
        Column {
            kind,
            phase: Phase::Loading,
            description: None,
            load_time: None,
            pending: None,
            running: None,
            output: None,
            run_error: None,
            stats: LatencyStats::default(),
            stale_dropped: 0,
            coverage: None,
        }
    }
}

/// What a column's state line says.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnState<'a> {
    Loading(Duration),
    Failed(&'a str),
    Running { elapsed: Duration, stale: bool },
    Queued,
    Idle,
}

/// How a column compares with the reference column (eager, else the first).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParityView {
    /// This column is the reference.
    Reference,
    /// Both outputs are for the same input.
    Value(Parity),
    /// The outputs are for different inputs (one is still running).
    Waiting,
    /// No output to compare (yet).
    Unavailable,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CorpusState {
    /// Being embedded by this backend.
    Embedding(BackendKind),
    Ready { kind: BackendKind, elapsed: Duration },
    Failed(String),
    Empty,
}

/// The nearest-sentence corpus, embedded once and shared by all columns.
#[derive(Clone, Debug)]
pub struct Corpus {
    pub sentences: Vec<String>,
    encoded: Arc<Vec<Encoded>>,
    /// In the order of `sentences` once ready.
    pub embeddings: Vec<Embedding>,
    pub state: CorpusState,
    tried: Vec<BackendKind>,
}

impl Corpus {
    /// The sentence nearest to `embedding` by cosine; `None` until the corpus is embedded.
    pub fn nearest(&self, embedding: &Embedding) -> Option<Nearest> {
        self.embeddings
            .iter()
            .enumerate()
            .map(|(index, e)| Nearest { index, cosine: embedding.cosine(e) })
            .max_by(|a, b| a.cosine.total_cmp(&b.cosine))
    }
}

/// The order in which backends are asked to embed the corpus: fastest first
/// among those that match eager (int8 is an approximation: last).
const CORPUS_PREFERENCE: [BackendKind; 5] = [
    BackendKind::Xnnpack,
    BackendKind::Eager,
    BackendKind::XnnpackStatic,
    BackendKind::XnnpackInt8,
    BackendKind::Portable,
];

pub struct App {
    now: Instant,
    /// When the backends began loading.
    started: Instant,
    input: InputLine,
    encoded: Option<Arc<Encoded>>,
    encode_error: Option<String>,
    generation: u64,
    run_due: Option<Instant>,
    columns: Vec<Column>,
    corpus: Corpus,
    serial: bool,
    repeat: bool,
    threads: usize,
    model: String,
    show_help: bool,
    profile: Option<ProfileView>,
    profile_requests: u64,
    profile_request: Option<ProfileRequest>,
    quit: bool,
    requests: Vec<Request>,
    tokenize: Tokenize,
    xnnpack_variants: Vec<BackendKind>,
    /// The latest temperature / clock / throttling reading (status bar).
    heat: Option<crate::heat::HeatSample>,
}

impl App {
    /// A new explorer: every column loading; the corpus is queued for the fastest backend.
    pub fn new(config: AppConfig, tokenize: Tokenize, now: Instant) -> App {
        let columns = config.kinds.iter().map(|&kind| Column::loading(kind)).collect();
        // Corpus sentences the tokenizer rejects are left out (they would never match anyway).
        let (sentences, encoded): (Vec<String>, Vec<Encoded>) =
            config.corpus.into_iter().filter_map(|s| tokenize(&s).ok().map(|e| (s, e))).unzip();
        let corpus = Corpus {
            state: if sentences.is_empty() { CorpusState::Empty } else { CorpusState::Failed(String::new()) },
            sentences,
            encoded: Arc::new(encoded),
            embeddings: Vec::new(),
            tried: Vec::new(),
        };
        let mut app = App {
            now,
            started: now,
            input: InputLine::default(),
            encoded: None,
            encode_error: None,
            generation: 0,
            run_due: None,
            columns,
            corpus,
            serial: false,
            repeat: false,
            threads: config.threads,
            model: config.model,
            show_help: false,
            profile: None,
            profile_requests: 0,
            profile_request: None,
            quit: false,
            requests: Vec::new(),
            tokenize,
            xnnpack_variants: config.xnnpack_variants,
            heat: None,
        };
        if app.corpus.state != CorpusState::Empty {
            app.assign_corpus();
        }
        app
    }

    // ---- reading (for drawing and for the event loop) ----

    pub fn now(&self) -> Instant {
        self.now
    }

    /// The latest heat reading; `None` before the first.
    pub fn heat(&self) -> Option<&crate::heat::HeatSample> {
        self.heat.as_ref()
    }

    /// A new heat reading (the event loop samples every [`crate::tui::HEAT_EVERY`]).
    pub fn set_heat(&mut self, sample: crate::heat::HeatSample) {
        self.heat = Some(sample);
    }
    pub fn input(&self) -> &InputLine {
        &self.input
    }
    pub fn encoded(&self) -> Option<&Encoded> {
        self.encoded.as_deref()
    }
    pub fn encode_error(&self) -> Option<&str> {
        self.encode_error.as_deref()
    }
    /// Bumped on every change of the text; results carry the generation they were run for.
    pub fn generation(&self) -> u64 {
        self.generation
    }
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }
    pub fn column(&self, kind: BackendKind) -> Option<&Column> {
        self.columns.iter().find(|c| c.kind == kind)
    }
    pub fn corpus(&self) -> &Corpus {
        &self.corpus
    }
    pub fn is_serial(&self) -> bool {
        self.serial
    }
    pub fn is_repeat(&self) -> bool {
        self.repeat
    }
    pub fn threads(&self) -> usize {
        self.threads
    }
    pub fn model(&self) -> &str {
        &self.model
    }
    pub fn show_help(&self) -> bool {
        self.show_help
    }
    pub fn should_quit(&self) -> bool {
        self.quit
    }
    /// Can F5 switch the XNNPACK column to another variant?
    pub fn can_switch_variant(&self) -> bool {
        self.columns.iter().any(|c| c.kind.is_xnnpack()) && self.next_variant().is_some()
    }
    /// The profile view, when shown.
    pub fn profile(&self) -> Option<&ProfileView> {
        self.profile.as_ref()
    }

    /// The column parity is measured against: eager when shown, else the first.
    pub fn reference(&self) -> Option<usize> {
        self.columns.iter().position(|c| c.kind == BackendKind::Eager).or((!self.columns.is_empty()).then_some(0))
    }

    /// Is the output of `column` for the text now in the input line?
    pub fn is_current(&self, output: &Output) -> bool {
        output.generation == self.generation
    }

    pub fn state(&self, index: usize) -> ColumnState<'_> {
        let c = &self.columns[index];
        match &c.phase {
            Phase::Loading => ColumnState::Loading(self.now.saturating_duration_since(self.started)),
            Phase::Failed(e) => ColumnState::Failed(e),
            Phase::Ready => match (c.running, c.pending) {
                (Some((generation, at)), _) => ColumnState::Running {
                    elapsed: self.now.saturating_duration_since(at),
                    stale: generation != self.generation,
                },
                (None, Some(_)) => ColumnState::Queued,
                (None, None) => ColumnState::Idle,
            },
        }
    }

    pub fn parity(&self, index: usize) -> ParityView {
        let Some(reference) = self.reference() else { return ParityView::Unavailable };
        if index == reference {
            return ParityView::Reference;
        }
        match (&self.columns[index].output, &self.columns[reference].output) {
            (Some(mine), Some(theirs)) if mine.generation == theirs.generation => {
                mine.embedding.parity(&theirs.embedding).map_or(ParityView::Unavailable, ParityView::Value)
            }
            (Some(_), Some(_)) => ParityView::Waiting,
            _ => ParityView::Unavailable,
        }
    }

    /// Work is in flight: loading, running, queued, or the corpus being embedded.
    pub fn is_busy(&self) -> bool {
        matches!(self.corpus.state, CorpusState::Embedding(_))
            || self.profile.as_ref().is_some_and(|p| matches!(p.state, ProfileState::Running { .. }))
            || self.columns.iter().any(|c| c.phase == Phase::Loading || c.running.is_some() || c.pending.is_some())
    }

    /// When [`Self::tick`] must be called next for a debounced run.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.run_due
    }

    /// The requests queued since the last call, for the scheduler.
    pub fn drain_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.requests)
    }

    /// The traced run asked for since the last call, for the event loop to start.
    pub fn take_profile_request(&mut self) -> Option<ProfileRequest> {
        self.profile_request.take()
    }

    // ---- changing ----

    /// Set the clock used for debounce and elapsed times.
    pub fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    /// Time passed: run the text if the debounce is over. `true` when something changed.
    pub fn tick(&mut self) -> bool {
        match self.run_due {
            Some(due) if due <= self.now => {
                self.submit();
                true
            }
            _ => false,
        }
    }

    pub fn apply(&mut self, action: Action) {
        let edited = match action {
            Action::Insert(c) => {
                self.input.insert(c);
                true
            }
            Action::Paste(s) => {
                self.input.insert_str(&s);
                !s.is_empty()
            }
            Action::Backspace => self.input.backspace(),
            Action::Delete => self.input.delete(),
            Action::Clear => self.input.clear(),
            Action::Left => {
                self.input.left();
                false
            }
            Action::Right => {
                self.input.right();
                false
            }
            Action::Home => {
                self.input.home();
                false
            }
            Action::End => {
                self.input.end();
                false
            }
            Action::RunNow => {
                self.submit();
                false
            }
            Action::ToggleHelp => {
                self.show_help = !self.show_help;
                false
            }
            Action::CloseHelp => {
                self.show_help = false;
                false
            }
            Action::ToggleSerial => {
                self.serial = !self.serial;
                self.requests.push(Request::SetSerial(self.serial));
                false
            }
            Action::ToggleRepeat => {
                self.repeat = !self.repeat;
                self.requests.push(Request::SetRepeat(self.repeat));
                if self.repeat && self.run_due.is_none() {
                    self.submit();
                }
                false
            }
            Action::NextVariant => {
                self.switch_variant();
                false
            }
            Action::ToggleProfile => {
                if self.profile.take().is_none() {
                    self.open_profile();
                }
                false
            }
            Action::CloseProfile => {
                self.profile = None;
                false
            }
            Action::Quit => {
                self.quit = true;
                false
            }
        };
        if edited {
            self.text_changed();
        }
    }

    fn text_changed(&mut self) {
        self.generation += 1;
        if self.columns.iter().any(|c| c.pending.is_some()) {
            // What waits is for the old text: drop it now rather than run it.
            self.requests.push(Request::Cancel);
            for c in &mut self.columns {
                c.pending = None;
            }
        }
        if self.input.text().trim().is_empty() {
            self.encoded = None;
            self.encode_error = None;
            self.run_due = None;
            return;
        }
        match (self.tokenize)(self.input.text()) {
            Ok(encoded) => {
                self.encoded = Some(Arc::new(encoded));
                self.encode_error = None;
                self.run_due = Some(self.now + DEBOUNCE);
            }
            Err(e) => {
                self.encoded = None;
                self.encode_error = Some(format!("{e:#}"));
                self.run_due = None;
            }
        }
    }

    /// Hand the current text to every backend that loaded or is loading.
    fn submit(&mut self) {
        self.run_due = None;
        let Some(input) = self.encoded.clone() else { return };
        let generation = self.generation;
        for c in &mut self.columns {
            if !matches!(c.phase, Phase::Failed(_)) {
                c.pending = Some(generation);
            }
        }
        self.requests.push(Request::Run(Job { generation, input }));
    }

    /// The XNNPACK column and the variant F5 would show in it: the next one
    /// present in the models directory and not already shown in another column.
    fn next_variant(&self) -> Option<(usize, BackendKind)> {
        let index = self.columns.iter().position(|c| c.kind.is_xnnpack())?;
        let from = self.columns[index].kind;
        let mut to = from.next_xnnpack_variant();
        while to != from {
            if self.xnnpack_variants.contains(&to) && self.index_of(to).is_none() {
                return Some((index, to));
            }
            to = to.next_xnnpack_variant();
        }
        None
    }

    /// F5: the XNNPACK column starts over with the next variant: it loads, its
    /// latency history starts empty (another program, other numbers), and the
    /// current text runs on it once it has loaded.
    fn switch_variant(&mut self) {
        let Some((index, to)) = self.next_variant() else { return };
        let from = self.columns[index].kind;
        self.columns[index] = Column::loading(to);
        let job = self.encoded.clone().map(|input| Job { generation: self.generation, input });
        if let Some(job) = &job {
            self.columns[index].pending = Some(job.generation);
        }
        self.requests.push(Request::Switch { from, to, job });
        if self.corpus.state == CorpusState::Embedding(from) {
            // The old worker is closed before it could finish the corpus.
            self.assign_corpus();
        }
    }

    fn index_of(&self, kind: BackendKind) -> Option<usize> {
        self.columns.iter().position(|c| c.kind == kind)
    }

    /// A worker reported. Results for text that is no longer current are dropped.
    pub fn on_worker(&mut self, event: WorkerEvent) {
        let Some(index) = self.index_of(event.kind()) else { return };
        let current = self.generation;
        match event {
            WorkerEvent::Loaded { description, load_time, .. } => {
                let c = &mut self.columns[index];
                c.phase = Phase::Ready;
                c.description = Some(description);
                c.load_time = Some(load_time);
            }
            WorkerEvent::LoadFailed { kind, error } => {
                let c = &mut self.columns[index];
                c.phase = Phase::Failed(error);
                c.pending = None;
                if self.corpus.state == CorpusState::Embedding(kind) {
                    self.assign_corpus();
                }
            }
            WorkerEvent::Started { generation, at, .. } => {
                let c = &mut self.columns[index];
                c.running = Some((generation, at));
                if c.pending.is_some_and(|p| p <= generation) {
                    c.pending = None;
                }
            }
            WorkerEvent::Finished { generation, input, outcome, elapsed, .. } => {
                let c = &self.columns[index];
                let nearest = match (&outcome, &c.output) {
                    // Repeat mode brings the same output hundreds of times a second: reuse the lookup.
                    (Ok(embedding), Some(previous)) if previous.embedding == *embedding && previous.nearest.is_some() => previous.nearest,
                    (Ok(embedding), _) if generation == current => self.corpus.nearest(embedding),
                    _ => None,
                };
                let c = &mut self.columns[index];
                if c.running.is_some_and(|(g, _)| g == generation) {
                    c.running = None;
                }
                if generation != current {
                    c.stale_dropped += 1;
                    return;
                }
                match outcome {
                    Ok(embedding) => {
                        c.stats.record(elapsed);
                        c.run_error = None;
                        c.output = Some(Output { generation, input, norm: embedding.norm(), embedding, elapsed, nearest });
                    }
                    Err(message) => c.run_error = Some((generation, message)),
                }
            }
            WorkerEvent::CorpusEmbedded { kind, outcome, elapsed } => match outcome {
                Ok(embeddings) if embeddings.len() == self.corpus.sentences.len() => {
                    self.corpus.embeddings = embeddings;
                    self.corpus.state = CorpusState::Ready { kind, elapsed };
                    for i in 0..self.columns.len() {
                        if let Some(output) = &self.columns[i].output {
                            let nearest = self.corpus.nearest(&output.embedding);
                            if let Some(o) = self.columns[i].output.as_mut() {
                                o.nearest = nearest;
                            }
                        }
                    }
                }
                Ok(_) | Err(_) => self.assign_corpus(),
            },
        }
    }

    /// Show the profile view and ask for a traced run of the current text.
    fn open_profile(&mut self) {
        self.profile_requests += 1;
        let id = self.profile_requests;
        let text = self.input.text().to_string();
        let kinds: Vec<BackendKind> = self
            .columns
            .iter()
            .filter(|c| c.kind.pte_file().is_some() && !matches!(c.phase, Phase::Failed(_)))
            .map(|c| c.kind)
            .collect();
        let state = match (&self.encoded, kinds.is_empty()) {
            (None, _) => ProfileState::Failed("type a sentence first: F4 profiles the text in the input line".to_string()),
            (Some(_), true) => ProfileState::Failed("no ExecuTorch column to profile".to_string()),
            (Some(input), false) => {
                self.profile_request = Some(ProfileRequest { id, input: input.clone(), kinds });
                ProfileState::Running { since: self.now }
            }
        };
        self.profile = Some(ProfileView { id, text, state });
    }

    /// A traced run finished; dropped unless its view is still shown.
    pub fn on_profile(&mut self, id: u64, outcome: Result<ProfileReport, String>) {
        if let Some(view) = self.profile.as_mut().filter(|v| v.id == id) {
            view.state = match outcome {
                Ok(report) => ProfileState::Ready(report),
                Err(message) => ProfileState::Failed(message),
            };
        }
    }

    /// The delegation coverage of a `.pte` column was read (or could not be).
    pub fn set_coverage(&mut self, kind: BackendKind, coverage: Result<CoverageView, String>) {
        if let Some(i) = self.index_of(kind) {
            self.columns[i].coverage = Some(coverage);
        }
    }

    /// Ask the fastest backend not tried yet (and not failed) to embed the corpus.
    fn assign_corpus(&mut self) {
        let next = CORPUS_PREFERENCE.into_iter().find(|&kind| {
            !self.corpus.tried.contains(&kind)
                && self.columns.iter().any(|c| c.kind == kind && !matches!(c.phase, Phase::Failed(_)))
        });
        match next {
            Some(kind) => {
                self.corpus.tried.push(kind);
                self.corpus.state = CorpusState::Embedding(kind);
                self.requests.push(Request::EmbedCorpus(kind, self.corpus.encoded.clone()));
            }
            None => self.corpus.state = CorpusState::Failed("no backend could embed the corpus".to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_encode(text: &str) -> anyhow::Result<Encoded> {
        anyhow::ensure!(!text.trim().is_empty(), "the text is empty");
        let words: Vec<&str> = text.split_whitespace().collect();
        let mut ids = vec![101];
        ids.extend(words.iter().map(|w| w.len() as i64 + 1000));
        ids.push(102);
        let mut tokens = vec!["[CLS]".to_string()];
        tokens.extend(words.iter().map(|w| w.to_string()));
        tokens.push("[SEP]".to_string());
        Ok(Encoded { text: text.to_string(), attention_mask: vec![1; ids.len()], tokens, ids, truncated: false })
    }

    fn app(kinds: &[BackendKind]) -> (App, Instant) {
        let t0 = Instant::now();
        let config = AppConfig {
            kinds: kinds.to_vec(),
            threads: 2,
            model: "m".into(),
            corpus: vec!["one two".into()],
            xnnpack_variants: BackendKind::XNNPACK_VARIANTS.to_vec(),
        };
        (App::new(config, Box::new(fake_encode), t0), t0)
    }

    fn runs(requests: &[Request]) -> Vec<(u64, String)> {
        requests
            .iter()
            .filter_map(|r| match r {
                Request::Run(job) => Some((job.generation, job.input.text.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_input_line_edits_anywhere_in_unicode_text() {
        let mut line = InputLine::default();
        for c in "héllo".chars() {
            line.insert(c);
        }
        line.home();
        line.right();
        line.delete();
        assert_eq!(line.text(), "hllo");
        line.insert('é');
        line.end();
        line.backspace();
        line.left();
        line.insert_str("\tx\ny\u{7}");
        assert_eq!((line.text(), line.cursor()), ("hél x yl", 7));
        line.right();
        line.right();
        assert_eq!(line.cursor(), 8, "the cursor stops at the end");
        assert!(line.clear() && line.text().is_empty() && line.cursor() == 0 && !line.backspace());
    }

    #[test]
    fn typing_runs_after_the_debounce_and_enter_at_once() {
        let (mut app, t0) = app(&[BackendKind::Eager, BackendKind::Xnnpack]);
        assert!(matches!(app.drain_requests()[..], [Request::EmbedCorpus(BackendKind::Xnnpack, _)]));
        for c in "a cat".chars() {
            app.apply(Action::Insert(c));
        }
        assert!(runs(&app.drain_requests()).is_empty(), "nothing runs while typing");
        assert_eq!(app.next_deadline(), Some(t0 + DEBOUNCE));
        app.set_now(t0 + DEBOUNCE / 2);
        assert!(!app.tick());
        app.set_now(t0 + DEBOUNCE);
        assert!(app.tick());
        assert_eq!(runs(&app.drain_requests()), vec![(5, "a cat".to_string())]);
        assert_eq!(app.next_deadline(), None);
        assert!(app.columns().iter().all(|c| c.pending == Some(5)));

        app.apply(Action::Insert('s'));
        let requests = app.drain_requests();
        assert!(matches!(requests[..], [Request::Cancel]), "what waited for the old text is dropped");
        app.apply(Action::RunNow);
        assert_eq!(runs(&app.drain_requests()), vec![(6, "a cats".to_string())]);

        app.apply(Action::Clear);
        app.apply(Action::RunNow);
        assert!(runs(&app.drain_requests()).is_empty(), "empty text never runs");
        assert!(app.encoded().is_none() && app.encode_error().is_none());
    }

    #[test]
    fn repeat_on_runs_the_current_text_and_modes_reach_the_scheduler() {
        let (mut app, _) = app(&[BackendKind::Eager]);
        app.drain_requests();
        app.apply(Action::Paste("same text".into()));
        app.apply(Action::RunNow);
        app.drain_requests();
        app.apply(Action::ToggleRepeat);
        let requests = app.drain_requests();
        assert!(matches!(requests[0], Request::SetRepeat(true)));
        assert_eq!(runs(&requests), vec![(1, "same text".to_string())]);
        app.apply(Action::ToggleSerial);
        assert!(matches!(app.drain_requests()[..], [Request::SetSerial(true)]));
        assert!(app.is_serial() && app.is_repeat());
    }

    #[test]
    fn the_corpus_moves_to_the_next_backend_when_one_fails() {
        let (mut app, _) = app(&BackendKind::ALL);
        app.drain_requests();
        app.on_worker(WorkerEvent::LoadFailed { kind: BackendKind::Xnnpack, error: "broken".into() });
        assert!(matches!(app.drain_requests()[..], [Request::EmbedCorpus(BackendKind::Eager, _)]));
        app.on_worker(WorkerEvent::CorpusEmbedded { kind: BackendKind::Eager, outcome: Err("no".into()), elapsed: Duration::ZERO });
        assert!(matches!(app.drain_requests()[..], [Request::EmbedCorpus(BackendKind::Portable, _)]));
        app.on_worker(WorkerEvent::LoadFailed { kind: BackendKind::Portable, error: "broken".into() });
        assert!(matches!(app.corpus().state, CorpusState::Failed(_)));
    }

    #[test]
    fn f5_switches_the_xnnpack_column_and_runs_the_text_on_the_new_program() {
        let (mut app, t0) = app(&[BackendKind::Eager, BackendKind::Xnnpack]);
        app.drain_requests();
        app.apply(Action::Paste("a cat".into()));
        app.apply(Action::RunNow);
        app.drain_requests();
        let input = app.encoded().map(|e| Arc::new(e.clone())).unwrap();
        app.on_worker(WorkerEvent::Loaded { kind: BackendKind::Xnnpack, description: "x".into(), load_time: Duration::ZERO });
        app.on_worker(WorkerEvent::Finished {
            kind: BackendKind::Xnnpack,
            generation: 1,
            input: input.clone(),
            outcome: Ok(Embedding(vec![1.0, 0.0])),
            elapsed: Duration::from_millis(2),
        });
        assert_eq!(app.column(BackendKind::Xnnpack).unwrap().stats.count(), 1);

        app.apply(Action::NextVariant);
        let requests = app.drain_requests();
        match &requests[..] {
            [Request::Switch { from: BackendKind::Xnnpack, to: BackendKind::XnnpackInt8, job: Some(job) }, Request::EmbedCorpus(BackendKind::Eager, _)] => {
                assert_eq!((job.generation, job.input.text.as_str()), (1, "a cat"));
            }
            other => panic!("the switch, and the corpus the old program was embedding goes to eager: {other:?}"),
        }
        let column = app.column(BackendKind::XnnpackInt8).expect("the column shows the int8 program");
        assert_eq!((column.phase.clone(), column.stats.count(), column.pending), (Phase::Loading, 0, Some(1)));
        assert!(column.output.is_none() && column.coverage.is_none());
        assert!(app.column(BackendKind::Xnnpack).is_none());
        assert_eq!(app.columns()[0].kind, BackendKind::Eager, "the other columns stay");

        // A late result of the old program is ignored.
        app.on_worker(WorkerEvent::Finished {
            kind: BackendKind::Xnnpack,
            generation: 1,
            input,
            outcome: Ok(Embedding(vec![1.0, 0.0])),
            elapsed: Duration::from_millis(2),
        });
        assert!(app.column(BackendKind::XnnpackInt8).unwrap().output.is_none());
        let _ = t0;

        app.apply(Action::NextVariant);
        app.apply(Action::NextVariant);
        assert_eq!(app.columns()[1].kind, BackendKind::Xnnpack, "three presses come back to the plain program");
    }

    #[test]
    fn f5_skips_variants_that_are_missing_or_already_shown() {
        let t0 = Instant::now();
        let config = AppConfig {
            kinds: vec![BackendKind::Xnnpack, BackendKind::XnnpackStatic],
            threads: 1,
            model: "m".into(),
            corpus: vec![],
            xnnpack_variants: vec![BackendKind::Xnnpack, BackendKind::XnnpackStatic],
        };
        let mut app = App::new(config, Box::new(fake_encode), t0);
        app.drain_requests();
        assert!(!app.can_switch_variant(), "int8 is missing and static has its own column");
        app.apply(Action::NextVariant);
        assert!(app.drain_requests().is_empty());
        assert_eq!(app.columns()[0].kind, BackendKind::Xnnpack);
    }

    #[test]
    fn f4_asks_for_one_traced_run_of_the_current_text_and_keeps_only_its_result() {
        let (mut app, t0) = app(&[BackendKind::Eager, BackendKind::Portable, BackendKind::Xnnpack]);
        app.apply(Action::ToggleProfile);
        assert!(matches!(app.profile().unwrap().state, ProfileState::Failed(_)), "no text yet");
        assert!(app.take_profile_request().is_none());
        app.apply(Action::CloseProfile);
        assert!(app.profile().is_none());

        app.on_worker(WorkerEvent::LoadFailed { kind: BackendKind::Portable, error: "broken".into() });
        app.apply(Action::Paste("a cat".into()));
        app.apply(Action::ToggleProfile);
        let request = app.take_profile_request().expect("a traced run is asked for");
        assert_eq!(request.kinds, vec![BackendKind::Xnnpack], "ExecuTorch columns that did not fail");
        assert_eq!(request.input.text, "a cat");
        assert!(app.take_profile_request().is_none(), "asked for once");
        assert!(matches!(app.profile().unwrap().state, ProfileState::Running { since } if since == t0));
        assert!(app.is_busy());

        // Closed and opened again: the first run's result no longer counts.
        app.apply(Action::ToggleProfile);
        app.apply(Action::ToggleProfile);
        let second = app.take_profile_request().unwrap();
        assert_ne!(second.id, request.id);
        app.on_profile(request.id, Err("old".into()));
        assert!(matches!(app.profile().unwrap().state, ProfileState::Running { .. }));
        app.on_profile(second.id, Err("ExecuTorch said no".into()));
        assert!(matches!(&app.profile().unwrap().state, ProfileState::Failed(m) if m == "ExecuTorch said no"));
        assert_eq!(app.profile().unwrap().text, "a cat");
    }

    #[test]
    fn parity_compares_outputs_for_the_same_input_only() {
        let (mut app, t0) = app(&[BackendKind::Xnnpack, BackendKind::Eager]);
        assert_eq!(app.reference(), Some(1), "eager is the reference wherever it is");
        app.apply(Action::Paste("x".into()));
        app.apply(Action::RunNow);
        let input = app.encoded().map(|e| Arc::new(e.clone())).unwrap();
        let finish = |kind, generation, v: Vec<f32>| WorkerEvent::Finished {
            kind,
            generation,
            input: input.clone(),
            outcome: Ok(Embedding(v)),
            elapsed: Duration::from_millis(2),
        };
        app.on_worker(WorkerEvent::Started { kind: BackendKind::Xnnpack, generation: 1, at: t0 });
        app.on_worker(finish(BackendKind::Xnnpack, 1, vec![0.6, 0.8]));
        assert_eq!(app.parity(0), ParityView::Unavailable);
        app.on_worker(finish(BackendKind::Eager, 1, vec![0.8, 0.6]));
        match app.parity(0) {
            ParityView::Value(p) => assert!((p.cosine - 0.96).abs() < 1e-6),
            other => panic!("{other:?}"),
        }
        assert_eq!(app.parity(1), ParityView::Reference);
        assert_eq!(app.column(BackendKind::Xnnpack).unwrap().stats.count(), 1);
    }
}
