//! BERT (`model_type` "bert": BERT, MiniLM and other BERT-shaped encoders).
//! The eager model is `crate::backend::eager::bert`.

use super::{Architecture, EagerModel};
use super::rows::{cut_layer, layer_order, MODEL_ROW};

pub const ARCHITECTURE: Architecture = Architecture {
    model_type: "bert",
    name: "BERT",
    classes: &["BertModel", "BertForMaskedLM", "BertForSequenceClassification"],
    decoder: false,
    prefixes: &["bert"],
    row,
    order,
    eager: EagerModel::Bert,
};

/// `embeddings`, `encoder.layer.N.attention.self` / `.attention.output` /
/// `.attention.output.LayerNorm` / `.intermediate` / `.output` / `.output.LayerNorm`;
/// the pooler counts in the head.
fn row(path: &[&str]) -> Option<String> {
    let (prefixed, rest) = match path {
        ["bert", rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    Some(match rest {
        [] if prefixed => MODEL_ROW.to_owned(),
        ["embeddings", ..] => "embeddings".to_owned(),
        ["encoder", "layer", n, tail @ ..] => {
            let layer = format!("encoder.layer.{n}");
            match tail {
                // The attention container adds nothing of its own: its layer's row.
                ["attention"] => layer,
                ["attention", sub @ ("self" | "output"), rest @ ..] if !rest.iter().any(|p| p.to_ascii_lowercase().contains("norm")) => {
                    format!("{layer}.attention.{sub}")
                }
                tail => cut_layer(layer, tail),
            }
        }
        // The layer stack's own loop.
        ["encoder"] => MODEL_ROW.to_owned(),
        ["pooler", ..] => super::rows::HEAD_ROW.to_owned(),
        [first, ..] if prefixed => (*first).to_owned(),
        _ => return None,
    })
}

fn order(row: &str) -> Option<(u8, usize, u8)> {
    match row.split('.').collect::<Vec<_>>().as_slice() {
        ["embeddings"] => Some((1, 0, 0)),
        parts @ ["encoder", "layer", ..] => Some(layer_order(parts, 2, 3)),
        _ => None,
    }
}
