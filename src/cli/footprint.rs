//! `runlens footprint`: what each stack costs on this machine (disk, resident
//! memory, time to the first result), and `runlens footprint-probe`, the child
//! it measures for the runlens rows (hidden: it waits on its stdin).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use clap::Args;

use super::Common;
use crate::backend;
use crate::footprint::{self, Setup};
use crate::model::{ModelsMissing, Reference};

#[derive(Debug, Args)]
pub struct FootprintArgs {
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The text every stack runs once.
    #[arg(long, default_value = "The cat sat on the mat.")]
    pub text: String,
    /// The full runlens binary (eager built in) for the runlens eager and XNNPACK rows.
    #[arg(long, value_name = "PATH", default_value = "target/release/runlens")]
    pub full_binary: PathBuf,
    /// The lite runlens binary (`make lite`) for the lite row.
    #[arg(long, value_name = "PATH", default_value = "target/lite/release/runlens")]
    pub lite_binary: PathBuf,
    /// Leave out the two Python rows.
    #[arg(long)]
    pub no_python: bool,
    /// Start each stack N times and report medians.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,
    /// A command prefix for the runlens rows, such as an emulator (split on spaces).
    #[arg(long, value_name = "CMD")]
    pub wrapper: Option<String>,
    /// Seconds a stack may take to load or to run before it counts as failed.
    #[arg(long, default_value_t = 600, value_name = "S")]
    pub timeout: u64,
}

/// Measure the stacks; `Ok(false)` when one could not be measured (exit 1, the table still printed).
pub fn run(common: &Common, args: &FootprintArgs) -> anyhow::Result<bool> {
    ensure!(common.backends.is_none(), "footprint chooses its own backends per row; leave out --backends");
    let dir = common.model_dir()?;
    let catalog = common.catalog(&dir)?;
    let program = catalog
        .iter()
        .find(|s| !s.given && s.is_float_xnnpack_program())
        .context("footprint compares the stacks on the model directory's `xnnpack` program, and it has none")?;
    let pte = program.pte_file().map(Path::to_path_buf).context("footprint's XNNPACK program has no file")?;
    if !pte.is_file() {
        return Err(ModelsMissing { path: pte }.into());
    }
    dir.tokenizer()?;
    for (binary, how) in [(&args.full_binary, "make build"), (&args.lite_binary, "make lite")] {
        ensure!(binary.is_file(), "{} not found: `{how}` builds it (or name it with --{}-binary)", binary.display(), if how == "make lite" { "lite" } else { "full" });
    }
    let python = if args.no_python {
        None
    } else {
        let venv = crate::bench::python::venv().context("no Python venv (.venv or $VIRTUAL_ENV) for the Python rows: `make build` creates it, or pass --no-python")?;
        Some((venv.join("bin/python"), script()?))
    };
    let setup = Setup {
        full_binary: absolute(&args.full_binary)?,
        lite_binary: absolute(&args.lite_binary)?,
        python,
        models: absolute(dir.root())?,
        pte: absolute(&pte)?,
        program: program.name.clone(),
        threads: common.thread_count(),
        text: args.text.clone(),
        wrapper: args.wrapper.as_deref().map(|w| w.split_whitespace().map(String::from).collect()).unwrap_or_default(),
    };
    let reference = dir.reference().ok().and_then(|p| Reference::load(&p).ok()).and_then(|r| {
        r.sentences.iter().find(|s| s.text == args.text).map(|s| s.embedding())
    });
    let report = footprint::report::measure(&setup, reference.as_ref(), args.repeat as usize, Duration::from_secs(args.timeout), |title| {
        if !args.json {
            eprintln!("measuring {title} ...");
        }
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(report.rows.iter().all(|r| r.ok))
}

/// `python/footprint_probe.py` under the current directory, else next to the sources.
fn script() -> anyhow::Result<PathBuf> {
    [PathBuf::from("python/footprint_probe.py"), Path::new(env!("CARGO_MANIFEST_DIR")).join("python/footprint_probe.py")]
        .into_iter()
        .find(|p| p.is_file())
        .context("python/footprint_probe.py not found; run from the repository root, or pass --no-python")
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The text to run once.
    #[arg(required = true, num_args = 1.., value_name = "TEXT")]
    pub text: Vec<String>,
}

/// The runlens side of the protocol in [`crate::footprint::probe`]: load the
/// tokenizer and the one backend named, say `loaded`, wait; run the text once,
/// say `result {...}`, wait; exit.
pub fn probe(common: &Common, args: &ProbeArgs) -> anyhow::Result<()> {
    let dir = common.model_dir()?;
    let specs = common.backends(&dir)?;
    ensure!(specs.len() == 1, "footprint-probe runs exactly one backend: name it with --backends");
    let tokenizer = dir.load_tokenizer()?;
    backend::set_threads(common.thread_count())?;
    let mut loaded = crate::task::load_backend(&specs[0], &dir)?;
    handshake("loaded")?;
    let start = Instant::now();
    let input = tokenizer.encode(&args.text.join(" "))?;
    let output = loaded.run(&input)?;
    let run_ms = start.elapsed().as_secs_f64() * 1e3;
    handshake(&format!("result {}", serde_json::json!({ "run_ms": run_ms, "embedding": output.data })))?;
    Ok(())
}

fn handshake(line: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).context("cannot write to stdout")?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).context("cannot read stdin")?;
    Ok(())
}
