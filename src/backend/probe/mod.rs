//! The probe: before this process loads a model file, a child process
//! (runlens itself, `runlens probe FILE --load WHAT`, hidden) loads it with its
//! runtime and runs it once on a representative input, for every runtime that
//! reads a file: a `.pte` through ExecuTorch (`forward` once), a GGUF through
//! llama.cpp (its context as the column makes it, one prefill or one pooled
//! embedding) and an `.onnx` through ONNX Runtime (a session, one run). [`Load`]
//! says which and how; [`once`] holds the one "load and run once" function of
//! each runtime, peers chosen by [`Load`], and everything else (the child, the
//! verdict, its cache, the measured peak, the messages) is written once.
//!
//! Why a child: each runtime ends the process on some damaged files. ExecuTorch
//! when one of its `ET_CHECK`s fails (`runtime_abort()` never returns; the
//! runtime is built without exceptions); llama.cpp on a failed `GGML_ASSERT`
//! (a GGUF whose `block_count` is 0 passes every check of the loader's and
//! aborts in its reading of the hyperparameters); ONNX Runtime on whatever its
//! kernels meet. Nothing in-process can turn that into an error. In the child
//! it costs only the child; here it becomes an error naming the file, the
//! runtime and its reason (ExecuTorch's abort report, else the signal and the
//! child's last lines of stderr: llama.cpp's `GGML_ASSERT(...) failed`), and the
//! other columns go on. runlens' own readers (`crate::pte`, `crate::gguf`,
//! `crate::onnx`) still check each file first, in the child and here: the probe
//! is for what gets past them.
//!
//! The child also measures its peak memory (load and run, above what it held
//! before: `crate::ffi::process::Watch`), kept in the verdict; the memory check
//! reads it ([`measured_peak`], `crate::memory::measured`) for all three runtimes.
//!
//! Verdicts are cached by the file's SHA-256, the [`Load`] (a GGUF's context
//! length and pooling) and runlens' version in `$RUNLENS_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/runlens`, else `~/.cache/runlens`, so a file is probed once
//! per use. `RUNLENS_PROBE=0` turns the probe off.
//!
//! What the probe cannot catch (an abort that depends on the input, not the
//! file) still ends the process, but an ExecuTorch abort never silently: the
//! shim's abort hook calls [`report_abort`] (the explorer restores the
//! terminal first), which names the file, the method and the reason; the status is 134.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::ffi::AbortReport;

pub(crate) mod cache;
mod input;
mod once;

pub use cache::cache_dir;
use cache::{cache_path, file_key, read_cached, write_cached};
pub use input::{kv_cache_inputs, probe_inputs, representative_input};
pub use once::Refusal;

/// The hidden subcommand the child runs (`probe-program`, its name before
/// every runtime was probed, is kept as an alias: an ExecuTorch load).
pub const PROBE_COMMAND: &str = "probe";
/// A child that has not answered by then is killed and the load fails.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// What the child loads, and how: the runtime, and what of the load in this
/// process the child must repeat to meet what it would meet. Part of the
/// verdict's cache key. Passed to the child as JSON (`--load`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "runtime", rename_all = "snake_case")]
pub enum Load {
    /// A `.pte` through ExecuTorch: method `forward` once.
    Executorch,
    /// A GGUF through llama.cpp, its context made as the column makes it: for
    /// `max_len` positions (the model directory's longest sequence; the file's
    /// own limit when smaller), an encoder's pooled embedding or a decoder's prefill.
    LlamaCpp { max_len: u32, pooled: bool },
    /// An `.onnx` through ONNX Runtime: a session on the CPU, one run.
    OnnxRuntime,
}

