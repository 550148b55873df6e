#!/usr/bin/env python3
"""Decode speed of several backends on a shared machine: `runlens run --json`
generations of 32 new tokens, the backends one after another in each invocation
(their order rotated from one invocation to the next), the median time per
decoded token of each generation, then the median over the invocations and the
per-invocation ratios (docs/kv-cache.md). Ratios taken within one invocation,
seconds apart, say more than absolute figures when other work shares the cores.

    .venv/bin/python scripts/decode_ab.py --model models/gpt2-random \
        --program xnnpack-new=other/xnnpack.pte --threads 1 --reps 5

Prompts: the first 8 and 61 words of assets/corpus.txt (14 and 126 tokens with
the GPT-2-sized checkpoint's tokenizer), raw. Backends: eager, xnnpack and the
`--program` one; the ratios are of the last two and of eager to the last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--program", required=True, help="NAME=FILE.pte, the program compared with the directory's xnnpack")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--runlens", default=str(ROOT / "target/release/runlens"))
    args = ap.parse_args()
    new = args.program.split("=", 1)[0]
    backends = ["eager", "xnnpack", new]
    words = [w for line in open(ROOT / "assets/corpus.txt") if not line.startswith("#") for w in line.split()]
    for text in (" ".join(words[:8]), " ".join(words[:61])):
        per_token: dict[str, list[float]] = {b: [] for b in backends}
        tokens = 0
        for r in range(args.reps):
            order = backends[r % 3:] + backends[:r % 3]
            cmd = [args.runlens, "--model", args.model, "--program", args.program, "--threads", args.threads,
                   "--prompt-format", "raw", "--backends", ",".join(order), "run", "--json", "--max-new-tokens", "32", text]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            run = json.loads(out.stdout)
            tokens = len(run["ids"])
            for b in run["backends"]:
                if not b["ok"]:
                    print(f"{b['name']}: {b['error']}", file=sys.stderr)
                    return 1
                per_token[b["name"]].append(statistics.median(b["token_ms"][1:]))
        median = {b: statistics.median(v) for b, v in per_token.items()}
        print(f"prompt of {tokens} tokens, {args.reps} generations per backend, --threads {args.threads}:")
        for b in backends:
            print(f"  {b:18} {1000 / median[b]:6.1f} decode tokens/s (median {median[b]:.1f} ms a token; "
                  f"per generation {[round(x, 1) for x in per_token[b]]})")
        for slow, fast in (("xnnpack", new), ("eager", new)):
            ratios = [s / f for s, f in zip(per_token[slow], per_token[fast])]
            print(f"  {fast} over {slow}: {statistics.median(ratios):.2f}x (per invocation {[round(x, 2) for x in ratios]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
