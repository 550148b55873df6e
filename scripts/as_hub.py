"""A checkpoint rewritten as the hub ships the models Pi users bring (issue 33's
figures; docs/figures.md): bfloat16 weights (config.json's dtype "bfloat16"), sharded
safetensors with model.safetensors.index.json, the tokenizer files, chat template and
generation_config.json copied as they are.

    python scripts/as_hub.py --checkpoint models/checkpoints/qwen2.5-0.5b-random \\
        --out models/checkpoints/qwen2.5-0.5b-hub [--shard-size 500MB]

Used on the random-weight checkpoints of published sizes (`make models-decoder-figures`'s
tests/python/tiny_checkpoint.py), so that the figures time an export of the layout a download
has. Random weights: they time like trained ones but quantize worse.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import torch

# Everything beside the weights that a hub download carries and the export reads.
COPIED = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
          "chat_template.jinja", "generation_config.json")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=Path, required=True, help="a checkpoint directory (any dtype, one file or sharded)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shard-size", default="500MB", help="save_pretrained's max_shard_size (default %(default)s)")
    args = ap.parse_args(argv)

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(args.checkpoint), dtype=torch.bfloat16)
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(args.out), max_shard_size=args.shard_size)
    for name in COPIED:
        if (args.checkpoint / name).is_file():
            shutil.copyfile(args.checkpoint / name, args.out / name)
    shards = sorted(p.name for p in args.out.glob("*.safetensors"))
    print(f"as_hub: {args.out}: bfloat16, {len(shards)} shard(s): {', '.join(shards)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
