"""Each written program run by ExecuTorch's Python runtime (the wheel's own
C++ runtime, not runlens) on the reference sentences, compared with Python
transformers' outputs in reference.json. A program that disagrees beyond the
task's tolerance (tasks.py) fails the export."""

from __future__ import annotations

from pathlib import Path

import torch

from .files import say
from .tasks import Task


def run_program(path: Path, ids: list[int], pad_id: int, fixed_len: int | None) -> torch.Tensor:
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(path).load_method("forward")
    return execute(method, ids, pad_id, fixed_len)


def execute(method, ids: list[int], pad_id: int, fixed_len: int | None) -> torch.Tensor:
    n = len(ids)
    length = fixed_len or n
    input_ids = torch.full((1, length), pad_id, dtype=torch.long)
    input_ids[0, :n] = torch.tensor(ids, dtype=torch.long)
    mask = torch.zeros(1, length, dtype=torch.long)
    mask[0, :n] = 1
    return method.execute([input_ids, mask])[0]


def verify(out: Path, programs: list[dict], task: Task, rows: list[dict], pad_id: int) -> list[str]:
    """Runs every program on every reference sentence; returns the failures
    (empty when all agree) after logging one line per program."""
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    failures = []
    for entry in programs:
        method = runtime.load_program(out / entry["file"]).load_method("forward")
        quantized = entry["quantization"] is not None
        bad = []
        summaries = []
        for row in rows:
            output = execute(method, row["ids"], pad_id, entry["fixed_len"])
            result = task.compare(row, output, quantized)
            summaries.append(result.summary)
            if not result.ok:
                bad.append(f"{row['text']!r}: {result.summary}")
        verdict = f"{len(bad)} DISAGREE" if bad else "ok"
        say(f"  {entry['name']:15} vs transformers on {len(rows)} sentences: {verdict} ({worst_line(summaries)})")
        failures += [f"{entry['file']} {b}" for b in bad]
    return failures


def worst_line(summaries: list[str]) -> str:
    """The summary of the sentence with the largest max|diff| (each summary holds one)."""
    import re

    def diff(s: str) -> float:
        m = re.search(r"max\|diff\|(?: logits)? ([0-9.e+-]+)", s)
        return float(m.group(1)) if m else 0.0

    return "worst " + max(summaries, key=diff) if summaries else ""


def verify_generation(out: Path, programs: list[dict], rows: list[dict], pad_id: int, max_seq_len: int,
                      max_new_tokens: int, stop) -> list[str]:
    """Each text-generation program's greedy ids (a Python loop over ExecuTorch's
    runtime) against transformers' `generated_ids`. The prompts run longest first
    on one loaded program, so a KV-cache program shows it keeps its cache between
    calls (prefill, then steps) and that a shorter prompt restarting at position 0
    is not disturbed by the longer one's stale entries."""
    from executorch.runtime import Runtime

    from .decoder import decoder_for, first_divergence, greedy

    runtime = Runtime.get()
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]["ids"]))
    failures = []
    for entry in programs:
        method = runtime.load_program(out / entry["file"]).load_method("forward")
        decoder = decoder_for(entry, method.execute, max_seq_len, pad_id)
        bad = []
        for i in order:
            row = rows[i]
            got = greedy(decoder, row["ids"], max_new_tokens, stop)
            if got != row["generated_ids"]:
                bad.append(f"{row['text']!r}: greedy ids differ from transformers' at new token "
                           f"{first_divergence(got, row['generated_ids'])} ({got} vs {row['generated_ids']})")
        n = sum(len(rows[i]["generated_ids"]) for i in order)
        lens = ", ".join(str(len(rows[i]["ids"])) for i in order)
        verdict = f"{len(bad)} DISAGREE" if bad else "ok, same ids"
        say(f"  {entry['name']:16} vs transformers, {len(rows)} prompts of {lens} tokens in turn on one loaded "
            f"program, {n} new tokens: {verdict}")
        failures += [f"{entry['file']} {b}" for b in bad]
    return failures
