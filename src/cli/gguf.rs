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
