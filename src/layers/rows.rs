//! The rows of `runlens layers`: a module path (as the export's
//! `nn_module_stack` or eager's scopes name it) to the row it is counted in.
//!
//! | row | what |
//! | --- | --- |
//! | `embeddings` | the embeddings and their LayerNorm |
//! | `model` | the encoder's own work outside its submodules (the attention mask) |
//! | `encoder.layer.N.attention.self`, `.attention.output`, `.attention.output.LayerNorm`, `.intermediate`, `.output`, `.output.LayerNorm` | BERT |
//! | `transformer.layer.N.attention`, `.sa_layer_norm`, `.ffn`, `.output_layer_norm`, `transformer.layer.N` (its residual adds) | DistilBERT |
//! | `head` | everything after the encoder: pooling, the masked-LM or classification head |
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

/// Where a row goes in the table: the encoder's own work, the embeddings, the
/// layers in order, the head; instruction rows (no sidecar) after, as they ran.
pub fn order_key(row: &str) -> (u8, usize) {
    if row == MODEL_ROW {
        return (0, 0);
    }
    if row == "embeddings" {
        return (1, 0);
    }
    if row == HEAD_ROW {
        return (3, 0);
    }
    let mut parts = row.split('.');
    match (parts.next(), parts.next(), parts.next().and_then(|n| n.parse().ok())) {
        (Some("encoder" | "transformer"), Some("layer"), Some(n)) => (2, n),
        _ => (4, 0),
    }
}

/// The row a module path counts in.
pub fn row_of(path: &str) -> String {
    let parts: Vec<&str> = if path.is_empty() { Vec::new() } else { path.split('.').collect() };
    let mut rest = &parts[..];
    if rest.first().is_some_and(|p| WRAPPERS.contains(p)) {
        rest = &rest[1..];
    }
    match rest.first() {
        Some(p) if ENCODERS.contains(p) => rest = &rest[1..],
        // Outside the encoder: the wrapper's pooling, cls, classifier, ...
        _ if !starts_inside(rest) => return HEAD_ROW.to_owned(),
        _ => {}
    }
    inside_encoder(rest)
}

/// Eager's scopes name the encoder's submodules without a prefix.
fn starts_inside(rest: &[&str]) -> bool {
    matches!(rest.first(), Some(&("embeddings" | "encoder" | "transformer")))
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
        ];
        for (path, row) in cases {
            assert_eq!(row_of(path), row, "{path}");
        }
    }
}
