"""ONNX Runtime's files of an encoder's model directory (docs/onnxruntime.md):
the model as the hub's sentence-transformers repositories ship it for ONNX
Runtime, beside the .pte programs, listed in the manifest as programs of the
`onnx` column (runtime "onnxruntime").

  model.onnx        torch.onnx.export (TorchScript exporter, opset 17) of the
                    transformers model, float32; inputs input_ids, attention_mask
                    and token_type_ids (when the architecture has them: BERT, not
                    DistilBERT), int64 [1, S] with S dynamic; its one output is
                    what the hub's files give: feature-extraction
                    `last_hidden_state` [1, S, H] (the caller pools, as the
                    manifest entry's "pooling" says), fill-mask `logits` [1, S, V],
                    text-classification `logits` [1, C]
  model.int8.onnx   model.onnx through ONNX Runtime's own quantizer
                    (onnxruntime.quantization.quantize_dynamic: QInt8 weights with a scale
                    per output channel, the embedding tables too; activations quantized
                    at run time, a scale per tensor: DynamicQuantizeLinear + MatMulInteger)

Each is checked here like the programs are (verify.py), by ONNX Runtime's Python
package on the reference sentences: float32 against transformers with the task's
float bounds (tasks.py), 8-bit against model.onnx's own outputs (ONNX_INT8_*
below). Encoders only in this slice: text-generation gets none (issue 41 asks for
decoders with their KV cache as inputs and outputs; not written yet).

Not named `onnx.py`: it would shadow the onnx package it imports.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from .files import say
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

    def manifest_entry(self, task_name: str, output_name: str, inputs: list[str]) -> dict:
        """The program entry, with exactly the keys the Rust side reads (docs/model-directory.md)."""
        entry = {"name": self.name, "file": self.file, "title": self.title, "column": COLUMN, "runtime": RUNTIME,
                 "delegate": None, "quantization": self.quantization}
        if self.bits is not None:
            entry["bits"] = self.bits
        entry["inputs"] = inputs
        entry["output"] = output_name
        if task_name == "feature-extraction":
            entry["pooling"] = POOLING
        entry["about"] = self.about(output_name)
        return entry


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


def write(task, model: torch.nn.Module, out: Path) -> list[dict]:
    """model.onnx and model.int8.onnx in `out` (the stage); their manifest entries.
    One progress step each."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

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
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # the quantizer's advice to pre-process, on the root logger
        try:
            quantize_dynamic(str(out / FLOAT.file), str(out / INT8.file), weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.setLevel(level)
        for leftover in out.glob("*-opt.onnx"):  # the quantizer's pre-processing copy, when it leaves one
            leftover.unlink()
    return [s.manifest_entry(task.name, output, inputs) for s in (FLOAT, INT8)]


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
    from .tasks import cosine

    if task_name == "fill-mask":
        return min((cosine(a[0, m["position"]], b[0, m["position"]]) for m in row["masks"]), default=1.0)
    return cosine(a, b)


def check(out: Path, entries: list[dict], task, rows: list[dict]) -> dict[str, list[str]]:
    """Every ONNX file on every reference sentence: float32 against transformers
    (the task's float bounds), 8-bit against model.onnx. Returns what failed by name."""
    failures: dict[str, list[str]] = {}
    by_name = {e["name"]: e for e in entries}
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
