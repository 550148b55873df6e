"""Qwen3 (model_type `qwen3`): decoder for text-generation (Qwen3ForCausalLM).
Llama's shape (llama.py) with an RMSNorm on each head's queries and keys
(q_norm, k_norm), no q/k/v biases, and a head_dim of its own that is not
hidden_size / num_attention_heads (Qwen3-0.6B: 1024 wide, 16 heads of 128):
the KV cache is sized by head_dim. Sliding windows are refused as for Qwen2."""

from __future__ import annotations

from . import Arch
from .llama import geometry
from .qwen2 import check

ARCH = Arch(
    model_type="qwen3",
    classes={"text-generation": "Qwen3ForCausalLM"},
    geometry=geometry,
    check=check,
    # Qwen3 keeps Qwen2's tokenizer and regex.
    gguf={"text-generation": "qwen2"},
)
