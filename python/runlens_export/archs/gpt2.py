"""GPT-2: decoder for text-generation (GPT2LMHeadModel). config.json: n_embd,
n_layer, n_head, n_positions (learned position embeddings: the longest
sequence), vocab_size. Every head has its own keys and values (no grouped-query
attention), so the KV cache is n_layer x n_head x (n_embd / n_head).

Exported as it loads: the static-cache and window wrappers of decoder.py take
the model as transformers builds it (its projections are `Conv1D`, which
matters only to a quantizer that looks for `nn.Linear`)."""

from __future__ import annotations

from . import Arch, Geometry


def geometry(config: dict) -> Geometry:
    hidden, heads = int(config["n_embd"]), int(config["n_head"])
    return Geometry(hidden=hidden, layers=int(config["n_layer"]), heads=heads, head_dim=hidden // heads,
                    kv_heads=heads, max_positions=int(config["n_positions"]), max_positions_key="n_positions",
                    vocab=int(config["vocab_size"]))


ARCH = Arch(
    model_type="gpt2",
    classes={"text-generation": "GPT2LMHeadModel"},
    geometry=geometry,
    # A hub GPT-2 names its weights `h.N...`; GPT2LMHeadModel saves `transformer.h.N...`.
    resave_weights=True,
    gguf={"text-generation": "gpt-2"},
)
