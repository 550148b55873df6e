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
    """A progress line with the wall time, this process's CPU time so far (the
    figure that holds on a busy machine), its resident memory now and its peak
    so far (VmHWM: the figure a memory limit is about)."""
    global _last_line
    with _LINE:
        now = time.monotonic()
        now_held, peak = resident_now(), peak_resident()
        held = f", rss {now_held / 1e9:4.2f} GB, peak {peak / 1e9:4.2f} GB" if peak else ""
        print(f"[export {now - T0:6.1f}s, cpu {time.process_time():6.1f}s{held}] {msg}", flush=True)
        _last_line = now


def process_ended(code: int) -> str:
    """How a child process ended, from its exit code (multiprocessing's and
    os.waitstatus_to_exitcode's: minus the signal when a signal ended it)."""
    import signal

    if code >= 0:
        return f"ended with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    oom = " (the kernel's OOM killer sends it when memory runs out: `dmesg` says)" if -code == signal.SIGKILL else ""
    return f"was killed by {name}{oom}"


def release_memory() -> None:
    """Collect Python's garbage, then hand the C heap's free pages back to the system
    (glibc's malloc_trim): torch's large buffers freed between steps otherwise stay in
    the process's resident memory, and the next step's peak lands on top of them."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def _status_kib(field: str) -> int:
    """A field of /proc/self/status in bytes (VmRSS, VmHWM); 0 where /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


# The peak before the kernel's high-water mark was last reset (reset_step_peak).
_peak_before_reset = 0


def peak_resident() -> int:
    """This process's peak resident memory so far (bytes): the kernel's high-water mark
    (VmHWM), and what it was before a step reset it."""
    return max(_peak_before_reset, _status_kib("VmHWM"))


def step_peak() -> int:
    """The peak resident memory since the step began (reset_step_peak), bytes."""
    return _status_kib("VmHWM")


def reset_step_peak() -> None:
    """Start measuring one step's own peak: the kernel resets VmHWM to the resident
    memory now when a process writes 5 to its clear_refs; the peak so far is kept for
    peak_resident. Where that is not allowed, a step's peak is the process's so far."""
    global _peak_before_reset
    _peak_before_reset = peak_resident()
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        pass


def resident_now() -> int:
    """This process's resident memory now (VmRSS, bytes)."""
    return _status_kib("VmRSS")


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


def write_program(path: Path, program) -> None:
    """An ExecuTorch program manager's .pte, written atomically from its serialised pieces
    (`write_to_file`): `program.buffer` would join them into one more copy of the whole
    file in memory (650 MB at SmolLM2-135M's sizes, at the export's peak)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        program.write_to_file(f)
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
