"""ONNX Runtime's files of a model directory (docs/onnxruntime.md): the model as
the hub's sentence-transformers repositories (an encoder) or Optimum (a decoder)
ship it for ONNX Runtime, beside the .pte programs, listed in the manifest as
programs of the `onnx` column (runtime "onnxruntime").

  model.onnx        torch.onnx.export (TorchScript exporter, opset 17) of the
                    transformers model, float32; inputs input_ids, attention_mask
                    and token_type_ids (when the architecture has them: BERT, not
                    DistilBERT), int64 [1, S] with S dynamic; its one output is
                    what the hub's files give: feature-extraction
                    `last_hidden_state` [1, S, H] (the caller pools, as the
                    manifest entry's "pooling" says), fill-mask `logits` [1, S, V],
                    text-classification `logits` [1, C]; a decoder's with its KV
                    cache as inputs and outputs (onnx_decoder.py: past_key_values.*
                    in, present.* out, logits [1, S, V]; "cache": "past-present")
  model.int8.onnx   model.onnx through ONNX Runtime's own quantizer
                    (onnxruntime.quantization.quantize_dynamic: QInt8 weights with a scale
                    per output channel, the embedding tables too; activations quantized
                    at run time, a scale per tensor: DynamicQuantizeLinear + MatMulInteger)

Each is checked here like the programs are (verify.py), by ONNX Runtime's Python
package on the reference sentences: float32 against transformers with the task's
float bounds (tasks.py; a decoder's greedy ids, one run a token with the presents
fed back), 8-bit against model.onnx's own outputs (ONNX_INT8_* below).

Not named `onnx.py`: it would shadow the onnx package it imports.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from .compare import cosine
from .files import say
from .manifest import program_entry
from .progress import PROGRESS

COLUMN = "onnx"
RUNTIME = "onnxruntime"
OPSET = 17
# The pooling the Rust side applies to `last_hidden_state` (feature-extraction): the
# sentence-transformers recipe the reference computes (tasks.SentenceEmbedder), mean over
# the real tokens, then L2-normalised.
POOLING = "mean"
# 8-bit (quantize_dynamic) against model.onnx on the same sentences. Measured on MiniLM's
# trained weights (all-MiniLM-L6-v2, the 30 reference sentences of assets/sentences.txt,
# onnxruntime 1.31.1 on x86-64), lowest / mean embedding cosine: per-channel weights (what is
# written) 0.9690 / 0.9913; quantize_dynamic's default, a scale per weight tensor, 0.8404 /
# 0.9507 (docs/onnxruntime.md). The bound sits under the per-channel figure with room for
# another CPU's kernels (Arm's MLAS), and above what per-tensor weights give.
ONNX_INT8_MIN_COSINE = 0.95
# Logits (fill-mask at each mask, classification): cosine to model.onnx's. Measured on the
# tiny random-weight test models (mk/test-models.mk), lowest: tiny-bert-mlm 0.9997,
# tiny-distilbert-mlm 0.9979, tiny-bert-cls 0.9976, tiny-distilbert-cls 0.9890.
ONNX_INT8_MIN_LOGITS_COSINE = 0.95


@dataclass(frozen=True)
class OnnxSpec:
    name: str
    file: str
    title: str
    quantization: str | None
    bits: int | None

    def about(self, output: str) -> str:
        if self.quantization is None:
            return (f"ONNX Runtime's CPU execution provider (MLAS kernels, its graph optimizer on), "
                    f"torch.onnx.export opset {OPSET}, float32; output {output}")
        return ("ONNX Runtime's CPU execution provider, model.onnx quantized by ONNX Runtime's "
                "quantize_dynamic: weights 8-bit (QInt8, a scale per output channel), activations "
                f"quantized at run time, a scale per tensor (MatMulInteger); output {output}")

    def manifest_entry(self, task_name: str, output_name: str, inputs: list[str], cache: str | None = None) -> dict:
        """The program entry, with exactly the keys the Rust side reads (docs/model-directory.md)."""
        fields = {} if self.bits is None else {"bits": self.bits}
        fields["inputs"] = inputs
        fields["output"] = output_name
        if task_name == "feature-extraction":
            fields["pooling"] = POOLING
        if cache is not None:
            fields["cache"] = cache
        return program_entry(self.name, self.file, self.title, COLUMN, runtime=RUNTIME, about=self.about(output_name),
                             delegate=None, quantization=self.quantization, **fields)


FLOAT = OnnxSpec("onnx", "model.onnx", "ONNX Runtime", None, None)
INT8 = OnnxSpec("onnx-int8", "model.int8.onnx", "ONNX Runtime int8", "int8-dynamic", 8)
ONNX_FILES = {s.name: s for s in (FLOAT, INT8)}


def is_onnx(entry: dict) -> bool:
    """A manifest program entry for ONNX Runtime (not an ExecuTorch program)."""
    return entry.get("runtime") == RUNTIME or str(entry.get("file", "")).endswith(".onnx")


def takes_token_type_ids(model: torch.nn.Module) -> bool:
    return "token_type_ids" in inspect.signature(model.forward).parameters


class Encoder(torch.nn.Module):
    """The transformers model as the hub's ONNX files export it: its named inputs,
    one output (last_hidden_state, or the head's logits)."""

    def __init__(self, model: torch.nn.Module, hidden: bool, token_types: bool):
        super().__init__()
        self.model, self.hidden, self.token_types = model, hidden, token_types

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.token_types:
            kwargs["token_type_ids"] = token_type_ids
        out = self.model(**kwargs)
        return out.last_hidden_state if self.hidden else out.logits


# A decoder's ONNX files need about this many times its float32 weights above what the
# process holds, plus a margin. Measured on SmolLM2-135M (W = 538 MB, 2026-12-06): with
# the linear weights traced transposed (onnx_decoder.linear_weights_transposed, so that the
# quantizer sees them), torch.onnx.export alone peaked at 3.63 GiB in a process holding
# 0.74 GiB with the model loaded (2.89 above, 5.8 x W: the transposed copies and the
# ModelProto); quantize_dynamic on that file alone at 2.04 GiB. Before that change, with
# nothing quantized but the embedding table: 1.65 and 2.28 GiB above what make models held.
DECODER_STEP_PER_WEIGHT = 6.0
DECODER_STEP_FIXED = 100 << 20
# A decoder's float32 weights above this are left without ONNX files: one protobuf
# holds at most 2 GiB, and runlens writes no external data files.
MAX_WEIGHT_BYTES = 1536 << 20
# The cache a decoder's file keeps, in its manifest entry: its inputs and outputs (onnx_decoder.py).
PAST_PRESENT = "past-present"
# A decoder's 8-bit copy against model.onnx: the first step's logits' cosine on each reference
# prompt, lowest. Measured on the tiny random-weight decoders and SmolLM2's trained weights
# (docs/onnxruntime.md); the bound is under them all.
ONNX_INT8_MIN_FIRST_LOGITS_COSINE = 0.9


def too_large(weights: int) -> str | None:
    """Why a decoder of `weights` float32 bytes gets no ONNX files, or None."""
    if weights > MAX_WEIGHT_BYTES:
        return (f"its float32 weights ({weights / (1 << 30):.2f} GiB) are over {MAX_WEIGHT_BYTES / (1 << 30):.1f} GiB: "
                "one ONNX protobuf holds at most 2 GiB and runlens writes no external data")
    return None


def write(task, model: torch.nn.Module, out: Path) -> list[dict]:
    """model.onnx and model.int8.onnx in `out` (the stage); their manifest entries.
    One progress step each."""
    import onnx

    if task.name == "text-generation":
        return _write_decoder(model, out)
    hidden = task.name == "feature-extraction"
    token_types = takes_token_type_ids(model)
    inputs = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_types else [])
    output = "last_hidden_state" if hidden else "logits"
    wrapper = Encoder(model, hidden, token_types).eval()
    example = tuple(torch.ones(1, 8, dtype=torch.long) for _ in inputs)
    if token_types:
        example = (*example[:2], torch.zeros(1, 8, dtype=torch.long))
    seq = {0: "batch", 1: "sequence"}
    axes = {name: seq for name in inputs}
    axes[output] = seq if output != "logits" or task.name == "fill-mask" else {0: "batch"}
    with PROGRESS.step(f"{FLOAT.file}: {FLOAT.title} (torch.onnx.export, opset {OPSET})", program=FLOAT.name):
        with torch.inference_mode():
            torch.onnx.export(wrapper, example, str(out / FLOAT.file), input_names=inputs, output_names=[output],
                              dynamic_axes=axes, opset_version=OPSET, dynamo=False)
        graph = onnx.load(str(out / FLOAT.file), load_external_data=False)
        onnx.checker.check_model(graph)
        say(f"  {FLOAT.file}: {len(graph.graph.node)} nodes, inputs {', '.join(inputs)}, output {output}")
    with PROGRESS.step(f"{INT8.file}: {INT8.title} (onnxruntime.quantization.quantize_dynamic)", program=INT8.name):
        _quantize(out)
    return [s.manifest_entry(task.name, output, inputs) for s in (FLOAT, INT8)]


