"""Each written program run by ExecuTorch's Python runtime (the wheel's own
C++ runtime, not runlens) on the reference sentences, compared with Python
transformers' outputs in reference.json. The checks return what failed by
program name (export.py: a float program that disagrees fails the export, a
quantized one that fails is left out and named in the manifest)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from .compare import Comparison
from .files import say
from .progress import PROGRESS

# program name -> why it failed (one line a prompt or sentence)
Failures = dict[str, list[str]]
# A task's `compare` (tasks.py): a reference sentence, the program's output on it and
# whether the program is quantized -> whether they agree, and a summary.
Compare = Callable[[dict, torch.Tensor, bool], Comparison]


def executorch_programs(programs: list[dict]) -> list[dict]:
    """The entries ExecuTorch runs: llama.cpp's GGUF files are checked by check_gguf,
    ONNX Runtime's files by onnx_files.check."""
    from .gguf_files import is_gguf
    from .onnx_files import is_onnx

    return [entry for entry in programs if not is_gguf(entry) and not is_onnx(entry)]


def check_gguf(out_dir: Path, runlens_bin: Path | None, entries: list[dict], reference_rows: list[dict]) -> list[dict]:
    """The llama.cpp check at export, through the runlens binary: a HOOK, not written yet
    (the Rust side adds it); returns [] (nothing failed).

    Called by export.py inside the check step (not with --no-check), after the
    ExecuTorch check, with the staged model directory `out_dir` (manifest.json is not
    written yet; reference.json, tokenizer.json, config.json and the GGUF files are
    there), `runlens_bin` (None when there is no binary: then nothing can be checked),
    `entries` (the GGUF program entries written: llamacpp-f32, and llamacpp-q8_0 and
    llamacpp-q4_0 when a binary quantized them) and `reference_rows` (reference.json's
    "sentences": text-generation rows with "ids" and "generated_ids", feature-extraction
    rows with "ids" and the pooled "embedding").

    Returns what failed, one dict per file: {"name", "file", "why"}. export.py treats
    them as the ExecuTorch check's failures: a float one (llamacpp-f32) fails the whole
    export and leaves the model directory as it was; a quantized one (q8_0, q4_0) is
    left out of the manifest's programs, named in "failed_checks", its file kept in the
    staging folder, and the export exits 1."""
    if entries:
        say(f"  {', '.join(e['name'] for e in entries)}: not checked at export yet (verify.check_gguf is a hook)")
    return []


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


def verify(out: Path, programs: list[dict], compare: Compare, rows: list[dict], pad_id: int) -> Failures:
    """Runs every program on every reference sentence and judges its output by the
    task's `compare`; returns the failures by program (empty when all agree) after
    logging one line per program."""
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    failures: Failures = {}
    for entry in executorch_programs(programs):
        with PROGRESS.timed(entry["name"], "check"):
            method = runtime.load_program(out / entry["file"]).load_method("forward")
            quantized = entry["quantization"] is not None
            bad = []
            summaries = []
            for row in rows:
                output = execute(method, row["ids"], pad_id, entry["fixed_len"])
                result = compare(row, output, quantized)
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


# Past this many parameters the check runs one raw and one chat prompt (the
# shortest of each) unless --check-all: at Qwen2.5-0.5B's sizes each quantized
# program's check of all 8 prompts took over 30 minutes on 2 cores, most of it
# torchao's quantized model generating in eager PyTorch (docs/models.md).
CHECK_ALL_UP_TO = 200_000_000


def check_rows(rows: list[dict], model, check_all: bool) -> list[int]:
    """The reference rows the check runs: all of them, or for a model past
    CHECK_ALL_UP_TO parameters the shortest raw and the shortest chat prompt."""
    every = list(range(len(rows)))
    if check_all or model is None or sum(p.numel() for p in model.parameters()) <= CHECK_ALL_UP_TO:
        return every
    picked = []
    for fmt in ("raw", "chat"):
        of_fmt = [i for i in every if rows[i].get("prompt_format", "raw") == fmt]
        if of_fmt:
            picked.append(min(of_fmt, key=lambda i: len(rows[i]["ids"])))
    say(f"  a model past {CHECK_ALL_UP_TO // 1_000_000} M parameters: the check runs {len(picked)} of the "
        f"{len(rows)} prompts (the shortest raw and chat ones; --check-all for every one)")
    return picked


