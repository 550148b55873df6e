"""Rotary position embeddings as a config describes them, for the decoders
that have them (llama.py, qwen2.py, qwen3.py): the scaling types runlens takes.

A checkpoint from the hub writes `rope_theta` and `rope_scaling`
({"rope_type" or "type": "linear" | "llama3" | ..., "factor", ...}, null for
none); transformers 5 writes `rope_parameters` ({"rope_type", "rope_theta", ...}).
"""

from __future__ import annotations

# What runlens' eager decoders compute too (Rust side): no scaling, positions
# divided by `factor`, Llama 3's frequency-dependent scaling.
ROPE_TYPES = ("default", "linear", "llama3")


def rope_of(config: dict) -> dict:
    """{"rope_type", "rope_theta", and the scaling's own fields} from either spelling."""
    scaling = dict(config.get("rope_scaling") or {})
    if "type" in scaling:  # the older spelling
        scaling.setdefault("rope_type", scaling.pop("type"))
    # Both present: rope_scaling wins, as transformers' config takes it.
    params = {**(config.get("rope_parameters") or {}), **scaling}
    params.setdefault("rope_type", "default")
    if "rope_theta" not in params and "rope_theta" in config:
        params["rope_theta"] = config["rope_theta"]
    return params


def check_rope(config: dict) -> None:
    from ..files import ExportError

    rope = rope_of(config)
    if rope["rope_type"] not in ROPE_TYPES:
        raise ExportError(f"config.json's rotary embeddings use the scaling {rope['rope_type']!r}; runlens takes "
                          f"{', '.join(ROPE_TYPES)}")
