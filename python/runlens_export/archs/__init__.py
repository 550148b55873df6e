"""The architectures python/export.py can export, one file each, and the one
table that picks a checkpoint's from its config.json (`model_type`, else the
class named in `architectures`).

Each file (bert.py, distilbert.py, gpt2.py, ...) says what its config fields
are (`geometry`: hidden size, layers, heads, head_dim, KV heads, positions,
vocabulary, whatever the config calls them), which transformers class each
task is built from, and, for a decoder, how it is wrapped for export and the
geometry of its KV cache. Nothing outside this folder names an architecture's
config fields. Adding an architecture adds a file here and a line in `ARCHS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass(frozen=True)
class Geometry:
    """A model's sizes, read from its config.json (each file knows its field names)."""

    hidden: int
    layers: int
    heads: int
    head_dim: int
    kv_heads: int  # = heads without grouped-query attention
    max_positions: int  # the longest sequence its position embeddings (or RoPE's range) allow
    max_positions_key: str  # the config field that says so (for error messages)
    vocab: int


@dataclass(frozen=True)
class Arch:
    model_type: str
    classes: dict[str, str]  # task -> the transformers class the program is built from
    geometry: Callable[[dict], Geometry]
    # Weights a task's program never uses: their absence is no reason to stop.
    unused_weights: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # A decoder: the module to wrap for export (DecoderWithStaticCache,
    # DecoderWindow), given the loaded transformers model; identity by default.
    prepare: Callable[[torch.nn.Module], torch.nn.Module] = lambda model: model
    # model.safetensors always written by transformers from the loaded class
    # (checkpoint.write_eager_files), not copied: one weight naming for the Rust
    # eager path whatever the source.
    resave_weights: bool = False
    # Refuses a config this runlens cannot take (an ExportError naming the field):
    # a rotary scaling or an attention kind the programs or eager do not have.
    check: Callable[[dict], None] = lambda config: None
    # llama.cpp (gguf_files.py): task -> the pre-tokenizer name llama.cpp knows for the family,
    # written into the GGUF when llama.cpp's converter does not recognise the tokenizer
    # (it knows published tokenizers by a hash of their ids; a retrained one is unknown to
    # it). A task not here gets no GGUF files.
    gguf: dict[str, str] = field(default_factory=dict)

    @property
    def decoder(self) -> bool:
        return "text-generation" in self.classes


def config_dict(config) -> dict:
    """config.json's fields, from the dict or a transformers config object."""
    return config if isinstance(config, dict) else config.to_dict()


def head_dim_of(config: dict, hidden: int, heads: int) -> int:
    """`head_dim` where the config gives one (Qwen3's differs from hidden/heads), else hidden/heads."""
    value = config.get("head_dim")
    return int(value) if value else hidden // heads


from . import bert, distilbert, gpt2, llama, qwen2, qwen3  # noqa: E402

ARCHS: dict[str, Arch] = {a.model_type: a for a in (bert.ARCH, distilbert.ARCH, gpt2.ARCH, llama.ARCH, qwen2.ARCH,
                                                    qwen3.ARCH)}
# config.json's `architectures` class names -> model_type (a config without `model_type`).
BY_CLASS: dict[str, str] = {cls: a.model_type for a in ARCHS.values() for cls in a.classes.values()}


def arch_of(config) -> Arch | None:
    """The architecture of a config (dict or transformers object), or None."""
    config = config_dict(config)
    arch = ARCHS.get(str(config.get("model_type")))
    if arch is not None:
        return arch
    for cls in config.get("architectures") or []:
        if cls in BY_CLASS:
            return ARCHS[BY_CLASS[cls]]
    return None


def arch_and_geometry(model):
    """The architecture of a loaded transformers decoder and its sizes."""
    from ..files import ExportError

    arch = arch_of(model.config)
    if arch is None or not arch.decoder:
        raise ExportError(f"{type(model).__name__} (model_type {getattr(model.config, 'model_type', '?')}) is not "
                          "a decoder of runlens_export/archs/")
    return arch, arch.geometry(config_dict(model.config))


def supported_text() -> str:
    rows = []
    for model_type, arch in ARCHS.items():
        rows.append(f"{model_type} ({', '.join(f'{task}: {cls}' for task, cls in arch.classes.items())})")
    return "; ".join(rows)
