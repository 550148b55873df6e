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
//! of the call under way are kept, per thread, and a failed call's error
//! carries its own warnings and errors (a load that fails says why only in
//! its log), not another column's that loads at the same time.
//! llama.cpp's C API catches C++ exceptions itself (`llama_model_load_from_file`,
//! `llama_decode` and `llama_encode` turn them into a status); what it cannot
//! survive (a `GGML_ASSERT`) runlens keeps away from it by checking the file
//! ([`crate::gguf`]) and the inputs before each call.

use std::ffi::{c_char, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::Once;

use llama_cpp_sys_2 as sys;

/// A failed llama.cpp call: what runlens asked, and what llama.cpp logged while it ran.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct LlamaError {
    pub message: String,
}

impl LlamaError {
    /// `what` failed; `lines` are the call's own log ([`logged`]).
    fn new(what: String, lines: &[String]) -> LlamaError {
        let message = if lines.is_empty() { what } else { format!("{what}; llama.cpp said: {}", lines.join(" / ")) };
        LlamaError { message }
    }
}

/// The most lines one call keeps (a load's reasons are a few lines).
const MAX_LINES: usize = 64;

thread_local! {
    /// The lines llama.cpp logged at warning level or above on this thread
    /// during the call under way ([`logged`]); `None` when no call is.
    static CAPTURED: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

static INIT: Once = Once::new();

/// llama.cpp's and ggml's logger, set once for the process ([`init`]).
///
/// Why a line reaches the call that caused it, with columns loading and
/// running at once: llama.cpp's and ggml's loggers (`llama_log_internal`,
/// `ggml_log_internal`) call this function directly, on the thread that logs;
/// the calls runlens makes log their failures on the thread that made the
/// call, before they return (a load's, a context's, a decode's and a
/// quantizer's errors are caught and logged there). So each line goes to the
/// capture of its own thread ([`CAPTURED`]), and a column's worker thread sees
/// only its own. A line from a thread with no capture (one of ggml's compute
/// threads) is dropped: none of them says why a call failed.
///
/// Not a `user_data` per call: llama.cpp keeps the callback and its
/// `user_data` in a plain global it reads without a lock, so setting them for
/// each load while another column's call logs would be a data race in C++.
/// They are set once, before any other call, and never changed.
///
/// It never panics: a thread being torn down, or a capture already borrowed,
/// drops the line.
extern "C" fn log_callback(level: sys::ggml_log_level, text: *const c_char, _user: *mut c_void) {
    if text.is_null() || level < sys::GGML_LOG_LEVEL_WARN || level == sys::GGML_LOG_LEVEL_CONT {
        return;
    }
    // SAFETY: ggml passes a NUL-terminated string that lives for this call.
    let line = unsafe { CStr::from_ptr(text) }.to_string_lossy().trim().to_string();
    if line.is_empty() {
        return;
    }
    let _ = CAPTURED.try_with(|captured| {
        if let Ok(mut captured) = captured.try_borrow_mut() {
            if let Some(lines) = captured.as_mut().filter(|l| l.len() < MAX_LINES) {
                lines.push(line);
            }
        }
    });
}

/// Run `call` (llama.cpp calls made by this thread) with this thread's log
/// captured: its result and the lines it logged.
fn logged<T>(call: impl FnOnce() -> T) -> (T, Vec<String>) {
    CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
    let result = call();
    let lines = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (result, lines)
}

/// Start llama.cpp once per process, its log sent to [`log_callback`].
fn init() {
    INIT.call_once(|| {
        // SAFETY: log_callback is a plain function valid for the whole process and
        // never unwinds; llama_backend_init has no inputs and is called once. Both
        // run before any other llama.cpp call (every entry point calls init first),
        // and the logger is never set again (see log_callback).
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
    // SAFETY: returns a plain struct by value.
    let mut params = unsafe { sys::llama_model_quantize_default_params() };
    params.nthread = threads.clamp(1, 64) as i32;
    params.ftype = to.ftype();
    params.pure_ = true;
    // SAFETY: both paths are NUL-terminated and outlive the call; params is a
    // valid struct from llama.cpp's defaults whose pointers stay null.
    let (status, log) = logged(|| unsafe { sys::llama_model_quantize(cin.as_ptr(), cout.as_ptr(), &params) });
    if status == 0 {
        Ok(())
    } else {
        Err(LlamaError::new(format!("{}: llama.cpp could not quantize it to {} (status {status})", input.display(), to.name()), &log))
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
        // SAFETY: returns a plain struct by value.
        let mut mparams = unsafe { sys::llama_model_default_params() };
        mparams.n_gpu_layers = 0;
        // SAFETY: the path is NUL-terminated and outlives the call; the params are
        // llama.cpp's defaults (null pointers, no callbacks). Null means failure.
        let (model, mut log) = logged(|| unsafe { sys::llama_model_load_from_file(cpath.as_ptr(), mparams) });
        let model = NonNull::new(model)
            .ok_or_else(|| LlamaError::new(format!("{}: llama.cpp could not load it", path.display()), &log))?;
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
        let (ctx, more) = logged(|| unsafe { sys::llama_init_from_model(model.as_ptr(), cparams) });
        log.extend(more);
        let Some(ctx) = NonNull::new(ctx) else {
            // SAFETY: the model is ours and nothing else refers to it.
            unsafe { sys::llama_model_free(model.as_ptr()) };
            return Err(LlamaError::new(format!("{}: llama.cpp could not make a context of {} positions", path.display(), options.n_ctx), &log));
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
        // SAFETY: the context is live; the batch's arrays hold n_tokens entries
        // each and outlive the call (Batch owns them).
        let (status, log) = logged(|| unsafe { sys::llama_decode(self.ctx.as_ptr(), batch.raw()) });
        if status != 0 {
            let why = match status {
                1 => "no room left in its KV cache".to_string(),
                2 => "aborted".to_string(),
                s => format!("status {s}"),
            };
            return Err(LlamaError::new(format!("{}: llama_decode failed: {why}", self.path.display()), &log));
        }
        // SAFETY: the context is live; -1 is the last output of the batch just
        // decoded; null (checked) means there is none.
        let row = unsafe { sys::llama_get_logits_ith(self.ctx.as_ptr(), -1) };
        if row.is_null() {
            return Err(LlamaError::new(format!("{}: llama.cpp returned no logits", self.path.display()), &log));
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
        // SAFETY: as in decode; every position is marked as an output, as pooling
        // needs, and n_tokens <= n_ubatch (check_tokens), as the encoder asserts.
        let (status, log) = logged(|| unsafe { sys::llama_encode(self.ctx.as_ptr(), batch.raw()) });
        if status != 0 {
            return Err(LlamaError::new(format!("{}: llama_encode failed: status {status}", self.path.display()), &log));
        }
        // SAFETY: the context is live; null (checked) when it has no pooled output.
        let row = unsafe { sys::llama_get_embeddings_seq(self.ctx.as_ptr(), 0) };
        if row.is_null() {
            return Err(LlamaError::new(format!("{}: llama.cpp returned no pooled embedding", self.path.display()), &log));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    /// Two columns' loads at once, each failing with lines that name its own
    /// file: each error has its own lines and none of the other's. With one
    /// log for the process (lines numbered, a call taking those since it began)
    /// a load took the other's lines logged while it ran.
    #[test]
    fn loads_at_once_each_get_their_own_log_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let options = ContextOptions { n_ctx: 16, n_batch: 16, n_ubatch: 16, threads: 1, embeddings: false, kv_f32: false };
        let names = ["first-column", "second-column"];
        let barrier = Arc::new(Barrier::new(names.len()));
        let loads: Vec<_> = names
            .iter()
            .map(|name| {
                let path = tmp.path().join(format!("{name}.gguf"));
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    (0..40).map(|_| LlamaSession::load(&path, options).err().expect("no such file").message).collect::<Vec<_>>()
                })
            })
            .collect();
        for (name, load) in names.iter().zip(loads) {
            let other = names.iter().find(|n| *n != name).unwrap();
            for message in load.join().unwrap() {
                let said = message.split_once("; llama.cpp said: ").map(|(_, said)| said).unwrap_or_else(|| panic!("no log lines: {message}"));
                assert!(said.contains(&format!("{name}.gguf")), "{name}: {message}");
                assert!(!said.contains(other), "{name} has {other}'s lines: {message}");
            }
        }
        // A thread with no call under way keeps nothing.
        assert!(CAPTURED.with(|c| c.borrow().is_none()));
    }
}
