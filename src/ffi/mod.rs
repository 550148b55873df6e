//! The one module with `unsafe` in runlens: safe wrappers over the C shim
//! (`shim/runlens_et.h`) that drives ExecuTorch's C++ `Module`, and over
//! llama.cpp's C API ([`llama`]).
//!
//! The shim catches every C++ exception and returns a status; here each status
//! becomes an [`EtError`] carrying ExecuTorch's error code and message (with the
//! ExecuTorch log lines of that call, which the shim captures instead of
//! letting them reach the terminal).

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Once;

pub mod llama;
pub mod process;

#[allow(non_camel_case_types, non_upper_case_globals, dead_code)]
mod sys {
    include!(concat!(env!("OUT_DIR"), "/runlens_et.rs"));
}

/// An error from ExecuTorch or the shim: a code (ExecuTorch's `runtime::Error`
/// when positive) and the message, which names the file.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct EtError {
    pub code: i32,
    pub name: String,
    pub message: String,
}

fn error_name(code: i32) -> String {
    // SAFETY: rl_error_name returns a pointer to a static NUL-terminated string for any code.
    unsafe { CStr::from_ptr(sys::rl_error_name(code)) }.to_string_lossy().into_owned()
}

/// The error the shim recorded for this thread's last failed call.
fn last_error(code: i32) -> EtError {
    let mut buf = vec![0u8; 4096];
    // SAFETY: buf is writable for buf.len() bytes; the shim writes at most that, NUL included.
    let full = unsafe { sys::rl_last_error(buf.as_mut_ptr().cast::<c_char>(), buf.len()) };
    if full >= buf.len() {
        buf = vec![0u8; full + 1];
        // SAFETY: as above, with a buffer large enough for the whole message.
        unsafe { sys::rl_last_error(buf.as_mut_ptr().cast::<c_char>(), buf.len()) };
    }
    let message = CStr::from_bytes_until_nul(&buf).map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
    let name = error_name(code);
    let message = if message.is_empty() { format!("ExecuTorch call failed with status {code} ({name})") } else { message };
    EtError { code, name, message }
}

fn check(status: i32) -> Result<(), EtError> {
    if status == 0 {
        Ok(())
    } else {
        Err(last_error(status))
    }
}

/// What ExecuTorch was doing when it aborted the process (an `ET_CHECK` failed;
/// see `rl_abort_report` in the shim's header).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AbortReport {
    /// The `.pte` being loaded or run; empty when no shim call was under way.
    pub program: String,
    pub method: String,
    /// "loading" or "running".
    pub phase: String,
    /// Chain and instruction being executed (known with a traced module only).
    pub chain: Option<u32>,
    pub instruction: Option<u32>,
    /// ExecuTorch's own reason: its fatal log line(s).
    pub reason: String,
}

/// What runs when ExecuTorch aborts, before the process ends with status 134.
pub type AbortHandler = fn(&AbortReport);

static ABORT_HANDLER: std::sync::RwLock<Option<AbortHandler>> = std::sync::RwLock::new(None);

/// Replace what happens when ExecuTorch aborts: `handler` gets the report on the
/// aborting thread (restore the terminal, say what happened); the shim then ends
/// the process with `_exit(134)`. Without a handler the shim prints the report.
pub fn set_abort_handler(handler: AbortHandler) {
    init_logging();
    if let Ok(mut slot) = ABORT_HANDLER.write() {
        *slot = Some(handler);
    }
}

fn c_text(ptr: *const c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: the shim passes NUL-terminated strings that live for the whole hook call.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
}

extern "C" fn on_abort(raw: *const sys::rl_abort_report) {
    // SAFETY: the shim passes a pointer to a report on its stack, valid during this call (or null).
    let Some(raw) = (unsafe { raw.as_ref() }) else { return };
    let report = AbortReport {
        program: c_text(raw.program),
        method: c_text(raw.method),
        phase: c_text(raw.phase),
        chain: u32::try_from(raw.chain).ok(),
        instruction: u32::try_from(raw.instruction).ok().filter(|_| raw.chain >= 0),
        reason: c_text(raw.reason),
    };
    let handler = ABORT_HANDLER.read().ok().and_then(|h| *h);
    match handler {
        Some(handler) => handler(&report),
        None => eprintln!("error: ExecuTorch aborted while {} {}: {}", report.phase, report.program, report.reason),
    }
}