def verify_generation(out: Path, programs: list[dict], rows: list[dict], pad_id: int, max_seq_len: int,
                      max_new_tokens: int, stop, models: dict | None = None, check_all: bool = False) -> Failures:
    """Each text-generation program's greedy ids (a Python loop over ExecuTorch's
    runtime) against transformers' `generated_ids`. The prompts run longest first
    on one loaded program, so a KV-cache program shows it keeps its cache between
    calls (prefill, then steps) and that a shorter prompt restarting at position 0
    is not disturbed by the longer one's stale entries."""
    from executorch.runtime import Runtime

    from .decoder import decoder_for
    from .quantize import load_quantized_kernels

    programs = executorch_programs(programs)
    if any(entry.get("quantization") for entry in programs):
        load_quantized_kernels()  # the quantized embeddings' operators
    runtime = Runtime.get()
    order = sorted(check_rows(rows, models["float"] if models else None, check_all),
                   key=lambda i: -len(rows[i]["ids"]))
    failures: Failures = {}
    for entry in programs:
        with PROGRESS.timed(entry["name"], "check"):
            program = runtime.load_program(out / entry["file"])
            decoder = decoder_for(entry, lambda name, program=program: program.load_method(name).execute,
                                  max_seq_len, pad_id)
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
    say(f"  {entry['name']:16} vs transformers, {len(order)} prompts of {lens} tokens in turn on one loaded "
        f"program, {n} new tokens: {verdict}")
    return bad


# A quantized program against the same quantized model run by PyTorch (torchao's
# reference kernels): the program must compute what that model computes. XNNPACK's
# per-token activation quantization rounds an activation lying within float rounding
# of a .5 the other way than torchao's now and then (a few in a million values; a
# prompt may meet none and agree to 1e-6); each such step moves the logits, and a deeper,
# wider or more sensitive model carries it further. What it may move is bounded
# against what quantizing itself moved the same logits (the quantized model against
# float32, first step): 1 - cosine(program, model) may be half of quantization's own
# 1 - cosine and max|diff| three quarters of its max|diff|, never less than the floors
# nor more than the ceilings below (cosine between 0.999 and 0.99; max|diff| between 10%
# and 25% of the model's largest |logit|). Measured with scripts/quantized_drift.py
# (docs/quantization.md), random GPT-2-124M and SmolLM2-135M sizes: 1 - cosine up to
# 1.7e-4 with weights of std 0.02 (17% of the floor); with std 0.2, whose logits reach
# +-27 and which carry any change far, up to 4.7e-3 (47% of what it was allowed) and
# max|diff| up to 2.04 (SmolLM2, 8da4w), at most 51% of its allowance (SmolLM2, int8: 1.71
# where quantizing moved a logit by 4.45); a bfloat16-rounded tiny Qwen2's 8da4w 3.1e-4
# and 0.16. So every bound is about twice the worst measured or more. A program computing
# other weights lands at the quantized model's own distance from float32 or further
# (8da4w: cosine 0.11-0.95 to float32; int8 with std 0.2 weights 0.87-0.97), and fails;
# one that skipped int8 quantization altogether can pass where int8 moves the logits
# less than the floor (std 0.02: 1 - cosine 4.6e-4), which the files' sizes catch
# instead (tests/quantized_generation.rs).
QUANTIZED_DRIFT_RATIO = 0.5  # of quantization's own 1 - cosine
QUANTIZED_DRIFT_RANGE = (1e-3, 1e-2)  # 1 - cosine: always allowed, never more
QUANTIZED_DIFF_RATIO = 0.75  # of quantization's own max|diff|
QUANTIZED_DIFF_RANGE = (0.10, 0.25)  # max|diff| over the model's largest |logit|: always allowed, never more
# Greedy ids may part where the quantized model's own two best logits are closer
# than a rounding step can move them: half the max|diff| allowed for that prompt, at
# least TIE_MARGIN (random weights make such near-ties: tiny-llama's 8da4w program left
# the model's ids where its top two were 1e-3 apart). After such a tie the program is
# compared teacher-forced on the model's ids, and every later position must agree
# unless it is a tie too. The reference file's top-level "tie_margin" is this floor,
# each sentence's "tie_margin" the one its check used.
TIE_MARGIN = 5e-2
# Trained weights: the quantized model in PyTorch is itself that sensitive. SmolLM2-135M's
# activations reach 2,955 at one layer's input (layer 11's down_proj) where most are near
# 1, so a per-token int8 step is about the median |activation|, and whether a typical value
# rounds to 0 or to one step is decided at float rounding. Any kernel that computes the
# float parts between two quantizations otherwise (the norms, SiLU, attention's softmax:
# XNNPACK's own approximations of exp and sigmoid, another summation order) flips some of
# those roundings, and it is how many flip, not by how much the float values moved, that
# moves the logits: scaling every linear layer's input by 1 + N(0, e) moves int8's first
# logits on 'What is the chemical symbol for gold?' by a median 1 - cosine of 3.5e-3 and
# at most 8.4e-3 over 10 draws at e = 2^-24 (about one float32 ulp), and the same (median
# 3.1-4.8e-3, at most 1.1-1.4e-2) at e = 2^-22, 2^-20 and 2^-16; transformers' own two
# attention implementations (eager, sdpa) give that model logits 3.4e-3 apart on one
# prompt, and the program's exported graph run by PyTorch is 1.7e-3 from it on this one
# (docs/quantization.md). No kernel can be held closer to the model than the model is to
# itself: each prompt's bounds are at least ROUNDING_FACTOR times the most that
# JITTER_DRAWS such perturbations move the model's own logits (`rounding_sensitivity`).
# Each linear layer's input is perturbed, not only the embeddings' output, which the first
# version did (3 draws): a kernel's rounding enters after every layer, and the embeddings'
# alone gave 3.4e-3 there, where XNNPACK's program on the AMD EPYC VM was 1.17e-2 away. On
# the tiny random-weight test models this adds nothing: their sensitivity stays far below
# the floors (docs/quantization.md).
JITTER = 2.0 ** -24  # relative std of the perturbation of each linear layer's input
JITTER_DRAWS = 10
ROUNDING_FACTOR = 2.0


