"""`run --json`'s logits parity of text-generation columns, computed again in
Python, apart from runlens: transformers for the float32 reference and
ExecuTorch's own Python runtime (`_load_for_executorch`) for the programs.
tests/generation_parity.rs compares runlens' figures with these.

    python tests/python/generation_parity.py --model models/tiny-gpt2 --ids 270,386,511,365 \\
        --programs xnnpack,xnnpack-int8,xnnpack-8da4w --max-new-tokens 24

For the prompt ids given (runlens' `ids`, so both sides start from the same tokens):
  reference            transformers' model of the directory (config.json, model.safetensors,
                       attn_implementation="eager", float32), greedy for --max-new-tokens new
                       tokens (the whole sequence through the model for each), stopping after an
                       end-of-text id of the manifest: its new ids and the first step's logits.
  first_logits_cosine  per program: cosine (float64) of the program's prefill logits to the
                       reference's first-step logits.
  top1_agreement       per program: the prompt in one call, then the reference's new ids fed one
                       by one (teacher-forced, not the program's own picks); the fraction of
                       positions (one per reference new id) where the program's argmax is the
                       reference's id.
KV-cache programs (`cache: "static"`) take (input_ids [1, S], cache_position [S]) and, when their
attention reads only the filled cache (`attends: "filled"`), key_positions [F]; window
programs (`cache: null`) the sequence left-padded into their window with its mask
(docs/model-directory.md).

Output, one JSON object on stdout:
  {"ids": [...], "reference": {"generated_ids": [...]},
   "programs": {name: {"first_logits_cosine": float, "top1_agreement": float, "top1_positions": int}}}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
warnings.filterwarnings("ignore")

import torch  # noqa: E402

# The export package beside these scripts' folder: python/runlens_export.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from runlens_export.decoder import decoder_for, teacher_forced  # noqa: E402
from runlens_export.verify import cosine  # noqa: E402


def reference_generation(model_dir: Path, manifest: dict, ids: list[int], max_new: int):
    """transformers' greedy continuation (the whole sequence each step, no cache): new ids, first logits."""
    import transformers

    model = getattr(transformers, manifest["architecture"]).from_pretrained(
        str(model_dir), attn_implementation="eager", torch_dtype=torch.float32).eval()
    eos = set(manifest.get("eos_token_ids") or [])
    room = int(manifest["max_seq_len"]) - len(ids)
    new, first = [], None
    with torch.no_grad():
        while True:
            logits = model(input_ids=torch.tensor([ids + new])).logits[0, -1]
            first = logits if first is None else first
            token = int(torch.argmax(logits))
            new.append(token)
            if token in eos or len(new) >= min(max_new, room):
                break
    return new, first


def load_decoder(path: Path, entry: dict, max_len: int, pad_id: int):
    """One program through ExecuTorch's Python runtime, driven as the export's check drives it."""
    import executorch.kernels.quantized  # noqa: F401  the quantized embeddings' kernels (not loaded by default)
    from executorch.extension.pybindings import portable_lib

    module = portable_lib._load_for_executorch(str(path))
    return decoder_for(entry, lambda name: (lambda inputs: module.run_method(name, tuple(inputs))), max_len, pad_id)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a text-generation model directory")
    ap.add_argument("--ids", required=True, help="the prompt's token ids, comma-separated (runlens' `ids`)")
    ap.add_argument("--programs", required=True, help="program names of the manifest, comma-separated")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    manifest = json.loads((args.model / "manifest.json").read_text())
    if manifest.get("task") != "text-generation":
        print(f"error: {args.model} is a {manifest.get('task')} model; this measures text-generation", file=sys.stderr)
        return 2
    programs = {p["name"]: p for p in manifest["programs"]}
    names = [n for n in args.programs.split(",") if n]
    missing = [n for n in names if n not in programs]
    if missing:
        print(f"error: {args.model} has no program {', '.join(missing)}; it has {', '.join(programs)}", file=sys.stderr)
        return 2
    try:
        ids = [int(x) for x in args.ids.split(",") if x.strip()]
    except ValueError:
        print(f"error: --ids takes comma-separated integers, not {args.ids!r}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    from executorch.extension.pybindings import portable_lib

    portable_lib._unsafe_reset_threadpool(args.threads)

    reference, first = reference_generation(args.model, manifest, ids, args.max_new_tokens)
    max_len, pad_id = int(manifest["max_seq_len"]), int(manifest.get("pad_token_id") or 0)
    out = {"ids": ids, "reference": {"generated_ids": reference}, "programs": {}}
    for name in names:
        decoder = load_decoder(args.model / programs[name]["file"], programs[name], max_len, pad_id)
        first_program, picks = teacher_forced(decoder, ids, reference)
        agreed = sum(int(p == t) for p, t in zip(picks, reference))
        out["programs"][name] = {
            "first_logits_cosine": cosine(first_program, first),
            "top1_agreement": agreed / len(reference),
            "top1_positions": len(reference),
        }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
