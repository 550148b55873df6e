"""Whether an export fits in this machine's memory, checked before the heavy steps.

A decoder's export holds the float32 model, a copy of it per program while that
program is exported, lowered and serialised, and the programs' buffers; at
Qwen2.5-0.5B's sizes that peaked at 15.2 GB. An export that does not fit is
refused before it starts, with the figures and a `--programs` set that fits,
instead of being killed by the kernel's OOM killer halfway (exit 137, no word).

What the process may take is the smallest of `MemAvailable` (/proc/meminfo) and,
where the process's cgroup sets a limit, that limit less what the cgroup uses
(v2 `memory.max` / `memory.current`, v1 `memory.limit_in_bytes` /
`memory.usage_in_bytes`), as runlens' own check reads them (src/memory/limit.rs).

What a step needs is estimated from the weights' float32 bytes W (parameters x 4):
STEP_PER_WEIGHT x W + STEP_FIXED above what the process holds when the check runs (the
model loaded), fitted to the peaks measured on SmolLM2-135M-Instruct (W = 538 MB) and
at Qwen2.5-0.5B's sizes (W = 1.98 GB) in docs/models.md: a step holds torch.export's
scratch, the edge and lowered graphs, the check's loaded program, and a fixed part
(the tracer's and ExecuTorch's Python objects) that dominates at SmolLM2's size. Each
step frees what it made before the next, so each program's step must fit alone.
"""

from __future__ import annotations

import os
from pathlib import Path

from .files import ExportError, say

GIB = 1 << 30
MIB = 1 << 20
# A limit at or above this is "no limit" (cgroup v1 writes 2^63 rounded down to a page).
UNLIMITED = 1 << 60
# A program's step, above what the process holds at the check: STEP_PER_WEIGHT x W +
# STEP_FIXED. Measured above that (2026-12-06, docs/models.md): SmolLM2-135M 1.92 GB
# (xnnpack) and 2.09 GB (portable), Qwen2.5-0.5B's sizes 4.80 GB (portable); the
# quantized steps take less since their copy shares the float tensors.
STEP_PER_WEIGHT = 2.0
STEP_FIXED = 1_100_000_000


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def mem_available(root: Path = Path("/")) -> int | None:
    text = _read(root / "proc/meminfo")
    for line in (text or "").splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            return int(parts[1]) * 1024
    return None


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    if text == "max":
        return UNLIMITED
    try:
        return int(text)
    except ValueError:
        return None


def _stat(text: str | None, key: str) -> int:
    """One value of a cgroup's memory.stat (0 when absent)."""
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def cgroup_headroom(root: Path = Path("/")) -> list[tuple[int, str]]:
    """(headroom, description) for each cgroup level above this process with a memory limit."""
    found = []
    text = _read(root / "proc/self/cgroup") or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if controllers == "":  # v2
            bases = [root / "sys/fs/cgroup/unified", root / "sys/fs/cgroup"]
            files = ("memory.max", "memory.current", ("file", "file_mapped", "shmem"))
        elif "memory" in controllers.split(","):
            bases = [root / "sys/fs/cgroup/memory"]
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes",
                     ("total_cache", "total_mapped_file", "total_shmem"))
        else:
            continue
        for base in bases:
            level = base / rel.lstrip("/")
            if not (level / files[0]).is_file():
                continue
            while True:
                limit, used = _int(_read(level / files[0])), _int(_read(level / files[1]))
                if limit is not None and used is not None and limit < UNLIMITED:
                    # Page cache no process maps is reclaimed before anything is killed: it counts as
                    # free. Active or not: the export's own files (the checkpoint it dequantized and
                    # wrote a moment ago, 0.5-1.1 GB at SmolLM2's size) are recently used, and under a
                    # 3 GB cgroup the kernel reclaimed them as the export went on (docs/models.md).
                    # runlens' own check (src/memory/limit.rs) counts only the inactive part, as
                    # `docker stats` does: a column's model file is mapped or about to be read.
                    stat = _read(level / "memory.stat")
                    cache, mapped, shmem = (_stat(stat, key) for key in files[2])
                    used -= min(used, max(cache - mapped - shmem, 0))
                    found.append((max(limit - used, 0), f"cgroup limit {limit / MIB:.0f} MiB "
                                  f"({used / MIB:.0f} MiB in use) at {level}"))
                if level == base:
                    break
                level = level.parent
            break
    return found


def headroom() -> tuple[int, str]:
    """What this process may still take, and what says so."""
    bounds = []
    available = mem_available()
    if available is not None:
        bounds.append((available, f"MemAvailable {available / GIB:.2f} GiB"))
    bounds.extend(cgroup_headroom())
    if not bounds:
        return UNLIMITED, "no memory figure readable (/proc/meminfo, cgroups)"
    return min(bounds)


def resident() -> int:
    """This process's resident memory now (VmRSS)."""
    from .files import resident_now

    return resident_now()


def weight_bytes(model) -> int:
    """The float32 bytes of the model's parameters (shared ones once)."""
    seen, total = set(), 0
    for p in model.parameters():
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        total += p.numel() * 4
    return total


def needs(weights: int) -> int:
    """What exporting one program is estimated to take above what the process holds."""
    return int(STEP_PER_WEIGHT * weights + STEP_FIXED)


def check_programs(names: list[str], weights: int, held: int) -> None:
    """An ExportError when a program's step would not fit: the figures, and the
    programs that do fit (the steps run one after another, so each must fit alone)."""
    room, what = headroom()
    if os.environ.get("RUNLENS_EXPORT_NO_MEMORY_CHECK"):
        return
    too_big = [n for n in names if needs(weights) > room]
    if not too_big:
        if names:
            say(f"memory: a program's step needs about {needs(weights) / GIB:.1f} GiB above the "
                f"{held / GIB:.1f} GiB held; {room / GIB:.2f} GiB free ({what})")
        return
    fits = [n for n in names if n not in too_big]
    detail = ", ".join(f"{n} about {needs(weights) / GIB:.1f} GiB" for n in too_big)
    hint = (f"--programs {','.join(fits)} fits" if fits else
            "no program fits: export on a machine with more memory (a desktop) and copy the directory over")
    raise ExportError(f"not enough memory to export {', '.join(too_big)}: {detail} more than the "
                      f"{held / GIB:.1f} GiB this export holds already, with {room / GIB:.2f} GiB free ({what}); "
                      f"{hint}; RUNLENS_EXPORT_NO_MEMORY_CHECK=1 tries anyway")
