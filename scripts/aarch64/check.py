"""Checks for `make test-aarch64` (run with .venv/bin/python).

  check.py run [--backends a,b] REFERENCE.json RUN.json...   each `runlens run --json`
      output: all three backends (or those named) present and ok, ids and embedding
      matching the reference.json sentence of the same text (same thresholds as the
      x86-64 tests).
  check.py footprint FOOTPRINT.json          `runlens footprint --json` of the two
      bundles: every row measured with positive figures and Python's result, no
      libtorch in the lite row, the lite row resident in less memory.
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


def check_run(reference_path, run_paths, backends=None):
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
            if backends is not None and name not in backends:
                continue
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


def check_footprint(path):
    report = json.load(open(path))
    failures = 0
    fields = ["disk_mb", "libraries", "rss_after_load_mb", "rss_after_run_mb", "load_ms", "first_run_ms", "start_to_first_result_ms"]
    rows = {r["name"]: r for r in report["rows"]}
    for r in report["rows"]:
        bad = [f for f in fields if not (r.get(f) or 0) > 0]
        cos = r.get("cosine_vs_reference")
        ok = r["ok"] and not bad and cos is not None and cos >= 0.99999
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {r['title']:28} disk {r['disk_mb']:7.1f} MB  RSS load {r['rss_after_load_mb']:6.1f} "
              f"run {r['rss_after_run_mb']:6.1f} MiB  start->result {r['start_to_first_result_ms']:8.0f} ms  libtorch {r['libtorch_loaded']}"
              + (f"  {r['error']}" if r.get("error") else "") + (f"  not positive: {bad}" if bad else ""))
    lite, full = rows.get("runlens-lite-xnnpack"), rows.get("runlens-xnnpack")
    if not lite or not full or lite["libtorch_loaded"] or not lite["rss_after_run_mb"] < full["rss_after_run_mb"]:
        print("FAIL the lite bundle must load no libtorch and be resident in less memory than the full one")
        failures += 1
    return failures


def main(argv):
    if len(argv) >= 5 and argv[0] == "run" and argv[1] == "--backends":
        failures = check_run(argv[3], argv[4:], set(argv[2].split(",")))
    elif len(argv) >= 3 and argv[0] == "run":
        failures = check_run(argv[1], argv[2:])
    elif len(argv) == 2 and argv[0] == "footprint":
        failures = check_footprint(argv[1])
    elif len(argv) == 3 and argv[0] == "same":
        failures = check_same(argv[1], argv[2])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
