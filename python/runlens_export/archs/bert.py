"""BERT (and MiniLM, which is one): encoder for feature-extraction, fill-mask
and text-classification. config.json: hidden_size, num_hidden_layers,
num_attention_heads, max_position_embeddings, vocab_size."""

from __future__ import annotations

from . import Arch, Geometry


def geometry(config: dict) -> Geometry:
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    return Geometry(hidden=hidden, layers=int(config["num_hidden_layers"]), heads=heads, head_dim=hidden // heads,
                    kv_heads=heads, max_positions=int(config.get("max_position_embeddings", 512)),
                    max_positions_key="max_position_embeddings", vocab=int(config["vocab_size"]))


ARCH = Arch(
    model_type="bert",
    classes={
        "feature-extraction": "BertModel",
        "fill-mask": "BertForMaskedLM",
        "text-classification": "BertForSequenceClassification",
    },
    geometry=geometry,
    # The sentence embedding pools the last hidden state itself; BertModel's pooler is not in the program.
    unused_weights={"feature-extraction": ("pooler.",)},
    # The sentence embedding (mean pooling) only: llama.cpp's bert graph has no masked-LM head, and
    # runlens reads no class logits from it. WordPiece has no pre-tokenizer in llama.cpp: the name is
    # not used.
    gguf={"feature-extraction": "default"},
)
