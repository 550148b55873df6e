#!/usr/bin/env python3
"""Start-up of the explorer, launch to all results on screen: runlens in a
tmux session of 120x40, the screen polled every 50 ms; once the column titles
show, a sentence is typed; done when every column shows a latency for it (not
marked "old text") and the nearest sentence of the corpus.

    scripts/startup.py --runs 5
    scripts/startup.py --runs 5 --bin before=build/before/runlens --bin after=target/release/runlens \
        --conditions warm-second,cold-second --backends portable,xnnpack

Each binary must be named `runlens` (the probe re-executes it only then): put
an older build in a folder of its own. A run's load times come from the
explorer's trace (RUNLENS_TUI_TRACE).

Conditions (interleaved, one of each per round):
  first   an empty cache directory (RUNLENS_CACHE_DIR): the probe runs each
          program in a child and the corpus is embedded, as on a first start;
  second  a cache directory filled by one start before the rounds: probe
          verdicts, digests and corpus embeddings all found;
  cold    the page cache dropped first (`sync; echo 3 > /proc/sys/vm/drop_caches`,
          root only: the programs, libtorch and the binary come from disk);
  warm    as left by the round before.
Prints each run, then the median per binary and condition, and the load average
before and after (the machine may be shared). Only the standard library.
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TITLE_OF = {"eager": "PyTorch eager", "portable": "ExecuTorch portable", "xnnpack": "ExecuTorch XNNPACK"}
TITLES = list(TITLE_OF.values())
POLL = 0.05


def tmux(sock, *args):
    return subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", *args], capture_output=True, text=True)


def results_shown(screen, text):
    """Every column has a latency row and a nearest sentence for `text`."""
    if text not in screen or "old text" in screen:
        return False
    lines = screen.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.count("p50") == len(TITLES):
            cells = [c.strip() for c in lines[i + 1].split("│") if c.strip()]
            latencies = [c for c in cells if re.match(r"\d+(\.\d+)?\b", c)]
            corpus = any(l.count("cos ") >= len(TITLES) for l in lines if "nearest" in l)
            return len(latencies) == len(TITLES) and corpus
    return False


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def start_once(binary, cache, text, timeout, extra):
    """(seconds to the titles, seconds to all results, load times from the trace)."""
    sock = f"runlens-startup-{os.getpid()}"
    trace = os.path.join(cache, "..", f"trace-{os.getpid()}")
    env = f"RUNLENS_CACHE_DIR='{cache}' RUNLENS_TUI_TRACE='{trace}' TERM=xterm-256color"
    cmd = f"cd '{ROOT}' && env {env} '{binary}' {extra}; sleep 600"
    t0 = time.monotonic()
    out = tmux(sock, "new-session", "-d", "-x", "120", "-y", "40", "sh", "-c", cmd)
    if out.returncode != 0:
        raise SystemExit(f"error: tmux new-session failed: {out.stderr}")
    opened = done = None
    screen = ""
    try:
        while time.monotonic() - t0 < timeout:
            screen = tmux(sock, "capture-pane", "-p").stdout
            now = time.monotonic() - t0
            if opened is None and all(t in screen for t in TITLES):
                opened = now
                tmux(sock, "send-keys", "-l", text)
            elif opened is not None and results_shown(screen, text):
                done = now
                break
            time.sleep(POLL)
    finally:
        tmux(sock, "kill-server")
    if done is None:
        raise SystemExit(f"error: no results after {timeout} s; the screen was:\n{screen}")
    time.sleep(0.3)  # the trace is written when runlens ends
    loads = {}
    try:
        for line in open(trace):
            m = re.match(r"\d+ loaded (\S+) load_us=(\d+)", line)
            if m:
                loads[m.group(1)] = int(m.group(2)) / 1e6
        os.remove(trace)
    except OSError:
        pass
    return opened, done, loads


def loadavg():
    return open("/proc/loadavg").read().split()[:3]


def main():
    # A kill ends the run through the `finally`s, so no tmux server is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", action="append", help="LABEL=PATH (repeatable); default target/release/runlens")
    ap.add_argument("--conditions", default="cold-first,warm-first,cold-second,warm-second")
    ap.add_argument("--text", default="A kitten is sleeping on the sofa")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--backends", help="passed to runlens as --backends (eager, portable, xnnpack); default all three")
    ap.add_argument("--args", default="", help="extra arguments for runlens, e.g. --model DIR")
    args = ap.parse_args()
    if args.backends:
        names = args.backends.split(",")
        unknown = [n for n in names if n not in TITLE_OF]
        if unknown:
            raise SystemExit(f"error: --backends {args.backends}: the script knows the titles of {', '.join(TITLE_OF)} only")
        TITLES[:] = [TITLE_OF[n] for n in names]
        args.args = f"--backends {args.backends} {args.args}"
    bins = [b.split("=", 1) for b in (args.bin or ["runlens=target/release/runlens"])]
    bins = [(label, os.path.abspath(os.path.join(ROOT, path))) for label, path in bins]
    for label, path in bins:
        if os.path.basename(path) != "runlens":
            # The probe re-executes the binary only when it is called runlens.
            raise SystemExit(f"error: {path}: the binary must be named runlens (put a copy in a folder of its own)")
    conditions = args.conditions.split(",")
    if any(c.startswith("cold") for c in conditions) and not os.access("/proc/sys/vm/drop_caches", os.W_OK):
        raise SystemExit("error: cold starts drop the page cache, which needs root (/proc/sys/vm/drop_caches); pass --conditions warm-first,warm-second")
    work = tempfile.mkdtemp(prefix="runlens-startup-")
    try:
        measure(args, bins, conditions, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(args, bins, conditions, work):
    primed = {}
    for label, path in bins:
        primed[label] = os.path.join(work, f"primed-{label}")
        os.makedirs(primed[label])
        start_once(path, primed[label], args.text, args.timeout, args.args)
    print(f"load average before: {' '.join(loadavg())}", flush=True)
    times = {}
    for r in range(args.runs):
        for condition in conditions:
            for label, path in bins:
                temp, which = condition.split("-")
                if which == "first":
                    cache = os.path.join(work, f"fresh-{label}-{r}-{temp}")
                    os.makedirs(cache)
                else:
                    cache = primed[label]
                if temp == "cold":
                    drop_caches()
                opened, done, loads = start_once(path, cache, args.text, args.timeout, args.args)
                times.setdefault((label, condition), []).append((opened, done, loads))
                shown = " ".join(f"{k} {v:.2f}" for k, v in sorted(loads.items()))
                print(f"round {r + 1} {label:>8} {condition:<12} titles {opened:5.2f} s  results {done:5.2f} s  loads: {shown}", flush=True)
    print(f"load average after: {' '.join(loadavg())}")
    print(f"\nmedians of {args.runs} (seconds from launch):")
    for (label, condition), runs in times.items():
        kinds = sorted({k for _, _, l in runs for k in l})
        loads = " ".join(f"{k} {statistics.median(l.get(k, float('nan')) for _, _, l in runs):.2f}" for k in kinds)
        print(
            f"{label:>8} {condition:<12} titles {statistics.median(o for o, _, _ in runs):5.2f}  "
            f"results {statistics.median(d for _, d, _ in runs):5.2f}  (min {min(d for _, d, _ in runs):.2f}, max {max(d for _, d, _ in runs):.2f})  loads: {loads}"
        )


if __name__ == "__main__":
    main()
