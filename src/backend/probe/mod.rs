//! The probe: before this process loads a `.pte`, a child process (runlens
//! itself, `runlens probe-program FILE`, hidden) loads it and runs `forward`
//! once on a representative input. ExecuTorch ends a process when one of its
//! `ET_CHECK`s fails (a kernel unpacking an argument of the wrong type, say):
//! `runtime_abort()` never returns and the runtime is built without exceptions,
//! so nothing in-process can turn that into an error. In the child it costs
//! only the child; here it becomes an error naming the file, the method, the
//! instruction and ExecuTorch's own reason, and the other backends go on.
//!
//! Verdicts are cached by the file's SHA-256 (and runlens' version) in
//! `$RUNLENS_CACHE_DIR`, else `$XDG_CACHE_HOME/runlens`, else `~/.cache/runlens`,
//! so a program is probed once. `RUNLENS_PROBE=0` turns the probe off.
//!
//! What the probe cannot catch (an abort that depends on the input, not the
//! program) still ends the process, but never silently: the shim's abort hook
//! calls [`report_abort`] (the explorer restores the terminal first), which
//! names the file, the method and the reason; the status is 134.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::ffi::{AbortReport, EtModule};

pub(crate) mod cache;
mod input;

pub use cache::cache_dir;
use cache::{cache_path, file_key, read_cached, write_cached};
pub use input::{kv_cache_inputs, probe_inputs, representative_input};

/// The hidden subcommand the child runs.
pub const PROBE_COMMAND: &str = "probe-program";
/// A child that has not answered by then is killed and the load fails.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// What the child found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Loaded and ran `forward` once; `peak`: the most the child held above what
    /// it held before reading the file, in bytes, when it could measure it
    /// (`crate::memory::measured`: the memory check uses it).
    Runs {
        #[serde(default)]
        peak: Option<u64>,
    },
    /// ExecuTorch refused to load it, with this error (naming the file); the
    /// load here would fail the same way, so it is not tried.
    RefusesLoad { error: String },
    /// It loaded but `forward` failed on the probe's input: the load here goes
    /// on (another input may run; if not, that error is reported).
    RefusesRun { error: String },
    /// ExecuTorch aborted the child.
    Aborts { report: AbortReport },
    /// The child ended by a signal, a timeout or without a verdict.
    Crashes { how: String, stderr: String },
}

/// The probe's error: the program would take the process down.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProgramAborts(pub String);

/// Check `path` before this process loads it (the one call in the load path).
/// `Ok` when the child ran it (or it loaded and only the probe's input failed);
/// ExecuTorch's own error when it refused to load it; an error naming the file
/// and the reason when ExecuTorch aborted or the child crashed.
pub fn check(path: &Path) -> anyhow::Result<()> {
    if !enabled() {
        return Ok(());
    }
    let Some(exe) = probe_exe() else {
        return Ok(());
    };
    let (_, key) = file_key(path)?;
    let cached = cache_path(&key).and_then(|p| read_cached(&p));
    let verdict = match cached {
        Some(v) => v,
        None => {
            let v = probe_in_child(&exe, path)?;
            if !matches!(v, Verdict::Crashes { .. }) {
                if let Some(p) = cache_path(&key) {
                    write_cached(&p, &v);
                }
            }
            v
        }
    };
    match verdict {
        Verdict::Runs { .. } | Verdict::RefusesRun { .. } => Ok(()),
        Verdict::RefusesLoad { error } => Err(anyhow::anyhow!(error)),
        Verdict::Aborts { report } => Err(ProgramAborts(describe_probe_abort(path, &report)).into()),
        Verdict::Crashes { how, stderr } => {
            let tail: Vec<&str> = stderr.lines().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
            let detail = if tail.is_empty() { String::new() } else { format!(": {}", tail.join(" / ")) };
            Err(ProgramAborts(format!(
                "{}: ExecuTorch {how} in runlens' probe (a child process that loads the program and runs method 'forward' once){detail}. \
                 The file is damaged or not a program this ExecuTorch can run: re-export it (`make models`)",
                path.display()
            ))
            .into())
        }
    }
}

/// Whether programs are probed: not with `RUNLENS_PROBE=0`, nor in a library
/// user outside the runlens binary (nothing to re-execute; the abort hook still
/// reports instead of a silent abort).
/// The peak the probe's child measured for the program at `path` (its verdict's),
/// when one is cached; reads no program (a file whose digest is not remembered has none).
pub fn measured_peak(path: &Path) -> Option<u64> {
    let dir = cache_dir()?;
    let digest = cache::remembered_digest_of(path, &dir)?;
    match read_cached(&cache_path(&cache::key_of_digest(&digest))?)? {
        Verdict::Runs { peak } => peak,
        _ => None,
    }
}

pub fn enabled() -> bool {
    !std::env::var("RUNLENS_PROBE").is_ok_and(|v| v == "0") && probe_exe().is_some()
}

/// The child: load `path` with a tracer (so an abort names its instruction),
/// run `forward` once, print the verdict as one JSON line. An ExecuTorch abort
/// prints [`Verdict::Aborts`] from the abort hook and ends with status 134.
pub fn run_child(path: &Path) -> i32 {
    crate::ffi::set_abort_handler(|report| {
        let verdict = Verdict::Aborts { report: report.clone() };
        if let Ok(line) = serde_json::to_string(&verdict) {
            println!("{line}");
        }
    });
    let _ = crate::ffi::set_threads(1);
    let verdict = probe_here(path);
    match serde_json::to_string(&verdict) {
        Ok(line) => {
            println!("{line}");
            0
        }
        Err(_) => 1,
    }
}

fn probe_here(path: &Path) -> Verdict {
    // From before runlens' reader takes the file in, as the load in the parent does.
    let watch = crate::ffi::process::Watch::start();
    let coverage = match crate::pte::inspect_file(path) {
        Ok(c) => c,
        Err(e) => return Verdict::RefusesLoad { error: format!("{}: {e}", path.display()) },
    };
    let plan = coverage.plan("forward").or_else(|| coverage.plans.first());
    let mut module = match EtModule::load(path, true) {
        Ok(m) => m,
        Err(e) => return Verdict::RefusesLoad { error: e.message },
    };
    // input_ids (with attention_mask, or cache_position for a KV-cache decoder, when it takes one).
    let inputs = probe_inputs(plan);
    let tensors: Vec<crate::ffi::LongTensor> = inputs.iter().map(|(data, sizes)| crate::ffi::LongTensor::new(data, sizes)).collect();
    match module.execute(&tensors) {
        Ok(_) => Verdict::Runs { peak: watch.and_then(|w| w.peak()) },
        Err(e) => Verdict::RefusesRun { error: e.message },
    }
}

fn probe_in_child(exe: &Path, path: &Path) -> anyhow::Result<Verdict> {
    let mut child = Command::new(exe)
        .args(["--threads", "1", PROBE_COMMAND])
        .arg(path)
        .env_remove("RUNLENS_ET_LOG")
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
