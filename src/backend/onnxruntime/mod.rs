//! The ONNX Runtime path: an `.onnx` file (the directory's `model.onnx` and
//! `model.int8.onnx`, or one given with `--program NAME=FILE.onnx`) run by
//! ONNX Runtime's CPU execution provider through the `ort` crate.
//!
//! ONNX Runtime is the wheel's `libonnxruntime.so`, opened at run time
//! (`ort`'s `load-dynamic`; [`library`] says where it is looked for), so the
//! binary starts and every other column works without it, and a missing or
//! too old library is this column's error, not the process's.
//!
//! Before ONNX Runtime sees a file, runlens reads it itself ([`crate::onnx`]:
//! a file that is not a `ModelProto` is refused naming it) and checks its
//! graph: encoders only here, inputs among `input_ids`, `attention_mask` and
//! `token_type_ids` (the first two required), int64 `[1, S]`, and the output
//! the task reads, float32; a graph that wants anything else is refused with
//! the inputs and outputs it has. Then runlens' probe opens it in a child
//! process and runs it once ([`load_and_run_once`], `super::probe`), so a file
//! that makes ONNX Runtime crash costs only the child. feature-extraction pools `last_hidden_state` `[1, S, H]` as the
//! manifest entry's `pooling` says (`mean` when it says nothing, the
//! sentence-transformers default; `cls`), L2-normalised as the `.pte` programs
//! do inside; fill-mask and classification return the `logits` output as it is.
//!
//! Threads: `--threads` intra-op threads, sequential execution, no spinning
//! (an idle column must not take a core from the others). ONNX Runtime's log
//! goes to [`log`]'s buffer, warnings and worse only, never to the terminal.

pub mod decoder;
pub mod library;
pub mod log;

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::Context;
use ort::environment::Environment;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::{Session, SessionInputValue};
use ort::value::Tensor;

use super::{Backend, BackendSpec, OutputKind, ProfiledRun};
use crate::onnx::{Dim, ElemType, OnnxModel, ValueInfo};
use crate::model::ModelDir;
use crate::tensor::{Encoded, OutputTensor};

/// The intra-op threads of every session (`--threads`; 0: not set, all cores).
static THREADS: super::ThreadSetting = super::ThreadSetting::new();

pub fn set_threads(threads: usize) {
    THREADS.set(threads);
}

pub fn threads() -> usize {
    THREADS.get()
}

/// The one environment of the process (ONNX Runtime allows one), made the
/// first time a column loads: the library opened, its log routed to [`log`].
/// A failure is kept and said again to every later column.
fn environment() -> anyhow::Result<Environment> {
    static ENV: OnceLock<Result<Environment, String>> = OnceLock::new();
    let made = ENV.get_or_init(|| {
        let path = library::find().map_err(|e| e.to_string())?;
        let builder = ort::init_from(&path).map_err(|e| format!("cannot load ONNX Runtime from {}: {e}; {}", path.display(), library::HOW_TO_GET))?;
        let env = builder
            .with_name("runlens")
            .with_telemetry(false)
            .with_logger(log::logger())
            .build()
            .map_err(|e| format!("ONNX Runtime ({}): cannot create its environment: {e}", path.display()))?;
        // The custom logger is handed every level at creation; only warnings and worse from now on.
        env.set_log_level(ort::logging::LogLevel::Warning);
        Ok(env)
    });
    made.clone().map_err(anyhow::Error::msg)
}

/// How `last_hidden_state` becomes one vector (feature-extraction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over the real tokens (sentence-transformers' `pooling_mode_mean_tokens`).
    Mean,
    /// The first token's (`[CLS]`) hidden state.
    Cls,
}

impl Pooling {
    /// From a manifest entry's `pooling`: `mean` when it says nothing.
    pub fn parse(said: Option<&str>) -> Result<Pooling, String> {
        match said {
            None | Some("mean") => Ok(Pooling::Mean),
            Some("cls") => Ok(Pooling::Cls),
            Some(other) => Err(format!("pooling {other:?}: runlens pools `mean` or `cls`")),
        }
    }
}

/// The graph inputs runlens fills: the tokenizer's ids and mask, zeros for the token types.
const INPUTS: [&str; 3] = ["input_ids", "attention_mask", "token_type_ids"];

