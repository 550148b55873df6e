"""DistilBERT: encoder for feature-extraction, fill-mask and text-classification.
config.json names its sizes its own way: dim, n_layers, n_heads,
max_position_embeddings, vocab_size."""

from __future__ import annotations

from . import Arch, Geometry


def geometry(config: dict) -> Geometry:
    hidden, heads = int(config["dim"]), int(config["n_heads"])
    return Geometry(hidden=hidden, layers=int(config["n_layers"]), heads=heads, head_dim=hidden // heads,
                    kv_heads=heads, max_positions=int(config.get("max_position_embeddings", 512)),
                    max_positions_key="max_position_embeddings", vocab=int(config["vocab_size"]))


ARCH = Arch(
    model_type="distilbert",
    classes={
        "feature-extraction": "DistilBertModel",
        "fill-mask": "DistilBertForMaskedLM",
        "text-classification": "DistilBertForSequenceClassification",
    },
    geometry=geometry,
)
