"""llama.cpp's files of a model directory (docs/gguf.md): GGUF files made from
the same checkpoint the .pte programs came from, beside them, listed in the
manifest as programs of the `llamacpp` column.

  llamacpp-f32.gguf    llama.cpp's own converter (convert_hf_to_gguf.py, vendored in
                       the llama-cpp-python sdist; mk/gguf-converter.mk unpacks it into
                       build/gguf-converter/llama.cpp), every weight float32, run by
                       gguf_convert.py in a process of its own
  llamacpp-q8_0.gguf   the F32 file quantized by llama.cpp's llama_model_quantize
  llamacpp-q4_0.gguf   through `runlens gguf-quantize --type q8_0|q4_0 IN OUT` (pure:
                       every matrix, the embedding and output too); written only when
                       there is a runlens binary (--runlens, RUNLENS_BIN, else
                       target/release/runlens)

Which checkpoints get them is the architecture table's (archs/: `gguf`, task ->
the pre-tokenizer name to force): gpt2, llama, qwen2, qwen3 for text-generation,
bert for feature-extraction (mean pooling, as runlens' embedding). Another task or
architecture gets none, and the export says why in one line.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .files import ExportError, say
from .manifest import program_entry

CONVERTER_PACKAGE = "llama-cpp-python"
CONVERTER_VERSION = "0.3.36"  # mk/gguf-converter.mk pins the same sdist (and its sha256)
CONVERTER = f"{CONVERTER_PACKAGE} {CONVERTER_VERSION} vendored convert_hf_to_gguf.py"
REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONVERTER_DIR = REPO / "build" / "gguf-converter" / "llama.cpp"
CONVERTER_ENV = "RUNLENS_GGUF_CONVERTER"
RUNLENS_ENV = "RUNLENS_BIN"
DEFAULT_RUNLENS = REPO / "target" / "release" / "runlens"
RUNNER = Path(__file__).with_name("gguf_convert.py")
COLUMN = "llamacpp"
RUNTIME = "llama.cpp"
# llama.cpp's pooling types (gguf-py PoolingType): what `bert.pooling_type` must say.
POOLING_MEAN = 1
# How many of the converter's last log lines a failure shows.
TAIL_LINES = 15

ENGINE = "llama.cpp (ggml CPU kernels)"


@dataclass(frozen=True)
class GgufSpec:
    gguf_type: str  # f32, q8_0, q4_0: the GGUF's weight type
    bits: int | None
    group_size: int | None
    # A file taken as it was shipped (export.py --from-gguf), not made here: where it came from.
    shipped_from: str | None = None
    label: str | None = None  # the name's suffix when it is not the type's (a shipped q4_0 beside ours)

    @property
    def name(self) -> str:
        return f"llamacpp-{self.label or self.gguf_type}"

    @property
    def file(self) -> str:
        return f"{self.name}.gguf"

    @property
    def title(self) -> str:
        return f"llama.cpp {self.label or self.gguf_type}"

    @property
    def about(self) -> str:
        if self.shipped_from is not None:
            return (f"{ENGINE}, the GGUF file as {self.shipped_from} ships it, not re-quantized: "
                    f"{self.gguf_type.upper()} weights (as its header says), the checkpoint's float32 weights "
                    "are dequantized from it")
        if self.bits is None:
            return f"{ENGINE}, GGUF from the checkpoint by llama.cpp's convert_hf_to_gguf.py, all weights float32"
        return (f"{ENGINE}, llamacpp-f32.gguf quantized by llama.cpp's llama_model_quantize (runlens gguf-quantize, "
                f"pure): the weight matrices, token embedding and output included, {self.gguf_type.upper()} "
                f"({self.bits}-bit in blocks of {self.group_size}, a float16 scale each; a matrix whose rows are not "
                f"a multiple of {self.group_size} wide falls back to float16); norms, biases, position and "
                "token-type embeddings stay float32")

    def manifest_entry(self) -> dict:
        """The program entry, with exactly the keys the Rust side reads (docs/model-directory.md)."""
        fields = {} if self.bits is None else {"bits": self.bits, "group_size": self.group_size}
        fields["gguf_type"] = self.gguf_type
        return program_entry(self.name, self.file, self.title, COLUMN, runtime=RUNTIME, about=self.about,
                             delegate=None, quantization=None if self.bits is None else self.gguf_type, **fields)


F32 = GgufSpec("f32", None, None)
QUANTIZED = (GgufSpec("q8_0", 8, 32), GgufSpec("q4_0", 4, 32))
GGUF_FILES = {s.name: s for s in (F32, *QUANTIZED)}
# Bits and block size of the types a shipped file may have (ggml's block_q*: 32 weights, one scale).
SHIPPED_TYPES = {"q4_0": (4, 32), "q4_1": (4, 32), "q5_0": (5, 32), "q5_1": (5, 32), "q8_0": (8, 32),
                 "f16": (16, None), "bf16": (16, None)}


def shipped_spec(gguf_type: str, described: str) -> GgufSpec:
    """The entry of a GGUF file taken as shipped (llamacpp-<type>), or an ExportError for a
    type the column does not name. Its name must not be one the export makes itself."""
    if gguf_type not in SHIPPED_TYPES:
        raise ExportError(f"{described}: its weights are {gguf_type}; runlens takes a shipped GGUF of "
                          f"{', '.join(SHIPPED_TYPES)}")
    bits, group = SHIPPED_TYPES[gguf_type]
    spec = GgufSpec(gguf_type, bits, group, shipped_from=described)
    if spec.name in GGUF_FILES:
        spec = GgufSpec(gguf_type, bits, group, shipped_from=described, label=f"{gguf_type}-shipped")
    return spec


def is_gguf(entry: dict) -> bool:
    """A manifest program entry for llama.cpp (not an ExecuTorch program)."""
    return entry.get("runtime") == RUNTIME or str(entry.get("file", "")).endswith(".gguf")


@dataclass
class GgufPlan:
    """What the export will do about GGUF: nothing (`why_not` says why), or the F32
    file with `pre_tokenizer` forced when the converter does not know the tokenizer,
    then the quantized files when there is a runlens binary."""

    pre_tokenizer: str | None = None
    mean_pooling: bool = False
    converter: Path | None = None
    runlens: Path | None = None
    why_not: str | None = None  # one line: why no GGUF at all
    why_not_quantized: str | None = None  # one line: why F32 alone
    # export.py --from-gguf: the file the checkpoint was dequantized from, copied in as it is.
    shipped: tuple[GgufSpec, Path] | None = None

    @property
    def specs(self) -> list[GgufSpec]:
        if self.why_not is not None:
            return []
        return [F32, *(QUANTIZED if self.runlens is not None else ()), *([self.shipped[0]] if self.shipped else [])]

    def files(self) -> list[str]:
        return [s.file for s in self.specs]

    def notes(self) -> list[str]:
        return [line for line in (self.why_not, self.why_not_quantized) if line]


def supported_text() -> str:
    from .archs import ARCHS

    by_task: dict[str, list[str]] = {}
    for model_type, arch in ARCHS.items():
        for task in arch.gguf:
            by_task.setdefault(task, []).append(model_type)
    return "; ".join(f"{', '.join(types)} for {task}" for task, types in by_task.items())


def find_converter() -> Path | None:
    """The converter's folder: RUNLENS_GGUF_CONVERTER (an ExportError when it names a
    folder without the converter), else build/gguf-converter/llama.cpp; None when that
    is not unpacked."""
    given = os.environ.get(CONVERTER_ENV)
    folder = Path(given) if given else DEFAULT_CONVERTER_DIR
    complete = (folder / "convert_hf_to_gguf.py").is_file() and (folder / "conversion").is_dir() \
        and (folder / "gguf-py" / "gguf").is_dir()
    if given and not complete:
        raise ExportError(f"{CONVERTER_ENV}={given}: not a folder holding convert_hf_to_gguf.py, conversion/ and "
                          "gguf-py/ (llama.cpp's converter; `make gguf-converter` unpacks it into "
                          f"{DEFAULT_CONVERTER_DIR.relative_to(REPO)})")
    return folder.resolve() if complete else None


def find_runlens(asked: Path | None) -> Path | None:
    """The runlens binary that quantizes: --runlens, else RUNLENS_BIN, else
    target/release/runlens when it is there; None when there is none."""
    given = asked if asked is not None else (Path(os.environ[RUNLENS_ENV]) if os.environ.get(RUNLENS_ENV) else None)
    if given is not None:
        what = "--runlens" if asked is not None else RUNLENS_ENV
        if not (given.is_file() and os.access(given, os.X_OK)):
            raise ExportError(f"{what} {given}: not an executable file (the runlens binary, `make build` writes "
                              f"{DEFAULT_RUNLENS.relative_to(REPO)})")
        return given.resolve()
    if DEFAULT_RUNLENS.is_file() and os.access(DEFAULT_RUNLENS, os.X_OK):
        return DEFAULT_RUNLENS
    return None


def plan(ckpt, task_name: str, enabled: bool, runlens: Path | None) -> GgufPlan:
    """What this export writes for llama.cpp (export.py prints the plan's notes)."""
    if not enabled:
        return GgufPlan(why_not="no llama.cpp files (GGUF): --no-gguf")
    arch = ckpt.arch
    pre = arch.gguf.get(task_name) if arch is not None else None
    if pre is None:
        return GgufPlan(why_not=f"no llama.cpp files (GGUF) for {ckpt.model_type} {task_name}: runlens' llama.cpp "
                        f"column takes {supported_text()}")
    converter = find_converter()
    if converter is None:
        return GgufPlan(why_not=f"no llama.cpp files (GGUF): llama.cpp's converter is not in "
                        f"{DEFAULT_CONVERTER_DIR.relative_to(REPO)} (`make gguf-converter` fetches it, or set "
                        f"{CONVERTER_ENV}); re-run the export to add them, or pass --no-gguf")
    binary = find_runlens(runlens)
    result = GgufPlan(pre_tokenizer=pre, mean_pooling=task_name == "feature-extraction", converter=converter,
                      runlens=binary)
    if binary is None:
        result.why_not_quantized = (f"{', '.join(s.file for s in QUANTIZED)} left out: no runlens binary to quantize "
                                    f"with ({DEFAULT_RUNLENS.relative_to(REPO)}): `make build`, then re-run the "
                                    f"export (or pass --runlens PATH); llamacpp-f32.gguf is written")
    return result


class GgufFailure(Exception):
    """A GGUF step that did not write its file: one line, the export goes on."""


def _run(cmd: list[str]) -> tuple[int, str, float, float]:
    """Runs `cmd`; returns its exit status, its output (stdout and stderr), the wall
    seconds and the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          text=True, errors="replace")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.returncode, proc.stdout, time.monotonic() - start, cpu


def _tail(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return "\n".join(f"    | {line}" for line in lines[-TAIL_LINES:])


def convert(p: GgufPlan, ckpt, out: Path) -> tuple[dict, dict]:
    """llamacpp-f32.gguf in `out` from the checkpoint's directory; returns its manifest
    entry and what gguf_convert.py reports of it. A GgufFailure when the converter
    fails or the file is not what runlens needs (its vocabulary the model's size; mean
    pooling for an embedding)."""
    target = out / F32.file
    with tempfile.TemporaryDirectory(prefix="runlens-gguf-") as tmp:
        report_path = Path(tmp) / "report.json"
        cmd = [sys.executable, str(RUNNER), "--converter", str(p.converter), "--checkpoint", str(ckpt.path),
               "--out", str(target), "--pre-tokenizer", p.pre_tokenizer, "--report", str(report_path)]
        if p.mean_pooling:
            cmd.append("--mean-pooling")
        say(f"convert_hf_to_gguf.py {ckpt.path} --outtype f32 (in its own process; pre-tokenizer {p.pre_tokenizer!r} "
            f"when it does not know the tokenizer{'; mean pooling' if p.mean_pooling else ''})")
        status, output, wall, cpu = _run(cmd)
        if status != 0 or not report_path.is_file():
            target.unlink(missing_ok=True)
            raise GgufFailure(f"llama.cpp's converter failed on {ckpt.path} (exit {status}); its last lines:\n"
                              f"{_tail(output)}")
        report = json.loads(report_path.read_text(encoding="utf-8"))
    vocab = ckpt.geometry.vocab
    problems = []
    if report.get("n_vocab") != vocab:
        problems.append(f"its vocabulary has {report.get('n_vocab')} tokens, config.json's vocab_size is {vocab}")
    if p.mean_pooling and report.get("pooling_type") != POOLING_MEAN:
        problems.append(f"its pooling type is {report.get('pooling_type')}, not {POOLING_MEAN} (mean)")
    if report.get("tensor_types") != ["F32"]:
        problems.append(f"its tensors are {', '.join(report.get('tensor_types') or [])}, not all F32")
    if problems:
        target.unlink(missing_ok=True)
        raise GgufFailure(f"{F32.file} from the converter is not what runlens needs: {'; '.join(problems)}")
    forced = " (forced: the converter does not know this tokenizer)" if report["pre_tokenizer_forced"] else ""
    pooling = ""
    if p.mean_pooling:
        said = report.get("checkpoint_pooling")
        pooling = f", mean pooling (the checkpoint's sentence-transformers files say {said or 'none'})"
    say(f"  {F32.file}: {report['architecture']}, {report['tensors']} tensors, vocabulary {report['n_vocab']} "
        f"(= config.json's vocab_size), tokenizer {report['tokenizer_model']}, pre-tokenizer "
        f"{report['pre_tokenizer']!r}{forced}{pooling}; {wall:.1f}s wall, {cpu:.1f}s CPU")
    return F32.manifest_entry(), report


def quantize(p: GgufPlan, spec: GgufSpec, out: Path) -> dict:
    """`spec`'s file in `out` from llamacpp-f32.gguf by `runlens gguf-quantize`; its
    manifest entry, or a GgufFailure (exit status 0 = written)."""
    target = out / spec.file
    cmd = [str(p.runlens), "gguf-quantize", "--type", spec.gguf_type, str(out / F32.file), str(target)]
    say(f"{p.runlens.name} gguf-quantize --type {spec.gguf_type} {F32.file} {spec.file}")
    status, output, wall, cpu = _run(cmd)
    if status != 0 or not target.is_file():
        target.unlink(missing_ok=True)
        raise GgufFailure(f"{p.runlens} gguf-quantize --type {spec.gguf_type} exited {status}; its last lines:\n"
                          f"{_tail(output)}")
    # runlens' last line: "OUT: N tensors, X MiB of weights, mostly TYPE"
    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
    say(f"  {spec.file}: {last.removeprefix(f'{target}: ') or 'written'}; {wall:.1f}s wall, {cpu:.1f}s CPU")
    return spec.manifest_entry()


def manifest_field(report: dict, source_dtype: str) -> dict:
    """manifest.json's top-level "gguf"."""
    return {"converter": CONVERTER, "pre_tokenizer": report["pre_tokenizer"],
            "pre_tokenizer_forced": bool(report["pre_tokenizer_forced"]), "converted_from": source_dtype}


def write(p: GgufPlan, ckpt, out: Path, source_dtype: str) -> tuple[list[dict], dict | None, list[dict]]:
    """Every GGUF step of the plan, one progress step each, into `out` (the stage).
    Returns the manifest entries written, the manifest's "gguf" (None without the F32
    file) and what failed ([{"name", "file", "why"}], each also printed as an error when
    it happens); a failure never stops the export."""
    from .progress import PROGRESS

    entries: list[dict] = []
    failures: list[dict] = []
    field = None

    def failed(spec: GgufSpec, why: str) -> None:
        print(f"error: {spec.file}: {why}", file=sys.stderr, flush=True)
        failures.append({"name": spec.name, "file": spec.file, "why": why})

    specs = p.specs
    if not specs:
        return entries, field, failures
    with PROGRESS.step(f"{F32.file}: {F32.title} (llama.cpp's convert_hf_to_gguf.py)", program=F32.name):
        try:
            entry, report = convert(p, ckpt, out)
            entries.append(entry)
            field = manifest_field(report, source_dtype)
        except GgufFailure as e:
            failed(F32, str(e))
    for spec in specs[1:]:
        if p.shipped is not None and spec is p.shipped[0]:
            with PROGRESS.step(f"{spec.file}: {spec.title}, the file as shipped", program=spec.name):
                shutil.copyfile(p.shipped[1], out / spec.file)
                say(f"  {spec.file}: {p.shipped[1]} copied as it is ({spec.shipped_from})")
                entries.append(spec.manifest_entry())
            continue
        with PROGRESS.step(f"{spec.file}: {spec.title} (runlens gguf-quantize)", program=spec.name):
            if field is None:
                failed(spec, f"no {F32.file} to quantize")
                continue
            try:
                entries.append(quantize(p, spec, out))
            except GgufFailure as e:
                failed(spec, str(e))
    return entries, field, failures
