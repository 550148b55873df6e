//! The explorer's state and every change to it. Knows nothing about terminals:
//! the event loop ([`crate::tui`]) turns keys into [`Action`]s and worker
//! reports into [`App::on_worker`]; what the app wants done in the background
//! is queued as [`Request`]s that the loop hands to the scheduler (inference)
//! and [`JobRequest`]s that it hands to [`crate::jobs`] (profile, layers,
//! coverage; their results come back through [`App::on_job`]). Drawing
//! ([`crate::ui`]) reads an `&App` only.
//!
//! This file holds the state ([`App`]), what drawing reads of it, the keys'
//! [`Action`]s and the text's way to the workers. The rest, a file each:
//! - `events`: the workers' reports (a column loaded, a token, a result);
//! - `jobs`: the background jobs (the F4 profile, the F6 layers, coverage);
//! - `variants`: F5, a column switched to another program of its `column`;
//! - `models`: F8, the model list and the switch to another model directory;
//! - `input`: the input line; `column`: one backend's column; `loading`: memory while loading;
//! - `corpus`: the nearest-sentence corpus; `profile`: the F4 view; `layers`: the F6 view;
//! - `generation`: text-generation's own state (a continuation as it grows, the top-1 pass).

mod column;
mod corpus;
mod events;
mod generation;
mod input;
mod jobs;
mod layers;
mod loading;
mod models;
mod profile;
mod variants;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use column::{Column, ColumnState, CoverageView, Nearest, Output, ParityView, Phase, Top1State};
pub use corpus::{Corpus, CorpusState};
pub use generation::{compare, Divergence, LiveGeneration};
pub use input::InputLine;
pub use layers::{LayersState, LayersView};
pub use models::{ListModels, ModelsView, SwitchRequest};
pub use profile::{ProfileState, ProfileView};
pub use crate::jobs::{CoverageRequest, JobDone, JobRequest, LayersRequest, ProfileRequest};

use crate::backend::BackendSpec;
use crate::model::Encoded;
use crate::schedule::{Job, Request};
use crate::task::Task;

/// How long typing must pause before the text runs (Enter runs at once).
pub const DEBOUNCE: Duration = Duration::from_millis(120);

/// The sentences the nearest-sentence lookup picks from (`assets/corpus.txt`, one a line).
pub const CORPUS: &str = include_str!("../../assets/corpus.txt");

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
    pub kinds: Vec<BackendSpec>,
    /// Threads of libtorch and ExecuTorch's pool (shown only; set before start).
    pub threads: usize,
    pub model: String,
    pub task: Task,
    /// Sentences for the nearest-sentence lookup (feature-extraction only).
    pub corpus: Vec<String>,
    /// Every backend whose files are present, in manifest order: F5 cycles a
    /// column through the ones that share its `column`.
    pub variants: Vec<BackendSpec>,
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
    /// F5: show the next program of the same column (an export variant).
    NextVariant,
    /// F4: open (and start) or close the per-operator profile of the current text.
    ToggleProfile,
    CloseProfile,
    /// F6: open (and start) or close the time per module of the current text.
    ToggleLayers,
    CloseLayers,
    /// F7: the prompt through the model's chat template, or raw (text-generation).
    TogglePromptFormat,
    /// F8: open or close the list of model directories.
    ToggleModels,
    CloseModels,
    /// Up / Down in the model list: move its cursor by this many entries.
    MoveModel(isize),
    /// Enter in the model list: switch the explorer to the entry under the cursor.
    ChooseModel,
    Quit,
}

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
    task: Task,
    show_help: bool,
    profile: Option<ProfileView>,
    profile_requests: u64,
    layers: Option<LayersView>,
    layers_requests: u64,
    quit: bool,
    requests: Vec<Request>,
    /// Background jobs asked for since the event loop last took them.
    jobs: Vec<JobRequest>,
    tokenize: Tokenize,
    /// text-generation: the prompt format now on, switched by F7 (the tokenizer reads it).
    prompter: Option<Arc<crate::model::Prompter>>,
    /// text-generation: the weights a decode step of eager reads (its checkpoint's).
    variants: Vec<BackendSpec>,
    /// The latest temperature / clock / throttling reading (status bar).
    heat: Option<crate::heat::HeatSample>,
    /// What each backend will hold at its peak, by name (`crate::memory`'s estimate), and
    /// what the process held before any loaded: shown while columns load.
    needs: std::collections::HashMap<String, u64>,
    base: Option<u64>,
    /// The process's resident memory, sampled while columns load.
    resident: Option<u64>,
    /// F8's list, when shown; how it is read; the directory now open.
    models: Option<ModelsView>,
    list_models: Option<ListModels>,
    model_dir: Option<std::path::PathBuf>,
    /// The switch to another model directory, once chosen.
    switch: Option<SwitchRequest>,
    /// A word for the status bar until the next key.
    note: Option<String>,
}

impl App {
    /// A new explorer: every column loading; the corpus is queued for the fastest backend.
    pub fn new(config: AppConfig, tokenize: Tokenize, now: Instant) -> App {
        let columns = config.kinds.iter().map(|kind| Column::loading(kind.clone())).collect();
        // Corpus sentences the tokenizer rejects are left out (they would never match anyway);
        // only sentence embeddings have a nearest sentence.
        let corpus = if config.task == Task::FeatureExtraction { config.corpus } else { Vec::new() };
        let (sentences, encoded): (Vec<String>, Vec<Encoded>) =
            corpus.into_iter().filter_map(|s| tokenize(&s).ok().map(|e| (s, e))).unzip();
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
            task: config.task,
            show_help: false,
            profile: None,
            profile_requests: 0,
            layers: None,
            layers_requests: 0,
            quit: false,
            requests: Vec::new(),
            jobs: Vec::new(),
            tokenize,
            prompter: None,
            variants: config.variants,
            heat: None,
            needs: std::collections::HashMap::new(),
            base: None,
            resident: None,
            models: None,
            list_models: None,
            model_dir: None,
            switch: None,
            note: None,
        };
        if app.corpus.state != CorpusState::Empty {
            app.assign_corpus();
        }
        app.request_coverage();
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

