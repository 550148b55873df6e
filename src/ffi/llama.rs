//! llama.cpp's C API (`llama.h`, bound by the `llama-cpp-sys-2` crate, which
//! compiles the llama.cpp it vendors), wrapped safe: a loaded model with its
//! one context ([`LlamaSession`]), quantizing a GGUF ([`quantize`]), and
//! llama.cpp's own description of the CPU kernels it was built with
//! ([`system_info`]).
//!
//! Why not the `llama-cpp-2` crate's safe API: its context borrows its model
//! (`LlamaContext<'model>`), so the two cannot live in one struct a worker
//! thread owns; it panics where runlens wants an error (a logits row not
//! marked); and it exposes neither quantizing nor the log lines a failed load
//! leaves behind. The calls runlens makes are few, so they are here, each with
//! why it is sound.
//!
//! llama.cpp's log goes to `log_callback`, never to the terminal: the lines
//! of the call under way are kept, and a failed call's error carries its
//! warnings and errors (a load that fails says why only in its log).
//! llama.cpp's C API catches C++ exceptions itself (`llama_model_load_from_file`,
//! `llama_decode` and `llama_encode` turn them into a status); what it cannot
//! survive (a `GGML_ASSERT`) runlens keeps away from it by checking the file
//! ([`crate::gguf`]) and the inputs before each call.

use std::ffi::{c_char, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

use llama_cpp_sys_2 as sys;

/// A failed llama.cpp call: what runlens asked, and what llama.cpp logged while it ran.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct LlamaError {
    pub message: String,
}

impl LlamaError {
    fn new(what: String, since: u64) -> LlamaError {
        let lines = log_since(since);
        let message = if lines.is_empty() { what } else { format!("{what}; llama.cpp said: {}", lines.join(" / ")) };
        LlamaError { message }
    }
}

/// The lines llama.cpp logged at warning level or above, numbered, the newest
/// 64 (a load's reasons are a few lines).
struct LogLines {
    next: u64,
    lines: std::collections::VecDeque<(u64, String)>,
}

static LOG: Mutex<LogLines> = Mutex::new(LogLines { next: 0, lines: std::collections::VecDeque::new() });
/// The number the next line will get, read without the lock.
static LOG_NEXT: AtomicU64 = AtomicU64::new(0);
static INIT: Once = Once::new();

/// llama.cpp's and ggml's logger. It may be called from ggml's worker threads;
/// it never panics (a poisoned lock drops the line).
extern "C" fn log_callback(level: sys::ggml_log_level, text: *const c_char, _user: *mut c_void) {
    if text.is_null() || level < sys::GGML_LOG_LEVEL_WARN || level == sys::GGML_LOG_LEVEL_CONT {
        return;
    }
    // SAFETY: ggml passes a NUL-terminated string that lives for this call.
    let line = unsafe { CStr::from_ptr(text) }.to_string_lossy().trim().to_string();
    if line.is_empty() {
        return;
    }
    if let Ok(mut log) = LOG.lock() {
        let n = log.next;
        log.next += 1;
        LOG_NEXT.store(log.next, Ordering::Relaxed);
        log.lines.push_back((n, line));
        if log.lines.len() > 64 {
            log.lines.pop_front();
        }
    }
}

fn log_mark() -> u64 {
    LOG_NEXT.load(Ordering::Relaxed)
}

fn log_since(mark: u64) -> Vec<String> {
    LOG.lock().map(|log| log.lines.iter().filter(|(n, _)| *n >= mark).map(|(_, l)| l.clone()).collect()).unwrap_or_default()
}

/// Start llama.cpp once per process, its log sent to [`log_callback`].
fn init() {
    INIT.call_once(|| {
        // SAFETY: log_callback is a plain function valid for the whole process and
        // never unwinds; llama_backend_init has no inputs and is called once.
        unsafe {
            sys::llama_log_set(Some(log_callback), std::ptr::null_mut());
            sys::llama_backend_init();
        }
    });
}

/// llama.cpp's line on what its CPU kernels were built with (`AVX2 = 1`,
/// `DOTPROD = 1`, `REPACK = 1`, ...).
pub fn system_info() -> String {
    init();
    // SAFETY: returns a pointer to a static NUL-terminated buffer owned by llama.cpp.
    let text = unsafe { sys::llama_print_system_info() };
    if text.is_null() {
        return String::new();
    }
    // SAFETY: non-null, NUL-terminated, static (above).
    unsafe { CStr::from_ptr(text) }.to_string_lossy().trim().to_string()
}

fn c_path(path: &Path) -> Result<CString, LlamaError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| LlamaError { message: format!("{}: the path has a NUL byte", path.display()) })
}

