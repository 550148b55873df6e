//! The bytes of weights one decode step reads, per backend: what the memory
//! wall is measured against ([`super::bandwidth`]). Every weight matrix is
//! read once a token; a table that is only gathered from (a token embedding
//! the head does not share, a position embedding) gives one row, which is not
//! counted. A matrix stored once counts once, stored twice (XNNPACK keeps its
//! own copy of a tied head) counts where it is read.
//!
//! - a program: its stored constants, from runlens' `.pte` reader
//!   ([`CoverageReport::weight_bytes_per_token`](crate::pte::CoverageReport::weight_bytes_per_token)),
//!   counted by the loaded backend from what it read at open; [`program`] reads a file for it;
//! - eager: the loaded model counts its own, float or quantized
//!   ([`crate::backend::Backend::weight_bytes_per_token`]); [`checkpoint`] is the
//!   same count of a float checkpoint read from `model.safetensors`' header (or its shards')
//!   (the tests hold the two together).

use std::path::Path;

use anyhow::Context;

/// A program's weight bytes a step of `forward` reads.
pub fn program(path: &Path) -> anyhow::Result<u64> {
    let (report, table) = crate::pte::read_program_file(path).with_context(|| format!("reading {}", path.display()))?;
    let plan = table.plan("forward").with_context(|| format!("{}: no method forward", path.display()))?;
    Ok(report.weight_bytes_per_token(plan))
}

/// Names of tables a decode step gathers one row of: position embeddings always,
/// the token embedding when the checkpoint has a head of its own (`lm_head.weight`).
fn gathered(name: &str, untied: bool) -> bool {
    let position = ["wpe.weight", "position_embeddings.weight"].iter().any(|s| name.ends_with(s));
    let token = ["wte.weight", "embed_tokens.weight", "word_embeddings.weight"].iter().any(|s| name.ends_with(s));
    position || (token && untied)
}

/// A safetensors checkpoint's weight bytes a float32 eager decode step reads
/// (`model.safetensors`, or every shard a `model.safetensors.index.json` names):
/// BF16 and F16 tensors count as the float32 eager widens them to.
pub fn checkpoint(path: &Path) -> anyhow::Result<u64> {
    let checkpoint = crate::model::safetensors::Checkpoint::read(path)?;
    let untied = checkpoint.contains("lm_head.weight");
    let as_read = |info: &crate::model::safetensors::TensorInfo| match info.dtype.as_str() {
        "BF16" | "F16" => 2 * info.len(),
        _ => info.len(),
    };
    Ok(checkpoint.tensors().filter(|(name, _, _)| !gathered(name, untied)).map(|(_, info, _)| as_read(info)).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_tables_are_the_embeddings_the_head_does_not_read() {
        assert!(gathered("transformer.wpe.weight", false));
        assert!(!gathered("transformer.wte.weight", false), "tied: the head reads it");
        assert!(gathered("model.embed_tokens.weight", true));
        assert!(!gathered("lm_head.weight", true));
        assert!(!gathered("model.layers.0.mlp.up_proj.weight", true));
    }

    #[test]
    fn a_sharded_half_precision_checkpoint_counts_as_eager_reads_it() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let shard = |name: &str, header: &str, data: usize| {
            let mut f = std::fs::File::create(dir.path().join(name)).unwrap();
            f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
            f.write_all(header.as_bytes()).unwrap();
            f.write_all(&vec![0u8; data]).unwrap();
        };
        shard("a.safetensors", r#"{"model.embed_tokens.weight":{"dtype":"BF16","shape":[8,4],"data_offsets":[0,64]}}"#, 64);
        shard("b.safetensors", r#"{"lm_head.weight":{"dtype":"BF16","shape":[8,4],"data_offsets":[0,64]},"model.norm.weight":{"dtype":"F32","shape":[4],"data_offsets":[64,80]}}"#, 80);
        let index = dir.path().join("model.safetensors.index.json");
        std::fs::write(&index, r#"{"weight_map": {"model.embed_tokens.weight": "a.safetensors", "lm_head.weight": "b.safetensors", "model.norm.weight": "b.safetensors"}}"#).unwrap();
        // Untied: the embedding is gathered; the head (bf16, widened) and the norm are read.
        assert_eq!(checkpoint(&index).unwrap(), 8 * 4 * 4 + 16);
    }
}
