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
//! parent (`attention.self.query` in `attention.self`).

/// The attribute names under which an export wrapper or a task model holds
/// the encoder (`model.` around a `...ForMaskedLM`, `bert.` in the embedding
/// wrapper); the row names start below them.
const WRAPPERS: [&str; 1] = ["model"];
const ENCODERS: [&str; 2] = ["bert", "distilbert"];
/// The encoder's own code outside its submodules.
pub const MODEL_ROW: &str = "model";
pub const HEAD_ROW: &str = "head";

/// GPT-2 keeps its decoder under `transformer.` (as DistilBERT its layer
/// stack): these names right below it say it is GPT-2's.
const GPT2_PARTS: [&str; 5] = ["h", "wte", "wpe", "ln_f", "drop"];

/// Where a row goes in the table: the encoder's own work, the embeddings, the
/// layers in order, the head; instruction rows (no sidecar) after, as they ran.
/// Within a layer, its modules in the order they first ran and the layer's own
/// row (its residual adds) last, so the order does not depend on which backend
/// came first (eager closes a block's scope after its MLP; a program's first
/// residual add runs right after attention).
pub fn order_key(row: &str) -> (u8, usize, u8) {
    if row == MODEL_ROW {
        return (0, 0, 0);
    }
    match row {
        "embeddings" | "wte" => return (1, 0, 0),
        "wpe" => return (1, 1, 0),
        _ => {}
    }
    if row == HEAD_ROW {
        return (3, 0, 0);
    }
    let parts: Vec<&str> = row.split('.').collect();
    let layer = |n: &str, depth: usize| n.parse().map_or((4, 0, 0), |n| (2, n, u8::from(parts.len() == depth)));
    match parts.as_slice() {
        ["encoder" | "transformer", "layer", n, ..] => layer(n, 3),
        ["h", n, ..] => layer(n, 2),
        _ => (4, 0, 0),
    }
}

/// The row a module path counts in.
pub fn row_of(path: &str) -> String {
    let parts: Vec<&str> = if path.is_empty() { Vec::new() } else { path.split('.').collect() };
    let mut rest = &parts[..];
    if rest.first().is_some_and(|p| WRAPPERS.contains(p)) {
        rest = &rest[1..];
    }
    match rest {
        [p, ..] if ENCODERS.contains(p) => rest = &rest[1..],
        ["transformer", part, ..] if GPT2_PARTS.contains(part) => rest = &rest[1..],
        // Outside the encoder: the wrapper's pooling, cls, classifier, ...
        _ if !starts_inside(rest) => return HEAD_ROW.to_owned(),
        _ => {}
    }
    inside_encoder(rest)
}

/// Eager's scopes name the encoder's submodules without a prefix.
fn starts_inside(rest: &[&str]) -> bool {
    matches!(rest.first(), Some(&("embeddings" | "encoder" | "transformer" | "h" | "wte" | "wpe")))
}

fn inside_encoder(rest: &[&str]) -> String {
    match rest {
        [] => MODEL_ROW.to_owned(),
        ["embeddings", ..] => "embeddings".to_owned(),
        [stack @ ("encoder" | "transformer"), "layer", n, tail @ ..] => {
            let layer = format!("{stack}.layer.{n}");
            if let Some(k) = tail.iter().position(|p| p.to_ascii_lowercase().contains("norm")) {
                return format!("{layer}.{}", tail[..=k].join("."));
            }
            match tail {
                [] => layer,
                // BERT's attention container adds nothing of its own: its layer's row.
                ["attention"] if *stack == "encoder" => layer,
                ["attention", sub @ ("self" | "output"), ..] => format!("{layer}.attention.{sub}"),
                [first, ..] => format!("{layer}.{first}"),
            }
        }
        ["pooler", ..] => HEAD_ROW.to_owned(),
        // GPT-2: token and position embeddings, each block's modules, the final norm.
        [part @ ("wte" | "wpe"), ..] => (*part).to_owned(),
        ["drop", ..] => MODEL_ROW.to_owned(),
        ["ln_f", ..] => HEAD_ROW.to_owned(),
        ["h", n] => format!("h.{n}"),
        ["h", n, first, ..] => format!("h.{n}.{first}"),
        // The layer stack's own loop.
        ["encoder" | "transformer"] => MODEL_ROW.to_owned(),
        [first, ..] => (*first).to_owned(),
    }
}

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