/// A weight type [`quantize`] writes: every tensor but the 1-D ones (`pure`,
/// so the embedding and output matrices are not mixed in at another type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantType {
    Q8_0,
    Q4_0,
}

impl QuantType {
    pub fn name(self) -> &'static str {
        match self {
            QuantType::Q8_0 => "q8_0",
            QuantType::Q4_0 => "q4_0",
        }
    }

    pub fn parse(name: &str) -> Option<QuantType> {
        [QuantType::Q8_0, QuantType::Q4_0].into_iter().find(|q| q.name() == name)
    }

    fn ftype(self) -> sys::llama_ftype {
        match self {
            QuantType::Q8_0 => sys::LLAMA_FTYPE_MOSTLY_Q8_0,
            QuantType::Q4_0 => sys::LLAMA_FTYPE_MOSTLY_Q4_0,
        }
    }
}

/// Write `output`, `input`'s weights quantized to `to` by llama.cpp's own quantizer.
pub fn quantize(input: &Path, output: &Path, to: QuantType, threads: usize) -> Result<(), LlamaError> {
    init();
    let (cin, cout) = (c_path(input)?, c_path(output)?);
    let mark = log_mark();
    // SAFETY: returns a plain struct by value.
    let mut params = unsafe { sys::llama_model_quantize_default_params() };
    params.nthread = threads.clamp(1, 64) as i32;
    params.ftype = to.ftype();
    params.pure_ = true;
    // SAFETY: both paths are NUL-terminated and outlive the call; params is a
    // valid struct from llama.cpp's defaults whose pointers stay null.
    let status = unsafe { sys::llama_model_quantize(cin.as_ptr(), cout.as_ptr(), &params) };
    if status == 0 {
        Ok(())
    } else {
        Err(LlamaError::new(format!("{}: llama.cpp could not quantize it to {} (status {status})", input.display(), to.name()), mark))
    }
}

/// What a context is made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextOptions {
    /// The most positions it holds (prompt and new tokens).
    pub n_ctx: u32,
    /// The most tokens one call takes.
    pub n_batch: u32,
    /// The most tokens llama.cpp computes at once (a longer call is split);
    /// an encoder's whole input must fit (llama.cpp asserts it), so an
    /// encoder's is its `n_batch`.
    pub n_ubatch: u32,
    pub threads: usize,
    /// An encoder's mean-pooled embedding instead of logits.
    pub embeddings: bool,
    /// Keep the KV cache and attention in float32 (llama.cpp's defaults are a
    /// float16 cache and, on the CPU, flash attention in float16).
    pub kv_f32: bool,
}

/// llama.cpp's own counters of a context: the time inside its prefill calls
/// (more than one token) and its one-token calls, since the last reset.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    pub prefill_ms: f64,
    pub prefill_tokens: u64,
    pub decode_ms: f64,
    pub decode_tokens: u64,
}

/// A GGUF model loaded by llama.cpp, with one context.
pub struct LlamaSession {
    model: NonNull<sys::llama_model>,
    ctx: NonNull<sys::llama_context>,
    path: PathBuf,
    options: ContextOptions,
    n_vocab: usize,
    n_embd_out: usize,
}

// SAFETY: llama.cpp's model and context are not tied to the thread that made
// them; a session is owned by one thread at a time (runlens' workers), and
// `&mut self` on every call that runs the context keeps calls from overlapping.
unsafe impl Send for LlamaSession {}

