"""Whether an export's files fit on the disk, checked before anything is written.

An export writes into a staging folder beside `--out` and renames it into place, so
every file it makes is on that disk at once, beside the directory it replaces. A disk
that fills halfway used to end the export in a Python traceback (`OSError: [Errno 28]`)
deep in a copy; now the export says before it starts what it will write and what is
free, and a disk that fills anyway (something else writing) ends in one message.

Sizes are estimated from the weights' float32 bytes W (parameters x 4), as measured
on SmolLM2-135M-Instruct (W = 538 MB; docs/models.md): the eager safetensors W,
xnnpack.pte 1.21 W, xnnpack-int8.pte 0.31 W, xnnpack-8da4w.pte 0.18 W, the GGUFs
W / 0.27 W / 0.14 W (f32 / q8_0 / q4_0), model.onnx W and its 8-bit copy 0.27 W.
While a program is lowered its delegate blobs are spilled to a file beside it
(lowering.py), so the largest program counts twice.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from .files import ExportError, say

GIB = 1 << 30
# Of W, by what the file holds.
FLOAT, INT8, INT4 = 1.25, 0.35, 0.2
GGUF = {"f32": 1.0, "f16": 0.5, "bf16": 0.5, "q8_0": 0.28, "q4_0": 0.15, "q4_1": 0.19}
ONNX = 1.0 + 0.28
MARGIN = 1.05
FIXED = 100 << 20  # graph.json, modules.json, references, tokenizer


def show(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / (1 << 20):.0f} MiB"


def program_share(name: str) -> float:
    if "4w" in name or "int4" in name:
        return INT4
    if "int8" in name or "8da" in name:
        return INT8
    return FLOAT


def estimate(weights: int, programs: list[str], gguf_types: list[str], onnx: bool) -> int:
    """Bytes the staging folder will hold at its fullest."""
    shares = [program_share(n) for n in programs]
    total = 1.0 + sum(shares) + max(shares, default=0.0)
    total += sum(GGUF.get(t, 1.0) for t in gguf_types)
    total += ONNX if onnx else 0.0
    return int(MARGIN * total * weights) + FIXED


def free_bytes(out: Path) -> int:
    """Free bytes on the disk that holds `out` (or its nearest existing parent)."""
    probe = out.resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def check(out: Path, need: int) -> None:
    """An ExportError when the files would not fit, with the figures and what to do."""
    free = free_bytes(out)
    if os.environ.get("RUNLENS_EXPORT_NO_DISK_CHECK"):
        return
    if need <= free:
        say(f"disk: the export writes about {show(need)}; {show(free)} free under {out.parent}")
        return
    raise ExportError(f"not enough disk space to export into {out}: its files take about {show(need)} "
                      f"and {show(free)} is free there; free space, name another disk with --out, or "
                      f"write fewer files (--programs, --no-gguf, --no-onnx); "
                      f"RUNLENS_EXPORT_NO_DISK_CHECK=1 tries anyway")


def is_full(e: OSError) -> bool:
    return e.errno in (errno.ENOSPC, errno.EDQUOT)


def filled_message(e: OSError, out: Path) -> str:
    """What a disk that filled during the export says, instead of a traceback."""
    where = e.filename2 or e.filename or out  # a copy's destination, else the file written
    return (f"the disk filled while the export wrote {where} ({e.strerror}); {out} left as it was and the "
            f"staging folder removed; {show(free_bytes(out))} is free now: free space or write fewer "
            f"files (--programs, --no-gguf, --no-onnx)")
