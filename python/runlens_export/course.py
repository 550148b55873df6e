"""Programs made the way other pipelines make them (Arm's course, "ExecuTorch
on Arm"), for `runlens --program NAME=FILE.pte` and its tests; written by
python/export_course.py, lowered as every other program (lowering.py).

fill-mask (an encoder checkpoint), fixed length LEN:
  at-mask.pte       the course's DistilBERT wrapper: inputs (input_ids,
                    attention_mask), the mask found with argmax(input_ids ==
                    mask_id), output the logits at that one position [1, V];
                    XnnpackPartitioner
  per-position.pte  input_ids alone, logits at every position [1, LEN, V]; the
                    wrapper masks the pad id itself; no delegate
  float-input.pte   not drivable: one float32 input, inputs_embeds [1, LEN, H]
  rank4-output.pte  not drivable: (input_ids, attention_mask) -> [1, 1, LEN, V]
  programs.json     what each takes and returns, whether runlens can drive it,
                    transformers' outputs on sentences with one mask (reference.json's
                    fill-mask format)

text-generation (a decoder checkpoint): the course's GPT-2 way, a fixed
left-padded window of LEN, no cache, the whole window recomputed per new token:
  window.pte               (input_ids, attention_mask) int64 [1, LEN], left-padded with
                           the pad id, mask 0 on the padding -> the last position's
                           logits [1, V]; XnnpackPartitioner
  window-per-position.pte  the same inputs, the logits of every position [1, LEN, V]
                           (the last real token at LEN-1); no delegate
  programs.json            what each takes and returns, and transformers' greedy
                           continuations of the prompts that fit (prompt + new tokens <= LEN)

Positions come from the mask inside the window programs (cumsum(mask) - 1), so
the padded window's greedy ids equal transformers' `generate` on the unpadded
prompt. Every drivable program is run by ExecuTorch's Python runtime and must
agree with transformers (the tolerances of python/export.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from .checkpoint import Checkpoint
from .decoder import WindowDecoder, export_window, first_divergence, greedy
from .files import ExportError, say, sha256, write_atomic, write_program
from .lowering import XNNPACK, lower
from .tasks import ASSETS, TASKS
from .verify import execute

SENTENCES = 3  # the first sentences of assets/fill-mask.txt with exactly one mask
MAX_NEW_TOKENS = 16  # a window of 32 holds a short prompt and 16 new tokens


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


def fill_mask_course(ckpt: Checkpoint, out: Path, n: int) -> int:
    """Writes the fill-mask course programs and programs.json; 1 when one disagrees."""
    task = TASKS["fill-mask"]
    class_name = ckpt.class_for(task.name)
    model = ckpt.load(class_name, task.name)
    tokenizer = ckpt.tokenizer()
    lines = (ASSETS / task.sentences).read_text(encoding="utf-8").splitlines()
    texts = [t for t in task.texts([line.strip() for line in lines if line.strip()], tokenizer)
             if t.count(tokenizer.mask_token) == 1][:SENTENCES]
    mask_id, pad_id = tokenizer.mask_token_id, tokenizer.pad_token_id or 0
    geometry = ckpt.geometry
    hidden, vocab = geometry.hidden, geometry.vocab

    rows = []
    with torch.inference_mode():
        for text in texts:
            enc = tokenizer(text, truncation=True, max_length=n, return_tensors="pt")
            ids = enc["input_ids"][0].tolist()
            logits = model(**enc).logits
            rows.append({"text": text, "ids": ids, **task.reference_row(logits, ids, model, tokenizer)})

    ids_n, mask_n = torch.ones(1, n, dtype=torch.long), torch.ones(1, n, dtype=torch.long)
    ids_n[0, 1] = mask_id  # the example input has a mask, as the course's
    programs = [
        ("at-mask", LogitsAtMask(model, mask_id), (ids_n, mask_n), True, [ids_input(n), mask_input(n)], [1, vocab],
         "the course's fill-mask wrapper: fixed length, one mask found with argmax(input_ids == mask_id), "
         "the logits at that position; XnnpackPartitioner"),
        ("per-position", LogitsFromIds(model, pad_id), (ids_n,), False, [ids_input(n)], [1, n, vocab],
         f"input_ids alone, fixed length, logits at every position; ids equal to the pad id ({pad_id}) are masked inside; no delegate"),
        ("float-input", LogitsFromEmbeddings(model), (torch.zeros(1, n, hidden),), False,
         [{"name": "inputs_embeds", "dtype": "float32", "shape": [1, n, hidden]}], [1, n, vocab],
         "not drivable: its one input is float32 token embeddings, not token ids"),
        ("rank4-output", Rank4Logits(model), (ids_n, mask_n), False, [ids_input(n), mask_input(n)], [1, 1, n, vocab],
         "not drivable: the output has rank 4"),
    ]
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, wrapper, example, xnnpack, inputs, output, about in programs:
        say(f"{name}.pte: {about}")
        program, _ = lower(torch.export.export(wrapper.eval(), example, strict=False), delegate=xnnpack)
        write_program(out / f"{name}.pte", program)
        drivable = not name.startswith(("float", "rank4"))
        entries.append({
            "name": name, "file": f"{name}.pte", "about": about, "drivable": drivable,
            "inputs": inputs, "output": {"dtype": "float32", "shape": output},
            "delegate": XNNPACK if xnnpack else None, "fixed_len": n,
        })

    failures = check_fill_mask(out, entries, rows, pad_id, n)
    if failures:
        for f in failures:
            print(f"error: {f}", file=sys.stderr)
        return 1
    doc = {
        "checkpoint": str(ckpt.path), "model": ckpt.name, "task": task.name, "mask_id": mask_id, "pad_id": pad_id,
        "fixed_len": n, "programs": entries,
        "sha256": {e["file"]: sha256(out / e["file"]) for e in entries},
        "sentences": rows,
    }
    write_atomic(out / "programs.json", (json.dumps(doc) + "\n").encode())
    say(f"done: {', '.join(e['file'] for e in entries)}, programs.json in {out}")
    return 0


def check_fill_mask(out: Path, entries: list[dict], rows: list[dict], pad_id: int, n: int) -> list[str]:
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


def generation_course(ckpt: Checkpoint, out: Path, n: int, new: int) -> int:
    """Writes the window programs and programs.json; 1 when one disagrees."""
    task = TASKS["text-generation"]
    class_name = ckpt.class_for(task.name)
    model = ckpt.load(class_name, task.name)
    tokenizer = ckpt.tokenizer()
    prompts = [ln.strip() for ln in (ASSETS / task.sentences).read_text(encoding="utf-8").splitlines() if ln.strip()]
    fits = [p for p in prompts if len(task.encode(tokenizer, p)) + new - 1 <= n]
    if not fits:
        raise ExportError(f"no prompt of {ASSETS / task.sentences} fits a window of {n} with {new} new tokens")
    extra = task.extra_fields(model, tokenizer)
    task.max_new_tokens = new
    model.requires_grad_(False)
    rows = task.reference(model, tokenizer, fits, n)  # also checks the padded window in eager
    pad_id, eos_id, vocab = extra["pad_token_id"], extra["eos_token_id"], ckpt.geometry.vocab
    stop = task.stop_ids(extra)

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
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, per_position, xnnpack, output, about in programs:
        say(f"{name}.pte: {about}")
        program, _ = lower(export_window(model, n, per_position), delegate=xnnpack, standard_ops_only=True)
        write_program(out / f"{name}.pte", program)
        entries.append({
            "name": name, "file": f"{name}.pte", "about": about, "drivable": True, "inputs": inputs(),
            "output": {"dtype": "float32", "shape": output}, "delegate": XNNPACK if xnnpack else None,
            "fixed_len": n, "cache": None,
        })

    from executorch.runtime import Runtime

    failures = []
    for e in entries:
        method = Runtime.get().load_program(out / e["file"]).load_method("forward")
        for row in rows:
            got = greedy(WindowDecoder(method.execute, n, pad_id), row["ids"], new, stop)
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
        "checkpoint": str(ckpt.path), "model": ckpt.name, "task": task.name, "pad_id": pad_id,
        "eos_token_id": eos_id, "fixed_len": n, "max_new_tokens": new,
        "reference": "transformers generate (greedy) on the unpadded prompt; equal to the padded window's "
                     "greedy ids since the programs take positions from the mask",
        "programs": entries,
        "sha256": {e["file"]: sha256(out / e["file"]) for e in entries},
        "sentences": rows,
    }
    write_atomic(out / "programs.json", (json.dumps(doc, indent=1) + "\n").encode())
    say(f"done: {', '.join(e['file'] for e in entries)}, programs.json in {out}")
    return 0
