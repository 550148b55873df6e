"""Programs made the way other pipelines make them, for `runlens --program
NAME=FILE.pte` and its tests: from a fill-mask checkpoint (a tiny random one
in the tests), programs that follow the conventions runlens drives besides its
own, and two it cannot drive.

    python python/export_course.py --model CHECKPOINT_DIR --out models/course [--len 32]

Writes to OUT:
  at-mask.pte       the course's DistilBERT wrapper (Arm, "ExecuTorch on Arm"):
                    fixed length LEN, inputs (input_ids, attention_mask), the mask
                    found with argmax(input_ids == mask_id), output the logits at
                    that one position [1, V]; lowered with XnnpackPartitioner
  per-position.pte  fixed length LEN, input_ids alone, logits at every position
                    [1, LEN, V]; the wrapper masks the pad id itself (no
                    attention_mask input); no delegate
  float-input.pte   not drivable: one float32 input, inputs_embeds [1, LEN, H]
  rank4-output.pte  not drivable: (input_ids, attention_mask) -> [1, 1, LEN, V]
  programs.json     what each program takes and returns, whether runlens can
                    drive it, and Python transformers' outputs on sentences with
                    one mask (reference.json's fill-mask format), to compare with

Each drivable program is run by ExecuTorch's Python runtime on those sentences
and must agree with transformers (the tolerances of python/export.py).
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
from runlens_export.files import ExportError, say, sha256, write_atomic  # noqa: E402
from runlens_export.tasks import ASSETS, TASKS  # noqa: E402
from runlens_export.verify import execute  # noqa: E402

SENTENCES = 3  # the first sentences of assets/fill-mask.txt with exactly one mask


class LogitsAtMask(torch.nn.Module):
    """The course's fill-mask wrapper: the logits at the (one) mask position."""

    def __init__(self, model, mask_id: int):
        super().__init__()
        self.model, self.mask_id = model, mask_id

    def forward(self, input_ids, attention_mask):
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits  # [1, S, V]
        position = torch.argmax((input_ids == self.mask_id).to(torch.long), dim=1)  # [1]
        return logits[torch.arange(logits.shape[0]), position]  # [1, V]


class LogitsFromIds(torch.nn.Module):
    """input_ids alone; the padding is masked inside (ids equal to the pad id)."""

    def __init__(self, model, pad_id: int):
        super().__init__()
        self.model, self.pad_id = model, pad_id

    def forward(self, input_ids):
        attention_mask = (input_ids != self.pad_id).to(torch.long)
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits  # [1, S, V]


class LogitsFromEmbeddings(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, inputs_embeds):
        return self.model(inputs_embeds=inputs_embeds).logits


class Rank4Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits.unsqueeze(1)


def ids_input(n: int) -> dict:
    return {"name": "input_ids", "dtype": "int64", "shape": [1, n]}


