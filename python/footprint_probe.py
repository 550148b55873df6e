"""One Python stack, from process start to its first result, for `runlens footprint`.

    footprint_probe.py eager MODEL_DIR THREADS TEXT
        transformers: AutoTokenizer + AutoModel (attn_implementation="eager") in
        export.py's SentenceEmbedder, under torch.inference_mode()
    footprint_probe.py executorch PTE MODEL_DIR THREADS TEXT
        executorch's _load_for_executorch on PTE; the text tokenized with the
        `tokenizers` package from MODEL_DIR/tokenizer.json (no transformers)

The protocol (src/footprint/probe.rs, the same as `runlens footprint-probe`):
imports, tokenizer and model are loaded, then "loaded" is printed and the
process waits for a line on stdin (the parent reads /proc/PID/status then);
it runs the text once and prints "result {"run_ms": ..., "embedding": [...]}",
and waits for a line (or the end of stdin) again before it exits.
Everything else goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def handshake(word: str, payload: dict | None = None) -> None:
    line = word if payload is None else f"{word} {json.dumps(payload)}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    sys.stdin.readline()


def eager(model_dir: str, threads: int, text: str) -> None:
    import torch
    from export import SentenceEmbedder
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = SentenceEmbedder(AutoModel.from_pretrained(model_dir, attn_implementation="eager")).eval()
    handshake("loaded")
    t0 = time.perf_counter()
    encoded = tokenizer(text, return_tensors="pt", truncation=True, max_length=128)
    with torch.inference_mode():
        out = model(encoded["input_ids"], encoded["attention_mask"])
    run_ms = (time.perf_counter() - t0) * 1e3
    handshake("result", {"run_ms": run_ms, "embedding": out[0].tolist()})


def executorch(pte: str, model_dir: str, threads: int, text: str) -> None:
    import torch
    from executorch.extension.pybindings import portable_lib
    from tokenizers import Tokenizer

    portable_lib._unsafe_reset_threadpool(threads)
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    module = portable_lib._load_for_executorch(pte)
    handshake("loaded")
    t0 = time.perf_counter()
    encoded = tokenizer.encode(text)
    ids = torch.tensor([encoded.ids[:128]], dtype=torch.long)
    mask = torch.tensor([encoded.attention_mask[:128]], dtype=torch.long)
    out = module.forward((ids, mask))[0]
    run_ms = (time.perf_counter() - t0) * 1e3
    handshake("result", {"run_ms": run_ms, "embedding": out[0].tolist()})


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "eager":
        eager(argv[1], int(argv[2]), argv[3])
    elif len(argv) == 5 and argv[0] == "executorch":
        executorch(argv[1], argv[2], int(argv[3]), argv[4])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