def _quantize(out: Path) -> None:
    """model.int8.onnx from model.onnx: quantize_dynamic, QInt8 weights with a scale per output channel."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer's advice to pre-process, on the root logger
    try:
        quantize_dynamic(str(out / FLOAT.file), str(out / INT8.file), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.setLevel(level)
    for leftover in out.glob("*-opt.onnx"):  # the quantizer's pre-processing copy, when it leaves one
        leftover.unlink()


def _write_decoder(model: torch.nn.Module, out: Path) -> list[dict]:
    """A decoder's model.onnx with its KV cache as inputs and outputs (onnx_decoder.py), and its 8-bit copy."""
    import onnx

    from . import memory, onnx_decoder

    weights = memory.weight_bytes(model)
    why = too_large(weights)
    need = int(DECODER_STEP_PER_WEIGHT * weights) + DECODER_STEP_FIXED
    free, what = memory.headroom()
    if why is None and need > free:
        why = (f"exporting them needs about {need / (1 << 30):.2f} GiB more than the process holds and "
               f"{free / (1 << 30):.2f} GiB is free ({what}); the programs and GGUFs are written without them")
    if why is not None:
        say(f"  no ONNX files: {why}")
        return []
    with PROGRESS.step(f"{FLOAT.file}: {FLOAT.title} (torch.onnx.export with past/present, opset {OPSET})", program=FLOAT.name):
        inputs, output = onnx_decoder.export(model, out / FLOAT.file, OPSET)
        graph = onnx.load(str(out / FLOAT.file), load_external_data=False)
        onnx.checker.check_model(graph)
        layers = (len(inputs) - 3) // 2
        say(f"  {FLOAT.file}: {len(graph.graph.node)} nodes, inputs input_ids, attention_mask, position_ids and "
            f"{layers} layers' past keys and values, outputs logits and the presents")
        del graph
    with PROGRESS.step(f"{INT8.file}: {INT8.title} (onnxruntime.quantization.quantize_dynamic)", program=INT8.name):
        _quantize(out)
    return [s.manifest_entry("text-generation", output, inputs[:3] + ["past_key_values.*"], PAST_PRESENT) for s in (FLOAT, INT8)]