static LOG_INIT: Once = Once::new();

/// Capture ExecuTorch's log (kept for error messages) and its aborts (reported
/// through [`set_abort_handler`]). The log is echoed to stderr only when
/// `RUNLENS_ET_LOG=1`, so it never lands on the TUI's screen.
pub fn init_logging() {
    LOG_INIT.call_once(|| {
        let echo = std::env::var("RUNLENS_ET_LOG").is_ok_and(|v| v == "1");
        // SAFETY: plain call with an int; the shim registers a static log function.
        let _ = unsafe { sys::rl_log_init(i32::from(echo)) };
        // SAFETY: on_abort is a 'static extern "C" function that never unwinds
        // (a panic in an extern "C" function aborts).
        unsafe { sys::rl_abort_hook_set(Some(on_abort)) };
    });
}

/// Resize ExecuTorch's shared thread pool (XNNPACK's threads). Call before loading.
pub fn set_threads(threads: u32) -> Result<(), EtError> {
    init_logging();
    // SAFETY: plain call with an int.
    check(unsafe { sys::rl_threadpool_set_threads(threads) })
}

/// OpenMP's thread count for the calling thread; None without an OpenMP runtime.
/// ExecuTorch forwards run with 1 and restore it (the shim's `SerialBlasScope`:
/// libtorch's MKL answers ExecuTorch's BLAS calls in this process).
pub fn openmp_threads() -> Option<u32> {
    // SAFETY: no arguments; the shim only asks libgomp, if present, for a per-thread value.
    let n = unsafe { sys::rl_openmp_max_threads() };
    u32::try_from(n).ok().filter(|&n| n > 0)
}

/// The size of ExecuTorch's thread pool.
pub fn threads() -> u32 {
    // SAFETY: plain call, no arguments.
    unsafe { sys::rl_threadpool_threads() }
}

/// Whether the runtime linked into this process has a kernel for the operator
/// `name` (`aten::add.out`, as a program's operator table names it with its overload).
pub fn has_kernel(name: &str) -> bool {
    let Ok(name) = CString::new(name) else { return false };
    // SAFETY: `name` is a NUL-terminated string that outlives the call; the
    // shim only reads it and the registry, and catches every exception.
    unsafe { sys::rl_registry_has_kernel(name.as_ptr()) == 1 }
}

/// Whether the runtime linked into this process has the delegate `name` (`XnnpackBackend`).
pub fn has_backend(name: &str) -> bool {
    let Ok(name) = CString::new(name) else { return false };
    // SAFETY: as in `has_kernel`: a NUL-terminated string the shim only reads.
    unsafe { sys::rl_registry_has_backend(name.as_ptr()) == 1 }
}

/// One int64 input of any rank for [`EtModule::execute`]: `data` holds the
/// product of `sizes` values, row-major.
#[derive(Clone, Copy, Debug)]
pub struct LongTensor<'a> {
    pub data: &'a [i64],
    pub sizes: &'a [i64],
}

impl<'a> LongTensor<'a> {
    pub fn new(data: &'a [i64], sizes: &'a [i64]) -> LongTensor<'a> {
        LongTensor { data, sizes }
    }

    fn describe(&self) -> String {
        format!("[{}]", self.sizes.iter().map(i64::to_string).collect::<Vec<_>>().join(", "))
    }
}

