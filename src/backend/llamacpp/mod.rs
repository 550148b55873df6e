//! The llama.cpp path: a GGUF file (the directory's `llamacpp-*.gguf`, or one
//! given with `--program NAME=FILE.gguf`) run by llama.cpp's CPU kernels
//! through [`crate::ffi::llama`].
//!
//! runlens tokenizes for every column and hands llama.cpp ids, so every column
//! sees the same tokens; the GGUF's own vocabulary only has to load and be as
//! large as the model directory's. Before llama.cpp sees a file, runlens reads
//! its header itself ([`crate::gguf`]) and refuses what llama.cpp would fail
//! or abort on, and checks that this CPU has the instructions the build's
//! kernels use ([`cpu`]); then runlens' probe loads it in a child process and
//! runs it once ([`load_and_run_once`], `super::probe`), so a file whose
//! hyperparameters make llama.cpp abort (a `GGML_ASSERT`) costs only the child.
//!
//! What it gives each task: text-generation, a decoder with llama.cpp's KV
//! cache (prefill in one call, one call a token); feature-extraction, the
//! mean-pooled embedding, L2-normalised here as the `.pte` programs do inside.
//! llama.cpp has no fill-mask or classification head for these models, and says so.

pub mod cpu;

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Backend, BackendSpec, Decoder, NativeLoop, OutputKind, RuntimeCounters};
use crate::ffi::llama::{ContextOptions, LlamaSession};
use crate::gguf::GgufFile;
use crate::model::ModelDir;
use crate::tensor::{Encoded, OutputTensor};

/// `--threads`, for the llama.cpp columns still to load (0: not set, all
/// cores). A column reads it once, as [`crate::backend::load`] hands it to
/// [`LlamaCppBackend::load`], and its context keeps its own count from then
/// on: a later [`set_threads`] (`bench`'s sweep) changes no column loaded.
static DEFAULT_THREADS: super::ThreadSetting = super::ThreadSetting::new();

pub fn set_threads(threads: usize) {
    DEFAULT_THREADS.set(threads);
}

/// The count a column loaded now gets.
pub fn default_threads() -> usize {
    DEFAULT_THREADS.get()
}

/// The probe's child runs the file on one thread, as its other runtimes (`probe::run_child`).
const PROBE_THREADS: usize = 1;

/// The architectures llama.cpp runs for each task here.
fn architectures_for(output: OutputKind) -> Result<&'static [&'static str], String> {
    match output {
        OutputKind::NextToken => Ok(&["llama", "qwen2", "qwen3", "gpt2"]),
        OutputKind::Pooled => Ok(&["bert"]),
        OutputKind::TokenLogits => Err("llama.cpp has no fill-mask head for these models (its BERT gives embeddings only)".into()),
        OutputKind::ClassLogits => Err("llama.cpp has no classification head for these models (its BERT gives embeddings only)".into()),
    }
}

pub struct LlamaCppBackend {
    spec: BackendSpec,
    session: LlamaSession,
    output: OutputKind,
    header: GgufFile,
    /// Positions the context holds now (a decoder's sequence so far).
    filled: usize,
    load_time: Duration,
    /// The counters as they were before the last run (for its own time).
    before_last: RuntimeCounters,
}

impl LlamaCppBackend {
    /// Check `path` (the CPU, the header, the task) and load it to return
    /// `output`, its context computing on `threads` threads (the column's own).
    pub fn load(spec: &BackendSpec, path: &Path, dir: &ModelDir, output: OutputKind, threads: usize) -> anyhow::Result<LlamaCppBackend> {
        if !path.is_file() {
            return Err(crate::model::ModelsMissing { path: path.to_path_buf() }.into());
        }
        let archs = architectures_for(output).map_err(|why| anyhow::anyhow!("{}: {why}", path.display()))?;
        cpu::check()?;
        let header = crate::gguf::read_path(path)?;
        // The task first (an encoder's GGUF in a decoder's directory says so), then the rest.
        let arch = header.architecture().unwrap_or_default().to_string();
        anyhow::ensure!(
            !crate::gguf::ARCHITECTURES.contains(&arch.as_str()) || archs.contains(&arch.as_str()),
            "{}: a GGUF of architecture {arch}; this model directory's task needs {} ({})",
            path.display(),
            output.expected(),
            archs.join(" or ")
        );
        header.check_runnable(expected_vocab(dir))?;
        let pooled = output == OutputKind::Pooled;
        super::probe::check(path, &super::probe::Load::LlamaCpp { max_len: dir.max_seq_len() as u32, pooled })?;
        let options = context_options(&header, dir.max_seq_len(), pooled, threads);
        let start = Instant::now();
        let session = LlamaSession::load(path, options)?;
        let load_time = start.elapsed();
        Ok(LlamaCppBackend { spec: spec.clone(), session, output, header, filled: 0, load_time, before_last: RuntimeCounters::default() })
    }

