//! GPT-2 (`model_type` "gpt2"), a decoder with its LM head. The eager model
//! is `crate::backend::eager::gpt2`.

use super::{Architecture, EagerModel};
use super::rows::{layer_order, HEAD_ROW, MODEL_ROW};

pub const ARCHITECTURE: Architecture = Architecture {
    model_type: "gpt2",
    name: "GPT-2",
    classes: &["GPT2LMHeadModel"],
    decoder: true,
    prefixes: &["transformer"],
    row,
    order,
    eager: EagerModel::Gpt2,
};

/// The names right below `transformer.` that say it is GPT-2's (DistilBERT
/// keeps its layer stack under a `transformer` too).
const PARTS: [&str; 5] = ["h", "wte", "wpe", "ln_f", "drop"];

/// `wte`, `wpe` (token and position embeddings; their sum is `model`'s),
/// `h.N.ln_1` / `.attn` / `.ln_2` / `.mlp`, `h.N` (its residual adds); `ln_f`
/// and the LM head count in the head.
fn row(path: &[&str]) -> Option<String> {
    let rest = match path {
        ["transformer", part, ..] if PARTS.contains(part) => &path[1..],
        ["transformer"] => return Some(MODEL_ROW.to_owned()),
        rest => rest,
    };
    Some(match rest {
        [part @ ("wte" | "wpe"), ..] => (*part).to_owned(),
        ["drop", ..] => MODEL_ROW.to_owned(),
        ["ln_f", ..] => HEAD_ROW.to_owned(),
        ["h", n] => format!("h.{n}"),
        ["h", n, first, ..] => format!("h.{n}.{first}"),
        _ => return None,
    })
}

fn order(row: &str) -> Option<(u8, usize, u8)> {
    match row.split('.').collect::<Vec<_>>().as_slice() {
        ["wte"] => Some((1, 0, 0)),
        ["wpe"] => Some((1, 1, 0)),
        parts @ ["h", ..] => Some(layer_order(parts, 1, 2)),
        _ => None,
    }
}