impl Load {
    /// The runtime's name in messages.
    pub fn runtime(&self) -> &'static str {
        match self {
            Load::Executorch => "ExecuTorch",
            Load::LlamaCpp { .. } => "llama.cpp",
            Load::OnnxRuntime => "ONNX Runtime",
        }
    }

    /// What the child does, for messages.
    fn what_the_child_does(&self) -> &'static str {
        match self {
            Load::Executorch => "loads the program and runs method 'forward' once",
            Load::LlamaCpp { pooled: false, .. } => "loads the GGUF with llama.cpp and runs one prefill",
            Load::LlamaCpp { pooled: true, .. } => "loads the GGUF with llama.cpp and embeds one input",
            Load::OnnxRuntime => "opens the file in an ONNX Runtime session and runs it once",
        }
    }

    /// What to do about a file the runtime cannot survive.
    fn remedy(&self) -> &'static str {
        match self {
            Load::Executorch => "The file is damaged or not a program this ExecuTorch can run: re-export it (`make models`)",
            Load::LlamaCpp { .. } => "The file is damaged or not a GGUF this llama.cpp can run: convert it again (`make models`)",
            Load::OnnxRuntime => "The file is damaged or not a model this ONNX Runtime can run: export it again (`make models`)",
        }
    }

    /// Its part of the cache key (a file name's characters).
    fn key(&self) -> String {
        match self {
            Load::Executorch => "executorch".into(),
            Load::LlamaCpp { max_len, pooled } => format!("llamacpp-{max_len}-{}", if *pooled { "pooled" } else { "prefill" }),
            Load::OnnxRuntime => "onnxruntime".into(),
        }
    }

    /// The load a column of `spec` makes in `dir`; `None` for eager (no file of its own to probe).
    /// A GGUF is pooled for an embedding task, a prefill for generation.
    pub fn of_spec(spec: &super::BackendSpec, dir: &crate::model::ModelDir) -> Option<Load> {
        match &spec.source {
            super::Source::Program(_) => Some(Load::Executorch),
            super::Source::Gguf(_) => Some(Load::LlamaCpp { max_len: dir.max_seq_len() as u32, pooled: !dir.task().takes_a_prompt() }),
            super::Source::Onnx(_) => Some(Load::OnnxRuntime),
            super::Source::Eager(_) => None,
        }
    }
}

/// What the child found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Loaded and ran once; `peak`: the most the child held above what
    /// it held before reading the file, in bytes, when it could measure it
    /// (`crate::memory::measured`: the memory check uses it).
    Runs {
        #[serde(default)]
        peak: Option<u64>,
    },
    /// The runtime (or runlens' reader before it) refused to load it, with this
    /// error (naming the file); the load here would fail the same way, so it is not tried.
    RefusesLoad { error: String },
    /// It loaded but the run failed on the probe's input: the load here goes
    /// on (another input may run; if not, that error is reported).
    RefusesRun { error: String },
    /// The child could not try the file: its runtime could not start there (ONNX
    /// Runtime's library missing, say). Says nothing of the file: not cached.
    CannotTry { error: String },
    /// ExecuTorch aborted the child (its abort hook's report).
    Aborts { report: AbortReport },
    /// The child ended by a signal, a timeout or without a verdict.
    Crashes { how: String, stderr: String },
}

/// The probe's error: the file would take the process down.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProgramAborts(pub String);

/// Check `path` before this process loads it as `load` says (the one call in
/// each runtime's load path). `Ok` when the child ran it (or it loaded and only
/// the probe's input failed); the runtime's own error when it refused to load
/// it; an error naming the file, the runtime and the reason when the runtime
/// aborted or the child crashed.
pub fn check(path: &Path, load: &Load) -> anyhow::Result<()> {
    if !enabled() {
        return Ok(());
    }
    let Some(exe) = probe_exe() else {
        return Ok(());
    };
    let (_, key) = file_key(path, &load.key())?;
    let cached = cache_path(&key).and_then(|p| read_cached(&p));
    let verdict = match cached {
        Some(v) => v,
        None => {
            let v = probe_in_child(&exe, path, load)?;
            if !matches!(v, Verdict::Crashes { .. } | Verdict::CannotTry { .. }) {
                if let Some(p) = cache_path(&key) {
                    write_cached(&p, &v);
                }
            }
            v
        }
    };
    match verdict {
        Verdict::Runs { .. } | Verdict::RefusesRun { .. } => Ok(()),
        Verdict::RefusesLoad { error } | Verdict::CannotTry { error } => Err(anyhow::anyhow!(error)),
        Verdict::Aborts { report } => Err(ProgramAborts(describe_probe_abort(path, &report)).into()),
        Verdict::Crashes { how, stderr } => Err(ProgramAborts(describe_crash(path, load, &how, &stderr)).into()),
    }
}

/// The error of a child that ended without a verdict: the file, the runtime,
/// how the child ended, its last lines of stderr (llama.cpp's `GGML_ASSERT`).
fn describe_crash(path: &Path, load: &Load, how: &str, stderr: &str) -> String {
    let tail: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
    let detail = if tail.is_empty() { String::new() } else { format!(": {}", tail.join(" / ")) };
    format!("{}: {} {how} in runlens' probe (a child process that {}){detail}. {}", path.display(), load.runtime(), load.what_the_child_does(), load.remedy())
}

/// The peak the probe's child measured for the file at `path` loaded as `load`
/// (its verdict's), when one is cached; reads no model file (a file whose
/// digest is not remembered has none).
pub fn measured_peak(path: &Path, load: &Load) -> Option<u64> {
    let dir = cache_dir()?;
    let digest = cache::remembered_digest_of(path, &dir)?;
    match read_cached(&cache_path(&cache::key_of_digest(&digest, &load.key()))?)? {
        Verdict::Runs { peak } => peak,
        _ => None,
    }
}

