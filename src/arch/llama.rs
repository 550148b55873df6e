//! The Llama family: Llama 2/3/3.2 (and SmolLM2, TinyLlama: `model_type`
//! "llama"), Qwen2/2.5 and Qwen3, decoders with their LM head. One eager model
//! for the three, `crate::backend::eager::llama` (what differs: Qwen2's q/k/v
//! biases, Qwen3's per-head q/k norms and its own head_dim).

use super::{Architecture, EagerModel};
use super::rows::{layer_order, HEAD_ROW, MODEL_ROW};

/// One row of the table per `model_type`; they share the rows and the eager model.
const fn family(model_type: &'static str, name: &'static str, classes: &'static [&'static str]) -> Architecture {
    Architecture {
        model_type,
        name,
        classes,
        decoder: true,
        prefixes: &["model"],
        row,
        order,
        eager: EagerModel::Llama,
    }
}

pub const LLAMA: Architecture = family("llama", "Llama", &["LlamaForCausalLM"]);
pub const QWEN2: Architecture = family("qwen2", "Qwen2", &["Qwen2ForCausalLM"]);
pub const QWEN3: Architecture = family("qwen3", "Qwen3", &["Qwen3ForCausalLM"]);

/// `embed_tokens`, `layers.N.input_layernorm` / `.self_attn` (Qwen3's q/k norms
/// count in it) / `.post_attention_layernorm` / `.mlp`, `layers.N` (its residual
/// adds); the final `norm` and `lm_head` count in the head.
fn row(path: &[&str]) -> Option<String> {
    const PARTS: [&str; 4] = ["embed_tokens", "layers", "norm", "rotary_emb"];
    let rest = match path {
        ["model", part, ..] if PARTS.contains(part) => &path[1..],
        rest => rest,
    };
    Some(match rest {
        ["embed_tokens", ..] => "embed_tokens".to_owned(),
        ["layers", n] => format!("layers.{n}"),
        ["layers", n, first, ..] => format!("layers.{n}.{first}"),
        ["layers"] | ["rotary_emb", ..] => MODEL_ROW.to_owned(),
        ["norm", ..] | ["lm_head", ..] => HEAD_ROW.to_owned(),
        _ => return None,
    })
}

fn order(row: &str) -> Option<(u8, usize, u8)> {
    match row.split('.').collect::<Vec<_>>().as_slice() {
        ["embed_tokens"] => Some((1, 0, 0)),
        parts @ ["layers", ..] => Some(layer_order(parts, 1, 2)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::layers::rows::{order_key, row_of};

    #[test]
    fn export_and_eager_paths_meet_in_the_same_rows() {
        let cases = [
            // The export's paths (the cache wrapper's `model.`, then LlamaForCausalLM's own `model.`).
            ("model.model.embed_tokens", "embed_tokens"),
            ("model.model.layers.1.self_attn.q_proj", "layers.1.self_attn"),
            ("model.model.layers.1.self_attn.q_norm", "layers.1.self_attn"),
            ("model.model.layers.0.input_layernorm", "layers.0.input_layernorm"),
            ("model.model.layers.0.mlp.act_fn", "layers.0.mlp"),
            ("model.model.layers.0", "layers.0"),
            ("model.model.norm", "head"),
            ("model.lm_head", "head"),
            ("model.model.rotary_emb", "model"),
            // Eager's scopes.
            ("model.embed_tokens", "embed_tokens"),
            ("model.layers.1.self_attn", "layers.1.self_attn"),
            ("model.layers.1.post_attention_layernorm", "layers.1.post_attention_layernorm"),
            ("model.norm", "head"),
            ("lm_head", "head"),
        ];
        for (path, row) in cases {
            assert_eq!(row_of(path), row, "{path}");
        }
        assert_eq!(order_key("embed_tokens"), (1, 0, 0));
        assert_eq!(order_key("layers.2.mlp"), (2, 2, 0));
        assert_eq!(order_key("layers.2"), (2, 2, 1));
    }
}
