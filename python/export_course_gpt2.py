"""GPT-2 programs made the course's way (Arm, "ExecuTorch on Arm": a fixed,
left-padded window, no cache, the whole window recomputed per new token), for
`runlens --program NAME=FILE.pte` with a text-generation model and its tests.
The peer of export_course.py (fill-mask).

    python python/export_course_gpt2.py --model CHECKPOINT_DIR --out models/course-gpt2 [--len 32]

Writes to OUT:
  window.pte               fixed length LEN, inputs (input_ids, attention_mask) int64 [1, LEN],
                           left-padded with the pad id, mask 0 on the padding; output the
                           last position's logits [1, V]; lowered with XnnpackPartitioner
  window-per-position.pte  the same inputs, the logits of every position [1, LEN, V]
                           (the last real token is at LEN-1); no delegate
  programs.json            what each program takes and returns, and the reference
                           continuations of the prompts that fit (prompt + new tokens <= LEN)

Positions come from the mask inside both programs (cumsum(mask) - 1), so the
padded window's greedy ids equal transformers' `generate` on the unpadded prompt;
`generated_ids` are those (transformers on the unpadded prompt), and both programs
were checked against them with ExecuTorch's Python runtime.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
warnings.filterwarnings("ignore", category=FutureWarning)

import torch  # noqa: E402

from runlens_export.checkpoint import Checkpoint  # noqa: E402
from runlens_export.decoder import WindowDecoder, export_window, first_divergence, greedy, to_program  # noqa: E402
from runlens_export.files import ExportError, say, sha256, write_atomic  # noqa: E402
from runlens_export.tasks import ASSETS, TASKS  # noqa: E402

MAX_NEW_TOKENS = 16  # a window of 32 holds a short prompt and 16 new tokens


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a GPT-2 checkpoint directory")
    ap.add_argument("--out", type=Path, default=Path("models/course-gpt2"))
    ap.add_argument("--len", type=int, default=32, help="the programs' fixed window length")
    ap.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS)
    args = ap.parse_args(argv)
    n, new = args.len, args.max_new_tokens
    task = TASKS["text-generation"]
    try:
        ckpt = Checkpoint.from_dir(args.model)
        class_name = ckpt.class_for(task.name)
        model = ckpt.load(class_name, task.name)
        tokenizer = ckpt.tokenizer()
        prompts = [ln.strip() for ln in (ASSETS / task.sentences).read_text(encoding="utf-8").splitlines() if ln.strip()]
        fits = [p for p in prompts if len(tokenizer(p, add_special_tokens=False)["input_ids"]) + new - 1 <= n]
        if not fits:
            raise ExportError(f"no prompt of {ASSETS / task.sentences} fits a window of {n} with {new} new tokens")
        extra = task.extra_fields(model, tokenizer)
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    task.max_new_tokens = new
    model.requires_grad_(False)
    rows = task.reference(model, tokenizer, fits, n)  # also checks the padded window in eager
    pad_id, eos_id, vocab = extra["pad_token_id"], extra["eos_token_id"], ckpt.config["vocab_size"]

    def inputs() -> list[dict]:
        return [{"name": name, "dtype": "int64", "shape": [1, n]} for name in ("input_ids", "attention_mask")]

    programs = [
        ("window", False, True, [1, vocab],
         f"the course's GPT-2 wrapper: a window of {n} left-padded with the pad id ({pad_id}), mask 0 on the padding, "
         "positions from the mask, the last position's logits; XnnpackPartitioner"),
        ("window-per-position", True, False, [1, n, vocab],
         f"a window of {n} left-padded as window.pte, the logits of every position (the last real token at {n - 1}); "
         "no delegate"),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, per_position, xnnpack, output, about in programs:
        say(f"{name}.pte: {about}")
        program, _ = to_program(export_window(model, n, per_position), delegate=xnnpack)
        write_atomic(args.out / f"{name}.pte", program.buffer)
        entries.append({
            "name": name, "file": f"{name}.pte", "about": about, "drivable": True, "inputs": inputs(),
            "output": {"dtype": "float32", "shape": output}, "delegate": "XnnpackBackend" if xnnpack else None,
            "fixed_len": n, "cache": None,
        })

    from executorch.runtime import Runtime

    failures = []
    for e in entries:
        method = Runtime.get().load_program(args.out / e["file"]).load_method("forward")
        for row in rows:
            got = greedy(WindowDecoder(method.execute, n, pad_id), row["ids"], new, eos_id)
            ok = got == row["generated_ids"]
            say(f"  {e['name']:19} {row['text']!r}: {'same ids' if ok else 'DIFFERENT ids'}")
            if not ok:
                failures.append(f"{e['file']} {row['text']!r}: first divergence at new token "
                                f"{first_divergence(got, row['generated_ids'])}")
    if failures:
        for f in failures:
            print(f"error: {f}", file=sys.stderr)
        return 1
    doc = {
        "checkpoint": str(args.model), "model": ckpt.name, "task": task.name, "pad_id": pad_id,
        "eos_token_id": eos_id, "fixed_len": n, "max_new_tokens": new,
        "reference": "transformers generate (greedy) on the unpadded prompt; equal to the padded window's "
                     "greedy ids since the programs take positions from the mask",
        "programs": entries,
        "sha256": {e["file"]: sha256(args.out / e["file"]) for e in entries},
        "sentences": rows,
    }
    write_atomic(args.out / "programs.json", (json.dumps(doc, indent=1) + "\n").encode())
    say(f"done: {', '.join(e['file'] for e in entries)}, programs.json in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