def mask_input(n: int) -> dict:
    return {"name": "attention_mask", "dtype": "int64", "shape": [1, n]}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a fill-mask checkpoint directory")
    ap.add_argument("--out", type=Path, default=Path("models/course"))
    ap.add_argument("--len", type=int, default=32, help="the programs' fixed sequence length")
    args = ap.parse_args(argv)
    n = args.len
    task = TASKS["fill-mask"]
    try:
        ckpt = Checkpoint.from_dir(args.model)
        class_name = ckpt.class_for(task.name)
        model = ckpt.load(class_name, task.name)
        tokenizer = ckpt.tokenizer()
        lines = (ASSETS / task.sentences).read_text(encoding="utf-8").splitlines()
        texts = [t for t in task.texts([line.strip() for line in lines if line.strip()], tokenizer)
                 if t.count(tokenizer.mask_token) == 1][:SENTENCES]
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    mask_id, pad_id = tokenizer.mask_token_id, tokenizer.pad_token_id or 0
    hidden = int(model.config.to_dict().get("dim") or model.config.to_dict().get("hidden_size"))

    rows = []
    with torch.inference_mode():
        for text in texts:
            enc = tokenizer(text, truncation=True, max_length=n, return_tensors="pt")
            ids = enc["input_ids"][0].tolist()
            logits = model(**enc).logits
            rows.append({"text": text, "ids": ids, **task.reference_row(logits, ids, model, tokenizer)})

    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge, to_edge_transform_and_lower

    ids_n, mask_n = torch.ones(1, n, dtype=torch.long), torch.ones(1, n, dtype=torch.long)
    ids_n[0, 1] = mask_id  # the example input has a mask, as the course's
    programs = [
        ("at-mask", LogitsAtMask(model, mask_id), (ids_n, mask_n), True, [ids_input(n), mask_input(n)], [1, ckpt.config["vocab_size"]],
         "the course's fill-mask wrapper: fixed length, one mask found with argmax(input_ids == mask_id), "
         "the logits at that position; XnnpackPartitioner"),
        ("per-position", LogitsFromIds(model, pad_id), (ids_n,), False, [ids_input(n)], [1, n, ckpt.config["vocab_size"]],
         f"input_ids alone, fixed length, logits at every position; ids equal to the pad id ({pad_id}) are masked inside; no delegate"),
        ("float-input", LogitsFromEmbeddings(model), (torch.zeros(1, n, hidden),), False,
         [{"name": "inputs_embeds", "dtype": "float32", "shape": [1, n, hidden]}], [1, n, ckpt.config["vocab_size"]],
         "not drivable: its one input is float32 token embeddings, not token ids"),
        ("rank4-output", Rank4Logits(model), (ids_n, mask_n), False, [ids_input(n), mask_input(n)], [1, 1, n, ckpt.config["vocab_size"]],
         "not drivable: the output has rank 4"),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, wrapper, example, xnnpack, inputs, output, about in programs:
        say(f"{name}.pte: {about}")
        ep = torch.export.export(wrapper.eval(), example, strict=False)
        if xnnpack:
            program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
        else:
            program = to_edge(ep).to_executorch()
        write_atomic(args.out / f"{name}.pte", program.buffer)
        drivable = not name.startswith(("float", "rank4"))
        entries.append({
            "name": name, "file": f"{name}.pte", "about": about, "drivable": drivable,
            "inputs": inputs, "output": {"dtype": "float32", "shape": output},
            "delegate": "XnnpackBackend" if xnnpack else None, "fixed_len": n,
        })

    failures = check(args.out, entries, rows, pad_id, n)
    if failures:
        for f in failures:
            print(f"error: {f}", file=sys.stderr)
        return 1
    doc = {
        "checkpoint": str(args.model), "model": ckpt.name, "task": task.name, "mask_id": mask_id, "pad_id": pad_id,
        "fixed_len": n, "programs": entries,
        "sha256": {e["file"]: sha256(args.out / e["file"]) for e in entries},
        "sentences": rows,
    }
    write_atomic(args.out / "programs.json", (json.dumps(doc) + "\n").encode())
    say(f"done: {', '.join(e['file'] for e in entries)}, programs.json in {args.out}")
    return 0


def check(out: Path, entries: list[dict], rows: list[dict], pad_id: int, n: int) -> list[str]:
    """The drivable programs against transformers, on padded inputs as runlens gives them."""
    from executorch.runtime import Runtime

    task = TASKS["fill-mask"]
    failures = []
    for e in entries:
        if not e["drivable"]:
            continue
        method = Runtime.get().load_program(out / e["file"]).load_method("forward")
        for row in rows:
            if e["name"] == "per-position":
                ids = torch.full((1, n), pad_id, dtype=torch.long)
                ids[0, : len(row["ids"])] = torch.tensor(row["ids"])
                output = method.execute([ids])[0]
            else:
                at = execute(method, row["ids"], pad_id, n)  # [1, V] at the mask
                output = torch.zeros(1, n, at.shape[-1])
                output[0, row["masks"][0]["position"]] = at[0]
            result = task.compare(row, output, quantized=False)
            say(f"  {e['name']:13} {row['text']!r}: {'ok' if result.ok else 'DISAGREES'} ({result.summary})")
            if not result.ok:
                failures.append(f"{e['file']} {row['text']!r}: {result.summary}")
    return failures


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
