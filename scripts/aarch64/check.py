"""Checks for `make test-aarch64` (run with .venv/bin/python).

  check.py run REFERENCE.json RUN.json...   each `runlens run --json` output: all
      three backends present and ok, ids and embedding matching the reference.json
      sentence of the same text (same thresholds as the x86-64 tests).
  check.py same A.json B.json               two `runlens inspect --json` outputs
      (x86-64 and aarch64) are the same JSON value, paths aside.
"""
import json
import math
import sys

# backend -> (min cosine, max abs diff) against reference.json (Python eager)
THRESHOLDS = {"eager": (0.999999, 1e-5), "portable": (0.99999, 1e-4), "xnnpack": (0.99999, 1e-4)}


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb)


def check_run(reference_path, run_paths):
    reference = {s["text"]: s for s in json.load(open(reference_path))["sentences"]}
    failures = 0
    for path in run_paths:
        report = json.load(open(path))
        ref = reference.get(report["text"])
        if ref is None:
            print(f"FAIL {path}: text {report['text']!r} is not in {reference_path}")
            failures += 1
            continue
        if report["ids"] != ref["ids"]:
            print(f"FAIL {path}: token ids {report['ids']} != reference {ref['ids']}")
            failures += 1
        by_name = {b["name"]: b for b in report["backends"]}
        for name, (min_cos, max_diff) in THRESHOLDS.items():
            b = by_name.get(name)
            if b is None or not b["ok"]:
                why = "missing" if b is None else f"error: {b['error']}"
                print(f"FAIL {report['text']!r} {name}: {why}")
                failures += 1
                continue
            emb, want = b["embedding"], ref["embedding"]
            if len(emb) != len(want):
                print(f"FAIL {report['text']!r} {name}: {len(emb)}-d, reference {len(want)}-d")
                failures += 1
                continue
            cos = cosine(emb, want)
            diff = max(abs(x - y) for x, y in zip(emb, want))
            ok = cos >= min_cos and diff <= max_diff
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {report['text']!r:28} {name:9} cosine {cos:.8f} (>= {min_cos})  "
                  f"max|diff| {diff:.2e} (<= {max_diff:g})  {b['latency_ms']:9.1f} ms emulated")
    return failures


def strip_paths(value, paths):
    if isinstance(value, dict):
        return {k: strip_paths(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_paths(v, paths) for v in value]
    if isinstance(value, str) and (value in paths or value.endswith(".pte")):
        return "<path>"
    return value


def check_same(a_path, b_path):
    a = strip_paths(json.load(open(a_path)), set())
    b = strip_paths(json.load(open(b_path)), set())
    if a == b:
        print(f"ok   {b_path} == {a_path}")
        return 0
    print(f"FAIL {b_path} differs from {a_path}")
    return 1


def main(argv):
    if len(argv) >= 3 and argv[0] == "run":
        failures = check_run(argv[1], argv[2:])
    elif len(argv) == 3 and argv[0] == "same":
        failures = check_same(argv[1], argv[2])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
