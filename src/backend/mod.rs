//! The inference paths runlens compares, tensor in and tensor out. Which paths
//! exist is data: [`catalog`] reads them from the model directory's manifest
//! (and `--program NAME=FILE.pte`). Each [`BackendSpec`] says what it is as
//! data: its [`Runtime`] (runlens' own eager model, or an ExecuTorch program
//! file), its [`Delegate`], its quantization and fixed length; code outside
//! this folder matches on those, never on a name, and asks a spec or a loaded
//! [`Backend`] for what it can give ([`Ability`]).
//!
//! The eager path is the cargo feature `eager` (on by default): without it
//! (`make lite`) the binary is ExecuTorch alone, with no tch and no libtorch;
//! the catalog then has no eager spec, and naming it is [`NotBuilt`].

#[cfg(feature = "eager")]
pub mod eager;
pub mod executorch;
pub mod decoder;
pub mod llamacpp;
pub mod onnxruntime;
pub mod probe;
mod spec;
pub mod weight_format;

use std::path::PathBuf;

pub use decoder::Decoder;
#[doc(hidden)]
pub use spec::named;
pub use spec::{is_gguf, is_onnx, Ability, BackendSpec, CacheKind, Delegate, Footer, Hue, Runtime, Source, EAGER};
pub use weight_format::WeightFormat;

use crate::model::ModelDir;
use crate::tensor::{Encoded, OutputTensor};

/// One CPU inference path with its model loaded, ready to run.
///
/// A backend is owned by one thread at a time (`Send`, not `Sync`): the TUI
/// gives each its own worker thread, `run` and `bench` call it directly.
pub trait Backend: Send {
    /// One line for humans: what runs, from which file, with how many threads.
    fn describe(&self) -> String;
    /// Run the model on one tokenized input; the first output tensor. For a
    /// decoder: the prefill of the input, the next token's logits `[1, V]`.
    fn run(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor>;
    /// The backend as a [`Decoder`] (text-generation: eager GPT-2, an ExecuTorch
    /// KV-cache or window program); `None` for encoders.
    fn as_decoder(&mut self) -> Option<&mut dyn Decoder> {
        None
    }
    /// The bytes of weights a decode step reads (a decoder: eager's loaded model,
    /// float or quantized, or a program's stored constants; `bench::weights`);
    /// `None` for an encoder.
    fn weight_bytes_per_token(&self) -> Option<u64> {
        None
    }
    /// The bytes of one element of the KV cache a decode step reads (float32 4,
    /// float16 2); `None` when it keeps no cache (an encoder, a window program).
    /// `bench` multiplies it by the cache's geometry from `config.json`.
    fn kv_cache_element_bytes(&self) -> Option<u64> {
        None
    }
    /// Where its KV cache lives, when the loaded model says it (a program's inputs:
    /// `static` inside it, `inputs` handed in by runlens, `none`); `None`: ask the manifest.
    fn cache_kind(&self) -> Option<&'static str> {
        None
    }
    /// How long opening its model took inside the runtime, when the runtime
    /// measures it (a program's open); `None`: the caller times the load.
    fn load_time(&self) -> Option<std::time::Duration> {
        None
    }
    /// One run timed per module of the model (eager: its own module scopes);
    /// `None` when this backend cannot time itself so (a program is timed from
    /// its ETDump instead, `crate::profile`).
    fn run_timed_per_module(&mut self, _input: &Encoded) -> Option<anyhow::Result<ModuleTimes>> {
        None
    }
    /// One run keeping each innermost module's output, flattened to float32,
    /// by module path in run order; `None` when this backend cannot.
    fn run_keeping_module_outputs(&mut self, _input: &Encoded) -> Option<anyhow::Result<Vec<(String, Vec<f32>)>>> {
        None
    }
    /// The runtime's own loop around one forward, timed inside the runtime:
    /// what the Rust wrapper adds to a call (`runlens bench`'s paired row);
    /// `None` when the runtime has no such loop.
    fn native_loop(&mut self) -> Option<&mut dyn NativeLoop> {
        None
    }
    /// The runtime's own counters of the time inside its prefill and decode
    /// calls since it loaded (llama.cpp's); `None` when it keeps none.
    fn runtime_counters(&mut self) -> Option<RuntimeCounters> {
        None
    }
}

