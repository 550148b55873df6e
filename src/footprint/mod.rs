//! What each stack costs on the device (`runlens footprint`): for the same
//! model and text, the code on disk a process maps, its resident memory after
//! load and after the first run, and its time from process start to the first
//! result, for Python eager, Python ExecuTorch, runlens (full) eager, runlens
//! (full) XNNPACK and runlens lite XNNPACK.
//!
//! - [`process`]: `/proc/PID/status` and `/proc/PID/maps` of a child;
//! - [`probe`]: the child process protocol and one measurement;
//! - [`report`]: the rows, the table and the comparison.

pub mod probe;
pub mod process;
pub mod report;

use std::path::{Path, PathBuf};

pub use probe::{ProbeCommand, ProbeResult};
pub use report::{FootprintReport, StackRow};

/// One stack to measure: a name for JSON, a title for people, and its command.
#[derive(Debug, Clone)]
pub struct Stack {
    pub name: &'static str,
    pub title: &'static str,
    pub command: ProbeCommand,
}

/// Where the stacks are: the two runlens binaries, the venv's Python and its
/// probe script, the models, and a command prefix (an emulator) if any.
#[derive(Debug, Clone)]
pub struct Setup {
    pub full_binary: PathBuf,
    pub lite_binary: PathBuf,
    /// None: no Python rows (as under emulation, where there is no aarch64 Python).
    pub python: Option<(PathBuf, PathBuf)>,
    pub models: PathBuf,
    pub pte: PathBuf,
    /// The name of the XNNPACK program (`--backends` of the runlens rows).
    pub program: String,
    pub threads: usize,
    pub text: String,
    /// e.g. `qemu-aarch64 -cpu cortex-a76 -L PREFIX`: the runlens rows run under it.
    pub wrapper: Vec<String>,
}

impl Setup {
    /// The rows (a)-(e) of issue 16, in that order (the Python ones when set).
    pub fn stacks(&self) -> Vec<Stack> {
        let mut stacks = Vec::new();
        if let Some((python, script)) = &self.python {
            let py = |args: &[&str]| {
                let mut argv = vec![python.display().to_string(), script.display().to_string()];
                argv.extend(args.iter().map(|a| a.to_string()));
                ProbeCommand { argv, program: python.clone() }
            };
            let (models, pte, threads) = (self.models.display().to_string(), self.pte.display().to_string(), self.threads.to_string());
            stacks.push(Stack { name: "python-eager", title: "Python eager (transformers)", command: py(&["eager", &models, &threads, &self.text]) });
            stacks.push(Stack {
                name: "python-executorch-xnnpack",
                title: "Python _load_for_executorch (XNNPACK)",
                command: py(&["executorch", &pte, &models, &threads, &self.text]),
            });
        }
        let rl = |binary: &Path, backend: &str| {
            let mut argv = self.wrapper.clone();
            argv.extend([binary.display().to_string(), "--model".into(), self.models.display().to_string()]);
            argv.extend(["--threads".into(), self.threads.to_string(), "--backends".into(), backend.into()]);
            argv.extend(["footprint-probe".into(), self.text.clone()]);
            ProbeCommand { argv, program: binary.to_path_buf() }
        };
        stacks.push(Stack { name: "runlens-eager", title: "runlens full, eager", command: rl(&self.full_binary, "eager") });
        stacks.push(Stack { name: "runlens-xnnpack", title: "runlens full, XNNPACK only", command: rl(&self.full_binary, &self.program) });
        stacks.push(Stack { name: "runlens-lite-xnnpack", title: "runlens lite, XNNPACK", command: rl(&self.lite_binary, &self.program) });
        stacks
    }
}
