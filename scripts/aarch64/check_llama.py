#!/usr/bin/env python3
"""make test-aarch64's llama.cpp check (issue 35): `run --json --first-logits` of the
llama.cpp columns on the same prompt, x86-64 (AVX2 kernels) against aarch64 under
qemu -cpu cortex-a76 (ggml built for armv8.2-a+dotprod+fp16: its dot-product and
Q4_0 repacked kernels). float32 must give the same greedy ids and first-step logits
within float rounding; Q8_0 and Q4_0 quantize the activations in their own kernels
per architecture, so their first-step logits must stay close (cosine) and their ids
are reported.

  check_llama.py X86.json AARCH64.json
"""
import json
import math
import sys


def rows(path):
    with open(path) as f:
        return {b["name"]: b for b in json.load(f)["backends"]}


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else float("nan")


def main():
    x86, arm = rows(sys.argv[1]), rows(sys.argv[2])
    failed = False
    for name, a in x86.items():
        b = arm.get(name)
        if b is None or not b.get("ok") or not a.get("ok"):
            print(f"error: {name}: not run on both ({b and b.get('error')})")
            failed = True
            continue
        same = a["generated_ids"] == b["generated_ids"]
        cos = cosine(a["first_logits"], b["first_logits"])
        diff = max(abs(x - y) for x, y in zip(a["first_logits"], b["first_logits"]))
        print(f"  {name}: ids {'the same' if same else 'DIFFER'} ({len(a['generated_ids'])} tokens), "
              f"first logits cosine {cos:.6f}, max |diff| {diff:.2e}")
        if name.endswith("f32") and (not same or cos < 0.99999):
            print(f"error: {name}: float32 must match x86-64")
            failed = True
        if cos < 0.99:
            print(f"error: {name}: the first-step logits part")
            failed = True
    sys.exit(1 if failed else 0)


main()
