"""Progress a person can follow on a long export (a 0.5B decoder takes tens of
minutes on two cores): each step as `[k/n] ...` with the elapsed time, a
heartbeat line from a thread while one step goes on without a word (a lowering
can take minutes), and at the end each program's times for the summary.

Plain lines only (the log is often a file or a pipe, not a terminal). The steps
are counted up front by export.py (`PROGRESS.plan(n)`); code that runs outside
an export (course.py, the benches) gets `[k] ...` without a total.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import warnings
from collections import defaultdict
from contextlib import contextmanager

from . import files

HEARTBEAT_SECONDS = 12.0


def quiet_frameworks() -> None:
    """Offline, and without the frameworks' lines that drown the progress lines; called
    before torch and transformers are imported (export.py; its workers inherit it, apart.py)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # torch.export's pytree emits one FutureWarning per node, as do torchao's enum
    # registrations (a logger of torch's pytree), ExecuTorch's note on mutable buffers (the
    # KV cache: InitializedMutableBufferPass runs) and dynamo's on transformers' output collector.
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message="Mutation on a buffer in the model is detected")
    warnings.filterwarnings("ignore", message="While compiling, we found certain side effects")
    logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)
    # transformers' progress bars redraw one line with carriage returns: not in a log file.
    if not sys.stderr.isatty():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF loader's bar (--from-gguf)


def clock(seconds: float) -> str:
    """1m05s, 42.0s."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(round(seconds)), 60)
    return f"{minutes}m{sec:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m{sec:02d}s"


class Progress:
    def __init__(self, heartbeat: float = HEARTBEAT_SECONDS):
        self.total: int | None = None
        self.done = 0
        self.heartbeat = heartbeat
        self.current: str | None = None
        self.label = ""
        self.detail: str | None = None  # what inside the step (the program being checked)
        self.step_start = 0.0
        # program name -> phase ("export", "check") -> seconds
        self.times: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def plan(self, total: int) -> None:
        self.total, self.done = total, 0

    def add_steps(self, n: int) -> None:
        if self.total is not None:
            self.total += n

    @contextmanager
    def step(self, what: str, program: str | None = None, phase: str = "export"):
        """One numbered step; its time goes to `program`'s `phase` when given."""
        self.done += 1
        label = f"[{self.done}/{self.total}]" if self.total is not None else f"[{self.done}]"
        files.say(f"{label} {what}")
        self.current, self.label, self.step_start = what, label, time.monotonic()
        files.reset_step_peak()
        self._start_heartbeat()
        try:
            yield
        finally:
            spent = time.monotonic() - self.step_start
            if program is not None:
                self.times[program][phase] += spent
            self.current = None
            if spent >= self.heartbeat:
                files.say(f"{label} done in {clock(spent)}, this step's peak {files.step_peak() / 1e9:.2f} GB resident")

    @contextmanager
    def timed(self, program: str, phase: str):
        """Time spent on `program` inside a step (the check's share of one program);
        the heartbeat names it meanwhile."""
        start, self.detail = time.monotonic(), f"{phase}: {program}"
        try:
            yield
        finally:
            self.times[program][phase] += time.monotonic() - start
            self.detail = None

    def _start_heartbeat(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._beat, name="export-heartbeat", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(1.0):
            what = self.current
            if what is None:
                continue
            now = time.monotonic()
            if now - files.last_line() >= self.heartbeat:
                detail = f"{self.detail}, " if self.detail else ""
                files.say(f"{self.label} ... still {what} ({detail}{clock(now - self.step_start)} in this step)")

    def stop(self) -> None:
        self._stop.set()


PROGRESS = Progress()


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def summary_table(out, written: list[str], programs: list[dict], failed: dict, stage) -> list[str]:
    """The export's last lines: every file written with its size, the programs first
    with the time each took to export (its share of a torch.export shared with
    another program included) and to check; a program that failed its check, where
    its files were kept."""
    from pathlib import Path

    by_file = {e["file"]: e["name"] for e in programs}
    times = PROGRESS.times
    rows = [("file", "size", "export", "check")]
    pte = [e["file"] for e in programs if e["file"] in written]
    rest = [n for n in written if n not in pte]
    total = 0
    for name in [*pte, *rest]:
        size = (Path(out) / name).stat().st_size
        total += size
        t = times.get(by_file.get(name, ""), {})
        rows.append((name, size_text(size), clock(t["export"]) if "export" in t else "",
                     clock(t["check"]) if "check" in t else ""))
    rows.append((f"total, {len(written)} files (+ manifest.json)", size_text(total), "", ""))
    for e in programs:
        if e["name"] in failed:
            t = times.get(e["name"], {})
            rows.append((f"{e['file']}: FAILED its check, kept in {stage}",
                         size_text((Path(stage) / e["file"]).stat().st_size), clock(t.get("export", 0.0)),
                         clock(t.get("check", 0.0))))
    width = max(len(r[0]) for r in rows)
    return [f"  {r[0]:<{width}}  {r[1]:>9}  {r[2]:>8}  {r[3]:>8}" for r in rows]