def _check_decoder(out: Path, by_name: dict, model_geometry, rows: list[dict]) -> dict[str, list[str]]:
    """Greedy ids of model.onnx through ONNX Runtime's Python package against transformers'
    (reference rows); model.int8.onnx's first logits against model.onnx's."""
    from . import onnx_decoder
    from .decoder import first_divergence

    failures: dict[str, list[str]] = {}
    g = model_geometry
    firsts = []
    if FLOAT.name in by_name:
        entry = by_name[FLOAT.name]
        with PROGRESS.timed(entry["name"], "check"):
            session = _session(out / entry["file"])
            bad = []
            for row in rows:
                want = row["generated_ids"]
                got, first = onnx_decoder.greedy(session, row["ids"], len(want), g.layers, g.kv_heads, g.head_dim)
                firsts.append(first)
                at = first_divergence(got, want)
                if at is not None:
                    bad.append(f"{row['text']!r}: greedy ids part from transformers' at new token {at}")
            say(f"  {entry['file']} (ONNX Runtime {onnxruntime_version()}, one run a token) vs transformers' greedy ids: "
                f"{'all agree' if not bad else f'{len(bad)} of {len(rows)} disagree'}")
            if bad:
                failures[entry["name"]] = bad
    if INT8.name in by_name and firsts:
        entry = by_name[INT8.name]
        with PROGRESS.timed(entry["name"], "check"):
            session = _session(out / entry["file"])
            cosines, same = [], 0
            for row, f in zip(rows, firsts):
                got, first = onnx_decoder.greedy(session, row["ids"], 1, g.layers, g.kv_heads, g.head_dim)
                cosines.append(cosine(torch.from_numpy(first), torch.from_numpy(f)))
                same += int(first.argmax() == f.argmax())
            worst = min(cosines)
            bound = ONNX_INT8_MIN_FIRST_LOGITS_COSINE
            say(f"  {entry['file']} vs {FLOAT.file}: first logits' cosine lowest {worst:.5f}, mean "
                f"{sum(cosines) / len(cosines):.5f}, the same first token on {same} of {len(rows)} (bound {bound})")
            if worst < bound:
                failures[entry["name"]] = [f"its lowest first-logits cosine to {FLOAT.file} is {worst:.5f}, under {bound}"]
    return failures


