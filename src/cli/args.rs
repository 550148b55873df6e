//! The command line's grammar: the options every subcommand and the explorer
//! share ([`Common`]), the subcommands, and the parsers of their values. What
//! the options mean is set up once, in [`super`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::{bench, footprint, layers, memory, profile, report, run};
use crate::backend::BackendSpec;

#[derive(Debug, Parser)]
#[command(name = "runlens", version, about = "A text model on three CPU runtimes side by side: PyTorch eager, ExecuTorch portable, ExecuTorch XNNPACK (and any .pte you add).", long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    /// What to do; with none, the live explorer (TUI) opens.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options every subcommand and the TUI share.
#[derive(Debug, Args, Clone)]
pub struct Common {
    /// Model directory, as python/export.py writes it (manifest.json, programs, tokenizer) [default: $RUNLENS_MODEL, else models/minilm]
    #[arg(long, global = true, value_name = "DIR", visible_alias = "models")]
    pub model: Option<PathBuf>,
    /// Comma list of backends by name: eager and the programs of the model directory (see `runlens inspect`) [default: eager and the first program of each column]
    #[arg(long, global = true, value_name = "LIST")]
    pub backends: Option<String>,
    /// Add a .pte file as one more ExecuTorch backend and column (repeatable), e.g. --program course=distilbert_xnnpack.pte
    #[arg(long = "program", global = true, value_name = "NAME=FILE.pte", value_parser = parse_program)]
    pub programs: Vec<(String, PathBuf)>,
    /// Threads for libtorch (intra-op) and ExecuTorch's pool (XNNPACK) [default: all cores]; bench takes a comma list (1,2,3,4) and sweeps them
    #[arg(long, global = true, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<ThreadList>,
    /// fill-mask: how many tokens to show per mask
    #[arg(long, global = true, value_name = "K", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub top_k: u32,
    /// Characters the explorer draws with: unicode, console (the Linux text console's fonts, 16 colours) or ascii [default: from TERM: console for TERM=linux]
    #[arg(long, global = true, value_name = "SET", value_enum)]
    pub glyphs: Option<crate::ui::GlyphSet>,
    /// text-generation: how typed text reaches the model: chat (one user message through the model's chat template) or raw (the text as it is) [default: chat when the model has a template, else raw]
    #[arg(long, global = true, value_name = "FORMAT", value_enum)]
    pub prompt_format: Option<crate::model::PromptFormat>,
    /// What runlens may hold in all, e.g. 3.5G or 900M (binary units), instead of what it measures (MemAvailable, the cgroup's limit); a set of columns that needs more is refused before loading (docs/memory.md)
    #[arg(long, global = true, value_name = "SIZE", env = "RUNLENS_MEMORY_BUDGET", value_parser = crate::memory::size::parse)]
    pub memory_budget: Option<u64>,
}

/// The value of `--threads`: one count, or for `bench` a comma list to sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadList(pub Vec<usize>);

fn parse_threads(list: &str) -> Result<ThreadList, String> {
    let mut counts = Vec::new();
    for part in list.split(',') {
        let n: usize = part.trim().parse().map_err(|_| format!("{part:?} is not a thread count: give a number from 1 to 256, or for bench a comma list such as 1,2,3,4"))?;
        if !(1..=256).contains(&n) {
            return Err(format!("{n} threads: give 1 to 256"));
        }
        if !counts.contains(&n) {
            counts.push(n);
        }
    }
    Ok(ThreadList(counts))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Tokenize TEXT and run it through each backend once; print outputs, latency and parity.
    Run(run::RunArgs),
    /// Read a .pte file and show how much of it is delegated (no runtime needed), or a GGUF header; or describe a model directory.
    Inspect(InspectArgs),
    /// Time every backend at several sequence lengths, optionally against the course's Python flow.
    Bench(bench::BenchArgs),
    /// Per-operator time of the ExecuTorch paths on TEXT, from a separate run with ExecuTorch's event tracer.
    Profile(profile::ProfileArgs),
    /// Time per module (embeddings, each layer's attention, feed-forward, norms, head) of every backend on TEXT, side by side.
    Layers(layers::LayersArgs),
    /// What each stack costs: disk, resident memory and time to the first result, Python and runlens (full and lite).
    Footprint(footprint::FootprintArgs),
    /// What each column of a model directory will hold in memory, which sets fit here and on a 2, 4, 8 and 16 GB Raspberry Pi 5 (estimated, nothing loaded).
    Memory(memory::MemoryArgs),
    /// Markdown tables rendered from `bench --json` files: check (--check) or rewrite (--write) the marked tables of markdown files, or print one table of a bench JSON.
    Report(report::ReportArgs),
    /// Quantization error on the model's own weights: every column against float32 over chat prompts (top-1 agreement, KL, where greedy continuations part) and a text (perplexity).
    Eval(super::eval::EvalArgs),
    /// One stack for `footprint` to measure (waits on stdin between load and run).
    #[command(hide = true)]
    FootprintProbe(footprint::ProbeArgs),
    /// Internal: quantize a GGUF with llama.cpp's quantizer (the export's q8_0 and q4_0 files).
    #[command(name = "gguf-quantize", hide = true)]
    GgufQuantize(super::gguf::QuantizeArgs),
    /// Internal: load a model file with its runtime and run it once, print the verdict as JSON (runlens' probe, see backend::probe).
    #[command(name = "probe", alias = "probe-program", hide = true)]
    Probe(ProbeArgs),
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The file to try.
    pub file: PathBuf,
    /// How to load it, as JSON (`backend::probe::Load`); an ExecuTorch program when not given.
    #[arg(long, value_parser = parse_load, default_value = r#"{"runtime":"executorch"}"#)]
    pub load: crate::backend::probe::Load,
}

