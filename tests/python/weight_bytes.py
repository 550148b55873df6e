"""The bytes of weights one decode step of a checkpoint reads, computed by
PyTorch from the loaded model, for tests/bench_weights.rs to check runlens'
own figure (bench::weights) against: every parameter once (a tied head and
embedding are one tensor), less the tables a step only gathers one row of (a
token embedding the head does not share, GPT-2's position embedding).

    python tests/python/weight_bytes.py CHECKPOINT_DIR [...]   -> one JSON object {dir: bytes}
"""

from __future__ import annotations

import json
import os
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")


def weight_bytes(path: str) -> int:
    import transformers

    import torch

    # float32 whatever the checkpoint's dtype: what runlens' eager holds (it widens bfloat16 at load).
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    total = sum(p.numel() * p.element_size() for p in model.parameters())  # parameters() counts a tied tensor once
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    gathered = 0 if head.data_ptr() == embedding.data_ptr() else embedding.numel() * embedding.element_size()
    for name, module in model.named_modules():
        if name.endswith("wpe"):
            gathered += module.weight.numel() * module.weight.element_size()
    return total - gathered


if __name__ == "__main__":
    print(json.dumps({path: weight_bytes(path) for path in sys.argv[1:]}))