impl LlamaSession {
    /// Load `path` (memory-mapped, CPU only) and make its context.
    pub fn load(path: &Path, options: ContextOptions) -> Result<LlamaSession, LlamaError> {
        init();
        let cpath = c_path(path)?;
        let mark = log_mark();
        // SAFETY: returns a plain struct by value.
        let mut mparams = unsafe { sys::llama_model_default_params() };
        mparams.n_gpu_layers = 0;
        // SAFETY: the path is NUL-terminated and outlives the call; the params are
        // llama.cpp's defaults (null pointers, no callbacks). Null means failure.
        let model = unsafe { sys::llama_model_load_from_file(cpath.as_ptr(), mparams) };
        let model = NonNull::new(model)
            .ok_or_else(|| LlamaError::new(format!("{}: llama.cpp could not load it", path.display()), mark))?;
        // SAFETY: returns a plain struct by value.
        let mut cparams = unsafe { sys::llama_context_default_params() };
        cparams.n_ctx = options.n_ctx;
        cparams.n_batch = options.n_batch;
        cparams.n_ubatch = options.n_ubatch.min(options.n_batch);
        cparams.n_seq_max = 1;
        cparams.n_threads = options.threads.clamp(1, 512) as i32;
        cparams.n_threads_batch = cparams.n_threads;
        cparams.no_perf = false;
        cparams.embeddings = options.embeddings;
        if options.kv_f32 {
            cparams.type_k = sys::GGML_TYPE_F32;
            cparams.type_v = sys::GGML_TYPE_F32;
            // llama.cpp's CPU flash attention works in float16: off, so float32 stays float32.
            cparams.flash_attn_type = sys::LLAMA_FLASH_ATTN_TYPE_DISABLED;
        }
        if options.embeddings {
            cparams.pooling_type = sys::LLAMA_POOLING_TYPE_MEAN;
        }
        // SAFETY: model is a live model from the call above; cparams is valid.
        let ctx = unsafe { sys::llama_init_from_model(model.as_ptr(), cparams) };
        let Some(ctx) = NonNull::new(ctx) else {
            // SAFETY: the model is ours and nothing else refers to it.
            unsafe { sys::llama_model_free(model.as_ptr()) };
            return Err(LlamaError::new(format!("{}: llama.cpp could not make a context of {} positions", path.display(), options.n_ctx), mark));
        };
        // SAFETY: model is live; the vocabulary pointer lives as long as the model.
        let (n_vocab, n_embd_out) = unsafe {
            let vocab = sys::llama_model_get_vocab(model.as_ptr());
            (sys::llama_vocab_n_tokens(vocab).max(0) as usize, sys::llama_model_n_embd_out(model.as_ptr()).max(0) as usize)
        };
        Ok(LlamaSession { model, ctx, path: path.to_path_buf(), options, n_vocab, n_embd_out })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn options(&self) -> ContextOptions {
        self.options
    }

    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// llama.cpp's one-line description of the model (`llama 135M Q4_0`).
    pub fn describe_model(&self) -> String {
        let mut buf = vec![0u8; 256];
        // SAFETY: buf is writable for its length; llama_model_desc writes a
        // NUL-terminated string of at most that many bytes.
        unsafe { sys::llama_model_desc(self.model.as_ptr(), buf.as_mut_ptr().cast::<c_char>(), buf.len()) };
        CStr::from_bytes_until_nul(&buf).map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// The bytes of all its weights, as llama.cpp holds them.
    pub fn model_bytes(&self) -> u64 {
        // SAFETY: the model is live.
        unsafe { sys::llama_model_size(self.model.as_ptr()) }
    }

    /// Forget every position held (a new sequence starts at 0).
    pub fn clear(&mut self) {
        // SAFETY: the context is live; its memory handle lives as long as it.
        unsafe { sys::llama_memory_clear(sys::llama_get_memory(self.ctx.as_ptr()), true) };
    }

    fn check_tokens(&self, tokens: &[i64], first: usize) -> Result<Vec<i32>, LlamaError> {
        let fail = |message: String| LlamaError { message: format!("{}: {message}", self.path.display()) };
        if tokens.is_empty() {
            return Err(fail("no tokens to run".into()));
        }
        if tokens.len() > self.options.n_batch as usize {
            return Err(fail(format!("{} tokens in one call, the context takes at most {}", tokens.len(), self.options.n_batch)));
        }
        if first + tokens.len() > self.options.n_ctx as usize {
            return Err(fail(format!("{} positions, the context holds {}", first + tokens.len(), self.options.n_ctx)));
        }
        tokens
            .iter()
            .map(|&t| match i32::try_from(t) {
                Ok(t) if t >= 0 && (t as usize) < self.n_vocab => Ok(t),
                _ => Err(fail(format!("token id {t} is outside its vocabulary of {}", self.n_vocab))),
            })
            .collect()
    }

    /// Run `tokens` at positions `first..`, keeping the logits of the last one
    /// (a decoder's prefill or step): those logits, `[V]`.
    pub fn decode(&mut self, tokens: &[i64], first: usize) -> Result<Vec<f32>, LlamaError> {
        let ids = self.check_tokens(tokens, first)?;
        let batch = Batch::new(&ids, first, false);
        let mark = log_mark();
        // SAFETY: the context is live; the batch's arrays hold n_tokens entries
        // each and outlive the call (Batch owns them).
        let status = unsafe { sys::llama_decode(self.ctx.as_ptr(), batch.raw()) };
        if status != 0 {
            let why = match status {
                1 => "no room left in its KV cache".to_string(),
                2 => "aborted".to_string(),
                s => format!("status {s}"),
            };
            return Err(LlamaError::new(format!("{}: llama_decode failed: {why}", self.path.display()), mark));
        }
        // SAFETY: the context is live; -1 is the last output of the batch just
        // decoded; null (checked) means there is none.
        let row = unsafe { sys::llama_get_logits_ith(self.ctx.as_ptr(), -1) };
        if row.is_null() {
            return Err(LlamaError::new(format!("{}: llama.cpp returned no logits", self.path.display()), mark));
        }
        // SAFETY: a logits row holds n_vocab floats, valid until the next call on the context.
        Ok(unsafe { std::slice::from_raw_parts(row, self.n_vocab) }.to_vec())
    }

    /// An encoder's mean-pooled embedding of `tokens` (one sequence, from position 0).
    pub fn embed(&mut self, tokens: &[i64]) -> Result<Vec<f32>, LlamaError> {
        let ids = self.check_tokens(tokens, 0)?;
        if ids.len() > self.options.n_ubatch as usize {
            return Err(LlamaError { message: format!("{}: {} tokens, the encoder takes at most {} at once", self.path.display(), ids.len(), self.options.n_ubatch) });
        }
        self.clear();
        let batch = Batch::new(&ids, 0, true);
        let mark = log_mark();
        // SAFETY: as in decode; every position is marked as an output, as pooling
        // needs, and n_tokens <= n_ubatch (check_tokens), as the encoder asserts.
        let status = unsafe { sys::llama_encode(self.ctx.as_ptr(), batch.raw()) };
        if status != 0 {
            return Err(LlamaError::new(format!("{}: llama_encode failed: status {status}", self.path.display()), mark));
        }
        // SAFETY: the context is live; null (checked) when it has no pooled output.
        let row = unsafe { sys::llama_get_embeddings_seq(self.ctx.as_ptr(), 0) };
        if row.is_null() {
            return Err(LlamaError::new(format!("{}: llama.cpp returned no pooled embedding", self.path.display()), mark));
        }
        // SAFETY: a pooled embedding holds n_embd_out floats, valid until the next call.
        Ok(unsafe { std::slice::from_raw_parts(row, self.n_embd_out) }.to_vec())
    }

    /// llama.cpp's own counters since the last [`reset_counters`](Self::reset_counters).
    pub fn counters(&self) -> Counters {
        // SAFETY: the context is live; returns a plain struct by value.
        let p = unsafe { sys::llama_perf_context(self.ctx.as_ptr()) };
        Counters {
            prefill_ms: p.t_p_eval_ms,
            prefill_tokens: p.n_p_eval.max(0) as u64,
            decode_ms: p.t_eval_ms,
            decode_tokens: p.n_eval.max(0) as u64,
        }
    }

    pub fn reset_counters(&mut self) {
        // SAFETY: the context is live.
        unsafe { sys::llama_perf_context_reset(self.ctx.as_ptr()) };
    }
}

impl Drop for LlamaSession {
    fn drop(&mut self) {
        // SAFETY: both are live and owned by this session alone; the context
        // refers to the model, so it is freed first.
        unsafe {
            sys::llama_free(self.ctx.as_ptr());
            sys::llama_model_free(self.model.as_ptr());
        }
    }
}

/// A `llama_batch` of one sequence, its arrays owned here (not by llama.cpp's
/// allocator), so nothing can leak or be freed twice.
struct Batch {
    tokens: Vec<i32>,
    pos: Vec<i32>,
    n_seq_id: Vec<i32>,
    seq: i32,
    seq_ids: Vec<*mut i32>,
    outputs: Vec<i8>,
}

impl Batch {
    fn new(ids: &[i32], first: usize, every_output: bool) -> Box<Batch> {
        let n = ids.len();
        let mut outputs = vec![every_output as i8; n];
        outputs[n - 1] = 1;
        let mut batch = Box::new(Batch {
            tokens: ids.to_vec(),
            pos: (first..first + n).map(|p| p as i32).collect(),
            n_seq_id: vec![1; n],
            seq: 0,
            seq_ids: Vec::new(),
            outputs,
        });
        // Every token's list of sequences is the one sequence 0 (boxed, so its address holds).
        let seq: *mut i32 = &mut batch.seq;
        batch.seq_ids = vec![seq; n];
        batch
    }

    fn raw(&self) -> sys::llama_batch {
        sys::llama_batch {
            n_tokens: self.tokens.len() as i32,
            token: self.tokens.as_ptr().cast_mut(),
            embd: std::ptr::null_mut(),
            pos: self.pos.as_ptr().cast_mut(),
            n_seq_id: self.n_seq_id.as_ptr().cast_mut(),
            seq_id: self.seq_ids.as_ptr().cast_mut(),
            logits: self.outputs.as_ptr().cast_mut(),
        }
    }
}