@dataclass(frozen=True)
class Sensitivity:
    """How far a model's own first logits move under float-rounding perturbations."""

    drift: float = 0.0  # largest 1 - cosine
    max_diff: float = 0.0  # largest max|diff|


def perturbed_drifts(model, ids: list[int], reference: torch.Tensor, jitter: float = JITTER,
                     draws: int = JITTER_DRAWS) -> list[tuple[float, float]]:
    """(1 - cosine, max|diff|) of the model's last-position logits from `reference` when
    every linear layer's input is scaled by 1 + N(0, jitter), one pair per seeded draw
    (also scripts/int8_rounding.py's measurement)."""
    from .quantize import linear_layers

    draw = {}

    def perturb(_module, args):
        x = args[0]
        return (x * (1.0 + jitter * torch.randn(x.shape, generator=draw["generator"], dtype=x.dtype)),) + args[1:]

    handles = [layer.register_forward_pre_hook(perturb) for _, layer in linear_layers(model)]
    moved = []
    try:
        for seed in range(draws):
            draw["generator"] = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0, -1]
            moved.append((1.0 - cosine(logits, reference), float((logits - reference).abs().max())))
    finally:
        for handle in handles:
            handle.remove()
    return moved


def rounding_sensitivity(model, ids: list[int], reference: torch.Tensor) -> Sensitivity:
    """The most the model's last-position logits move from `reference` when every linear
    layer's input is scaled by 1 + N(0, JITTER), over JITTER_DRAWS seeded draws."""
    moved = perturbed_drifts(model, ids, reference)
    return Sensitivity(max(d for d, _ in moved), max(m for _, m in moved))


@dataclass(frozen=True)
class QuantizedBounds:
    """What one prompt's first-step logits may differ by (see QUANTIZED_DRIFT_RATIO and
    ROUNDING_FACTOR)."""

    drift: float  # 1 - cosine(program, quantized model), at most
    max_diff: float  # max|program - quantized model|, at most

    @classmethod
    def of(cls, quantized: torch.Tensor, float32: torch.Tensor,
           sensitivity: Sensitivity = Sensitivity()) -> "QuantizedBounds":
        own_drift = 1.0 - cosine(quantized, float32)
        own_diff = float((quantized - float32).abs().max())
        scale = float(quantized.abs().max())
        low, high = QUANTIZED_DRIFT_RANGE
        drift = min(max(QUANTIZED_DRIFT_RATIO * own_drift, low), high)
        low, high = QUANTIZED_DIFF_RANGE
        diff = min(max(QUANTIZED_DIFF_RATIO * own_diff, low * scale), high * scale)
        return cls(max(drift, ROUNDING_FACTOR * sensitivity.drift), max(diff, ROUNDING_FACTOR * sensitivity.max_diff))

    @property
    def tie_margin(self) -> float:
        return max(TIE_MARGIN, self.max_diff / 2)


def top2_margins(model, prompt: list[int], ids: list[int]) -> list[float]:
    """The model's top-1 minus top-2 logit at each of `ids`' positions, teacher-forced:
    one forward over the prompt and `ids` (the last id's own logits are not needed)."""
    seq = torch.tensor([prompt + ids[:-1]], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=seq).logits[0, len(prompt) - 1:]
    top = torch.topk(logits.float(), 2, dim=-1).values
    return [float(m) for m in (top[:, 0] - top[:, 1])]