    /// The threads this column's context computes on.
    pub fn threads(&self) -> usize {
        self.session.options().threads
    }

    /// The header runlens read before loading.
    pub fn header(&self) -> &GgufFile {
        &self.header
    }

    fn counters(&self) -> RuntimeCounters {
        let c = self.session.counters();
        RuntimeCounters { prefill_ms: c.prefill_ms, prefill_tokens: c.prefill_tokens, decode_ms: c.decode_ms, decode_tokens: c.decode_tokens }
    }

    fn mark(&mut self) {
        self.before_last = self.counters();
    }
}

/// The bytes of one KV-cache element in the context runlens makes for this file: a
/// float32 GGUF keeps a float32 cache (the column's parity reference, as ExecuTorch's
/// float programs do), a quantized one llama.cpp's default float16. Read by the context
/// and by the memory estimate, so the two cannot disagree.
pub fn kv_cache_element_bytes(header: &GgufFile) -> u64 {
    if header.main_type().is_some_and(|t| t.name() == "f32") { 4 } else { 2 }
}

/// The context a column makes: a decoder holds `max_len` positions (the model
/// directory's longest sequence), at most the model's own limit; an encoder
/// (`pooled`) takes its whole input in one physical batch (llama.cpp asserts it).
/// The one place that sizes it (the column's load, the probe's child).
fn context_options(header: &GgufFile, max_len: usize, pooled: bool, threads: usize) -> ContextOptions {
    let mut n_ctx = max_len.max(2);
    if let Some(trained) = header.context_length().filter(|&c| c > 0) {
        n_ctx = n_ctx.min(trained as usize);
    }
    let n_ubatch = if pooled { n_ctx } else { n_ctx.min(512) };
    let kv_f32 = kv_cache_element_bytes(header) == 4;
    ContextOptions { n_ctx: n_ctx as u32, n_batch: n_ctx as u32, n_ubatch: n_ubatch as u32, threads, embeddings: pooled, kv_f32 }
}

/// The probe's child (`super::probe`): read the header as the column's load
/// does (all but the directory's vocabulary, which the parent checked), load
/// the file into the same context, and run the probe's input once: one prefill,
/// or one pooled embedding; its ids kept inside the file's vocabulary and the context.
pub fn load_and_run_once(path: &Path, max_len: usize, pooled: bool) -> Result<(), super::probe::Refusal> {
    use super::probe::Refusal;
    cpu::check().map_err(|e| Refusal::Runtime(format!("{}: {e:#}", path.display())))?;
    let header = crate::gguf::read_path(path).map_err(|e| Refusal::Load(e.to_string()))?;
    header.check_runnable(None).map_err(|e| Refusal::Load(e.to_string()))?;
    let options = context_options(&header, max_len, pooled, PROBE_THREADS);
    let mut session = LlamaSession::load(path, options).map_err(|e| Refusal::Load(e.message))?;
    let vocab = session.n_vocab().max(1) as i64;
    let (mut ids, _) = super::probe::representative_input(None);
    ids.truncate(options.n_ctx as usize);
    ids.iter_mut().for_each(|id| *id %= vocab);
    let ran = if pooled { session.embed(&ids).map(drop) } else { session.decode(&ids, 0).map(drop) };
    ran.map_err(|e| Refusal::Run(e.message))
}

