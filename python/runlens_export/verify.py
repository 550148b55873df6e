"""Each written program run by ExecuTorch's Python runtime (the wheel's own
C++ runtime, not runlens) on the reference sentences, compared with Python
transformers' outputs in reference.json. The checks return what failed by
program name (export.py: a float program that disagrees fails the export, a
quantized one that fails is left out and named in the manifest)."""

from __future__ import annotations

from pathlib import Path

import torch

from .files import say
from .progress import PROGRESS
from .tasks import Task

# program name -> why it failed (one line a prompt or sentence)
Failures = dict[str, list[str]]


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


def verify(out: Path, programs: list[dict], task: Task, rows: list[dict], pad_id: int) -> Failures:
    """Runs every program on every reference sentence; returns the failures by
    program (empty when all agree) after logging one line per program."""
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    failures: Failures = {}
    for entry in programs:
        with PROGRESS.timed(entry["name"], "check"):
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
        if bad:
            failures[entry["name"]] = bad
    return failures


def worst_line(summaries: list[str]) -> str:
    """The summary of the sentence with the largest max|diff| (each summary holds one)."""
    import re

    def diff(s: str) -> float:
        m = re.search(r"max\|diff\|(?: logits)? ([0-9.e+-]+)", s)
        return float(m.group(1)) if m else 0.0

    return "worst " + max(summaries, key=diff) if summaries else ""


def verify_generation(out: Path, programs: list[dict], rows: list[dict], pad_id: int, max_seq_len: int,
                      max_new_tokens: int, stop, models: dict | None = None) -> Failures:
    """Each text-generation program's greedy ids (a Python loop over ExecuTorch's
    runtime) against transformers' `generated_ids`. The prompts run longest first
    on one loaded program, so a KV-cache program shows it keeps its cache between
    calls (prefill, then steps) and that a shorter prompt restarting at position 0
    is not disturbed by the longer one's stale entries."""
    from executorch.runtime import Runtime

    from .decoder import decoder_for
    from .quantize import load_quantized_kernels

    if any(entry.get("quantization") for entry in programs):
        load_quantized_kernels()  # the quantized embeddings' operators
    runtime = Runtime.get()
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]["ids"]))
    failures: Failures = {}
    for entry in programs:
        with PROGRESS.timed(entry["name"], "check"):
            method = runtime.load_program(out / entry["file"]).load_method("forward")
            decoder = decoder_for(entry, method.execute, max_seq_len, pad_id)
            if entry.get("quantization"):
                bad = verify_quantized(out, entry, decoder, models, rows, order, max_seq_len, max_new_tokens, stop)
            else:
                bad = verify_float(entry, decoder, rows, order, max_new_tokens, stop)
        if bad:
            failures[entry["name"]] = bad
    return failures


def verify_float(entry: dict, decoder, rows: list[dict], order: list[int], max_new_tokens: int, stop) -> list[str]:
    """A float32 program's greedy ids against transformers' on every prompt; what disagrees."""
    from .decoder import first_divergence, greedy

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
    return bad


# A quantized program against the same quantized model run by PyTorch (torchao's
# reference kernels): the program must compute what that model computes. The
# greedy ids must be equal, and the first step's logits close: XNNPACK's int8
# GEMM sums in another order and its per-token activation quantization may round
# an activation one step the other way than torchao's does when it lies within
# float rounding of a .5; one such step moves these logits (random weights, std
# 0.2, spread over about +-10) by up to about 6e-2, in PyTorch alone too: scaling
# the tiny GPT-2's embedding output by 1 + 1e-6 moves its int8 model's logits by
# 6.2e-2. Measured: tiny GPT-2 int8-dynamic 6.2e-2 on one prompt of 4 (cosine
# 0.99993; 1.7e-6 on the others), 8da4w 7e-6 (docs/quantization.md).
QUANTIZED_MAX_DIFF = {"int8-dynamic": 1e-1, "8da4w": 1e-1}
QUANTIZED_MIN_COSINE = 0.9999
# Greedy ids may part where the quantized model's own two best logits are closer
# than this (random weights make such near-ties: tiny-llama's 8da4w program left
# the model's ids where its top two were 1e-3 apart, its logits within 5.3e-2 of
# the model's). Half the logits bound: a tie one rounding step can decide, not a
# program computing something else. After such a tie the program is compared
# teacher-forced on the model's ids, and every later position must agree unless it
# is a tie too.
TIE_MARGIN = 5e-2


def top2_margins(model, prompt: list[int], ids: list[int]) -> list[float]:
    """The model's top-1 minus top-2 logit at each of `ids`' positions, teacher-forced:
    one forward over the prompt and `ids` (the last id's own logits are not needed)."""
    seq = torch.tensor([prompt + ids[:-1]], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=seq).logits[0, len(prompt) - 1:]
    top = torch.topk(logits.float(), 2, dim=-1).values
    return [float(m) for m in (top[:, 0] - top[:, 1])]