pub struct OnnxRuntimeBackend {
    spec: BackendSpec,
    session: Session,
    path: std::path::PathBuf,
    /// The graph's inputs, as the file names them.
    input_names: Vec<String>,
    /// Whether the graph takes `token_type_ids`.
    token_types: bool,
    /// The graph output runlens reads, and the pooling of it (feature-extraction).
    output_name: String,
    pooling: Option<Pooling>,
    load_time: Duration,
}

/// The column for `path`: a decoder's file ([`decoder`]: its KV cache as
/// inputs and outputs) for text-generation, else an encoder's.
pub fn load_column(spec: &BackendSpec, path: &Path, dir: &ModelDir, output: OutputKind) -> anyhow::Result<Box<dyn Backend>> {
    if output != OutputKind::NextToken {
        return Ok(Box::new(OnnxRuntimeBackend::load(spec, path, dir, output)?));
    }
    if !path.is_file() {
        return Err(crate::model::ModelsMissing { path: path.to_path_buf() }.into());
    }
    let model = crate::onnx::read_path(path)?;
    let layout = decoder::check(&model).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    environment()?;
    super::probe::check(path, &super::probe::Load::OnnxRuntime)?;
    Ok(Box::new(decoder::OnnxDecoder::open(spec, path, &model, layout, dir.max_seq_len())?))
}

impl OnnxRuntimeBackend {
    /// Open `path` with ONNX Runtime to return `output`: an error (never a crash)
    /// for a missing file, one that is not an ONNX model (runlens' reader) or
    /// that ONNX Runtime cannot parse, a graph whose inputs or outputs are not an
    /// encoder's, a library that cannot be loaded, or a file that ended the
    /// probe's child (ONNX Runtime crashed on it there).
    pub fn load(spec: &BackendSpec, path: &Path, dir: &ModelDir, output: OutputKind) -> anyhow::Result<OnnxRuntimeBackend> {
        if !path.is_file() {
            return Err(crate::model::ModelsMissing { path: path.to_path_buf() }.into());
        }
        anyhow::ensure!(output != OutputKind::NextToken, "{}: a decoder's ONNX file is opened by load_column", path.display());
        let pooling = match output {
            OutputKind::Pooled => Some(pooling_for(spec, dir).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?),
            _ => None,
        };
        // runlens' reading of the file, then the probe's child, then ONNX Runtime here.
        let model = crate::onnx::read_path(path)?;
        let token_types = check_inputs(&model).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let output_name = check_output(&model, output).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        // The library first: one that cannot load is this column's error, with no child started.
        let env = environment()?;
        super::probe::check(path, &super::probe::Load::OnnxRuntime)?;
        let threads = threads();
        let start = Instant::now();
        let session =
            open(&env, path, threads, &spec.name).map_err(|e| anyhow::anyhow!("{}: ONNX Runtime cannot load it: {e}{}", path.display(), log::last_words(&spec.name)))?;
        let load_time = start.elapsed();
        let input_names = model.inputs.iter().map(|i| i.name.clone()).collect();
        Ok(OnnxRuntimeBackend { spec: spec.clone(), session, path: path.to_path_buf(), input_names, token_types, output_name, pooling, load_time })
    }
}

/// How a file's `last_hidden_state` is pooled: as its manifest entry says (the
/// export's own files); for another file (the `onnx/` folder's, a `--program`),
/// as the directory's sentence-transformers config says (`modules.json`,
/// `1_Pooling/config.json`); else `mean`.
fn pooling_for(spec: &BackendSpec, dir: &ModelDir) -> Result<Pooling, String> {
    let entry = dir.manifest().programs.iter().find(|p| p.name == spec.name && !spec.given);
    if let Some(said) = entry.and_then(|e| e.pooling.as_deref()) {
        return Pooling::parse(Some(said));
    }
    match crate::model::sentence_transformers::pooling(dir.root()) {
        Some(config) => Pooling::parse(Some(config?.as_str())),
        None => Ok(Pooling::Mean),
    }
}

