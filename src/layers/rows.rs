//! The rows of `runlens layers`: a module path (as the export's
//! `nn_module_stack` or eager's scopes name it) to the row it is counted in.
//!
//! | row | what |
//! | --- | --- |
//! | `embeddings` | the embeddings and their LayerNorm |
//! | `model` | the encoder's own work outside its submodules (the attention mask) |
//! | `encoder.layer.N.attention.self`, `.attention.output`, `.attention.output.LayerNorm`, `.intermediate`, `.output`, `.output.LayerNorm` | BERT |
//! | `transformer.layer.N.attention`, `.sa_layer_norm`, `.ffn`, `.output_layer_norm`, `transformer.layer.N` (its residual adds) | DistilBERT |
//! | `wte`, `wpe`, `h.N.ln_1`, `.attn`, `.ln_2`, `.mlp`, `h.N` (its residual adds) | GPT-2 (token and position embeddings, then the decoder's blocks; their sum is `model`'s) |
//! | `head` | everything after the encoder: pooling, the masked-LM or classification head; GPT-2's `ln_f` and LM head |
//!
//! Paths are cut to these rows: a layer's linear projections count in their
//! parent (`attention.self.query` in `attention.self`). Which paths are whose
//! is each architecture's ([`crate::arch`]); this file is the driver.

/// The attribute names under which an export wrapper or a task model holds
/// the model (`model.` around a `...ForMaskedLM` or the cache wrapper); the
/// architecture's own paths start below them.
const WRAPPERS: [&str; 1] = ["model"];
/// Where a row goes in the table: the model's own work, the embeddings, the
/// layers in order, the head; instruction rows (no sidecar) after, as they ran.
/// Within a layer, its modules in the order they first ran and the layer's own
/// row (its residual adds) last, so the order does not depend on which backend
/// came first (eager closes a block's scope after its MLP; a program's first
/// residual add runs right after attention). Each architecture orders its own
/// rows ([`crate::arch::Architecture::order`]).
pub fn order_key(row: &str) -> (u8, usize, u8) {
    match row {
        MODEL_ROW => (0, 0, 0),
        HEAD_ROW => (3, 0, 0),
        _ => ARCHITECTURES.iter().find_map(|a| (a.order)(row)).unwrap_or((4, 0, 0)),
    }
}

/// The row a module path counts in: the first architecture that knows the
/// path names it ([`crate::arch::Architecture::row`]); a path none knows is
/// outside the model (the wrapper's pooling, a task head): the head.
pub fn row_of(path: &str) -> String {
    let parts: Vec<&str> = if path.is_empty() { Vec::new() } else { path.split('.').collect() };
    let mut rest = &parts[..];
    if rest.first().is_some_and(|p| WRAPPERS.contains(p)) {
        rest = &rest[1..];
    }
    ARCHITECTURES.iter().find_map(|a| (a.row)(rest)).unwrap_or_else(|| HEAD_ROW.to_owned())
}

pub use crate::arch::rows::{cut_layer, layer_order, HEAD_ROW, MODEL_ROW};
use crate::arch::ARCHITECTURES;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_and_eager_paths_meet_in_the_same_rows() {
        let cases = [
            ("model.bert.embeddings.word_embeddings", "embeddings"),
            ("bert.embeddings", "embeddings"),
            ("embeddings.LayerNorm", "embeddings"),
            ("model.bert", "model"),
            ("bert", "model"),
            ("model.bert.encoder.layer.3.attention.self.query", "encoder.layer.3.attention.self"),
            ("encoder.layer.3.attention.self", "encoder.layer.3.attention.self"),
            ("bert.encoder.layer.0.attention.output.dense", "encoder.layer.0.attention.output"),
            ("bert.encoder.layer.0.attention.output.LayerNorm", "encoder.layer.0.attention.output.LayerNorm"),
            ("encoder.layer.0.output.LayerNorm", "encoder.layer.0.output.LayerNorm"),
            ("model.bert.encoder.layer.1.intermediate.intermediate_act_fn", "encoder.layer.1.intermediate"),
            ("model.bert.encoder.layer.1.output.dropout", "encoder.layer.1.output"),
            ("encoder.layer.1.attention", "encoder.layer.1"),
            ("encoder", "model"),
            ("model.distilbert.transformer.layer.2.attention.q_lin", "transformer.layer.2.attention"),
            ("model.distilbert.transformer.layer.2.sa_layer_norm", "transformer.layer.2.sa_layer_norm"),
            ("transformer.layer.2.ffn", "transformer.layer.2.ffn"),
            ("model.distilbert.transformer.layer.2.ffn.lin1", "transformer.layer.2.ffn"),
            ("model.distilbert.transformer.layer.2", "transformer.layer.2"),
            ("model.cls.predictions.transform.LayerNorm", "head"),
            ("model.classifier", "head"),
            ("model.vocab_projector", "head"),
            ("", "head"),
            ("head", "head"),
            // GPT-2: the export's paths (under the cache wrapper's `model.`) and eager's scopes.
            ("model.transformer.wte", "wte"),
            ("model.transformer.wpe", "wpe"),
            ("wpe", "wpe"),
            ("model.transformer.h.1.attn.c_attn", "h.1.attn"),
            ("h.1.attn", "h.1.attn"),
            ("model.transformer.h.0.ln_1", "h.0.ln_1"),
            ("model.transformer.h.0.mlp.act", "h.0.mlp"),
            ("model.transformer.h.0", "h.0"),
            ("h.0", "h.0"),
            ("model.transformer.ln_f", "head"),
            ("model.lm_head", "head"),
            ("model.transformer", "model"),
        ];
        for (path, row) in cases {
            assert_eq!(row_of(path), row, "{path}");
        }
        assert_eq!(order_key("h.3.attn"), (2, 3, 0));
        assert_eq!(order_key("h.3"), (2, 3, 1));
        assert_eq!(order_key("transformer.layer.1"), (2, 1, 1));
        assert_eq!(order_key("encoder.layer.5.output.LayerNorm"), (2, 5, 0));
        assert_eq!(order_key("head"), (3, 0, 0));
    }
}