/// A runtime's own count of its calls ([`Backend::runtime_counters`]): the
/// time inside its prefill calls (more than one token) and one-token calls.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RuntimeCounters {
    pub prefill_ms: f64,
    pub prefill_tokens: u64,
    pub decode_ms: f64,
    pub decode_tokens: u64,
}

impl RuntimeCounters {
    /// What was counted between `earlier` and `self`.
    pub fn since(&self, earlier: &RuntimeCounters) -> RuntimeCounters {
        RuntimeCounters {
            prefill_ms: self.prefill_ms - earlier.prefill_ms,
            prefill_tokens: self.prefill_tokens.saturating_sub(earlier.prefill_tokens),
            decode_ms: self.decode_ms - earlier.decode_ms,
            decode_tokens: self.decode_tokens.saturating_sub(earlier.decode_tokens),
        }
    }
}

/// A runtime's own loop over one forward ([`Backend::native_loop`]).
pub trait NativeLoop {
    /// The runtime's inner time of the last [`Backend::run`], in ns.
    fn last_run_ns(&mut self) -> u64;
    /// One forward of `input` in the runtime's own loop; its inner time in ns.
    fn run_native(&mut self, input: &Encoded) -> anyhow::Result<u64>;
}

/// The path of the time outside every module: the model's own work (input
/// checks, the attention mask) and the caller's ([`ModuleTimes::spans`]).
pub const ROOT_MODULE: &str = "";

/// One forward, timed per module: each path's own time, in the order the
/// paths first finished, the outside ([`ROOT_MODULE`]) last; they add up to `total`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleTimes {
    pub spans: Vec<(String, std::time::Duration)>,
    pub total: std::time::Duration,
    /// When the run started.
    pub started: std::time::Instant,
    /// Every scope entered, as it ran (for `--trace`): (path, start from
    /// `started`, wall time), in the order they finished.
    pub scopes: Vec<(String, std::time::Duration, std::time::Duration)>,
}

/// What one profiled run is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProfiledRun {
    /// The input, run whole (a decoder's: its prompt, from an empty cache).
    #[default]
    Prompt,
    /// A decoder's decode step: after the prompt and one warm-up step (left out), one
    /// new token a run, each the previous run's greedy token (`runlens profile --decode`).
    DecodeStep,
}

impl ProfiledRun {
    /// The runs before the profiled ones that are left out: the warm-up run, or
    /// the prompt's run and the warm-up step.
    pub fn left_out(self) -> usize {
        match self {
            ProfiledRun::Prompt => 1,
            ProfiledRun::DecodeStep => 2,
        }
    }
}

/// What a backend is loaded to return, in tensor terms. The task layer says
/// which its task needs ([`crate::task::Task::output`]); eager picks its head
/// from it, and a program's inputs and output are checked against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutputKind {
    /// One pooled vector, `[1, H]`.
    Pooled,
    /// Vocabulary logits per position `[1, S, V]`, or at one position `[1, V]` (a masked-LM head).
    TokenLogits,
    /// Class logits, `[1, C]`.
    ClassLogits,
    /// A decoder: the next token's logits `[1, V]` (or per position `[1, S, V]`),
    /// driven through [`Decoder`].
    NextToken,
}

