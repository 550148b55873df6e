//! The vocabulary of `runlens layers`' rows that every architecture's row
//! rules share ([`crate::layers::rows`] drives them over the table).

/// The model's own code outside its submodules.
pub const MODEL_ROW: &str = "model";
pub const HEAD_ROW: &str = "head";

/// `layer` (`encoder.layer.3`) and the module path below it: the layer's own
/// row when nothing is below, a norm with the path down to it, else the first
/// module below (a layer's linear projections count in their parent).
pub fn cut_layer(layer: String, tail: &[&str]) -> String {
    if let Some(k) = tail.iter().position(|p| p.to_ascii_lowercase().contains("norm")) {
        return format!("{layer}.{}", tail[..=k].join("."));
    }
    match tail {
        [] => layer,
        [first, ..] => format!("{layer}.{first}"),
    }
}

/// The order key of a row inside layer `parts[index]` of a stack whose
/// layer rows have `depth` parts (`h.3`: 2; `encoder.layer.3`: 3).
pub fn layer_order(parts: &[&str], index: usize, depth: usize) -> (u8, usize, u8) {
    parts.get(index).and_then(|n| n.parse().ok()).map_or((4, 0, 0), |n| (2, n, u8::from(parts.len() == depth)))
}