fn parse_load(text: &str) -> Result<crate::backend::probe::Load, String> {
    serde_json::from_str(text).map_err(|e| format!("not a probe load ({e}): {text}"))
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The .pte file to read, or a model directory (what it holds: model, weights and their dtypes, programs).
    pub file: PathBuf,
}

/// Parse a comma list such as `eager,xnnpack` against the catalog; duplicates
/// are dropped, order kept.
pub fn parse_list(list: &str, catalog: &[BackendSpec]) -> Result<Vec<BackendSpec>, String> {
    let valid = || catalog.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ");
    let mut specs: Vec<BackendSpec> = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let spec = catalog
            .iter()
            .find(|s| s.name == part)
            .ok_or_else(|| format!("unknown backend '{part}'; this model directory has: {}", valid()))?;
        if !specs.contains(spec) {
            specs.push(spec.clone());
        }
    }
    if specs.is_empty() {
        return Err(format!("no backend named; this model directory has: {}", valid()));
    }
    Ok(specs)
}

/// `--backends` names a backend the model directory does not have: a usage
/// error (exit code 2, like clap's), with the names it has.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UnknownBackend(pub String);

/// Parse `--program NAME=FILE.pte`.
pub fn parse_program(arg: &str) -> Result<(String, PathBuf), String> {
    let (name, file) = arg.split_once('=').ok_or_else(|| format!("--program {arg}: expected NAME=FILE.pte"))?;
    if name.trim().is_empty() || file.trim().is_empty() {
        return Err(format!("--program {arg}: expected NAME=FILE.pte, both non-empty"));
    }
    Ok((name.trim().to_string(), PathBuf::from(file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Vec<BackendSpec> {
        ["eager", "portable", "xnnpack", "xnnpack-int8"].map(crate::backend::named).to_vec()
    }

    #[test]
    fn parses_lists_against_the_catalog_and_rejects_unknown_names() {
        let c = catalog();
        let names = |v: Vec<BackendSpec>| v.into_iter().map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(names(parse_list("xnnpack, eager,xnnpack", &c).unwrap()), ["xnnpack", "eager"]);
        let err = parse_list("eager,tflite", &c).unwrap_err();
        assert!(err.contains("tflite") && err.contains("portable") && err.contains("xnnpack-int8"), "{err}");
        assert!(parse_list(" , ", &c).is_err());
        assert_eq!(parse_program("mine=/tmp/a.pte").unwrap(), ("mine".to_string(), PathBuf::from("/tmp/a.pte")));
        assert!(parse_program("nofile").unwrap_err().contains("NAME=FILE.pte"));
        assert!(parse_program("=a.pte").is_err());
    }

    /// The probe's child: `probe FILE --load JSON`, and its old name `probe-program FILE`
    /// (an ExecuTorch program); a load that is not JSON of a `Load` is a usage error.
    #[test]
    fn the_probe_subcommand_takes_a_load_and_keeps_its_old_name() {
        use crate::backend::probe::Load;
        use clap::Parser;
        let load = |args: &[&str]| match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(Some(Command::Probe(p))) => Ok((p.file, p.load)),
            Ok(_) => Err("another command".to_string()),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(load(&["runlens", "probe-program", "x.pte"]), Ok((PathBuf::from("x.pte"), Load::Executorch)));
        assert_eq!(
            load(&["runlens", "probe", "x.gguf", "--load", r#"{"runtime":"llama_cpp","max_len":64,"pooled":true}"#]),
            Ok((PathBuf::from("x.gguf"), Load::LlamaCpp { max_len: 64, pooled: true }))
        );
        assert_eq!(load(&["runlens", "probe", "x.onnx", "--load", r#"{"runtime":"onnx_runtime"}"#]), Ok((PathBuf::from("x.onnx"), Load::OnnxRuntime)));
        assert!(load(&["runlens", "probe", "x.onnx", "--load", "onnx"]).unwrap_err().contains("not a probe load"));
    }
}