def untied_disagreements(picks: list[int], ids: list[int], margins: list[float], tie: float) -> list[int]:
    """Positions where the program picks another token than the model and the model's
    top two are not within `tie`: what a tie cannot explain."""
    return [k for k, (p, t) in enumerate(zip(picks, ids)) if p != t and margins[k] > tie]


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

    from .decoder import first_divergence, generate, greedy, teacher_forced
    from .files import write_atomic

    qmodel, fmodel = models[entry["name"]], models["float"]
    bad, ties, sentences, cosines, diffs, agree, total = [], [], [], [], [], 0, 0
    q_cosines, used, sensitivities = [], [], []
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
        sensitivity = rounding_sensitivity(qmodel, row["ids"], q_first)
        bounds = QuantizedBounds.of(q_first, f_first, sensitivity)
        sensitivities.append(sensitivity)
        diffs.append(diff)
        q_cosines.append(cos_q)
        used.append(max(diff / bounds.max_diff, (1.0 - cos_q) / bounds.drift))
        margins = top2_margins(qmodel, row["ids"], expected)
        if got != expected:
            k = first_divergence(got, expected)
            untied = untied_disagreements(teacher_forced(decoder, row["ids"], expected)[1], expected, margins,
                                          bounds.tie_margin)
            if untied:
                bad.append(f"{row['text']!r}: greedy ids differ from the quantized PyTorch model's at new token {k} "
                           f"({got} vs {expected}); teacher-forced, they differ where the model's top two are more "
                           f"than {bounds.tie_margin:.2g} apart at tokens {untied}")
            else:
                ties.append(f"{row['text']!r} at new token {k} (the model's top two {margins[k]:.1e} apart)")
        if diff > bounds.max_diff or 1.0 - cos_q > bounds.drift:
            bad.append(f"{row['text']!r}: first logits max|diff| {diff:.2e}, cosine {cos_q:.6f} against the quantized "
                       f"PyTorch model (allowed {bounds.max_diff:.2e}, {1.0 - bounds.drift:.6f}: from what quantizing "
                       "moved them, within the floors and ceilings)")
        cosines.append(cosine(p_first, f_first))
        agree += sum(int(p == t) for p, t in zip(float_picks, row["generated_ids"]))
        total += len(row["generated_ids"])
        sentences.append({"text": row["text"], "ids": row["ids"], "generated_ids": expected,
                          "logits": [float(x) for x in q_first], "top2_margins": [round(m, 6) for m in margins],
                          "tie_margin": round(bounds.tie_margin, 6), "max_diff": round(bounds.max_diff, 6),
                          "min_cosine": round(1.0 - bounds.drift, 7),
                          "rounding_sensitivity": {"drift": sensitivity.drift, "max_diff": round(sensitivity.max_diff, 6)}})
    vs_float = {"first_logits_cosine_min": round(min(cosines), 6),
                "first_logits_cosine_mean": round(sum(cosines) / len(cosines), 6),
                "top1_agreement": round(agree / total, 4), "tokens": total}
    entry["vs_float"] = vs_float
    # `out` is the staging folder; the model's name is the one reference.json (written first) gives.
    model_name = json.loads((out / "reference.json").read_text())["model"]
    reference = {"model": model_name, "task": "text-generation", "program": entry["name"],
                 "quantization": entry["quantization"], "max_seq_len": max_seq_len, "max_new_tokens": max_new_tokens,
                 "made_by": "the quantized model (torchao) run by PyTorch, transformers generate, greedy; "
                            "logits: the first step's; top2_margins: its top-1 minus top-2 logit at each new "
                            "token, teacher-forced",
                 "tie_margin": TIE_MARGIN,
                 "bounds": "per sentence: max_diff, min_cosine for the first logits and tie_margin for the greedy ids "
                           "(verify.py QuantizedBounds: from what quantizing moved the logits, within floors and ceilings, "
                           "and at least twice rounding_sensitivity: how far the model's own logits move when each "
                           "linear layer's input is perturbed at float32 rounding)",
                 "sentences": [sentences[order.index(i)] for i in sorted(order)]}
    write_atomic(out / entry["reference"], json.dumps(reference).encode())
    verdict = f"{len(bad)} DISAGREE" if bad else "ok, same ids" if not ties else f"ok ({len(ties)} near-tie(s), same ids teacher-forced)"
    for tie in ties:
        say(f"  {entry['name']:16} ids part at a near-tie, then agree teacher-forced: {tie}")
    say(f"  {entry['name']:16} vs the quantized model in PyTorch, {len(order)} prompts: {verdict} "
        f"(first logits: worst max|diff| {max(diffs):.2e}, min cosine {min(q_cosines):.6f}; at most "
        f"{max(used):.0%} of what the bounds allow; the model's own at float rounding: 1 - cosine up to "
        f"{max(x.drift for x in sensitivities):.1e}, max|diff| {max(x.max_diff for x in sensitivities):.2g})")
    say(f"  {entry['name']:16} vs float32 (reported, not checked): first-logits cosine min "
        f"{vs_float['first_logits_cosine_min']}, mean {vs_float['first_logits_cosine_mean']}; top-1 agreement "
        f"{agree}/{total} teacher-forced on float32's greedy ids")
    return bad
