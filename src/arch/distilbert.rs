//! DistilBERT (`model_type` "distilbert"). The eager model is
//! `crate::backend::eager::distilbert`.

use super::{Architecture, EagerModel};
use super::rows::{cut_layer, layer_order, MODEL_ROW};

pub const ARCHITECTURE: Architecture = Architecture {
    model_type: "distilbert",
    name: "DistilBERT",
    classes: &["DistilBertModel", "DistilBertForMaskedLM", "DistilBertForSequenceClassification"],
    decoder: false,
    prefixes: &["distilbert"],
    row,
    order,
    eager: EagerModel::DistilBert,
};

/// `embeddings`, `transformer.layer.N.attention` / `.sa_layer_norm` / `.ffn` /
/// `.output_layer_norm`, and `transformer.layer.N` for its residual adds.
fn row(path: &[&str]) -> Option<String> {
    let (prefixed, rest) = match path {
        ["distilbert", rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    Some(match rest {
        [] if prefixed => MODEL_ROW.to_owned(),
        ["embeddings", ..] => "embeddings".to_owned(),
        ["transformer", "layer", n, tail @ ..] => cut_layer(format!("transformer.layer.{n}"), tail),
        ["transformer"] => MODEL_ROW.to_owned(),
        [first, ..] if prefixed => (*first).to_owned(),
        _ => return None,
    })
}

fn order(row: &str) -> Option<(u8, usize, u8)> {
    match row.split('.').collect::<Vec<_>>().as_slice() {
        ["embeddings"] => Some((1, 0, 0)),
        parts @ ["transformer", "layer", ..] => Some(layer_order(parts, 2, 3)),
        _ => None,
    }
}