def untied_disagreements(picks: list[int], ids: list[int], margins: list[float]) -> list[int]:
    """Positions where the program picks another token than the model and the model's
    top two are not within TIE_MARGIN: what a tie cannot explain."""
    return [k for k, (p, t) in enumerate(zip(picks, ids)) if p != t and margins[k] > TIE_MARGIN]


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.reshape(-1).double(), b.reshape(-1).double()
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp(min=1e-300))


def verify_quantized(out: Path, entry: dict, decoder, models: dict, rows: list[dict], order: list[int],
                     max_seq_len: int, max_new_tokens: int, stop) -> list[str]:
    """Checks one quantized program (tight: against its quantized PyTorch model)
    and measures it against float32 (loose, reported: the first step's logits
    cosine and the top-1 agreement teacher-forced on float32's greedy ids).
    Writes the quantized model's greedy ids and first logits to the entry's
    reference file and the float32 figures into the entry ("vs_float")."""
    import json

    from .decoder import first_divergence, greedy, teacher_forced
    from .files import write_atomic
    from .tasks import generate

    qmodel, fmodel = models[entry["name"]], models["float"]
    bad, ties, sentences, cosines, diffs, agree, total = [], [], [], [], [], 0, 0
    q_cosines, rel_diffs = [], []
    for i in order:
        row = rows[i]
        ids = torch.tensor([row["ids"]], dtype=torch.long)
        with torch.no_grad():
            q_first = qmodel(input_ids=ids).logits[0, -1]
            f_first = fmodel(input_ids=ids).logits[0, -1]
        expected = generate(qmodel, row["ids"], max_new_tokens, stop)
        got = greedy(decoder, row["ids"], max_new_tokens, stop)
        # Against float32: teacher-forced on float32's ids, so one early divergence does not hide the rest.
        p_first, float_picks = teacher_forced(decoder, row["ids"], row["generated_ids"])
        diff = float((p_first - q_first).abs().max())
        cos_q = cosine(p_first, q_first)
        diffs.append(diff)
        q_cosines.append(cos_q)
        rel_diffs.append(diff / max(float(q_first.abs().max()), 1e-30))
        margins = top2_margins(qmodel, row["ids"], expected)
        if got != expected:
            k = first_divergence(got, expected)
            untied = untied_disagreements(teacher_forced(decoder, row["ids"], expected)[1], expected, margins)
            if untied:
                bad.append(f"{row['text']!r}: greedy ids differ from the quantized PyTorch model's at new token {k} "
                           f"({got} vs {expected}); teacher-forced, they differ where the model's top two are more "
                           f"than {TIE_MARGIN} apart at tokens {untied}")
            else:
                ties.append(f"{row['text']!r} at new token {k} (the model's top two {margins[k]:.1e} apart)")
        if diff > QUANTIZED_MAX_DIFF[entry['quantization']] or cos_q < QUANTIZED_MIN_COSINE:
            bad.append(f"{row['text']!r}: first logits max|diff| {diff:.2e}, cosine {cos_q:.6f} against the quantized "
                       f"PyTorch model (allowed {QUANTIZED_MAX_DIFF[entry['quantization']]:.0e}, {QUANTIZED_MIN_COSINE})")
        cosines.append(cosine(p_first, f_first))
        agree += sum(int(p == t) for p, t in zip(float_picks, row["generated_ids"]))
        total += len(row["generated_ids"])
        sentences.append({"text": row["text"], "ids": row["ids"], "generated_ids": expected,
                          "logits": [float(x) for x in q_first], "top2_margins": [round(m, 6) for m in margins]})
    vs_float = {"first_logits_cosine_min": round(min(cosines), 6),
                "first_logits_cosine_mean": round(sum(cosines) / len(cosines), 6),
                "top1_agreement": round(agree / total, 4), "tokens": total}
    entry["vs_float"] = vs_float
    reference = {"model": out.name, "task": "text-generation", "program": entry["name"],
                 "quantization": entry["quantization"], "max_seq_len": max_seq_len, "max_new_tokens": max_new_tokens,
                 "made_by": "the quantized model (torchao) run by PyTorch, transformers generate, greedy; "
                            "logits: the first step's; top2_margins: its top-1 minus top-2 logit at each new "
                            "token, teacher-forced",
                 "tie_margin": TIE_MARGIN,
                 "sentences": [sentences[order.index(i)] for i in range(len(rows))]}
    write_atomic(out / entry["reference"], json.dumps(reference).encode())
    verdict = f"{len(bad)} DISAGREE" if bad else "ok, same ids" if not ties else f"ok ({len(ties)} near-tie(s), same ids teacher-forced)"
    for tie in ties:
        say(f"  {entry['name']:16} ids part at a near-tie, then agree teacher-forced: {tie}")
    say(f"  {entry['name']:16} vs the quantized model in PyTorch, {len(rows)} prompts: {verdict} "
        f"(first logits: worst max|diff| {max(diffs):.2e}, relative {max(rel_diffs):.2e}; min cosine {min(q_cosines):.6f})")
    say(f"  {entry['name']:16} vs float32 (reported, not checked): first-logits cosine min "
        f"{vs_float['first_logits_cosine_min']}, mean {vs_float['first_logits_cosine_mean']}; top-1 agreement "
        f"{agree}/{total} teacher-forced on float32's greedy ids")
    return bad