/// The probe's child (`super::probe`): read and check the file as the column's
/// load does, open it in a session and run the probe's input once (its ids kept
/// inside the vocabulary the graph's embedding table has, when it says one).
pub fn load_and_run_once(path: &Path) -> Result<(), super::probe::Refusal> {
    use super::probe::Refusal;
    let model = crate::onnx::read_path(path).map_err(|e| Refusal::Load(e.to_string()))?;
    let graph = Graph::of(&model).map_err(|e| Refusal::Load(format!("{}: {e}", path.display())))?;
    let token_types = match graph {
        Graph::Decoder(layout) => {
            // A decoder's file: one prefill of the probe's input, with empty pasts.
            environment().map_err(|e| Refusal::Runtime(format!("{}: {e:#}", path.display())))?;
            let (mut ids, _) = super::probe::representative_input(None);
            if let Some(rows) = model.rows_gathered_by(INPUTS[0]).filter(|&r| r > 0) {
                ids.iter_mut().for_each(|id| *id %= rows);
            }
            let spec = BackendSpec::program("probe", path);
            let mut d = decoder::OnnxDecoder::open(&spec, path, &model, layout, ids.len()).map_err(|e| Refusal::Load(format!("{e:#}")))?;
            return crate::backend::Decoder::prefill(&mut d, &ids).map(drop).map_err(|e| Refusal::Run(format!("{e:#}")));
        }
        Graph::Encoder { token_types } => token_types,
    };
    let env = environment().map_err(|e| Refusal::Runtime(format!("{}: {e:#}", path.display())))?;
    let log_id = "probe";
    let mut session =
        open(&env, path, threads(), log_id).map_err(|e| Refusal::Load(format!("{}: ONNX Runtime cannot load it: {e}{}", path.display(), log::last_words(log_id))))?;
    let (mut ids, mask) = super::probe::representative_input(None);
    if let Some(rows) = model.rows_gathered_by(INPUTS[0]).filter(|&r| r > 0) {
        ids.iter_mut().for_each(|id| *id %= rows);
    }
    let fed = feeds(&ids, &mask, token_types).map_err(|e| Refusal::Run(format!("{}: {e}", path.display())))?;
    session.run(fed).map(drop).map_err(|e| Refusal::Run(format!("{}: ONNX Runtime's run failed: {e}{}", path.display(), log::last_words(log_id))))
}

/// ONNX Runtime's own profile of `runs` runs of the file at `path` on `input`,
/// after the runs `run` leaves out: a session opened as the column's is (the
/// file read and checked by runlens and its probe's child first), with ONNX
/// Runtime's profiler on, its JSON (Chrome trace events: one `model_run` per
/// run, one `*_kernel_time` event per node run) returned as written, the file
/// removed. An encoder's file runs `input` whole after one warm-up run; a
/// decoder's is driven as its column drives it ([`decoder::profiled`]). The
/// left-out runs' events are in it too: [`crate::profile`] drops them.
pub fn profiled_runs(path: &Path, input: &Encoded, runs: u32, run: ProfiledRun) -> anyhow::Result<Vec<u8>> {
    if !path.is_file() {
        return Err(crate::model::ModelsMissing { path: path.to_path_buf() }.into());
    }
    let model = crate::onnx::read_path(path)?;
    let graph = Graph::of(&model).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if run == ProfiledRun::DecodeStep && !matches!(graph, Graph::Decoder(_)) {
        anyhow::bail!("{}: --decode profiles a decoder's file, and this graph is an encoder's", path.display());
    }
    let env = environment()?;
    super::probe::check(path, &super::probe::Load::OnnxRuntime)?;
    let scratch = scratch()?;
    let prefix = scratch.path().join("profile");
    let log_id = "profile";
    let written = match graph {
        Graph::Decoder(layout) => decoder::profiled(path, &model, layout, &input.ids, runs, run, &prefix)?,
        Graph::Encoder { token_types } => {
            let mut session = open_as(&env, path, threads(), log_id, Extra::Profiled(&prefix))
                .map_err(|e| anyhow::anyhow!("{}: ONNX Runtime cannot load it: {e}{}", path.display(), log::last_words(log_id)))?;
            for _ in 0..=runs {
                let fed = feeds(&input.ids, &input.attention_mask, token_types)?;
                session.run(fed).map_err(|e| anyhow::anyhow!("{}: ONNX Runtime's run failed: {e}{}", path.display(), log::last_words(log_id)))?;
            }
            session.end_profiling().map_err(|e| anyhow::anyhow!("{}: ONNX Runtime's profiler: {e}", path.display()))?
        }
    };
    let written = std::path::PathBuf::from(written);
    let written = if written.is_absolute() { written } else { scratch.path().join(written.file_name().unwrap_or_default()) };
    std::fs::read(&written).with_context(|| format!("{}: ONNX Runtime's profile {}", path.display(), written.display()))
}