/// One input of [`EtModule::run_method`]: `data` holds the product of `sizes`
/// values, row-major.
#[derive(Debug)]
pub enum MethodInput<'a> {
    /// Copied into the module (token ids, positions: small).
    Long { data: &'a [i64], sizes: &'a [i64] },
    /// Given to the program as its input memory for the call, not copied (a KV
    /// cache prefix). XNNPACK may read up to 16 bytes past its end (its
    /// `XNN_EXTRA_BYTES`): a prefix of a longer `Vec` has them in its allocation.
    Float { data: &'a mut [f32], sizes: &'a [i64] },
}

impl MethodInput<'_> {
    fn parts(&mut self) -> (i32, *mut std::ffi::c_void, usize, &[i64]) {
        match self {
            // The shim only reads a Long input (it copies it), so the cast to *mut is never written through.
            MethodInput::Long { data, sizes } => (sys::RL_DTYPE_LONG as i32, data.as_ptr().cast_mut().cast(), data.len(), sizes),
            MethodInput::Float { data, sizes } => (sys::RL_DTYPE_FLOAT as i32, data.as_mut_ptr().cast(), data.len(), sizes),
        }
    }
}

/// One float output of the last run, borrowed from the module until its next run.
#[derive(Debug)]
pub struct MethodOutput<'a> {
    pub data: &'a [f32],
    pub sizes: Vec<usize>,
}

/// A loaded `.pte` program with its `forward` method, owned by one thread at a time.
pub struct EtModule {
    handle: NonNull<sys::rl_module>,
    path: PathBuf,
    output: Vec<f32>,
    /// run_method's output descriptions; kept, so its capacity is the most outputs seen.
    method_outputs: Vec<sys::rl_tensor_out>,
}

// SAFETY: the shim's module is only touched through &mut self (one thread at a
// time), and ExecuTorch's Module has no thread affinity, so moving it is sound.
// It is not Sync: ExecuTorch's Module must not run concurrently.
unsafe impl Send for EtModule {}

