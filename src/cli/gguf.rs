//! `runlens gguf-quantize`: a GGUF's weights quantized by llama.cpp's own
//! quantizer (what `python/export.py` calls to write `llamacpp-q8_0.gguf` and
//! `llamacpp-q4_0.gguf` from the F32 file; hidden, for the export).

use std::path::PathBuf;

use clap::Args;

use crate::ffi::llama::{self, QuantType};

#[derive(Debug, Args)]
pub struct QuantizeArgs {
    /// The weight type: q8_0 or q4_0 (every 2-D tensor, `pure`: the embedding and output too).
    #[arg(long = "type", value_name = "TYPE")]
    pub to: String,
    /// The GGUF to read (F32 or F16).
    pub input: PathBuf,
    /// The GGUF to write.
    pub output: PathBuf,
}

pub fn quantize(common: &super::Common, args: &QuantizeArgs) -> anyhow::Result<()> {
    let to = QuantType::parse(&args.to).ok_or_else(|| anyhow::anyhow!("--type {}: runlens writes q8_0 or q4_0", args.to))?;
    crate::backend::llamacpp::cpu::check()?;
    // The header first: a file llama.cpp would abort on is refused here.
    crate::gguf::read_path(&args.input)?;
    llama::quantize(&args.input, &args.output, to, common.thread_count())?;
    // What was written is read back as any GGUF runlens loads.
    let written = crate::gguf::read_path(&args.output)?;
    eprintln!(
        "{}: {} tensors, {:.1} MiB of weights, mostly {}",
        args.output.display(),
        written.tensors.len(),
        written.tensor_bytes() as f64 / (1u64 << 20) as f64,
        written.main_type().map_or("?", |t| t.name())
    );
    Ok(())
}

/// `inspect --json FILE.gguf`: the header as runlens read it, and what this
/// build's llama.cpp says of its CPU kernels.
#[derive(serde::Serialize)]
struct GgufJson {
    file: String,
    version: u32,
    architecture: Option<String>,
    vocab_size: Option<u64>,
    block_count: Option<u64>,
    embedding_length: Option<u64>,
    context_length: Option<u64>,
    tensors: usize,
    tensor_bytes: u64,
    main_type: Option<String>,
    /// (type, tensors, bytes), largest first.
    types: Vec<(String, usize, u64)>,
    /// Why runlens would not hand it to llama.cpp; null: it would.
    refused: Option<String>,
    /// What this CPU lacks of the kernels' instruction set (empty: it runs them).
    cpu_lacks: Vec<&'static str>,
    /// llama.cpp's own line on the kernels it was built with (`DOTPROD = 1`, ...).
    llama_cpp_system_info: String,
}

/// `runlens inspect [--json] FILE.gguf`.
pub fn inspect(file: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let h = crate::gguf::read_path(file)?;
    let report = GgufJson {
        file: file.display().to_string(),
        version: h.version,
        architecture: h.architecture().map(str::to_string),
        vocab_size: h.vocab_size(),
        block_count: h.block_count(),
        embedding_length: h.embedding_length(),
        context_length: h.context_length(),
        tensors: h.tensors.len(),
        tensor_bytes: h.tensor_bytes(),
        main_type: h.main_type().map(|t| t.name().to_string()),
        types: h.type_summary().into_iter().map(|(t, n, b)| (t.name().to_string(), n, b)).collect(),
        refused: h.check_runnable(None).err().map(|e| e.to_string()),
        cpu_lacks: crate::backend::llamacpp::cpu::missing(),
        llama_cpp_system_info: llama::system_info(),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    println!("{}: GGUF v{}, {}", report.file, report.version, report.architecture.as_deref().unwrap_or("no architecture"));
    println!(
        "  {} blocks, width {}, context {}, vocabulary {}",
        report.block_count.map_or("?".into(), |v| v.to_string()),
        report.embedding_length.map_or("?".into(), |v| v.to_string()),
        report.context_length.map_or("?".into(), |v| v.to_string()),
        report.vocab_size.map_or("?".into(), |v| v.to_string())
    );
    println!("  {} tensors, {:.1} MiB of weights, mostly {}", report.tensors, mib(report.tensor_bytes), report.main_type.as_deref().unwrap_or("?"));
    for (t, n, b) in &report.types {
        println!("    {t:<6} {n:>5} tensors {:>10.1} MiB", mib(*b));
    }
    match &report.refused {
        Some(why) => println!("  runlens would refuse it: {why}"),
        None => println!("  runlens hands it to llama.cpp"),
    }
    if !report.cpu_lacks.is_empty() {
        println!("  this CPU lacks {} (the kernels would not run here)", report.cpu_lacks.join(", "));
    }
    println!("  llama.cpp: {}", report.llama_cpp_system_info);
    Ok(())
}
