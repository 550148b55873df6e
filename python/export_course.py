"""Programs made the way other pipelines make them (Arm's course, "ExecuTorch
on Arm"), for `runlens --program NAME=FILE.pte` and its tests: from a
fill-mask checkpoint (a tiny random one in the tests), programs that follow the
conventions runlens drives besides its own, and two it cannot drive; from a
decoder checkpoint, the course's left-padded window programs (no cache).
Which set is written follows from the checkpoint's architecture
(runlens_export/archs/); what each program is: runlens_export/course.py.

    python python/export_course.py --model CHECKPOINT_DIR --out models/course [--len 32]
    python python/export_course.py --model GPT2_DIR --out models/course-gpt2 [--len 32] [--max-new-tokens 16]

Writes to OUT:
  fill-mask         at-mask.pte, per-position.pte, float-input.pte, rank4-output.pte
  text-generation   window.pte, window-per-position.pte
  and programs.json: what each program takes and returns, whether runlens can
  drive it, and transformers' outputs to compare with.

Each drivable program is run by ExecuTorch's Python runtime on those sentences
and must agree with transformers (the tolerances of python/export.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
warnings.filterwarnings("ignore", category=FutureWarning)

from runlens_export.checkpoint import Checkpoint  # noqa: E402
from runlens_export.course import MAX_NEW_TOKENS, fill_mask_course, generation_course  # noqa: E402
from runlens_export.files import ExportError  # noqa: E402


def main(argv: list[str], default_out: str = "models/course") -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a fill-mask or a decoder checkpoint directory")
    ap.add_argument("--out", type=Path, default=Path(default_out))
    ap.add_argument("--len", type=int, default=32, help="the programs' fixed sequence length (window)")
    ap.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS, help="text-generation: new tokens per prompt")
    args = ap.parse_args(argv)
    try:
        ckpt = Checkpoint.from_dir(args.model)
        if ckpt.arch is not None and ckpt.arch.decoder:
            return generation_course(ckpt, args.out, args.len, args.max_new_tokens)
        return fill_mask_course(ckpt, args.out, args.len)
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