impl EtModule {
    /// Load and verify `path` (InternalConsistency) and its `forward` method;
    /// with `trace`, an ETDump event tracer is attached (for profiles only).
    pub fn load(path: &Path, trace: bool) -> Result<EtModule, EtError> {
        init_logging();
        let c_path = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| EtError {
            code: -2,
            name: error_name(-2),
            message: format!("{}: the path contains a NUL byte", path.display()),
        })?;
        let mut raw: *mut sys::rl_module = std::ptr::null_mut();
        // SAFETY: c_path is a valid NUL-terminated string for the call; raw is a valid out-pointer.
        check(unsafe { sys::rl_module_load(c_path.as_ptr(), i32::from(trace), &mut raw) })?;
        let handle = NonNull::new(raw).ok_or_else(|| EtError {
            code: -1,
            name: error_name(-1),
            message: format!("{}: the shim returned no module", path.display()),
        })?;
        Ok(EtModule { handle, path: path.to_path_buf(), output: Vec::with_capacity(1024), method_outputs: Vec::with_capacity(16) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_inputs(&self, ids: &[i64], mask: Option<&[i64]>) -> Result<(), EtError> {
        if ids.is_empty() || mask.is_some_and(|m| m.len() != ids.len()) {
            return Err(EtError {
                code: -2,
                name: error_name(-2),
                message: format!(
                    "{}: input_ids has {} values and attention_mask {}; they must be equal and non-zero",
                    self.path.display(),
                    ids.len(),
                    mask.map_or(0, <[i64]>::len)
                ),
            });
        }
        Ok(())
    }

    /// Run `forward(input_ids, attention_mask)` (each `[1, len]`), or
    /// `forward(input_ids)` when `mask` is `None`; returns the first output.
    pub fn forward(&mut self, ids: &[i64], mask: Option<&[i64]>) -> Result<&[f32], EtError> {
        self.check_inputs(ids, mask)?;
        let mask_ptr = mask.map_or(std::ptr::null(), <[i64]>::as_ptr);
        loop {
            let mut len = 0usize;
            let cap = self.output.capacity();
            // SAFETY: ids and mask (when not null) hold ids.len() values each (checked above);
            // output has room for `cap` floats and the shim writes at most that many; len is an out-pointer.
            let status = unsafe {
                sys::rl_module_forward(
                    self.handle.as_ptr(),
                    ids.as_ptr(),
                    mask_ptr,
                    ids.len() as i64,
                    self.output.as_mut_ptr(),
                    cap,
                    &mut len,
                )
            };
            if status == sys::RL_ERR_ARGUMENT && len > cap {
                self.output.reserve(len);
                continue;
            }
            check(status)?;
            // SAFETY: the shim initialised exactly `len` <= capacity floats.
            unsafe { self.output.set_len(len) };
            return Ok(&self.output);
        }
    }

    /// Run `forward` on int64 inputs of any rank (e.g. input_ids `[1, S]` and
    /// cache_position `[S]`); returns the first output. State the program keeps
    /// (a KV cache in mutable buffers) persists from one call to the next.
    pub fn execute(&mut self, inputs: &[LongTensor<'_>]) -> Result<&[f32], EtError> {
        let bad = |message: String| EtError { code: -2, name: error_name(-2), message: format!("{}: {message}", self.path.display()) };
        if inputs.is_empty() || inputs.len() > sys::RL_MAX_INPUTS as usize {
            return Err(bad(format!("{} inputs; 1 to {} are taken", inputs.len(), sys::RL_MAX_INPUTS)));
        }
        for (i, t) in inputs.iter().enumerate() {
            let numel = t.sizes.iter().try_fold(1i64, |n, &d| if d >= 1 { n.checked_mul(d) } else { None });
            if t.sizes.is_empty() || t.sizes.len() > sys::RL_MAX_RANK as usize || numel != Some(t.data.len() as i64) {
                return Err(bad(format!("input {i} has {} values for sizes {}", t.data.len(), t.describe())));
            }
        }
        let raw: Vec<sys::rl_long_tensor> =
            inputs.iter().map(|t| sys::rl_long_tensor { data: t.data.as_ptr(), sizes: t.sizes.as_ptr(), rank: t.sizes.len() }).collect();
        loop {
            let mut len = 0usize;
            let cap = self.output.capacity();
            // SAFETY: every raw tensor points at `data` holding the product of its `sizes`
            // (checked above), both borrowed for this call; output has room for `cap` floats
            // and the shim writes at most that many; len is an out-pointer.
            let status = unsafe {
                sys::rl_module_execute(self.handle.as_ptr(), raw.as_ptr(), raw.len(), self.output.as_mut_ptr(), cap, &mut len)
            };
            if status == sys::RL_ERR_ARGUMENT && len > cap {
                self.output.reserve(len);
                continue;
            }
            check(status)?;
            // SAFETY: the shim initialised exactly `len` <= capacity floats.
            unsafe { self.output.set_len(len) };
            return Ok(&self.output);
        }
    }

    /// Run `method` ("forward", "prefill") once on every input it takes, in order;
    /// returns every output (each must be float). Float inputs are the program's
    /// input memory for the call, not copied (for a program lowered with
    /// `alloc_graph_input=False`; others copy them). A program with more than 16
    /// outputs runs twice on its first call (the shim reports the count after a run).
    pub fn run_method(&mut self, method: &str, inputs: &mut [MethodInput<'_>]) -> Result<Vec<MethodOutput<'_>>, EtError> {
        let bad = |message: String| EtError { code: -2, name: error_name(-2), message: format!("{}: {message}", self.path.display()) };
        let c_method = CString::new(method).map_err(|_| bad(format!("method name {method:?} contains a NUL byte")))?;
        if inputs.is_empty() || inputs.len() > sys::RL_MAX_METHOD_INPUTS as usize {
            return Err(bad(format!("{method}: {} inputs; 1 to {} are taken", inputs.len(), sys::RL_MAX_METHOD_INPUTS)));
        }
        let mut raw = Vec::with_capacity(inputs.len());
        for (i, input) in inputs.iter_mut().enumerate() {
            let (dtype, data, len, sizes) = input.parts();
            let numel = sizes.iter().try_fold(1i64, |n, &d| if d >= 1 { n.checked_mul(d) } else { None });
            if sizes.is_empty() || sizes.len() > sys::RL_MAX_RANK as usize || numel != i64::try_from(len).ok() {
                let shape = sizes.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
                return Err(bad(format!("{method}: input {i} has {len} values for sizes [{shape}]")));
            }
            raw.push(sys::rl_tensor_in { dtype, data, sizes: sizes.as_ptr(), rank: sizes.len() });
        }
        let mut retried = false;
        loop {
            self.method_outputs.clear();
            let cap = self.method_outputs.capacity();
            let mut count = 0usize;
            // SAFETY: the handle is live and the name NUL-terminated for the call. Each raw input
            // points at `data` holding the product of its `sizes` (checked above), both borrowed
            // for this call through `inputs`. A Long input is only read (copied). A Float input is
            // an exclusive borrow (`&mut [f32]`) held until this function returns, so nothing else
            // reads or writes it while the program runs on it; the program reads it, or writes it
            // if it mutates that input, only within the values its sizes give (ExecuTorch resizes
            // its input to them), apart from XNNPACK's reads past the end (see MethodInput::Float),
            // which are never written nor used. The program keeps the pointer after the call but
            // never uses it again: the shim makes every later run of a method set all its inputs
            // anew. method_outputs has room for `cap` entries, and the shim writes none when the
            // outputs exceed it; count is an out-pointer.
            let status = unsafe {
                sys::rl_module_run_method(
                    self.handle.as_ptr(),
                    c_method.as_ptr(),
                    raw.as_ptr(),
                    raw.len(),
                    self.method_outputs.as_mut_ptr(),
                    cap,
                    &mut count,
                )
            };
            if status == sys::RL_ERR_ARGUMENT && count > cap && !retried {
                self.method_outputs.reserve(count);
                retried = true;
                continue;
            }
            check(status)?;
            // SAFETY: on success the shim initialised exactly `count` <= capacity entries.
            unsafe { self.method_outputs.set_len(count) };
            break;
        }
        let outputs = self.method_outputs.iter().map(|out| {
            let data = if out.data.is_null() || out.numel == 0 {
                &[][..]
            } else {
                // SAFETY: `data` points at `numel` floats of the module's own (its output memory,
                // or a copy for an output that pointed into an input), valid until its next run,
                // load or destroy, each of which needs `&mut self`, which the returned borrow holds.
                // Nothing writes them meanwhile; they never alias a caller's input.
                unsafe { std::slice::from_raw_parts(out.data, out.numel) }
            };
            let sizes = out.sizes[..out.rank.min(out.sizes.len())].iter().map(|&d| usize::try_from(d).unwrap_or(0)).collect();
            MethodOutput { data, sizes }
        });
        Ok(outputs.collect())
    }

    /// Nanoseconds the last successful forward ([`forward`](Self::forward) or a run of
    /// [`forward_loop`](Self::forward_loop)) spent inside the shim, in the span the loop
    /// times; 0 before the first.
    pub fn last_run_ns(&self) -> u64 {
        // SAFETY: the handle is a live module owned by self; the call only reads a field.
        unsafe { sys::rl_module_last_run_ns(self.handle.as_ptr()) }
    }

    /// The first output of the last successful forward or execute (empty before one).
    pub fn last_output(&self) -> &[f32] {
        &self.output
    }

    /// The sizes of the first output of the last successful forward (empty before one).
    pub fn output_shape(&self) -> Vec<usize> {
        let mut dims = [0i64; 8];
        // SAFETY: the handle is a live module owned by self; dims has room for 8 values and
        // the shim writes at most that many.
        let rank = unsafe { sys::rl_module_output_shape(self.handle.as_ptr(), dims.as_mut_ptr(), dims.len()) };
        dims[..rank.min(dims.len())].iter().map(|&d| usize::try_from(d).unwrap_or(0)).collect()
    }

    /// `forward` `iters` times in the shim's own C++ loop; nanoseconds of each run.
    pub fn forward_loop(&mut self, ids: &[i64], mask: Option<&[i64]>, iters: u32) -> Result<Vec<u64>, EtError> {
        self.check_inputs(ids, mask)?;
        let mut times = vec![0u64; iters as usize];
        let mask_ptr = mask.map_or(std::ptr::null(), <[i64]>::as_ptr);
        // SAFETY: inputs as in forward; times has room for exactly `iters` values.
        check(unsafe {
            sys::rl_module_forward_loop(self.handle.as_ptr(), ids.as_ptr(), mask_ptr, ids.len() as i64, iters, times.as_mut_ptr())
        })?;
        Ok(times)
    }

    /// Makes the tracer (module loaded with `trace`) copy every intermediate
    /// output into a buffer the ETDump's debug events point into. The buffer
    /// grows as a run logs (the shim's own sink: ExecuTorch's fixed one ends
    /// the process when a tensor does not fit); `reserve` bytes are set aside
    /// up front ([`crate::pte::PlanInstructions::logged_output_bytes`]).
    pub fn log_outputs(&mut self, reserve: usize) -> Result<(), EtError> {
        // SAFETY: the handle is valid for the life of self.
        check(unsafe { sys::rl_module_log_outputs(self.handle.as_ptr(), reserve) })
    }

    /// A copy of what the tracer wrote into the buffer of [`EtModule::log_outputs`].
    pub fn debug_buffer(&mut self) -> Result<Vec<u8>, EtError> {
        // The bytes stay the module's until it is destroyed or log_outputs is called again.
        self.copy_out(sys::rl_module_debug_buffer)
    }

    /// The ETDump bytes of the traced runs so far (module loaded with `trace`).
    pub fn take_etdump(&mut self) -> Result<Vec<u8>, EtError> {
        // The bytes stay the module's until the next call on it.
        self.copy_out(sys::rl_module_take_etdump)
    }

    /// Calls a shim function that points `data` at `len` bytes the module owns
    /// and copies them out before anything else touches the module.
    fn copy_out(
        &mut self,
        call: unsafe extern "C" fn(*mut sys::rl_module, *mut *const u8, *mut usize) -> i32,
    ) -> Result<Vec<u8>, EtError> {
        let mut data: *const u8 = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: the handle is live for the life of self; data and len are valid out-pointers.
        check(unsafe { call(self.handle.as_ptr(), &mut data, &mut len) })?;
        if data.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: on success `data` points at `len` bytes the module owns; `&mut self`
        // keeps every other call on the module out until they are copied.
        Ok(unsafe { std::slice::from_raw_parts(data, len) }.to_vec())
    }
}

/// ExecuTorch's ticks (the unit of ETDump timestamps) to nanoseconds, as the
/// platform layer defines it: `ns = ticks * numerator / denominator`.
pub fn ticks_to_ns_ratio() -> Result<(u64, u64), EtError> {
    init_logging();
    let (mut numerator, mut denominator) = (0u64, 0u64);
    // SAFETY: both are valid out-pointers for the call.
    check(unsafe { sys::rl_ticks_to_ns_ratio(&mut numerator, &mut denominator) })?;
    Ok((numerator, denominator))
}

impl Drop for EtModule {
    fn drop(&mut self) {
        // SAFETY: the handle came from rl_module_load and is destroyed exactly once, here.
        unsafe { sys::rl_module_destroy(self.handle.as_ptr()) }
    }
}

/// Leave the process now, without C++ static destructors or atexit handlers.
/// The explorer quits while worker threads may still be inside libtorch or
/// ExecuTorch (loading a model, say); tearing those libraries down under them
/// corrupted the heap (glibc abort on quit during loading). The terminal is
/// restored before this is called.
pub fn exit_immediately(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: _exit takes an int and never returns; buffered output was flushed above.
    unsafe { libc::_exit(code) }
}
