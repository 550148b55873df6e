"""Python counterparts of runlens' generation bench (issue 14): time to first
token and decode speed of a text-generation model directory, the way a Python
user drives it. Run by `runlens bench` in the same session, or alone:

    python python/bench_generate.py --model models/gpt2-random --backends eager,portable,xnnpack,xnnpack-nocache \\
        --prompt-lens 8,32,128 --gen-tokens 32 --iters 3 --threads 2 --json OUT.json

Backends:
  eager       transformers' `generate` on the checkpoint in the directory (config.json,
              model.safetensors; attn_implementation="eager"), greedy: do_sample=False,
              use_cache=True (its own DynamicCache), min_new_tokens = max_new_tokens =
              --gen-tokens so it never stops early; a streamer stamps each new token.
  eager-int8  the same with every linear layer (the head included) on ATen's packed kernels,
  eager-int4  `_weight_int8pack_mm` / `_weight_int4pack_mm_for_cpu`, called from Python as
              runlens' columns call them (tests/python/eager_quant_reference.py `quantize_linears`):
              torchao 0.18's weight-only configs have no packed CPU path (int8 dequantizes
              to bfloat16 and runs aten::mm; int4 asks for CUDA or mslk).
  a program   any program name of the manifest (portable, portable-nocache, xnnpack,
              xnnpack-nocache, ...): ExecuTorch's `_load_for_executorch` on its file and a
              Python greedy loop (argmax in torch). KV-cache programs (`cache: "static"`):
              one prefill call with the prompt at positions 0..n-1, then one call per token;
              window programs (`cache: null`): the sequence left-padded to the window, the
              whole window per token. It never stops at the end-of-text id either.
  an ONNX     a decoder's ONNX file named with --onnx NAME=PATH (runlens passes each ONNX
  file        column's): ONNX Runtime's Python package, its session opened as runlens' column
              opens one (bench_python.py's `onnx_session`), the layout read from the graph as
              the column reads it (src/backend/onnxruntime/decoder.rs): one run for the prompt
              with empty pasts, then one a token with the presents fed back as the pasts
              (`use_cache_branch` false, then true, in Optimum's merged file).

Prompts are exactly N tokens for each N of --prompt-lens: the ids of assets/prompts.txt
and assets/corpus.txt (the directory's tokenizer.json), repeated as needed. A prompt
length that leaves no room for --gen-tokens (N + gen - 1 > max_seq_len) is skipped and
listed under "skipped". Each (backend, prompt length) runs --warmup untimed generations
(default 1), then --iters timed ones.

Timing (the same definitions as runlens' `greedy`):
  ttft_ms               from the prompt going in to the first new id out: prefill + argmax
                        (eager: `generate` called to the streamer receiving the first new token)
  decode_tokens_per_s   (gen_tokens - 1) / the time from the first new token to the last

Output (--json OUT, and a summary table on stderr):
  {"rows": [{"backend": "eager" | program name, "runtime": "python", "prompt_len": int,
             "gen_tokens": int, "ttft_ms": [float per iter], "decode_tokens_per_s": [float per iter]}],
   "torch": str, "transformers": str, "executorch": str, "python": str, "threads": int,
   "model": DIR, "weights": str, "skipped": [{"backend", "prompt_len", "why"}],
   "interrupted": bool}
Ctrl-C stops and still writes what was measured. The models made here have random
weights: the timings depend on the shapes only (layers, width, vocabulary, lengths).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from runlens_export.decoder import decoder_for  # noqa: E402

ASSETS = Path(__file__).resolve().parents[1] / "assets"
PROMPT_TEXTS = ("prompts.txt", "corpus.txt")


def log(msg: str) -> None:
    print(f"[bench_generate] {msg}", file=sys.stderr, flush=True)


def prompt_of(tokenizer_json: Path, n: int) -> list[int]:
    """Exactly n ids: the assets text's tokens, repeated."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    text = "\n".join(
        line.strip() for name in PROMPT_TEXTS for line in (ASSETS / name).read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    )
    ids = tok.encode(text, add_special_tokens=False).ids
    if not ids:
        raise SystemExit(f"error: {tokenizer_json} encodes the assets text to no tokens")
    return (ids * (n // len(ids) + 1))[:n]


class FirstAndLast:
    """A transformers streamer that stamps the first and the last new token."""

    def __init__(self):
        self.prompt_seen, self.first, self.last, self.count = False, None, None, 0

    def put(self, value):
        if not self.prompt_seen:  # generate() puts the prompt first
            self.prompt_seen = True
            return
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        self.last = now
        self.count += value.numel()

    def end(self):
        pass


def eager_run(model, prompt: list[int], gen: int) -> tuple[float, float]:
    ids = torch.tensor([prompt], dtype=torch.long)
    mask = torch.ones_like(ids)
    streamer = FirstAndLast()
    eos = model.config.eos_token_id  # an id or, for Llama 3, a list of them
    pad = eos[0] if isinstance(eos, (list, tuple)) else eos
    with torch.inference_mode():
        t0 = time.perf_counter()
        model.generate(ids, attention_mask=mask, do_sample=False, use_cache=True, max_new_tokens=gen,
                       min_new_tokens=gen, streamer=streamer, pad_token_id=pad)
    if streamer.count != gen:
        raise RuntimeError(f"generate gave {streamer.count} new tokens, not {gen}")
    return (streamer.first - t0) * 1e3, rate(gen, streamer.last - streamer.first)


def program_run(decoder, prompt: list[int], gen: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    token = int(torch.argmax(decoder.prefill(prompt).reshape(-1)))
    first = time.perf_counter()
    for _ in range(gen - 1):
        token = int(torch.argmax(decoder.step(token).reshape(-1)))
    last = time.perf_counter()
    return (first - t0) * 1e3, rate(gen, last - first)


class OnnxDecoder:
    """A decoder's ONNX file (past_key_values.{i}.key/value in, present.{i}.* and logits
    out) driven as runlens' ONNX Runtime column drives it."""

    def __init__(self, path: str, threads: int):
        from bench_python import onnx_session

        self.session = onnx_session(path, threads)
        self.inputs = {i.name: i for i in self.session.get_inputs()}
        self.pasts = [n for n in self.inputs if n.startswith("past_key_values.")]
        if "input_ids" not in self.inputs or not self.pasts:
            raise SystemExit(f"error: {path} is not a decoder's ONNX file with its KV cache as inputs "
                             f"(its inputs: {', '.join(self.inputs)})")
        self.outputs = ["logits"] + [n.replace("past_key_values.", "present.", 1) for n in self.pasts]
        self.past, self.filled = None, 0

    def run(self, tokens: list[int]) -> torch.Tensor:
        import numpy as np

        s, filled = len(tokens), self.filled
        feeds = {"input_ids": np.array([tokens], dtype=np.int64), "attention_mask": np.ones((1, filled + s), dtype=np.int64)}
        if "position_ids" in self.inputs:
            feeds["position_ids"] = np.arange(filled, filled + s, dtype=np.int64)[None, :]
        if "use_cache_branch" in self.inputs:
            feeds["use_cache_branch"] = np.array([self.past is not None])
        if self.past is None:
            for name in self.pasts:
                _, heads, _, width = self.inputs[name].shape
                dtype = np.float16 if self.inputs[name].type == "tensor(float16)" else np.float32
                feeds[name] = np.zeros((1, heads, 0, width), dtype=dtype)
        else:
            feeds.update(zip(self.pasts, self.past))
        result = self.session.run(self.outputs, feeds)
        self.past, self.filled = result[1:], filled + s
        return torch.from_numpy(result[0][0, -1].astype(np.float32))

    def prefill(self, prompt: list[int]) -> torch.Tensor:
        self.past, self.filled = None, 0
        return self.run(list(prompt))

    def step(self, token: int) -> torch.Tensor:
        return self.run([token])


def rate(gen: int, seconds: float) -> float:
    return (gen - 1) / seconds if gen > 1 and seconds > 0 else 0.0


def versions() -> dict:
    from importlib.metadata import version

    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "executorch": version("executorch"), "onnxruntime": version("onnxruntime"),
            "python": platform.python_version()}


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a text-generation model directory (manifest.json)")
    ap.add_argument("--backends", default="eager,portable,portable-nocache,xnnpack,xnnpack-nocache",
                    help="comma list: eager and program names of the manifest (default all)")
    ap.add_argument("--prompt-lens", default="8,32,128")
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--onnx", action="append", default=[], metavar="NAME=PATH",
                    help="a decoder's ONNX file run as backend NAME (repeatable)")
    ap.add_argument("--json", type=Path, help="write the results here (default: stdout)")
    return ap.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        manifest = json.loads((args.model / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"error: cannot read {args.model}/manifest.json: {e} (a model directory from python/export.py)", file=sys.stderr)
        return 2
    if manifest.get("task") != "text-generation":
        print(f"error: {args.model} is a {manifest.get('task')!r} directory; bench_generate.py times text-generation "
              "(python/export.py --task text-generation)", file=sys.stderr)
        return 2
    programs = {p["name"]: p for p in manifest["programs"]}
    onnx_files = dict(o.split("=", 1) for o in args.onnx if "=" in o)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    eager_formats = {"eager": None, "eager-int8": "int8", "eager-int4": "int4"}
    unknown = [b for b in backends if b not in eager_formats and b not in programs and b not in onnx_files]
    if unknown or not backends:
        print(f"error: --backends {args.backends!r}: unknown {', '.join(unknown) or '(empty)'}; "
              f"choose from eager, eager-int8, eager-int4, {', '.join(programs)}", file=sys.stderr)
        return 2
    try:
        lens = [int(n) for n in args.prompt_lens.split(",") if n.strip()]
    except ValueError:
        lens = []
    if not lens or min(lens) < 1 or args.gen_tokens < 1 or args.iters < 1:
        print("error: --prompt-lens takes a comma list of positive ints; --gen-tokens and --iters at least 1", file=sys.stderr)
        return 2

    torch.set_num_threads(args.threads)
    max_len = int(manifest["max_seq_len"])
    pad_id = int(manifest.get("pad_token_id") or 0)
    prompts = {n: prompt_of(args.model / manifest.get("tokenizer", "tokenizer.json"), n) for n in lens}
    out = {"rows": [], **versions(), "threads": args.threads, "model": str(args.model),
           "weights": "random (tests/python/tiny_checkpoint.py): timings depend on the shapes only",
           "skipped": [], "interrupted": False}
    try:
        for backend in backends:
            t0 = time.perf_counter()
            if backend in eager_formats:
                import transformers

                model = getattr(transformers, manifest["architecture"]).from_pretrained(
                    str(args.model), dtype=torch.float32, attn_implementation="eager").eval()  # float32 as runlens' eager, whatever the checkpoint's dtype
                if eager_formats[backend]:
                    from eager_quant_reference import quantize_linears

                    group = next((p.get("group_size") for p in programs.values() if p.get("bits") == 4 and p.get("group_size")), 128)
                    quantize_linears(model, eager_formats[backend], group, packed=True)

                def run(prompt, model=model):
                    return eager_run(model, prompt, args.gen_tokens)
            elif backend in onnx_files:
                onnx_decoder = OnnxDecoder(onnx_files[backend], args.threads)

                def run(prompt, decoder=onnx_decoder):
                    return program_run(decoder, prompt, args.gen_tokens)
            else:
                import executorch.kernels.quantized  # noqa: F401  the quantized embeddings' kernels (not loaded by default)
                from executorch.extension.pybindings import portable_lib

                portable_lib._unsafe_reset_threadpool(args.threads)
                module = portable_lib._load_for_executorch(str(args.model / programs[backend]["file"]))
                decoder = decoder_for(programs[backend], lambda name, module=module: (
                    lambda inputs: module.run_method(name, inputs)), max_len, pad_id)

                def run(prompt, decoder=decoder):
                    return program_run(decoder, prompt, args.gen_tokens)
            log(f"{backend}: loaded in {(time.perf_counter() - t0) * 1e3:.0f} ms")
            for n in lens:
                if n + args.gen_tokens - 1 > max_len:
                    why = f"{n} + {args.gen_tokens} new tokens do not fit in max_seq_len {max_len}"
                    out["skipped"].append({"backend": backend, "prompt_len": n, "why": why})
                    log(f"{backend} prompt {n}: skipped ({why})")
                    continue
                for _ in range(args.warmup):
                    run(prompts[n])
                row = {"backend": backend, "runtime": "python", "prompt_len": n, "gen_tokens": args.gen_tokens,
                       "ttft_ms": [], "decode_tokens_per_s": []}
                out["rows"].append(row)
                for _ in range(args.iters):
                    ttft, tps = run(prompts[n])
                    row["ttft_ms"].append(ttft)
                    row["decode_tokens_per_s"].append(tps)
                log(f"{backend:16} prompt {n:4}: TTFT median {statistics.median(row['ttft_ms']):9.2f} ms, "
                    f"decode median {statistics.median(row['decode_tokens_per_s']):8.2f} tokens/s ({args.iters} iters)")
    except KeyboardInterrupt:
        out["interrupted"] = True
    text = json.dumps(out, indent=1) + "\n"
    if args.json:
        args.json.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