impl OutputKind {
    /// The output shapes a program of this kind may have, for error messages.
    pub fn expected(self) -> &'static str {
        match self {
            OutputKind::Pooled => "an embedding [1, H]",
            OutputKind::TokenLogits => "logits per position [1, S, V] or at the one mask [1, V]",
            OutputKind::ClassLogits => "class logits [1, C]",
            OutputKind::NextToken => "next-token logits [1, V], or per position [1, S, V]",
        }
    }

    /// The ranks its first output may have.
    pub fn ranks(self) -> &'static [usize] {
        match self {
            OutputKind::Pooled | OutputKind::ClassLogits => &[2],
            OutputKind::TokenLogits | OutputKind::NextToken => &[2, 3],
        }
    }
}

/// The names a manifest's program may not take: the columns the other
/// runtimes make (eager's, in every weight format, built or not).
pub fn reserved_names() -> Vec<String> {
    WeightFormat::all(weight_format::DEFAULT_GROUP_SIZE).iter().map(|f| f.backend_name().to_string()).collect()
}

/// Every path the model directory offers, in column order: eager (when the
/// manifest lists the checkpoint's files), the manifest's programs, the files
/// of its `onnx/` folder (the sentence-transformers layout, in the ONNX
/// column), then the `--program` ones. An error when a `--program` name is taken or malformed.
pub fn catalog(dir: &ModelDir, extra: &[(String, PathBuf)]) -> anyhow::Result<Vec<BackendSpec>> {
    dir.manifest().refuse_names(&dir.root().join("manifest.json"), &reserved_names())?;
    let mut specs = Vec::new();
    if HAS_EAGER && dir.manifest().eager.is_some() {
        specs.push(BackendSpec::eager());
        if dir.task().takes_a_prompt() {
            // A decoder's quantized eager columns, with the 4-bit program's group size.
            let programs = &dir.manifest().programs;
            let group = programs.iter().find(|p| p.bits == Some(4)).and_then(|p| p.group_size);
            let group = group.map_or(weight_format::DEFAULT_GROUP_SIZE, |g| g as i64);
            specs.push(BackendSpec::eager_with(WeightFormat::Int8));
            specs.push(BackendSpec::eager_with(WeightFormat::Int4 { group_size: group }));
        }
    }
    for p in &dir.manifest().programs {
        let file = dir.root().join(&p.file);
        // The manifest's delegate; a manifest from before it was recorded: read once from the file.
        let gguf = p.runtime.as_deref() == Some(spec::LLAMA_CPP) || p.file.ends_with(".gguf");
        let onnx = p.runtime.as_deref() == Some(spec::ONNX_RUNTIME) || p.file.ends_with(".onnx");
        let delegate = if gguf || onnx || p.delegate_recorded { Delegate::from_id(p.delegate.as_deref()) } else { Delegate::read(&file) };
        let source = match (gguf, onnx) {
            (true, _) => Source::Gguf(file),
            (false, true) => Source::Onnx(file),
            (false, false) => Source::Program(file),
        };
        specs.push(BackendSpec {
            name: p.name.clone(),
            title: p.title.clone(),
            about: p.about.clone(),
            column: p.column.clone().unwrap_or_else(|| p.name.clone()),
            source,
            given: false,
            quantization: p.quantization.clone(),
            delegate,
            fixed_len: p.fixed_len,
        });
    }
    // The sentence-transformers `onnx/` folder: each file a variant of the ONNX column.
    let onnx_column = specs.iter().find(|s| s.runtime() == Runtime::OnnxRuntime).map_or_else(|| "onnx".to_string(), |s| s.column.clone());
    for file in crate::model::sentence_transformers::onnx_files(dir.root()) {
        if !specs.iter().any(|s| s.name == file.name) {
            specs.push(BackendSpec::hub_onnx(&file, &onnx_column));
        }
    }
    for (name, file) in extra {
        anyhow::ensure!(
            !name.is_empty() && !name.contains(',') && name.chars().all(|c| !c.is_control()),
            "--program {name}={}: the name must be non-empty, without commas",
            file.display()
        );
        anyhow::ensure!(
            !specs.iter().any(|s| s.name == *name),
            "--program {name}={}: the name {name:?} is taken (the model directory has it); choose another",
            file.display()
        );
        specs.push(BackendSpec::program(name, file));
    }
    Ok(specs)
}

