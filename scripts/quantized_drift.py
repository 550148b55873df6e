"""How far the quantized XNNPACK programs are from the quantized model run by
PyTorch (torchao's reference kernels) on random models of published sizes: the
measurement behind verify.py's bounds for the check at export
(docs/quantization.md, "Checked at export").

    python scripts/quantized_drift.py [--sizes gpt2-124m,smollm2-135m] [--init-range 0.02,0.2]
                                     [--prompts 4] [--prompt-len 8] [--json OUT]

Each model is built from a transformers config with random weights (seeded; no
checkpoint, no tokenizer: the prompts are random ids), quantized as the export
does (quantize.quantized_copy, the group the export would pick), exported with
the static KV cache and lowered to XNNPACK (decoder.py), and its first-step
logits on each prompt compared with the quantized model's in PyTorch: cosine,
max|diff| and max|diff| over the reference's largest |logit|. For scale, the
same quantized model against float32 (the distance a program that skipped or
botched its quantization would show), and what share of verify.py's bounds
(QuantizedBounds) the program used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")

import torch  # noqa: E402

# The export package: python/runlens_export.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from runlens_export.decoder import CacheDecoder, export_with_cache, to_program  # noqa: E402
from runlens_export.files import say  # noqa: E402
from runlens_export.quantize import SCHEMES, load_quantized_kernels, pick_group_size, quantized_copy  # noqa: E402
from runlens_export.verify import QuantizedBounds, cosine  # noqa: E402

# Published sizes (config.json of each): class, config fields.
SIZES = {
    "gpt2-124m": ("GPT2", dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257)),
    "gpt2-40m": ("GPT2", dict(n_embd=640, n_layer=8, n_head=10, n_positions=1024, vocab_size=50257)),
    "smollm2-135m": ("Llama", dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                                   intermediate_size=1536, vocab_size=49152, max_position_embeddings=8192,
                                   tie_word_embeddings=True, rope_theta=100000.0)),
    "qwen2.5-0.5b": ("Qwen2", dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                                   intermediate_size=4864, vocab_size=151936, max_position_embeddings=32768,
                                   tie_word_embeddings=True, rope_theta=1000000.0)),
}


def build(size: str, init_range: float, seed: int) -> torch.nn.Module:
    import transformers

    family, fields = SIZES[size]
    config = getattr(transformers, f"{family}Config")(initializer_range=init_range, **fields)
    torch.manual_seed(seed)
    cls = transformers.GPT2LMHeadModel if family == "GPT2" else getattr(transformers, f"{family}ForCausalLM")
    config._attn_implementation = "eager"
    return cls(config).eval().requires_grad_(False)


def measure(model, scheme: str, prompts: list[list[int]], max_seq_len: int) -> list[dict]:
    from executorch.runtime import Runtime

    group = pick_group_size(model, None)[0] if SCHEMES[scheme].grouped else None
    qmodel = quantized_copy(model, SCHEMES[scheme], group)
    program, _ = to_program(export_with_cache(qmodel, max_seq_len), True)
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    rows = []
    for ids in prompts:
        got = CacheDecoder(method.execute, max_seq_len).prefill(ids).reshape(-1)
        with torch.no_grad():
            want = qmodel(input_ids=torch.tensor([ids])).logits[0, -1]
            flt = model(input_ids=torch.tensor([ids])).logits[0, -1]
        diff, bounds = float((got - want).abs().max()), QuantizedBounds.of(want, flt)
        rows.append({"scheme": scheme, "group_size": group, "len": len(ids), "cosine": cosine(got, want),
                     "max_diff": diff, "relative": diff / float(want.abs().max()),
                     "logits_max": float(want.abs().max()), "same_top1": int(got.argmax()) == int(want.argmax()),
                     "quantized_vs_float_cosine": cosine(want, flt),
                     "quantized_vs_float_max_diff": float((want - flt).abs().max()),
                     "allowed_min_cosine": 1.0 - bounds.drift, "allowed_max_diff": bounds.max_diff,
                     "used": max(diff / bounds.max_diff, (1.0 - cosine(got, want)) / bounds.drift)})
    return rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="gpt2-124m,smollm2-135m", help=f"comma list of {', '.join(SIZES)}")
    ap.add_argument("--init-range", default="0.02", help="comma list of weight std devs (0.02: transformers' default)")
    ap.add_argument("--schemes", default="int8-dynamic,8da4w")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=8)
    ap.add_argument("--max-seq-len", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", help="write every row here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_quantized_kernels()
    results = []
    for size in args.sizes.split(","):
        for init_range in [float(r) for r in args.init_range.split(",")]:
            model = build(size, init_range, args.seed)
            vocab = model.config.vocab_size
            gen = torch.Generator().manual_seed(args.seed)
            prompts = [torch.randint(0, vocab, (args.prompt_len,), generator=gen).tolist() for _ in range(args.prompts)]
            for scheme in args.schemes.split(","):
                say(f"{size}, weights std {init_range}: {scheme}")
                for row in measure(model, scheme, prompts, args.max_seq_len):
                    row = {"size": size, "init_range": init_range, **row}
                    results.append(row)
                    print(f"{size:13} std {init_range:<5} {scheme:13} len {row['len']:3}: cosine {row['cosine']:.7f} "
                          f"max|diff| {row['max_diff']:.2e} (relative {row['relative']:.2e}, |logits| <= "
                          f"{row['logits_max']:.1f}), top-1 {'same' if row['same_top1'] else 'DIFFERENT'}; "
                          f"quantized vs float32 cosine {row['quantized_vs_float_cosine']:.5f}, max|diff| "
                          f"{row['quantized_vs_float_max_diff']:.3f}; {row['used']:.0%} of verify.py's bounds", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(["python", *sys.argv]), "rows": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