/// The vocabulary the model directory's tokenizer ids index: config.json's `vocab_size`.
fn expected_vocab(dir: &ModelDir) -> Option<u64> {
    dir.model_config().ok()?.vocab_size
}

impl Backend for LlamaCppBackend {
    fn describe(&self) -> String {
        let shape = match self.output {
            OutputKind::NextToken => format!("KV cache of {} positions", self.session.options().n_ctx),
            _ => format!("up to {} tokens, mean pooling", self.session.options().n_batch),
        };
        format!(
            "{}: {}, {} ({}), {shape}, {} threads",
            self.spec.title,
            self.spec.about,
            self.session.path().display(),
            self.session.describe_model(),
            self.session.options().threads
        )
    }

    fn run(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor> {
        self.mark();
        match self.output {
            OutputKind::NextToken => {
                let logits = self.prefill(&input.ids)?;
                Ok(OutputTensor::new(vec![1, logits.len()], logits))
            }
            _ => {
                let mut v = self.session.embed(&input.ids)?;
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm > 0.0 && norm.is_finite() {
                    v.iter_mut().for_each(|x| *x /= norm);
                }
                Ok(OutputTensor::new(vec![1, v.len()], v))
            }
        }
    }

    fn as_decoder(&mut self) -> Option<&mut dyn Decoder> {
        (self.output == OutputKind::NextToken).then_some(self as &mut dyn Decoder)
    }

    /// The weights a decode step reads: every tensor but the token embedding
    /// (one row is looked up) unless it is also the output matrix (no
    /// `output.weight`), and the position and token-type tables.
    fn weight_bytes_per_token(&self) -> Option<u64> {
        (self.output == OutputKind::NextToken).then(|| {
            let tied = !self.header.tensors.iter().any(|t| t.name == "output.weight");
            self.header
                .tensors
                .iter()
                .filter(|t| match t.name.as_str() {
                    "token_embd.weight" => tied,
                    "position_embd.weight" | "token_types.weight" => false,
                    _ => true,
                })
                .map(|t| t.nbytes)
                .sum()
        })
    }

    /// float32 for an F32 file, llama.cpp's default float16 for a quantized one
    /// ([`kv_cache_element_bytes`], as the context was made).
    fn kv_cache_element_bytes(&self) -> Option<u64> {
        (self.output == OutputKind::NextToken).then(|| kv_cache_element_bytes(&self.header))
    }

    fn load_time(&self) -> Option<Duration> {
        Some(self.load_time)
    }

    fn native_loop(&mut self) -> Option<&mut dyn NativeLoop> {
        Some(self)
    }

    fn runtime_counters(&mut self) -> Option<RuntimeCounters> {
        Some(self.counters())
    }
}

/// llama.cpp's loop is its own `llama_decode` / `llama_encode`: its counters
/// time the call inside llama.cpp, what runlens' wrapper adds is the rest.
impl NativeLoop for LlamaCppBackend {
    fn last_run_ns(&mut self) -> u64 {
        let (now, before) = (self.counters(), self.before_last);
        let ms = (now.prefill_ms - before.prefill_ms) + (now.decode_ms - before.decode_ms);
        (ms.max(0.0) * 1e6) as u64
    }

    fn run_native(&mut self, input: &Encoded) -> anyhow::Result<u64> {
        self.run(input)?;
        Ok(self.last_run_ns())
    }
}

impl Decoder for LlamaCppBackend {
    fn max_len(&self) -> usize {
        self.session.options().n_ctx as usize
    }

    fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>> {
        anyhow::ensure!(!prompt.is_empty(), "{}: the prompt is empty: type some text to continue", self.session.path().display());
        self.session.clear();
        self.filled = 0;
        let logits = self.session.decode(prompt, 0)?;
        self.filled = prompt.len();
        Ok(logits)
    }

    fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>> {
        anyhow::ensure!(self.filled > 0, "{}: a step before any prefill (no sequence to continue)", self.session.path().display());
        let logits = self.session.decode(&[token], self.filled)?;
        self.filled += 1;
        Ok(logits)
    }
}