/// The backends shown when none are named: eager, the first program of each
/// column whose file is present, and every `--program`.
pub fn defaults(catalog: &[BackendSpec]) -> Vec<BackendSpec> {
    let mut columns: Vec<&str> = Vec::new();
    let mut chosen = Vec::new();
    for spec in catalog {
        let present = spec.given || file_there(spec);
        if present && !columns.contains(&spec.column.as_str()) {
            columns.push(&spec.column);
            chosen.push(spec.clone());
        }
    }
    chosen
}

/// The specs of `catalog` that share `spec`'s column and whose file is present,
/// in catalog order (F5 cycles them).
pub fn variants(catalog: &[BackendSpec], spec: &BackendSpec) -> Vec<BackendSpec> {
    catalog.iter().filter(|s| s.column == spec.column && file_there(s)).cloned().collect()
}

/// Whether the file a spec brings is there (a program's `.pte`); eager reads
/// the checkpoint the manifest lists, checked when it loads ([`files_present`]).
fn file_there(spec: &BackendSpec) -> bool {
    match &spec.source {
        Source::Program(file) | Source::Gguf(file) | Source::Onnx(file) => file.is_file(),
        Source::Eager(_) => true,
    }
}

/// Whether this binary has the PyTorch eager path (the `eager` cargo feature, libtorch).
pub const HAS_EAGER: bool = cfg!(feature = "eager");

/// A path this binary was built without (eager in the lite build).
#[derive(Debug, thiserror::Error)]
#[error(
    "{0}: this runlens was built without the PyTorch eager path (the lite build: ExecuTorch only, no libtorch); \
     `make build` builds the full binary, target/release/runlens"
)]
pub struct NotBuilt(pub String);

/// `name` is a column of a runtime this binary was built without (eager's in
/// the lite build): the error that says so, instead of "unknown backend".
pub fn not_built(name: &str) -> Option<NotBuilt> {
    let eager = WeightFormat::all(weight_format::DEFAULT_GROUP_SIZE).iter().any(|f| f.backend_name() == name);
    (!HAS_EAGER && eager).then(|| NotBuilt(EAGER.to_string()))
}

/// Load one backend to return `output` (slow: hundreds of ms).
pub fn load(spec: &BackendSpec, dir: &ModelDir, output: OutputKind) -> anyhow::Result<Box<dyn Backend>> {
    Ok(match &spec.source {
        #[cfg(feature = "eager")]
        Source::Eager(format) => Box::new(eager::EagerBackend::load_as(dir, output, *format)?),
        #[cfg(not(feature = "eager"))]
        Source::Eager(_) => return Err(NotBuilt(spec.name.clone()).into()),
        Source::Program(path) => {
            let manifest = dir.manifest();
            let pad_id = manifest.pad_token_id.or(manifest.eos_token_id).unwrap_or(0);
            Box::new(executorch::ExecutorchBackend::load_file(spec, path, output)?.with_pad_id(pad_id))
        }
        Source::Gguf(path) => Box::new(llamacpp::LlamaCppBackend::load(spec, path, dir, output, llamacpp::default_threads())?),
        Source::Onnx(path) => onnxruntime::load_column(spec, path, dir, output)?,
    })
}

/// The files `spec` needs, or [`crate::model::ModelsMissing`] naming the first one absent.
pub fn files_present(spec: &BackendSpec, dir: &ModelDir) -> Result<(), crate::model::ModelsMissing> {
    match &spec.source {
        Source::Program(file) | Source::Gguf(file) | Source::Onnx(file) if file.is_file() => Ok(()),
        Source::Program(file) | Source::Gguf(file) | Source::Onnx(file) => Err(crate::model::ModelsMissing { path: file.clone() }),
        Source::Eager(_) => dir.config().and_then(|_| dir.weight_files()).map(drop),
    }
}

