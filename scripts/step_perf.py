#!/usr/bin/env python3
"""Where a decode step's time goes, and what grows with the filled cache, below the
operators: `perf record` (CPU samples) of `runlens bench` decoding at two positions,
the samples of the step attributed to functions, and each function's milliseconds a
step at both positions and their difference (docs/kv-cache.md, "Where the per-position
cost goes, from perf").

    .venv/bin/python scripts/step_perf.py --model models/smollm2-2048 \
        --program xnnpack-int8-kvin=models/smollm2-2048-kvin/xnnpack-int8-kvin.pte \
        --backend xnnpack-int8-kvin --positions 64,1000 --json assets/perf-step-....json

Why not ETDump (`runlens profile`): it times XNNPACK's operators, not what runs inside
one (the packing of a runtime operand is part of its GEMM's time), and it leaves out
what a delegate call costs around them. perf sees every function, but the wheel's
XNNPACK library is stripped: its microkernels show as addresses. They are grouped here
into functions by their code (a function starts where an aligned `push`/`endbr64`
follows a `ret`, a jump or padding), and each function is described by its
instruction mix (vector width, scalar moves, FMAs, prefetches), which is what tells a
packer from a GEMM; the names in the docs were read from the disassembly that way.

Each position is two bench runs after a prompt of that many tokens, one of --short new
tokens and one of --gen-tokens, each recorded whole: their difference in samples, per
function, is what the extra decode steps cost (loading, the prompt and bench's bandwidth
probe are in both runs and cancel). Samples are CPU time (perf's cpu-clock at --freq
per thread), so a function's figure is CPU milliseconds a step summed over the threads;
the step's wall time is the longer run's decode time a token. One pair of runs per
position: compare within a run of this script, and rerun it before trusting a small
difference. Needs `perf` (Debian: linux-perf) and objdump.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XNNPACK_LIB = "libexecutorch_backend_xnnpack.so"


def runlens_cmd(args, prompt: int, gen: int, out: Path) -> list[str]:
    cmd = [args.runlens, "--model", args.model, "--threads", args.threads]
    for p in args.program:
        cmd += ["--program", p]
    return cmd + ["--backends", args.backend, "bench", "--prompt-lens", str(prompt), "--gen-tokens", str(gen),
                  "--warmup", "0", "--iters", "1", "--json", str(out)]


def decode_ms(bench_json: Path, backend: str) -> float:
    rows = json.loads(bench_json.read_text())["results"]
    row = next(r for r in rows if r["backend"] == backend and r.get("decode_tokens_per_s"))
    return 1000.0 / row["decode_tokens_per_s"]


def samples(data: Path) -> dict[tuple[str, str], int]:
    """{(dso, symbol, or the hex address where the library has no symbol): samples}."""
    out = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", "dso,sym", "-F",
                          "sample,dso,sym"], capture_output=True, text=True, check=True).stdout
    counts: dict[tuple[str, str], int] = collections.Counter()
    for line in out.splitlines():
        parts = line.split(None, 3)  # samples, dso, [.] or [k], symbol
        if line.startswith("#") or len(parts) < 4 or not parts[0].isdigit():
            continue
        counts[(parts[1], parts[3].strip())] += int(parts[0])
    return counts


def functions(lib: Path):
    """Start addresses of the functions in `lib`'s text, and a describer of each."""
    dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                          check=True).stdout
    ins = []
    for line in dump.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(\S+)\s*(.*)", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2), m.group(3)))
    starts = [ins[i][0] for i in range(1, len(ins))
              if ins[i][1] in ("push", "endbr64") and ins[i][0] % 16 == 0
              and (ins[i - 1][1] in ("ret", "jmp", "int3") or ins[i - 1][1].startswith("nop"))]
    addresses = [a for a, _, _ in ins]

    def describe(start: int) -> dict:
        k = bisect.bisect_right(starts, start)
        end = starts[k] if k < len(starts) else start + 4096
        body = ins[bisect.bisect_left(addresses, start):bisect.bisect_left(addresses, end)]
        regs = collections.Counter(r for _, _, ops in body for r in re.findall(r"%(zmm|ymm|xmm)", ops))
        mnemonics = collections.Counter(m for _, m, _ in body)
        return {"start": hex(start), "instructions": len(body),
                "zmm": regs["zmm"], "ymm": regs["ymm"], "xmm": regs["xmm"],
                "fma": sum(n for m, n in mnemonics.items() if m.startswith("vfmadd")),
                "scalar_moves": mnemonics["movss"] + mnemonics["vmovss"],
                "prefetches": sum(n for m, n in mnemonics.items() if m.startswith("prefetch"))}

    return starts, describe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--program", action="append", default=[], help="NAME=FILE.pte, as runlens takes it")
    ap.add_argument("--positions", default="64,1000")
    ap.add_argument("--gen-tokens", type=int, default=400)
    ap.add_argument("--short", type=int, default=40, help="new tokens of the run subtracted")
    ap.add_argument("--freq", type=int, default=4000, help="perf's samples a second, per thread")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--runlens", default=str(ROOT / "target/release/runlens"))
    ap.add_argument("--json", help="write the table here")
    args = ap.parse_args()
    if not shutil.which("perf") or not shutil.which("objdump"):
        print("needs perf (Debian: linux-perf) and objdump (binutils)", file=sys.stderr)
        return 2
    lib = next(Path(sys.prefix).glob(f"lib/python3*/site-packages/executorch/lib/{XNNPACK_LIB}"), None)
    if lib is None:
        print(f"no {XNNPACK_LIB} under {sys.prefix}: run with the project's .venv/bin/python", file=sys.stderr)
        return 2
    starts, describe = functions(lib)
    positions = [int(p) for p in args.positions.split(",")]
    per_position = {}
    with tempfile.TemporaryDirectory() as tmp:
        for position in positions:
            counts, step = {}, 0.0
            for tokens in (args.short, args.gen_tokens):
                data, bench = Path(tmp) / f"{position}-{tokens}.data", Path(tmp) / f"{position}-{tokens}.json"
                subprocess.run(["perf", "record", "-q", "-F", str(args.freq), "-o", str(data), "--"]
                               + runlens_cmd(args, position, tokens, bench), check=True, capture_output=True)
                counts[tokens], step = samples(data), decode_ms(bench, args.backend)
            grouped: dict[str, float] = collections.Counter()
            for (dso, symbol) in set(counts[args.short]) | set(counts[args.gen_tokens]):
                extra = counts[args.gen_tokens].get((dso, symbol), 0) - counts[args.short].get((dso, symbol), 0)
                if dso == XNNPACK_LIB and symbol.startswith("0x"):
                    address = int(symbol, 16)
                    at = starts[max(0, bisect.bisect_right(starts, address) - 1)]
                    name = f"{XNNPACK_LIB} function at {hex(at)}"
                else:
                    name = f"{dso} {symbol}"
                grouped[name] += extra * 1000.0 / args.freq / (args.gen_tokens - args.short)
            per_position[position] = {"step_ms": step, "ms": grouped}
    low, high = positions[0], positions[-1]
    names = set(per_position[low]["ms"]) | set(per_position[high]["ms"])
    rows = []
    for name in names:
        a, b = per_position[low]["ms"].get(name, 0.0), per_position[high]["ms"].get(name, 0.0)
        row = {"function": name, f"cpu_ms@{low}": round(a, 3), f"cpu_ms@{high}": round(b, 3),
               "growth_cpu_ms": round(b - a, 3)}
        if " function at " in name:
            row["code"] = describe(int(name.rsplit(" ", 1)[1], 16))
        rows.append(row)
    rows.sort(key=lambda r: -max(abs(r["growth_cpu_ms"]), r[f"cpu_ms@{high}"]))
    report = {"model": args.model, "backend": args.backend, "programs": args.program, "threads": args.threads,
              "gen_tokens": args.gen_tokens, "short": args.short, "freq": args.freq, "positions": positions,
              "step_ms": {str(p): round(per_position[p]["step_ms"], 3) for p in positions},
              "date": time.strftime("%Y-%m-%d"), "functions": rows[:40]}
    print(f"{args.backend}: a step {report['step_ms'][str(low)]} ms (wall) after {low} tokens, "
          f"{report['step_ms'][str(high)]} ms after {high}; CPU ms a step, summed over {args.threads} threads:")
    print(f"{'@' + str(low):>9} {'@' + str(high):>9} {'growth':>7}  function")
    for row in rows[:args.top]:
        code = row.get("code")
        hint = (f"  [{code['instructions']} instr, zmm {code['zmm']} ymm {code['ymm']} xmm {code['xmm']}, fma {code['fma']}, "
                f"scalar moves {code['scalar_moves']}, prefetch {code['prefetches']}]") if code else ""
        print(f"{row[f'cpu_ms@{low}']:9.2f} {row[f'cpu_ms@{high}']:9.2f} {row['growth_cpu_ms']:7.2f}  {row['function']}{hint}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
