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
//!   same count of a float checkpoint read from `model.safetensors`' header
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

/// A safetensors checkpoint's weight bytes a decode step reads.
pub fn checkpoint(path: &Path) -> anyhow::Result<u64> {
    let header = crate::model::safetensors::read_header(path)?;
    let untied = header.tensors.contains_key("lm_head.weight");
    Ok(header.tensors.iter().filter(|(name, _)| !gathered(name, untied)).map(|(_, info)| info.len()).sum())
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
}