/// The graph as ONNX Runtime's graph optimizer leaves it for this column (every
/// level, the CPU execution provider), read by runlens from the optimized model
/// ONNX Runtime writes when asked (`SessionOptions::SetOptimizedModelFilePath`):
/// its fused operators (`FusedMatMul`, `com.microsoft:BiasGelu`,
/// `com.microsoft:SkipLayerNormalization`, `DynamicQuantizeMatMul`, ...) where
/// the file has the standard ones. The file is read and checked by runlens (an
/// encoder's or a decoder's) and its probe's child first, as for the column.
pub fn optimized_graph(path: &Path) -> anyhow::Result<OnnxModel> {
    if !path.is_file() {
        return Err(crate::model::ModelsMissing { path: path.to_path_buf() }.into());
    }
    let model = crate::onnx::read_path(path)?;
    Graph::of(&model).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let env = environment()?;
    super::probe::check(path, &super::probe::Load::OnnxRuntime)?;
    let scratch = scratch()?;
    let written = scratch.path().join("optimized.onnx");
    let log_id = "inspect";
    open_as(&env, path, threads(), log_id, Extra::Optimized(&written))
        .map_err(|e| anyhow::anyhow!("{}: ONNX Runtime cannot load it: {e}{}", path.display(), log::last_words(log_id)))?;
    let mut optimized = crate::onnx::read_path(&written).with_context(|| format!("{}: ONNX Runtime's optimized model", path.display()))?;
    optimized.path = None;
    Ok(optimized)
}

/// A folder of the temporary directory for one run's file (a profile, the optimized
/// model), removed when dropped.
fn scratch() -> anyhow::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("runlens-ort-")
        .tempdir()
        .context("cannot make a temporary folder for ONNX Runtime's file (set TMPDIR to a writable directory)")
}

/// The graph's inputs as runlens fills them: ids and mask `[1, S]`, zeros for the token types.
fn feeds(ids: &[i64], mask: &[i64], token_types: bool) -> anyhow::Result<Vec<(&'static str, SessionInputValue<'static>)>> {
    let n = ids.len();
    let tensor = |values: Vec<i64>| -> anyhow::Result<SessionInputValue<'static>> { Ok(Tensor::from_array(([1usize, n], values))?.into()) };
    let mut feeds = vec![(INPUTS[0], tensor(ids.to_vec())?), (INPUTS[1], tensor(mask.to_vec())?)];
    if token_types {
        feeds.push((INPUTS[2], tensor(vec![0; n])?));
    }
    Ok(feeds)
}

/// A session on the CPU execution provider: `threads` intra-op threads that
/// sleep when idle, one inter-op thread (sequential execution), every graph
/// optimization on (ONNX Runtime's default, said here).
fn open(env: &Environment, path: &Path, threads: usize, log_id: &str) -> Result<Session, String> {
    open_as(env, path, threads, log_id, Extra::None)
}

