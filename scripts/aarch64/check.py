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
  check.py generation MODEL_DIR X86.json A64.json [A64.err]   two `runlens run --json
      --first-logits` outputs of a text-generation model on the same prompt (x86-64
      and aarch64 under qemu): every backend ok on both, the same greedy ids, first-step
      logits within GEN_BOUNDS of x86-64's, and for a program with its own reference
      (the quantized model run by PyTorch at export, <program>.reference.json) within
      the x86-64 tests' bounds of it too; the aarch64 run's stderr must not show
      XNNPACK rejecting a subgraph (xnn_status_*, a failed delegate init).
"""
import json
import math
import sys

# backend -> (min cosine, max abs diff) against reference.json (Python eager)
# onnx-int8: ONNX Runtime's 8-bit copy (quantize_dynamic), as tests/onnxruntime.rs bounds it on x86-64.
THRESHOLDS = {"eager": (0.999999, 1e-5), "portable": (0.99999, 1e-4), "xnnpack": (0.99999, 1e-4),
              "onnx": (0.99999, 1e-4), "onnx-int8": (0.95, 0.1)}


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


# Generation, aarch64 against x86-64: the same program (or eager column) on another
# instruction set takes other kernels (XNNPACK's NEON / dot-product ones for its
# AVX2 / AVX-512 ones, libtorch's Arm builds for ATen's x86 ones). Integer
# accumulation is exact on both, so what may differ is float rounding: the order
# of a float reduction (layer norm, softmax, the dynamic activation scale) and
# so, rarely, an activation rounded to the neighbouring 8-bit step. On logits
# spread over about +-10 that is a difference of about 1e-5 in float and a few
# 1e-3 where an activation step flips; a greedy id only changes where the top
# two logits are closer than that. Measured under qemu's Cortex-A76 (docs/pi5.md):
# max|diff| 7e-7 for both quantized programs of the tiny GPT-2, cosine 1.0, the
# same 16 ids. Bounds: cosine >= 0.9999 and max|diff| <= 0.05 (int8, 4-bit and
# float alike): far above rounding, far below what a wrong kernel gives (a 4-bit
# program against float32 is at cosine 0.95); the ids must be the same (the check
# says where they first differ, and the first logits' cosine, if they do not).
GEN_BOUNDS = (0.9999, 0.05)
# eager's quantized columns (eager-int4) run ATen's packed kernels with bfloat16
# activations and round each linear layer's output to bfloat16 (8 bits of
# mantissa), and ATen's Arm and x86 kernels sum in other orders: a logit may move
# by a bfloat16 step or so of its size (0.03125 for |logit| in [4, 8)), and the
# head's bfloat16 logits can tie exactly, so greedy ids may part at a tie. Measured
# under qemu's Cortex-A76 on the tiny GPT-2: cosine 0.99995, max|diff| 5.5e-2
# (1.75 steps of its largest logit), 14 of 16 ids before they parted. Bounds: cosine >= 0.9999, max|diff|
# <= two bfloat16 steps of the largest logit, the first 8 ids the same (a wrong
# kernel is far off: a 4-bit scale of max/7 instead of max/7.5 gives cosine 0.93).
BF16_COLUMNS = ("eager-int8", "eager-int4")
BF16_SAME_IDS = 8


def bf16_step(logits):
    """The spacing of bfloat16 values at the largest |logit|."""
    top = max(abs(x) for x in logits) or 1.0
    return 2.0 ** (math.floor(math.log2(top)) - 7)


# Against the program's own reference (the quantized PyTorch model on x86-64 at
# export): the bounds of tests/quantized_generation.rs.
PROGRAM_REFERENCE_BOUNDS = {"int8-dynamic": (0.9999, 1e-3), "8da4w": (0.9999, 1e-1)}
# What ExecuTorch's XNNPACK delegate prints when XNNPACK refuses a subgraph or a node
# ("Failed to create linear node 3, with code: xnn_status_invalid_parameter", "XNN
# Subgraph creation failed with code: ...", strings of libexecutorch_backend_xnnpack.so)
# and the runtime when a delegate does not initialise.
REJECTED = ("xnn_status_", "Failed to create", "creation failed", "XNN Initialize failed", "Init failed for backend", "DelegateInvalidHandle")


def check_generation(model_dir, x86_path, a64_path, err_path=None):
    x86, a64 = json.load(open(x86_path)), json.load(open(a64_path))
    failures = 0
    if x86["ids"] != a64["ids"]:
        print(f"FAIL prompt ids differ: x86-64 {x86['ids']} aarch64 {a64['ids']}")
        failures += 1
    manifest = json.load(open(f"{model_dir}/manifest.json"))
    programs = {p["name"]: p for p in manifest["programs"]}
    if err_path:
        for line in open(err_path, errors="replace"):
            if any(r in line for r in REJECTED):
                print(f"FAIL aarch64 stderr: {line.rstrip()}")
                failures += 1
    a64_by_name = {b["name"]: b for b in a64["backends"]}
    for want in x86["backends"]:
        name, got = want["name"], a64_by_name.get(want["name"])
        if not want["ok"] or got is None or not got["ok"]:
            why = f"x86-64: {want['error']}" if not want["ok"] else "missing" if got is None else f"aarch64: {got['error']}"
            print(f"FAIL {name:14} {why}")
            failures += 1
            continue
        lx, la = want["first_logits"], got["first_logits"]
        cos, diff = cosine(la, lx), max(abs(x - y) for x, y in zip(la, lx))
        ids_x, ids_a = want["generated_ids"], got["generated_ids"]
        same = ids_x == ids_a
        where = next((k for k, (p, q) in enumerate(zip(ids_a, ids_x)) if p != q), min(len(ids_a), len(ids_x)))
        min_cos, max_diff, need = GEN_BOUNDS[0], GEN_BOUNDS[1], len(ids_x)
        if name in BF16_COLUMNS:
            max_diff, need = 2 * bf16_step(lx), min(BF16_SAME_IDS, len(ids_x))
        same_enough = ids_a[:need] == ids_x[:need] and len(ids_a) == len(ids_x)
        ok = same_enough and len(la) == len(lx) and cos >= min_cos and diff <= max_diff
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:14} {len(ids_a)} ids {'the same' if same else f'DIFFER from new token {where} (the first {need} must agree)'}; "
              f"first logits vs x86-64 cosine {cos:.8f} (>= {min_cos}) max|diff| {diff:.2e} (<= {max_diff:g}); "
              f"TTFT {got['ttft_ms']:.1f} ms, {got['latency_ms']:.0f} ms in all, emulated")
        program = programs.get(name)
        if program and program.get("reference") and program.get("quantization") in PROGRAM_REFERENCE_BOUNDS:
            min_cos, max_diff = PROGRAM_REFERENCE_BOUNDS[program["quantization"]]
            sentences = {s["text"]: s for s in json.load(open(f"{model_dir}/{program['reference']}"))["sentences"]}
            ref = sentences.get(a64["text"])
            if ref is None:
                print(f"FAIL {name:14} the prompt {a64['text']!r} is not in {program['reference']}: use one of {sorted(sentences)}")
                failures += 1
                continue
            rcos, rdiff = cosine(la, ref["logits"]), max(abs(x - y) for x, y in zip(la, ref["logits"]))
            n = min(len(ids_a), len(ref["generated_ids"]))
            rok = ids_a[:n] == ref["generated_ids"][:n] and rcos >= min_cos and rdiff <= max_diff
            failures += not rok
            print(f"{'ok  ' if rok else 'FAIL'} {name:14} vs {program['reference']} (PyTorch, x86-64): first {n} ids "
                  f"{'the same' if ids_a[:n] == ref['generated_ids'][:n] else 'DIFFER'}; first logits cosine {rcos:.8f} (>= {min_cos}) "
                  f"max|diff| {rdiff:.2e} (<= {max_diff:g})")
    return failures


def main(argv):
    if len(argv) >= 5 and argv[0] == "run" and argv[1] == "--backends":
        failures = check_run(argv[3], argv[4:], set(argv[2].split(",")))
    elif len(argv) >= 3 and argv[0] == "run":
        failures = check_run(argv[1], argv[2:])
    elif len(argv) == 2 and argv[0] == "footprint":
        failures = check_footprint(argv[1])
    elif len(argv) in (4, 5) and argv[0] == "generation":
        failures = check_generation(*argv[1:])
    elif len(argv) == 3 and argv[0] == "same":
        failures = check_same(argv[1], argv[2])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