    /// A new heat reading (sampled every [`crate::jobs::heat::HEAT_EVERY`]).
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
    /// The column of the backend named `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.kind.name == name)
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
    pub fn task(&self) -> Task {
        self.task
    }
    pub fn show_help(&self) -> bool {
        self.show_help
    }
    pub fn should_quit(&self) -> bool {
        self.quit
    }

    /// The profile view, when shown.
    pub fn profile(&self) -> Option<&ProfileView> {
        self.profile.as_ref()
    }

    /// The layers view, when shown.
    pub fn layers(&self) -> Option<&LayersView> {
        self.layers.as_ref()
    }

    /// The column parity is measured against: eager when shown, else the first.
    pub fn reference(&self) -> Option<usize> {
        self.columns.iter().position(|c| c.kind.is_float_eager()).or((!self.columns.is_empty()).then_some(0))
    }

    /// Is the output of `column` for the text now in the input line?
    pub fn is_current(&self, output: &Output) -> bool {
        output.generation == self.generation
    }

    pub fn state(&self, index: usize) -> ColumnState<'_> {
        let c = &self.columns[index];
        match &c.phase {
            Phase::Loading => ColumnState::Loading(self.now.saturating_duration_since(c.since.unwrap_or(self.started))),
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
                // text-generation: with the top-1 agreement measured for this text, when it is.
                let top1 = match &self.columns[index].top1 {
                    Some((g, Top1State::Done(agreement))) if *g == mine.generation => Some(*agreement),
                    _ => None,
                };
                mine.output.parity(&theirs.output).map_or(ParityView::Unavailable, |p| ParityView::Value(p.with_top1(top1)))
            }
            (Some(_), Some(_)) => ParityView::Waiting,
            _ => ParityView::Unavailable,
        }
    }

    /// Work is in flight: loading, running, queued, or the corpus being embedded.
    pub fn is_busy(&self) -> bool {
        matches!(self.corpus.state, CorpusState::Embedding(_))
            || self.profile.as_ref().is_some_and(|p| matches!(p.state, ProfileState::Running { .. }))
            || self.layers.as_ref().is_some_and(|l| matches!(l.state, LayersState::Running { .. }))
            || self.switch.is_some()
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
        self.note = None;
        let edited = match action {
            Action::Insert(c) => {
                self.input.insert(c);
                true
            }
            // The model list takes the keys; a paste under it would change the text unseen.
            Action::Paste(_) if self.models.is_some() => false,
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
                    self.layers = None;
                    self.models = None;
                    self.open_profile();
                }
                false
            }
            Action::CloseProfile => {
                self.profile = None;
                false
            }
            Action::ToggleLayers => {
                if self.layers.take().is_none() {
                    self.profile = None;
                    self.models = None;
                    self.open_layers();
                }
                false
            }
            Action::CloseLayers => {
                self.layers = None;
                false
            }
            Action::TogglePromptFormat => self.toggle_prompt_format(),
            Action::ToggleModels => {
                if self.models.is_some() {
                    self.close_models();
                } else {
                    self.open_models();
                }
                false
            }
            Action::CloseModels => {
                self.close_models();
                false
            }
            Action::MoveModel(by) => {
                self.move_model(by);
                false
            }
            Action::ChooseModel => {
                self.choose_model();
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

    /// F7: switch chat / raw and tokenize the text again; for a model without
    /// a template, say so instead of switching.
    fn toggle_prompt_format(&mut self) -> bool {
        let Some(prompter) = &self.prompter else { return false };
        match prompter.toggle() {
            Ok(_) => true,
            Err(e) => {
                self.encode_error = Some(e.to_string());
                false
            }
        }
    }

    /// The shared prompt format (text-generation): the explorer's tokenize
    /// closure encodes with the same [`crate::model::Prompter`].
    pub fn with_prompter(mut self, prompter: Arc<crate::model::Prompter>) -> App {
        self.prompter = Some(prompter);
        self
    }

    /// text-generation: the weights a decode step of column `index` reads, when known
    /// (as its loaded backend counted them; before the load, a program's constants
    /// from its coverage).
    pub fn weight_bytes_per_token(&self, index: usize) -> Option<u64> {
        let column = self.columns.get(index)?;
        if column.weight_bytes.is_some() {
            return column.weight_bytes;
        }
        column.coverage.as_ref()?.as_ref().ok()?.weight_bytes_per_token
    }

    /// text-generation: the prompt format now on (the status bar shows it).
    pub fn prompt_format(&self) -> Option<crate::model::PromptFormat> {
        self.prompter.as_ref().filter(|_| self.task.takes_a_prompt()).map(|p| p.format())
    }

    fn text_changed(&mut self) {
        self.generation += 1;
        // A generation in progress is for the old text: it stops at its next token.
        let generating = self.task.generates() && self.columns.iter().any(|c| c.running.is_some());
        if generating || self.columns.iter().any(|c| c.pending.is_some()) {
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

    fn index_of(&self, kind: &BackendSpec) -> Option<usize> {
        self.columns.iter().position(|c| c.kind == *kind)
    }

}

#[cfg(test)]
mod tests;
