"""Llama (model_type `llama`: Llama 2, Llama 3 / 3.1 / 3.2, SmolLM2,
TinyLlama, ...): decoder for text-generation (LlamaForCausalLM).

config.json: hidden_size, num_hidden_layers, num_attention_heads,
num_key_value_heads (grouped-query attention: fewer KV heads than query heads;
absent means as many), head_dim (absent: hidden_size / num_attention_heads),
max_position_embeddings, vocab_size, tie_word_embeddings (the head shares the
embedding or has its own `lm_head.weight`). Rotary embeddings: rope_theta and
rope_scaling as checkpoints from the hub write them, or transformers 5's
`rope_parameters` ({"rope_type", "rope_theta", ...}); the scalings runlens
takes are `default`, `linear` and `llama3` (rope.py).

The KV cache is num_hidden_layers x num_key_value_heads x head_dim: a
transformers StaticCache inside the program (decoder.py), written by standard
ops; the model is exported as it loads."""

from __future__ import annotations

from . import Arch, Geometry, head_dim_of
from .rope import check_rope


def geometry(config: dict) -> Geometry:
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    return Geometry(hidden=hidden, layers=int(config["num_hidden_layers"]), heads=heads,
                    head_dim=head_dim_of(config, hidden, heads),
                    kv_heads=int(config.get("num_key_value_heads") or heads),
                    max_positions=int(config["max_position_embeddings"]),
                    max_positions_key="max_position_embeddings", vocab=int(config["vocab_size"]))


ARCH = Arch(
    model_type="llama",
    classes={"text-generation": "LlamaForCausalLM"},
    geometry=geometry,
    check=check_rope,
    # Llama 3's byte-level BPE. A SentencePiece tokenizer.model, or a byte-fallback tokenizer.json
    # (TinyLlama's), takes the converter's SentencePiece paths, which write "default" and check no hash.
    gguf={"text-generation": "llama-bpe"},
)
