"""Qwen2 (model_type `qwen2`: Qwen2, Qwen2.5): decoder for text-generation
(Qwen2ForCausalLM). Llama's shape (llama.py: the same config fields, grouped-
query attention, RoPE) with biases on the q/k/v projections; the small ones
tie the head to the embedding. Sliding-window attention (`use_sliding_window`,
off in the published checkpoints) is not taken: its cache is not the static one."""

from __future__ import annotations

from . import Arch
from .llama import geometry
from .rope import check_rope


def check(config: dict) -> None:
    from ..files import ExportError

    check_rope(config)
    if config.get("use_sliding_window"):
        raise ExportError("config.json sets use_sliding_window: runlens exports full attention only "
                          "(the static KV cache); set it to false if the checkpoint was trained without it")


ARCH = Arch(
    model_type="qwen2",
    classes={"text-generation": "Qwen2ForCausalLM"},
    geometry=geometry,
    check=check,
    gguf={"text-generation": "qwen2"},
)