def bring_hub_files(source: Path, out: Path) -> list[str]:
    """The sentence-transformers layout of the checkpoint `source`, brought into `out` as
    the hub ships it: its `onnx/` folder (each `.onnx`, and `.onnx_data` external weights,
    hard-linked where the file system allows, else copied) and its pipeline files
    (`modules.json` and the pooling module's `config.json`, copied). runlens offers each
    `onnx/` file as a variant of the ONNX column, pooled as those files say
    (docs/onnxruntime.md). Not in the manifest: the folder is read when the directory
    opens. Returns what it brought."""
    import json
    import os
    import shutil

    brought = []
    onnx_dir = source / "onnx"
    for f in sorted(onnx_dir.glob("*")) if onnx_dir.is_dir() else []:
        if f.is_file() and f.suffix in (".onnx", ".onnx_data"):
            (out / "onnx").mkdir(exist_ok=True)
            try:
                os.link(f, out / "onnx" / f.name)
            except OSError:
                shutil.copy2(f, out / "onnx" / f.name)
            brought.append(f"onnx/{f.name}")
    modules = source / "modules.json"
    if modules.is_file():
        shutil.copy2(modules, out / "modules.json")
        brought.append("modules.json")
        try:
            folders = [m.get("path") for m in json.loads(modules.read_text()) if str(m.get("type", "")).endswith("models.Pooling")]
        except (ValueError, AttributeError):
            folders = []
        for folder in filter(None, folders):
            if (source / folder / "config.json").is_file():
                (out / folder).mkdir(exist_ok=True)
                shutil.copy2(source / folder / "config.json", out / folder / "config.json")
                brought.append(f"{folder}/config.json")
    if brought:
        say(f"  from the checkpoint's sentence-transformers layout: {', '.join(brought)}")
    return brought


def step_count() -> int:
    return len(ONNX_FILES)


def _session(path: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _run(session, entry: dict, ids: list[int]) -> torch.Tensor:
    import numpy as np

    n = len(ids)
    feeds = {"input_ids": np.array([ids], dtype=np.int64), "attention_mask": np.ones((1, n), dtype=np.int64)}
    if "token_type_ids" in entry["inputs"]:
        feeds["token_type_ids"] = np.zeros((1, n), dtype=np.int64)
    out = torch.from_numpy(session.run([entry["output"]], feeds)[0])
    if entry.get("pooling") == POOLING:  # last_hidden_state -> the task's embedding, as runlens pools it
        pooled = out.mean(dim=1)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)
    return out


def _cosine(task_name: str, row: dict, a: torch.Tensor, b: torch.Tensor) -> float:
    """The task output's cosine: the embedding, the class logits, or the logits at each mask (lowest)."""
    if task_name == "fill-mask":
        return min((cosine(a[0, m["position"]], b[0, m["position"]]) for m in row["masks"]), default=1.0)
    return cosine(a, b)


def check(out: Path, entries: list[dict], task, rows: list[dict], model=None) -> dict[str, list[str]]:
    """Every ONNX file on every reference sentence: float32 against transformers
    (the task's float bounds; a decoder's greedy ids), 8-bit against model.onnx.
    Returns what failed by name."""
    failures: dict[str, list[str]] = {}
    by_name = {e["name"]: e for e in entries}
    if task.name == "text-generation":
        from .decoder import arch_and_geometry

        return _check_decoder(out, by_name, arch_and_geometry(model)[1], rows)
    floats: list[torch.Tensor] = []
    if FLOAT.name in by_name:
        entry = by_name[FLOAT.name]
        with PROGRESS.timed(entry["name"], "check"):
            session = _session(out / entry["file"])
            bad = []
            for row in rows:
                got = _run(session, entry, row["ids"])
                floats.append(got)
                result = task.compare(row, got, quantized=False)
                if not result.ok:
                    bad.append(f"{row['text']!r}: {result.summary}")
            say(f"  {entry['file']} (ONNX Runtime {onnxruntime_version()}) vs transformers: "
                f"{'all agree' if not bad else f'{len(bad)} of {len(rows)} disagree'}")
            if bad:
                failures[entry["name"]] = bad
    if INT8.name in by_name and floats:
        entry = by_name[INT8.name]
        bound = ONNX_INT8_MIN_COSINE if task.name == "feature-extraction" else ONNX_INT8_MIN_LOGITS_COSINE
        with PROGRESS.timed(entry["name"], "check"):
            session = _session(out / entry["file"])
            cosines = [_cosine(task.name, row, _run(session, entry, row["ids"]), f) for row, f in zip(rows, floats)]
            worst = min(cosines)
            say(f"  {entry['file']} vs {FLOAT.file}: cosine lowest {worst:.5f}, mean {sum(cosines) / len(cosines):.5f} "
                f"(bound {bound})")
            if worst < bound:
                failures[entry["name"]] = [f"its lowest cosine to {FLOAT.file} is {worst:.5f}, under {bound}"]
    return failures


def onnxruntime_version() -> str:
    import onnxruntime

    return onnxruntime.__version__