/// Whether files are probed: not with `RUNLENS_PROBE=0`, nor in a library
/// user outside the runlens binary (nothing to re-execute; the abort hook still
/// reports instead of a silent abort).
pub fn enabled() -> bool {
    !std::env::var("RUNLENS_PROBE").is_ok_and(|v| v == "0") && probe_exe().is_some()
}

/// The child: load `path` as `load` says and run it once (an ExecuTorch
/// program with a tracer, so an abort names its instruction), print the verdict
/// as one JSON line. An ExecuTorch abort prints [`Verdict::Aborts`] from the
/// abort hook and ends with status 134; llama.cpp's and ONNX Runtime's end the
/// child without a verdict, which the parent reads as [`Verdict::Crashes`].
pub fn run_child(path: &Path, load: &Load) -> i32 {
    crate::ffi::set_abort_handler(|report| {
        let verdict = Verdict::Aborts { report: report.clone() };
        if let Ok(line) = serde_json::to_string(&verdict) {
            println!("{line}");
        }
    });
    let _ = super::set_threads(1);
    // From before runlens' reader takes the file in, as the load in the parent does.
    let watch = crate::ffi::process::Watch::start();
    let verdict = match once::load_and_run(path, load) {
        Ok(()) => Verdict::Runs { peak: watch.and_then(|w| w.peak()) },
        Err(Refusal::Load(error)) => Verdict::RefusesLoad { error },
        Err(Refusal::Run(error)) => Verdict::RefusesRun { error },
        Err(Refusal::Runtime(error)) => Verdict::CannotTry { error },
    };
    match serde_json::to_string(&verdict) {
        Ok(line) => {
            println!("{line}");
            0
        }
        Err(_) => 1,
    }
}

fn probe_in_child(exe: &Path, path: &Path, load: &Load) -> anyhow::Result<Verdict> {
    let load_json = serde_json::to_string(load)?;
    let mut child = Command::new(exe)
        .args(["--threads", "1", PROBE_COMMAND])
        .arg(path)
        .args(["--load", &load_json])
        .env_remove("RUNLENS_ET_LOG")
        // ggml's abort otherwise attaches gdb to the child for a backtrace (slow, and its text is no use here).
        .env("GGML_NO_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("{}: cannot start runlens' probe {}: {e}", path.display(), exe.display()))?;
    // Read both pipes on threads so a chatty child cannot block on a full pipe.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if start.elapsed() > PROBE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let verdict = stdout.lines().rev().find_map(|l| serde_json::from_str::<Verdict>(l).ok());
    Ok(match (status, verdict) {
        (_, Some(v)) => v,
        (None, None) => Verdict::Crashes { how: format!("did not finish within {} s", PROBE_TIMEOUT.as_secs()), stderr },
        (Some(status), None) => Verdict::Crashes { how: describe_exit(status), stderr },
    })
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.signal(), status.code()) {
        (Some(sig), _) => format!("crashed ({})", signal_name(sig)),
        (None, Some(code)) => format!("ended with status {code} and no verdict"),
        _ => "ended without a verdict".to_string(),
    }
}

fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGSEGV => "SIGSEGV, a segmentation fault".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGBUS => "SIGBUS".into(),
        libc::SIGFPE => "SIGFPE".into(),
        libc::SIGILL => "SIGILL".into(),
        libc::SIGKILL => "SIGKILL, killed (out of memory?)".into(),
        other => format!("signal {other}"),
    }
}

/// The runlens binary to re-execute: `$RUNLENS_PROBE_EXE`, this executable when
/// it is runlens, else `runlens` next to the test binary's `deps/` folder.
fn probe_exe() -> Option<PathBuf> {
    if let Some(exe) = std::env::var_os("RUNLENS_PROBE_EXE").filter(|e| !e.is_empty()) {
        return Some(PathBuf::from(exe));
    }
    let me = std::env::current_exe().ok()?;
    if me.file_stem().is_some_and(|s| s == "runlens") {
        return Some(me);
    }
    let sibling = me.parent()?.parent()?.join("runlens");
    sibling.is_file().then_some(sibling)
}