/// What a session does besides running: nothing (a column's), profile its
/// runs (the profiler's file named from this prefix), or write the optimized model here.
enum Extra<'a> {
    None,
    Profiled(&'a Path),
    Optimized(&'a Path),
}

/// [`open`], with ONNX Runtime's profiler on or its optimized model written, as `extra` says.
fn open_as(env: &Environment, path: &Path, threads: usize, log_id: &str, extra: Extra) -> Result<Session, String> {
    let said = |e: ort::Error<SessionBuilder>| e.to_string();
    let mut builder = Session::builder(env)
        .map_err(|e| e.to_string())?
        .with_log_id(log_id)
        .map_err(said)?
        .with_log_level(ort::logging::LogLevel::Warning)
        .map_err(said)?
        .with_intra_threads(threads)
        .map_err(said)?
        .with_inter_threads(1)
        .map_err(said)?
        .with_parallel_execution(false)
        .map_err(said)?
        .with_intra_op_spinning(false)
        .map_err(said)?
        .with_optimization_level(GraphOptimizationLevel::All)
        .map_err(said)?;
    builder = match extra {
        Extra::None => builder,
        Extra::Profiled(prefix) => builder.with_profiling(prefix).map_err(said)?,
        Extra::Optimized(file) => builder.with_optimized_model_path(file).map_err(said)?,
    };
    builder.commit_from_file(path).map_err(|e| e.to_string())
}

fn names(values: &[ValueInfo]) -> String {
    if values.is_empty() {
        return "none".into();
    }
    values.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// What a file's graph is as runlens drives it: a decoder's ([`decoder::check`]:
/// its KV cache in and out) or an encoder's ([`check_inputs`]); the encoder's
/// reason when it is neither.
enum Graph {
    Decoder(decoder::PastLayout),
    Encoder { token_types: bool },
}

impl Graph {
    fn of(model: &OnnxModel) -> Result<Graph, String> {
        match decoder::check(model) {
            Ok(layout) => Ok(Graph::Decoder(layout)),
            Err(_) => check_inputs(model).map(|token_types| Graph::Encoder { token_types }),
        }
    }
}

/// The graph's inputs, as read from the file, must be among [`INPUTS`]
/// (`input_ids` and `attention_mask` required), int64, of rank 2 with a batch
/// of 1 and a free length where the file gives a shape. Whether it takes token types.
fn check_inputs(model: &OnnxModel) -> Result<bool, String> {
    let inputs = &model.inputs;
    for input in inputs {
        if !INPUTS.contains(&input.name.as_str()) {
            return Err(format!(
                "the graph takes an input {:?} runlens cannot give (its inputs: {}); an encoder's are {}",
                input.name,
                names(inputs),
                INPUTS.join(", ")
            ));
        }
        if input.elem_type != Some(ElemType::INT64) {
            return Err(format!("its input {input} is not int64 as runlens gives the ids (its inputs: {})", model.describe_inputs()));
        }
        match input.shape.as_deref() {
            None => {}
            Some([batch, len]) => {
                if matches!(batch, Dim::Size(b) if *b != 1) {
                    return Err(format!("its input {input} has a batch of {batch}; runlens gives one sequence, [1, S]"));
                }
                if let Dim::Size(n) = len {
                    return Err(format!("its input {input} has a fixed length of {n}; runlens gives [1, S] for S tokens (an export with a dynamic length)"));
                }
            }
            Some(_) => return Err(format!("its input {input} is not of rank 2; runlens gives [1, S] (its inputs: {})", model.describe_inputs())),
        }
    }
    for required in &INPUTS[..2] {
        if !inputs.iter().any(|i| i.name == *required) {
            return Err(format!("the graph has no input {required} (its inputs: {}); an encoder's are {}", names(inputs), INPUTS.join(", ")));
        }
    }
    Ok(inputs.iter().any(|i| i.name == INPUTS[2]))
}

/// The output runlens reads for `output`, found by name as the hub's files
/// name them, float32, of a rank the task reads where the file gives a shape.
fn check_output(model: &OnnxModel, output: OutputKind) -> Result<String, String> {
    let outputs = &model.outputs;
    let (wanted, ranks): (&[&str], &[usize]) = match output {
        OutputKind::Pooled => (&["last_hidden_state"], &[3]),
        OutputKind::TokenLogits | OutputKind::ClassLogits => (&["logits"], output.ranks()),
        OutputKind::NextToken => (&[], &[]),
    };
    // By name: a single output of another name could be anything.
    let Some(found) = outputs.iter().find(|o| wanted.contains(&o.name.as_str())) else {
        return Err(format!("the graph has no output {} (its outputs: {}); this task needs {}", wanted.join(" or "), names(outputs), output.expected()));
    };
    if found.elem_type != Some(ElemType::FLOAT32) {
        return Err(format!("its output {found} is not float32"));
    }
    if let Some(shape) = &found.shape {
        if !ranks.contains(&shape.len()) {
            return Err(format!("its output {found} is not of rank {}; this task needs {}", ranks.iter().map(usize::to_string).collect::<Vec<_>>().join(" or "), output.expected()));
        }
    }
    Ok(found.name.clone())
}

impl Backend for OnnxRuntimeBackend {
    fn describe(&self) -> String {
        let reads = match self.pooling {
            Some(Pooling::Mean) => format!("{} mean-pooled, L2-normalised", self.output_name),
            Some(Pooling::Cls) => format!("{} at [CLS], L2-normalised", self.output_name),
            None => self.output_name.clone(),
        };
        format!(
            "{}: {}, {} (inputs {}), {reads}, CPU execution provider, {} intra-op threads, sequential",
            self.spec.title,
            self.spec.about,
            self.path.display(),
            self.input_names.join(", "),
            threads()
        )
    }

    fn run(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor> {
        anyhow::ensure!(!input.ids.is_empty(), "{}: no tokens to run", self.path.display());
        let feeds = feeds(&input.ids, &input.attention_mask, self.token_types)?;
        let path = self.path.display().to_string();
        let outputs = self.session.run(feeds).map_err(|e| anyhow::anyhow!("{path}: ONNX Runtime's run failed: {e}{}", log::last_words(&self.spec.name)))?;
        let value = outputs.get(self.output_name.as_str()).with_context(|| format!("{path}: no output {}", self.output_name))?;
        let (shape, data) = value.try_extract_tensor::<f32>().map_err(|e| anyhow::anyhow!("{path}: output {}: {e}", self.output_name))?;
        let shape: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        match self.pooling {
            Some(pooling) => pool(&shape, data, &input.attention_mask, pooling).map_err(|e| anyhow::anyhow!("{path}: {e}")),
            None => Ok(OutputTensor::new(shape, data.to_vec())),
        }
    }

    fn load_time(&self) -> Option<Duration> {
        Some(self.load_time)
    }
}

/// `last_hidden_state` `[1, S, H]` to one L2-normalised `[1, H]`, as
/// sentence-transformers pools (mean over the tokens the mask keeps, or the first).
pub fn pool(shape: &[usize], data: &[f32], mask: &[i64], pooling: Pooling) -> Result<OutputTensor, String> {
    let &[1, s, h] = shape else {
        return Err(format!("last_hidden_state is {shape:?}, not [1, S, H]"));
    };
    if s != mask.len() || data.len() != s * h {
        return Err(format!("last_hidden_state is {shape:?} for {} tokens", mask.len()));
    }
    let mut v = vec![0f32; h];
    match pooling {
        Pooling::Cls => v.copy_from_slice(&data[..h]),
        Pooling::Mean => {
            let mut kept = 0f32;
            for (row, _) in data.chunks_exact(h).zip(mask).filter(|(_, &m)| m != 0) {
                v.iter_mut().zip(row).for_each(|(a, b)| *a += b);
                kept += 1.0;
            }
            let kept = kept.max(1e-9);
            v.iter_mut().for_each(|a| *a /= kept);
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm.max(1e-12));
    }
    Ok(OutputTensor::new(vec![1, h], v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(name: &str, elem: i32, shape: Option<Vec<Dim>>) -> ValueInfo {
        ValueInfo::new(name, elem, shape)
    }

    fn model(inputs: Vec<ValueInfo>, outputs: Vec<ValueInfo>) -> OnnxModel {
        OnnxModel::with_io(inputs, outputs)
    }

    /// The graph's layout, read from the file: what runlens can give and read, and
    /// each refusal naming what the graph has.
    #[test]
    fn the_graph_is_checked_from_the_file_naming_what_it_has() {
        let seq = || Some(vec![Dim::Named("batch".into()), Dim::Named("sequence".into())]);
        let encoder = |inputs: Vec<ValueInfo>| model(inputs, vec![value("last_hidden_state", 1, Some(vec![Dim::Size(1), Dim::Unknown, Dim::Size(8)]))]);
        let bert = encoder(vec![value("input_ids", 7, seq()), value("attention_mask", 7, seq()), value("token_type_ids", 7, None)]);
        assert_eq!(check_inputs(&bert), Ok(true));
        assert_eq!(check_output(&bert, OutputKind::Pooled), Ok("last_hidden_state".into()));
        let distil = encoder(vec![value("input_ids", 7, seq()), value("attention_mask", 7, seq())]);
        assert_eq!(check_inputs(&distil), Ok(false));
        let e = check_inputs(&encoder(vec![value("input_ids", 7, seq()), value("position_ids", 7, seq()), value("attention_mask", 7, seq())])).unwrap_err();
        assert_eq!(e, "the graph takes an input \"position_ids\" runlens cannot give (its inputs: input_ids, position_ids, attention_mask); an encoder's are input_ids, attention_mask, token_type_ids");
        let e = check_inputs(&encoder(vec![value("input_ids", 7, seq())])).unwrap_err();
        assert_eq!(e, "the graph has no input attention_mask (its inputs: input_ids); an encoder's are input_ids, attention_mask, token_type_ids");
        let e = check_inputs(&encoder(vec![value("input_ids", 6, seq()), value("attention_mask", 7, seq())])).unwrap_err();
        assert!(e.starts_with("its input input_ids int32 [batch, sequence] is not int64"), "{e}");
        let fixed = encoder(vec![value("input_ids", 7, Some(vec![Dim::Size(1), Dim::Size(128)])), value("attention_mask", 7, seq())]);
        assert!(check_inputs(&fixed).unwrap_err().contains("a fixed length of 128"));
        let batch = encoder(vec![value("input_ids", 7, Some(vec![Dim::Size(4), Dim::Unknown])), value("attention_mask", 7, seq())]);
        assert!(check_inputs(&batch).unwrap_err().contains("a batch of 4"));
        let rank = encoder(vec![value("input_ids", 7, Some(vec![Dim::Unknown])), value("attention_mask", 7, seq())]);
        assert!(check_inputs(&rank).unwrap_err().contains("is not of rank 2"));
        // Outputs: by name, float32, of the task's rank.
        assert_eq!(check_output(&bert, OutputKind::ClassLogits).unwrap_err(), format!("the graph has no output logits (its outputs: last_hidden_state); this task needs {}", OutputKind::ClassLogits.expected()));
        let logits = |shape| model(vec![], vec![value("logits", 1, shape)]);
        assert_eq!(check_output(&logits(None), OutputKind::TokenLogits), Ok("logits".into()));
        assert!(check_output(&logits(Some(vec![Dim::Unknown; 3])), OutputKind::ClassLogits).unwrap_err().contains("is not of rank 2"));
        let half = model(vec![], vec![value("logits", 10, None)]);
        assert_eq!(check_output(&half, OutputKind::ClassLogits).unwrap_err(), "its output logits float16 is not float32");
    }

    #[test]
    fn mean_pooling_keeps_the_masked_tokens_and_normalises() {
        // Two tokens of width 2, the second masked out: the first alone, normalised.
        let out = pool(&[1, 2, 2], &[3.0, 4.0, 100.0, -100.0], &[1, 0], Pooling::Mean).unwrap();
        assert_eq!(out.shape, [1, 2]);
        assert!((out.data[0] - 0.6).abs() < 1e-6 && (out.data[1] - 0.8).abs() < 1e-6, "{:?}", out.data);
        // Both kept: their mean.
        let out = pool(&[1, 2, 2], &[1.0, 0.0, 3.0, 0.0], &[1, 1], Pooling::Mean).unwrap();
        assert_eq!(out.data, [1.0, 0.0]);
        let out = pool(&[1, 2, 2], &[0.0, 2.0, 3.0, 0.0], &[1, 1], Pooling::Cls).unwrap();
        assert_eq!(out.data, [0.0, 1.0]);
        assert!(pool(&[1, 3, 2], &[0.0; 6], &[1, 1], Pooling::Mean).is_err(), "a shape that does not fit the tokens");
        assert_eq!(Pooling::parse(Some("max")).unwrap_err(), "pooling \"max\": runlens pools `mean` or `cls`");
        assert_eq!(Pooling::parse(None), Ok(Pooling::Mean));
    }
}
