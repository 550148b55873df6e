//! One stack as a child process, measured at the points the protocol stops it:
//! the child loads (imports, tokenizer, model), prints `loaded` and waits for a
//! line on stdin; the parent reads its memory; the child runs the text once,
//! prints `result {"run_ms", "embedding"}` and waits again; the parent reads its
//! memory and mapped files, then closes stdin and the child exits. Spoken by
//! `runlens footprint-probe` and `python/footprint_probe.py`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Deserialize;

use super::process::{MappedCode, Resident};

/// What the child reports with its first result.
#[derive(Debug, Deserialize)]
pub struct ProbeResult {
    /// The child's own time for tokenizing and running the text once.
    pub run_ms: f64,
    pub embedding: Vec<f32>,
}

/// The figures of one child, from its start to its first result.
#[derive(Debug)]
pub struct Measured {
    pub after_load: Resident,
    pub after_run: Resident,
    pub mapped: MappedCode,
    /// From spawning the process to its `loaded` line.
    pub load_ms: f64,
    /// From the parent's go to the child's `result` line.
    pub first_run_ms: f64,
    pub result: ProbeResult,
}

impl Measured {
    /// Time from process start to the first result, the parent's pause excluded.
    pub fn start_to_first_result_ms(&self) -> f64 {
        self.load_ms + self.first_run_ms
    }
}

/// A command that speaks the protocol, and the file counted as its program.
#[derive(Debug, Clone)]
pub struct ProbeCommand {
    pub argv: Vec<String>,
    pub program: PathBuf,
}

impl ProbeCommand {
    pub fn display(&self) -> String {
        self.argv.iter().map(|a| if a.contains(' ') { format!("'{a}'") } else { a.clone() }).collect::<Vec<_>>().join(" ")
    }
}

/// Start the child, stop it at both points, measure, let it go.
pub fn measure(command: &ProbeCommand, timeout: Duration) -> anyhow::Result<Measured> {
    let (first, rest) = command.argv.split_first().context("an empty command")?;
    let start = Instant::now();
    let mut child = Command::new(first)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {first}"))?;
    let pid = child.id();
    let mut session = Session::new(&mut child)?;
    let outcome = (|| -> anyhow::Result<Measured> {
        session.expect("loaded", timeout)?;
        let load_ms = start.elapsed().as_secs_f64() * 1e3;
        let after_load = Resident::of(pid)?;
        let go = Instant::now();
        session.go()?;
        let line = session.expect("result", timeout)?;
        let first_run_ms = go.elapsed().as_secs_f64() * 1e3;
        let after_run = Resident::of(pid)?;
        let mapped = MappedCode::of(pid, &command.program)?;
        let result: ProbeResult = serde_json::from_str(line.trim_start_matches("result").trim()).context("the child's result line is not the expected JSON")?;
        Ok(Measured { after_load, after_run, mapped, load_ms, first_run_ms, result })
    })();
    session.finish();
    if outcome.is_err() {
        // It may still be waiting on its stdin or stuck loading: stop it.
        let _ = child.kill();
    }
    let status = child.wait().context("waiting for the child")?;
    let stderr = session.stderr.take().and_then(|h| h.join().ok()).unwrap_or_default();
    match outcome {
        Ok(m) if status.success() => Ok(m),
        Ok(_) => bail!("{} exited with {status}: {}", command.display(), tail(&stderr)),
        Err(e) => Err(e.context(format!("{} ({status}): {}", command.display(), tail(&stderr)))),
    }
}

/// The child's pipes: stdout lines through a channel (so waits can time out),
/// stderr collected for the error message.
struct Session {
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Session {
    fn new(child: &mut Child) -> anyhow::Result<Session> {
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let mut err = child.stderr.take().context("no stderr pipe")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        Ok(Session { stdin: child.stdin.take(), lines, stderr: Some(stderr) })
    }

    /// Wait for the line starting with `word`; other lines are ignored.
    fn expect(&self, word: &str, timeout: Duration) -> anyhow::Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.split_whitespace().next() == Some(word) => return Ok(line),
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => bail!("no '{word}' line within {timeout:?}"),
                Err(RecvTimeoutError::Disconnected) => bail!("the child ended before its '{word}' line"),
            }
        }
    }

    fn go(&mut self) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        stdin.write_all(b"go\n").and_then(|()| stdin.flush()).context("cannot write to the child")
    }

    /// Let the child go for good: a last line, then the end of its stdin.
    fn finish(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"done\n");
        }
    }
}

/// The last lines of a child's stderr, for an error message.
fn tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = &lines[lines.len().saturating_sub(5)..];
    if last.is_empty() { "nothing on stderr".to_string() } else { last.join(" | ") }
}
