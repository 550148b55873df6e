"""Small helpers shared by the export steps."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import numpy as np

T0 = time.monotonic()
_LINE = threading.Lock()  # say() is also called from progress.py's heartbeat thread
_last_line = T0


def say(msg: str) -> None:
    """A progress line with the wall time and this process's CPU time so far
    (the CPU figure is the one that holds on a busy machine)."""
    global _last_line
    with _LINE:
        now = time.monotonic()
        print(f"[export {now - T0:6.1f}s, cpu {time.process_time():6.1f}s] {msg}", flush=True)
        _last_line = now


def last_line() -> float:
    """When say() last printed (time.monotonic())."""
    return _last_line


class ExportError(Exception):
    """Something the user can fix (a checkpoint, an option); printed as one
    message, exit code 2, nothing written."""


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def f32_list(values) -> list[float]:
    """float32 values as the shortest decimals that read back as the same
    float32 (a logit row of 30522 values stays a few hundred KB of JSON)."""
    arr = np.asarray(values, dtype=np.float32).reshape(-1)
    return [float(str(v)) for v in arr]