/// "method 'forward', instruction 52 (kernel aten::mul.out)", read from the
/// program with runlens' own reader.
fn where_it_was(report: &AbortReport) -> String {
    let method = if report.method.is_empty() { "?" } else { report.method.as_str() };
    let mut text = format!("method '{method}'");
    if let (Some(chain), Some(index)) = (report.chain, report.instruction) {
        text += &format!(", instruction {index}");
        if chain != 0 {
            text += &format!(" of chain {chain}");
        }
        let what = crate::pte::read_program_file(Path::new(&report.program))
            .ok()
            .and_then(|(_, table)| table.plan(method)?.describe(chain as usize, index as usize));
        if let Some(what) = what {
            text += &format!(" ({what})");
        }
    } else if report.phase == "loading" {
        text += ", while loading";
    }
    text
}

fn describe_probe_abort(path: &Path, report: &AbortReport) -> String {
    format!(
        "{}: ExecuTorch aborts on this program: {} ({}; found by runlens' probe, which ran it once in a child process). \
         The file is damaged or was not written for this ExecuTorch: re-export it (`make models`)",
        path.display(),
        report.reason.trim_end_matches('.'),
        where_it_was(report),
    )
}

/// The message of an abort in this process (the probe passed, the input made
/// the difference). The default abort handler prints it.
pub fn describe_abort(report: &AbortReport) -> String {
    let program = if report.program.is_empty() { "a program" } else { report.program.as_str() };
    let phase = if report.phase.is_empty() { "using" } else { report.phase.as_str() };
    format!(
        "ExecuTorch aborted runlens while {phase} {program} ({}): {}. ExecuTorch ends the process when an internal \
         check fails; runlens' probe (a child process that runs each program once before it is loaded) did not meet \
         this abort with its own input, so this input made the difference, or the probe was off (RUNLENS_PROBE=0). \
         The file may be damaged: re-export it (`make models`)",
        where_it_was(report),
        report.reason.trim_end_matches('.')
    )
}

/// The abort handler of the command line: the report on stderr.
pub fn report_abort(report: &AbortReport) {
    eprintln!("error: {}", describe_abort(report));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip_through_the_cache_format() {
        let report = AbortReport {
            program: "x.pte".into(),
            method: "forward".into(),
            phase: "running".into(),
            chain: Some(0),
            instruction: Some(52),
            reason: "F evalue.h:207] EValue is not an int.".into(),
        };
        for v in [Verdict::Runs { peak: None }, Verdict::Runs { peak: Some(1 << 30) }, Verdict::RefusesLoad { error: "e".into() }, Verdict::RefusesRun { error: "f".into() }, Verdict::Aborts { report }] {
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(serde_json::from_str::<Verdict>(&json).unwrap(), v, "{json}");
        }
    }

    #[test]
    fn loads_round_trip_and_a_crash_names_the_file_the_runtime_and_the_reason() {
        for load in [Load::Executorch, Load::LlamaCpp { max_len: 128, pooled: false }, Load::OnnxRuntime] {
            let json = serde_json::to_string(&load).unwrap();
            assert_eq!(serde_json::from_str::<Load>(&json).unwrap(), load, "{json}");
        }
        assert_eq!(Load::LlamaCpp { max_len: 64, pooled: true }.key(), "llamacpp-64-pooled");
        let stderr = "llama_model_loader: loaded meta data\n\n/src/llama-model.cpp:1330: GGML_ASSERT(hparams.n_layer_all > 0) failed\n";
        let text = describe_crash(Path::new("/nowhere/x.gguf"), &Load::LlamaCpp { max_len: 64, pooled: false }, "crashed (SIGABRT)", stderr);
        for part in ["/nowhere/x.gguf: llama.cpp crashed (SIGABRT)", "runs one prefill", "GGML_ASSERT(hparams.n_layer_all > 0) failed", "convert it again"] {
            assert!(text.contains(part), "{part:?} missing: {text}");
        }
        let text = describe_crash(Path::new("m.onnx"), &Load::OnnxRuntime, "crashed (SIGSEGV, a segmentation fault)", "");
        assert!(text.starts_with("m.onnx: ONNX Runtime crashed (SIGSEGV, a segmentation fault) in runlens' probe (a child process that opens"), "{text}");
    }

    #[test]
    fn an_abort_message_names_file_method_and_reason() {
        let report = AbortReport {
            program: "/nowhere/x.pte".into(),
            method: "forward".into(),
            phase: "running".into(),
            chain: Some(0),
            instruction: Some(52),
            reason: "F evalue.h:207] In function toInt(), assert failed (isInt()): EValue is not an int.".into(),
        };
        let text = describe_probe_abort(Path::new("/nowhere/x.pte"), &report);
        for part in ["/nowhere/x.pte", "method 'forward'", "instruction 52", "EValue is not an int", "re-export"] {
            assert!(text.contains(part), "{part:?} missing: {text}");
        }
    }
}
