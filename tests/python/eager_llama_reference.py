"""What transformers computes for tiny Llama-family checkpoints, for the eager
Llama / Qwen2 / Qwen3 decoders' tests (tests/eager_llama.rs).

    python tests/python/eager_llama_reference.py --out models/eager-llama [--arch llama,qwen2,qwen3] [--seed 0]
    python tests/python/eager_llama_reference.py --checkpoint DIR --out DIR/eager-reference.json

The first form builds one checkpoint per architecture from a config here
(random weights, seeded; sizes unlike any published model) into OUT/<arch>/,
written by `save_pretrained` (config.json and model.safetensors), and writes
OUT/<arch>/reference.json beside it. The second writes the reference for a
checkpoint that exists already (tests/python/tiny_checkpoint.py's, say).

The checkpoints and what each one checks:
  llama  LlamaForCausalLM: grouped-query attention (6 heads, 2 KV heads), an
         untied head, `llama3` rope scaling with frequencies in all three bands
         (kept, smoothed, divided), config.json in the Llama 3.2 style
         (`rope_scaling` and `rope_theta` at the top, no `head_dim`)
  qwen2  Qwen2ForCausalLM: q/k/v biases, one KV head, tied head, `rope_theta`
         at the top and `rope_scaling: null` (the Qwen2.5 style)
  qwen3  Qwen3ForCausalLM: per-head q/k RMSNorm, head_dim 12 with hidden 32 /
         4 heads, `linear` rope scaling, config.json as transformers 5 writes it
         (`rope_parameters`)
Biases and RMSNorm weights are drawn at random too (transformers initialises
them to 0 and 1, which would not show a decoder that ignores them), and the
initializer range is wide so that the greedy token wins by a clear margin.

reference.json: {"arch", "model_type", "inv_freq", "prompts": [{"ids", "last_logits",
"greedy", "final_logits", "min_top2_gap"}]}: the prompt's ids (seeded random
ids, lengths 1, 7 and 20), the logits of the next token after the prompt (the
prefill), `generate(do_sample=False)`'s new ids (10, no end-of-text stop), the
logits that chose the last of them (a forward over prompt + greedy[:-1]), and
the smallest gap between the top two logits over those greedy steps;
`inv_freq` is the rotary embedding's buffer (the inverse frequencies). The
script fails if that gap is below MIN_GAP: then a greedy comparison could
depend on float noise; pick another --seed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

# What a config means (rotary settings in either spelling, head_dim) is read from the export's
# architecture files, python/runlens_export/archs/, not written again here.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from runlens_export.archs import head_dim_of  # noqa: E402
from runlens_export.archs.rope import rope_of  # noqa: E402

ARCHS = ("llama", "qwen2", "qwen3")
PROMPT_LENS = (1, 7, 20)
NEW_TOKENS = 10
MIN_GAP = 1e-3
INIT_RANGE = 0.2


def configs():
    import transformers as tf

    return {
        "llama": tf.LlamaConfig(
            vocab_size=320, hidden_size=48, intermediate_size=80, num_hidden_layers=2,
            num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=128,
            rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=INIT_RANGE,
            rope_theta=5000.0,
            rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        ),
        "qwen2": tf.Qwen2Config(
            vocab_size=288, hidden_size=40, intermediate_size=72, num_hidden_layers=2,
            num_attention_heads=5, num_key_value_heads=1, max_position_embeddings=256,
            rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=INIT_RANGE,
            rope_theta=1_000_000.0,
        ),
        "qwen3": tf.Qwen3Config(
            vocab_size=352, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=12, max_position_embeddings=128,
            rms_norm_eps=1e-6, tie_word_embeddings=False, initializer_range=INIT_RANGE,
            rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 20000.0},
        ),
    }


def legacy_config(arch: str, path: Path) -> None:
    """Rewrite config.json the way checkpoints saved by transformers 4 are (what a download has)."""
    cfg = json.loads(path.read_text())
    rope = cfg.pop("rope_parameters")
    theta = rope.pop("rope_theta")
    if arch == "llama":
        cfg.pop("head_dim")  # TinyLlama's config has none: hidden / heads
        cfg["rope_scaling"] = rope
    else:
        cfg["rope_scaling"] = None
    cfg["rope_theta"] = theta
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def build(arch: str, seed: int, out: Path):
    import transformers as tf

    cls = {"llama": tf.LlamaForCausalLM, "qwen2": tf.Qwen2ForCausalLM, "qwen3": tf.Qwen3ForCausalLM}[arch]
    torch.manual_seed(seed)
    model = cls(configs()[arch]).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, INIT_RANGE)
            elif "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    if arch in ("llama", "qwen2"):
        legacy_config(arch, out / "config.json")


def last_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1]


def reference(checkpoint: Path, seed: int) -> dict:
    from transformers import AutoModelForCausalLM

    # The model as transformers reads it back from the files, eager attention, float32.
    model = AutoModelForCausalLM.from_pretrained(str(checkpoint), attn_implementation="eager", dtype=torch.float32).eval()
    cfg = model.config
    gen = torch.Generator().manual_seed(seed + 1)
    prompts = []
    for n in PROMPT_LENS:
        ids = torch.randint(0, cfg.vocab_size, (n,), generator=gen).tolist()
        with torch.no_grad():
            out = model.generate(
                torch.tensor([ids]), attention_mask=torch.ones(1, n, dtype=torch.long), do_sample=False,
                max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0,
                output_logits=True, return_dict_in_generate=True,
            )
        greedy = out.sequences[0, n:].tolist()
        assert len(greedy) == NEW_TOKENS, f"generate stopped early: {greedy}"
        gaps = [float(torch.topk(step[0], 2).values.diff().abs()) for step in out.logits]
        gap = min(gaps)
        if gap < MIN_GAP:
            raise SystemExit(f"{checkpoint}: prompt {ids}: top-2 gap {gap:.2e} < {MIN_GAP}: try another --seed")
        prefill = last_logits(model, ids)
        final = last_logits(model, ids + greedy[:-1])
        # generate's own logits are the same forward passes (with its cache).
        assert torch.allclose(out.logits[0][0], prefill, atol=1e-4), "generate's first logits differ from a forward"
        assert int(final.argmax()) == greedy[-1]
        prompts.append({
            "ids": ids, "last_logits": prefill.tolist(), "greedy": greedy,
            "final_logits": final.tolist(), "min_top2_gap": gap,
        })
    # The rotary embedding's inverse frequencies as transformers' rope init function made them.
    inv_freq = model.model.rotary_emb.inv_freq
    return {"arch": type(model).__name__, "model_type": cfg.model_type, "inv_freq": inv_freq.tolist(), "prompts": prompts}


def llama3_bands(ref: dict, cfg: dict) -> None:
    """The llama checkpoint's frequencies must fall in all three of llama3's bands (kept, smoothed, divided)."""
    import math

    rope = rope_of(cfg)
    theta, dim = rope["rope_theta"], head_dim_of(cfg, cfg["hidden_size"], cfg["num_attention_heads"])
    old = rope["original_max_position_embeddings"]
    wavelens = [2 * math.pi * theta ** (i / dim) for i in range(0, dim, 2)]
    bands = {"kept": [w < old / rope["high_freq_factor"] for w in wavelens],
             "divided": [w > old / rope["low_freq_factor"] for w in wavelens]}
    bands["smoothed"] = [not (k or d) for k, d in zip(bands["kept"], bands["divided"])]
    missing = [name for name, flags in bands.items() if not any(flags)]
    assert not missing, f"llama3 bands without a frequency: {missing} (wavelengths {wavelens})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the parent of the checkpoints; with --checkpoint, the JSON file")
    ap.add_argument("--arch", default=",".join(ARCHS), help=f"a comma list of {', '.join(ARCHS)}")
    ap.add_argument("--checkpoint", type=Path, help="write the reference of this checkpoint instead of building any")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.checkpoint:
        ref = reference(args.checkpoint, args.seed)
        args.out.write_text(json.dumps(ref) + "\n")
        print(f"eager_llama_reference: {ref['arch']} of {args.checkpoint} -> {args.out}")
        return 0
    archs = [a.strip() for a in args.arch.split(",") if a.strip()]
    if not archs or any(a not in ARCHS for a in archs):
        ap.error(f"--arch {args.arch}: choose from {', '.join(ARCHS)}")
    for arch in archs:
        out = args.out / arch
        build(arch, args.seed, out)
        ref = reference(out, args.seed)
        if arch == "llama":
            llama3_bands(ref, json.loads((out / "config.json").read_text()))
        (out / "reference.json").write_text(json.dumps(ref) + "\n")
        gap = min(p["min_top2_gap"] for p in ref["prompts"])
        print(f"eager_llama_reference: {ref['arch']} (seed {args.seed}, random weights, top-2 gap >= {gap:.3f}) in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
