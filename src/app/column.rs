//! One backend's column: where its loading stands, its last output, its
//! latency history and, for a `.pte`, its delegation coverage.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::BackendSpec;
use crate::model::Encoded;
use crate::stats::LatencyStats;
use crate::task::generation::Top1Agreement;
use crate::task::{Embedding, TaskOutput, TaskParity};

pub use crate::jobs::CoverageView;

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
    pub output: TaskOutput,
    pub elapsed: Duration,
    /// The corpus sentence nearest to an embedding (feature-extraction).
    pub nearest: Option<Nearest>,
}

impl Output {
    pub fn embedding(&self) -> Option<&Embedding> {
        self.output.embedding()
    }
}

/// One backend's column.
#[derive(Clone, Debug)]
pub struct Column {
    pub kind: BackendSpec,
    pub phase: Phase,
    /// When its load began, when not with the explorer's start (F5 switched it).
    pub since: Option<Instant>,
    pub description: Option<String>,
    pub load_time: Option<Duration>,
    /// The weights a decode step reads, as the loaded backend reports them (a decoder).
    pub weight_bytes: Option<u64>,
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
    /// text-generation: the tokens of the latest run, as they come.
    pub live: Option<super::LiveGeneration>,
    /// text-generation: the top-1 agreement teacher-forced on the reference
    /// column's new ids, for the text of this generation (asked for: `Pending`).
    pub top1: Option<(u64, Top1State)>,
}

/// Where a column's teacher-forced top-1 agreement stands.
#[derive(Clone, Debug, PartialEq)]
pub enum Top1State {
    /// The pass is queued or running.
    Pending,
    Done(Top1Agreement),
    Failed(String),
}

impl Column {
    /// A column whose backend has just started loading.
    pub fn loading(kind: BackendSpec) -> Column {
        Column {
            kind,
            phase: Phase::Loading,
            since: None,
            description: None,
            load_time: None,
            weight_bytes: None,
            pending: None,
            running: None,
            output: None,
            run_error: None,
            stats: LatencyStats::default(),
            stale_dropped: 0,
            coverage: None,
            live: None,
            top1: None,
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
    Value(TaskParity),
    /// The outputs are for different inputs (one is still running).
    Waiting,
    /// No output to compare (yet).
    Unavailable,
}