/// Set the thread count of every runtime: libtorch's intra-op threads,
/// ExecuTorch's shared pool (XNNPACK), ONNX Runtime's sessions (intra-op) and
/// llama.cpp's contexts (each column's own, given at its load). Call before loading.
pub fn set_threads(threads: usize) -> anyhow::Result<()> {
    anyhow::ensure!(threads >= 1, "--threads must be at least 1");
    #[cfg(feature = "eager")]
    tch::set_num_threads(threads as i32);
    crate::ffi::set_threads(threads as u32)?;
    llamacpp::set_threads(threads);
    onnxruntime::set_threads(threads);
    Ok(())
}

/// The threads each runtime uses now: (libtorch intra-op, ExecuTorch pool);
/// libtorch's is 0 in a build without the eager path.
pub fn threads() -> (usize, usize) {
    #[cfg(feature = "eager")]
    let libtorch = tch::get_num_threads().max(0) as usize;
    #[cfg(not(feature = "eager"))]
    let libtorch = 0;
    (libtorch, crate::ffi::threads() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn catalog() -> Vec<BackendSpec> {
        let prog = |name: &str, column: &str| BackendSpec {
            name: name.into(),
            title: name.into(),
            about: String::new(),
            column: column.into(),
            source: Source::Program(PathBuf::from(format!("/nonexistent/{name}.pte"))),
            given: false,
            quantization: None,
            delegate: Delegate::None,
            fixed_len: None,
        };
        vec![BackendSpec::eager(), prog("portable", "portable"), prog("xnnpack", "xnnpack"), prog("xnnpack-int8", "xnnpack")]
    }

    /// The delegate is the manifest's when it says one (null included), else read
    /// from the file; never guessed from the name.
    #[test]
    fn the_delegate_comes_from_the_manifest_or_the_file_not_the_name() {
        let tmp = tempfile::tempdir().unwrap();
        let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/pte/testdata");
        for (from, to) in [("flat_xnnpack", "a"), ("flat_portable", "b"), ("foo_backend", "c")] {
            std::fs::copy(testdata.join(format!("{from}.pte")), tmp.path().join(format!("{to}.pte"))).unwrap();
        }
        let manifest = r#"{"runlens_manifest": 2, "model": "x", "task": "feature-extraction", "max_seq_len": 64,
            "programs": [{"name": "my-portable-thing", "file": "a.pte", "title": "A"},
                         {"name": "xnnpack-fast", "file": "b.pte", "title": "B"},
                         {"name": "c", "file": "c.pte", "title": "C"},
                         {"name": "said-none", "file": "a.pte", "title": "D", "delegate": null},
                         {"name": "said-xnnpack", "file": "b.pte", "title": "E", "delegate": "XnnpackBackend", "fixed_len": 64}]}"#;
        std::fs::write(tmp.path().join("manifest.json"), manifest).unwrap();
        let dir = ModelDir::open(tmp.path()).unwrap();
        let extra = [("given".to_string(), tmp.path().join("a.pte")), ("gone".to_string(), tmp.path().join("gone.pte"))];
        let specs = super::catalog(&dir, &extra).unwrap();
        let of = |name: &str| specs.iter().find(|s| s.name == name).unwrap();
        assert_eq!(of("my-portable-thing").delegate, Delegate::Xnnpack);
        assert_eq!(of("xnnpack-fast").delegate, Delegate::None);
        assert!(matches!(&of("c").delegate, Delegate::Other(id) if !id.is_empty()), "{:?}", of("c").delegate);
        assert_eq!(of("said-none").delegate, Delegate::None, "the manifest's null is no delegate");
        assert_eq!((of("said-xnnpack").delegate.clone(), of("said-xnnpack").fixed_len), (Delegate::Xnnpack, Some(64)));
        assert_eq!(of("given").delegate, Delegate::Xnnpack);
        assert_eq!(of("gone").delegate, Delegate::Unknown);
        assert!(specs.iter().all(|s| s.runtime() == Runtime::ExecuTorch));
        // Undelegated or not is the delegate above, whatever the name says.
        assert!(of("my-portable-thing").is_float_xnnpack_program());
        assert!(!of("xnnpack-fast").is_float_xnnpack_program());
        assert!(!of("said-xnnpack").is_float_xnnpack_program(), "a fixed-length program is not the one bench pairs");
        assert!(!BackendSpec::eager().per_operator_times().is_available() && BackendSpec::eager().runtime() == Runtime::Eager);
    }

    #[test]
    fn defaults_take_the_first_present_program_of_each_column() {
        let c = catalog();
        let names = |v: Vec<BackendSpec>| v.into_iter().map(|s| s.name).collect::<Vec<_>>();
        // No file exists: eager only.
        assert_eq!(names(defaults(&c)), ["eager"]);
        let given = BackendSpec::program("mine", Path::new("/nonexistent/mine.pte"));
        let mut c2 = c.clone();
        c2.push(given);
        assert_eq!(names(defaults(&c2)), ["eager", "mine"]);

        // Real files: the catalog of a directory holding some of the programs.
        let tmp = tempfile::tempdir().unwrap();
        let at = |c: &[BackendSpec], present: &[&str]| -> Vec<BackendSpec> {
            c.iter()
                .map(|s| {
                    let mut s = s.clone();
                    if let Source::Program(file) = &s.source {
                        let file = tmp.path().join(file.file_name().unwrap());
                        if present.contains(&s.name.as_str()) {
                            std::fs::write(&file, b"a program").unwrap();
                        } else {
                            let _ = std::fs::remove_file(&file);
                        }
                        s.source = Source::Program(file);
                    }
                    s
                })
                .collect()
        };
        // Every file present: the first program of each column (xnnpack, not xnnpack-int8).
        assert_eq!(names(defaults(&at(&c, &["portable", "xnnpack", "xnnpack-int8"]))), ["eager", "portable", "xnnpack"]);
        // The column's first file missing: its next present program stands in.
        assert_eq!(names(defaults(&at(&c, &["portable", "xnnpack-int8"]))), ["eager", "portable", "xnnpack-int8"]);
        assert_eq!(names(variants(&at(&c, &["portable", "xnnpack-int8"]), &c[2])), ["xnnpack-int8"]);
        // A column with no file: gone, the others stay.
        assert_eq!(names(defaults(&at(&c, &["xnnpack"]))), ["eager", "xnnpack"]);
        // A --program is shown although its file is missing (its column says so).
        let mut c3 = at(&c, &["portable", "xnnpack"]);
        c3.push(BackendSpec::program("mine", &tmp.path().join("mine.pte")));
        assert!(!tmp.path().join("mine.pte").exists());
        assert_eq!(names(defaults(&c3)), ["eager", "portable", "xnnpack", "mine"]);
        // A program from the manifest with the same missing file is not.
        let mut unlisted = BackendSpec::program("mine", &tmp.path().join("mine.pte"));
        unlisted.given = false;
        let mut c4 = at(&c, &["portable"]);
        c4.push(unlisted);
        assert_eq!(names(defaults(&c4)), ["eager", "portable"]);
    }
}

/// A runtime's thread count from `--threads` (0: not set, all cores), one per
/// runtime that keeps its own (llama.cpp's contexts, ONNX Runtime's sessions).
pub struct ThreadSetting(std::sync::atomic::AtomicUsize);

impl ThreadSetting {
    pub const fn new() -> ThreadSetting {
        ThreadSetting(std::sync::atomic::AtomicUsize::new(0))
    }

    pub fn set(&self, threads: usize) {
        self.0.store(threads, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn get(&self) -> usize {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

impl Default for ThreadSetting {
    fn default() -> ThreadSetting {
        ThreadSetting::new()
    }
}
