"""transformers' own greedy ids for the hub-layout checkpoints (tests/python/hub_layout.py),
computed in float32, for tests/hub_checkpoints.rs to hold every runlens column to.

    python tests/python/hub_reference.py --checkpoint DIR [--out FILE]

loads DIR as a user of transformers would who wants float32 from a bfloat16
checkpoint (`AutoModelForCausalLM.from_pretrained(DIR, dtype=torch.float32)`;
eager attention, as the export's programs compute it; the shards through their
index) and its tokenizer (`AutoTokenizer`: tokenizer.json, or converted from
tokenizer.model), and writes FILE (default DIR/hub_reference.json):

  sentences   per prompt of hub_layout.prompts (assets/prompts.txt raw and through
              the chat template, then a chat prompt of several hundred tokens):
              text, prompt_format, long, ids, and `generate(do_sample=False,
              max_new_tokens=24)`'s new ids (the end id included where it stopped),
              their text, and the end id it stopped at (null: it ran to 24)
  eos_token_ids   config.json's end ids, then generation_config.json's others
  source_dtype    config.json's dtype; `computed_in` the model's dtype here (float32)
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
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hub_layout import MAX_NEW_TOKENS, prompts  # noqa: E402


def as_ids(value) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, type=Path, help="a hub-layout checkpoint directory")
    ap.add_argument("--out", type=Path, help="the JSON to write (default CHECKPOINT/hub_reference.json)")
    args = ap.parse_args()
    config = json.loads((args.checkpoint / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    model = AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.float32, attn_implementation="eager").eval()
    if model.dtype != torch.float32:
        raise SystemExit(f"hub_reference: {args.checkpoint} loaded as {model.dtype}, not float32")
    eos = as_ids(config.get("eos_token_id"))
    eos += [i for i in as_ids(model.generation_config.eos_token_id) if i not in eos]
    pad = model.generation_config.pad_token_id
    # Pure argmax, as runlens' loop: transformers 5 fills every setting a call leaves
    # unset from the checkpoint's generation_config.json (Qwen2.5's repetition_penalty,
    # top_k), so a bare one stands in for it (as runlens_export.decoder.generate does).
    model.generation_config = transformers.GenerationConfig(eos_token_id=eos, pad_token_id=pad if pad is not None else eos[0])
    rows = []
    with torch.inference_mode():
        for p in prompts(tokenizer):
            ids = torch.tensor([p["ids"]])
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_NEW_TOKENS, do_sample=False,
                                 eos_token_id=eos, pad_token_id=pad if pad is not None else eos[0])
            new = out[0, ids.shape[1]:].tolist()
            stopped = new[-1] if new and new[-1] in eos else None
            prompt_text = tokenizer.decode(p["ids"], skip_special_tokens=True)
            text = tokenizer.decode(p["ids"] + new, skip_special_tokens=True)[len(prompt_text):]
            rows.append({**p, "generated_ids": new, "generated_text": text, "stopped_at": stopped})
    doc = {
        "checkpoint": args.checkpoint.name,
        "source_dtype": config.get("dtype"),
        "computed_in": str(model.dtype).removeprefix("torch."),
        "max_new_tokens": MAX_NEW_TOKENS,
        "eos_token_ids": eos,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "sentences": rows,
    }
    out = args.out or args.checkpoint / "hub_reference.json"
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out)
    stops = {i: sum(1 for r in rows if r["stopped_at"] == i) for i in eos}
    longest = max(len(r["ids"]) for r in rows)
    print(f"hub_reference: {len(rows)} prompts (the longest {longest} tokens), stopped at the end ids {stops}, in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
