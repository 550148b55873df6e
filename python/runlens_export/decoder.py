"""The programs of a `text-generation` directory (a decoder of archs/) and the greedy loops
that drive them (verify, bench_generate.py, course.py).

Two kinds of program (docs/model-directory.md, "text-generation"):

  KV cache (`cache: "static"`)   forward(input_ids int64 [1, S] (S 1..C), cache_position int64 [S],
                                 key_positions int64 [F] (F 1..L))
                                 -> float32 [1, V]: the logits of the last input position.
      The keys and values of every layer live in the program as mutable buffers
      of length L (static_cache.py: keys stored transposed, written in place at
      `cache_position` by standard ops, attention as bmm on the buffers, no copy
      of a whole cache per call). key_positions is 0..F-1 with F = the last
      position written + 1: attention reads those F entries only (its shape
      carries the filled length), so a step costs what the filled part needs,
      not L (`attends: "filled"` in the manifest). A call takes at most C =
      min(L, PREFILL_CHUNK) new tokens (`prefill_chunk`): a longer prompt is fed in
      chunks, as ExecuTorch's LLM runner does, so the memory the program plans for
      a prefill's attention scores (heads x C x L floats) stays small at a long
      context instead of growing with L x L. The causal mask hides every
      entry after the query's position, so a new prompt simply starts again at
      position 0. The buffers start as zeros (InitializedMutableBufferPass).
  window (`cache: null`)         forward(input_ids int64 [1, L], attention_mask int64 [1, L])
                                 -> float32 [1, V]: the logits of position L-1.
      The course's way: the sequence left-padded with the pad id into a window of
      L, mask 0 on the padding; positions come from the mask (cumsum - 1), so the
      real tokens get 0..n-1 and the result equals transformers on the unpadded
      sequence. Every new token recomputes the whole window.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from .archs import arch_and_geometry
from .files import ExportError, release_memory, say, write_atomic, write_program
from .lowering import XNNPACK, lower
from .manifest import program_entry
from .static_cache import CACHE_BUFFERS, StaticKV, attention_for_export


class DecoderWithStaticCache(torch.nn.Module):
    """A causal LM with a static KV cache of `max_len` positions held as buffers
    (static_cache.py: its layout, its writes, its attention). Traced only inside
    `attention_for_export` (export_with_cache), which makes the model's attention
    modules call static_cache.attend."""

    def __init__(self, model: torch.nn.Module, max_len: int):
        super().__init__()
        arch, geometry = arch_and_geometry(model)
        self.model = arch.prepare(model)
        # One sequence; num_key_value_heads x head_dim per layer, as the architecture's config says.
        self.cache = StaticKV(geometry.layers, geometry.kv_heads, geometry.head_dim, max_len, model.dtype)

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
        # transformers keeps no cache of its own (use_cache=False): the attention writes
        # self.cache and reads its first len(key_positions) entries, handed down with the
        # positions and the mask.
        kwargs = self.cache.call_kwargs(cache_position, key_positions, self.cache.key_cache_0.dtype)
        out = self.model(input_ids=input_ids, use_cache=False, position_ids=cache_position.unsqueeze(0),
                         logits_to_keep=1, **kwargs)
        return out.logits[:, -1, :]  # [1, V]


class DecoderWindow(torch.nn.Module):
    """A causal LM over a left-padded window: the last position's logits [1, V]
    (or every position's, [1, L, V], with `per_position`)."""

    def __init__(self, model: torch.nn.Module, per_position: bool = False):
        super().__init__()
        arch, _ = arch_and_geometry(model)
        self.model, self.per_position = arch.prepare(model), per_position

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         use_cache=False, logits_to_keep=0 if self.per_position else 1)
        return out.logits if self.per_position else out.logits[:, -1, :]


@dataclass(frozen=True)
class DecoderProgramSpec:
    name: str
    title: str
    column: str
    delegate: str | None
    # Where the KV cache lives: "static" (mutable buffers inside the program, static_cache.py),
    # "inputs" (the caller's, handed in and out: cache_inputs.py), None (no cache: a window).
    cache: str | None
    quantization: str | None = None  # a scheme of quantize.py (None: float32 weights)

    @property
    def file(self) -> str:
        return f"{self.name}.pte"

    @property
    def modules_file(self) -> str:
        return f"{self.name}.modules.json"

    def about(self, max_seq_len: int, group_size: int | None = None) -> str:
        on = ("XnnpackPartitioner: supported subgraphs on XNNPACK, the rest on the default kernels"
              if self.delegate else "no delegate: every operator on ExecuTorch's default CPU kernels")
        if self.cache == "static":
            how = (f"KV cache of {max_seq_len} positions inside the program (static, mutable buffers on the default "
                   f"kernels), attention over the filled part only; prompt in one call, then one token per call")
        elif self.cache == "inputs":
            how = (f"KV cache of {max_seq_len} positions held by the caller and read in place as the program's "
                   f"inputs (not memory-planned), new entries returned; methods prefill (a chunk) and forward "
                   f"(one token)")
        else:
            how = (f"no cache: a left-padded window of {max_seq_len} tokens, the whole window recomputed for "
                   f"every new token (the course's way)")
        if self.quantization:
            from .quantize import SCHEMES

            return f"{SCHEMES[self.quantization].describe(group_size)}; {how}; {on}"
        return f"{how}; {on}"

    def manifest_entry(self, max_seq_len: int, group_size: int | None = None) -> dict:
        fields = {
            "fixed_len": None if self.cache else max_seq_len,
            "cache": self.cache,
            # What its attention reads: the filled part of the cache (key_positions' length).
            "attends": "filled" if self.cache else None,
            # The most new tokens a call takes (a longer prompt goes in chunks).
            "prefill_chunk": prefill_chunk(max_seq_len) if self.cache else None,
            "modules": self.modules_file,
        }
        if self.quantization:
            from .quantize import SCHEMES, embedding_fields, float_parts

            fields.update({
                "bits": SCHEMES[self.quantization].bits,
                "activation_bits": 8,
                "group_size": group_size if self.quantized_in_groups else None,
                "float": float_parts(),
                **embedding_fields(SCHEMES[self.quantization]),
                # Written by the check at export (verify.py): this program's greedy ids on the
                # prompts from the same quantized model run by PyTorch, in reference.json's format.
                "reference": self.reference_file,
            })
        return program_entry(self.name, self.file, self.title, self.column,
                             about=self.about(max_seq_len, group_size if self.quantized_in_groups else None),
                             delegate=self.delegate, quantization=self.quantization, **fields)

    @property
    def quantized_in_groups(self) -> bool:
        from .quantize import SCHEMES

        return self.quantization is not None and SCHEMES[self.quantization].grouped

    @property
    def reference_file(self) -> str:
        return f"{self.name}.reference.json"


GENERATION_PROGRAMS: dict[str, DecoderProgramSpec] = {
    p.name: p
    for p in (
        DecoderProgramSpec("portable", "ExecuTorch portable", "portable", None, "static"),
        DecoderProgramSpec("portable-nocache", "ExecuTorch portable, no cache", "portable", None, None),
        DecoderProgramSpec("xnnpack", "ExecuTorch XNNPACK", "xnnpack", XNNPACK, "static"),
        DecoderProgramSpec("xnnpack-nocache", "ExecuTorch XNNPACK, no cache", "xnnpack-nocache", XNNPACK, None),
        DecoderProgramSpec("xnnpack-int8", "ExecuTorch XNNPACK, 8-bit weights", "xnnpack", XNNPACK, "static", "int8-dynamic"),
        DecoderProgramSpec("xnnpack-8da4w", "ExecuTorch XNNPACK, 4-bit weights", "xnnpack", XNNPACK, "static", "8da4w"),
        # The same three with the cache as inputs (cache_inputs.py): opt-in until they are measured
        # against the static ones in one run (docs/kv-cache.md).
        DecoderProgramSpec("xnnpack-kvin", "ExecuTorch XNNPACK, cache as inputs", "xnnpack", XNNPACK, "inputs"),
        DecoderProgramSpec("xnnpack-int8-kvin", "ExecuTorch XNNPACK, 8-bit weights, cache as inputs", "xnnpack",
                           XNNPACK, "inputs", "int8-dynamic"),
        DecoderProgramSpec("xnnpack-8da4w-kvin", "ExecuTorch XNNPACK, 4-bit weights, cache as inputs", "xnnpack",
                           XNNPACK, "inputs", "8da4w"),
    )
}
# What an export writes when --programs is not given: what a Pi user runs, the
# KV-cache programs in float32 (portable, xnnpack) and quantized (xnnpack-int8,
# xnnpack-8da4w). The window programs recompute the whole window per token (the
# portable one would take hours a reply at SmolLM2's sizes): opt-in with --programs.
DEFAULT_GENERATION_PROGRAMS = tuple(n for n, p in GENERATION_PROGRAMS.items() if p.cache == "static")


# The most new tokens a KV-cache program takes in one call: longer prompts go in chunks.
# 256 keeps a prefill's planned attention scores at heads x 256 x L floats (Qwen2.5-0.5B,
# L = 2048: 29 MB a score tensor instead of 235 MB for S = L) while a prompt of up to
# 256 tokens, most chat turns, is still one call.
PREFILL_CHUNK = 256


def prefill_chunk(max_len: int) -> int:
    return min(max_len, PREFILL_CHUNK)


def export_with_cache(model: torch.nn.Module, max_len: int):
    """torch.export of DecoderWithStaticCache, S (the new tokens, 1..prefill_chunk)
    and F (the filled length, 1..max_len) dynamic apart: the example continues a sequence (3 new
    tokens after 2) so that neither is specialised to the other. strict=True, as
    transformers' integration does: the non-strict trace of the in-place cache
    updates fails later in to_edge's decompositions."""
    wrapper = DecoderWithStaticCache(model, max_len).eval()
    seq = torch.export.Dim("seq", min=1, max=prefill_chunk(max_len))
    filled = torch.export.Dim("filled", min=1, max=max_len)
    f = min(5, max_len)
    n = max(1, min(3, f - 1, prefill_chunk(max_len)))
    example = (torch.zeros(1, n, dtype=torch.long), torch.arange(f - n, f, dtype=torch.long), torch.arange(f, dtype=torch.long))
    with attention_for_export(model):
        return torch.export.export(wrapper, example, dynamic_shapes=({1: seq}, {0: seq}, {0: filled}), strict=True)


def export_window(model: torch.nn.Module, length: int, per_position: bool = False):
    wrapper = DecoderWindow(model, per_position).eval()
    example = (torch.zeros(1, length, dtype=torch.long), torch.ones(1, length, dtype=torch.long))
    return torch.export.export(wrapper, example, strict=False)


def export_for(cache: str | None, model: torch.nn.Module, max_len: int, what: str):
    """torch.export of `model` as a program keeps its cache (`DecoderProgramSpec.cache`):
    an ExportedProgram, or {method: ExportedProgram} for the cache as inputs."""
    if cache == "static":
        say(f"torch.export of {what} with a static KV cache of {max_len}, input length dynamic 1..{prefill_chunk(max_len)}")
        return export_with_cache(model, max_len)
    if cache == "inputs":
        from .cache_inputs import export_methods

        say(f"torch.export of {what} with its KV cache of {max_len} as inputs: methods forward (a token) and "
            f"prefill (1..{prefill_chunk(max_len)} tokens)")
        return export_methods(model, max_len, prefill_chunk(max_len))
    say(f"torch.export of {what} as a left-padded window of {max_len} (no cache)")
    return export_window(model, max_len)


def to_program(ep, delegate: bool, pte=None, caller_cache: bool = False):
    """An ExportedProgram (or {method: ExportedProgram}) lowered (XnnpackPartitioner or
    none) to an ExecuTorch program, and the edge graph's nodes with their modules
    (modules.py); mutable buffers (the KV cache) start as zeros; with `caller_cache`
    the inputs are read where the caller has them (lowering.lower). An ExportError
    when an operator outside the standard namespaces is left."""
    return lower(ep, delegate, mutable_buffers=() if caller_cache else CACHE_BUFFERS, standard_ops_only=True, pte=pte,
                 caller_cache=caller_cache)


def lower_decoder(model: torch.nn.Module, names: list[str], max_seq_len: int, out: Path,
                  group_size: int | None = None, quantized: dict | None = None, after=None) -> list[dict]:
    """Writes the named programs into `out`, one progress step each (progress.py);
    returns their manifest entries in the order of GENERATION_PROGRAMS. A quantized
    program is lowered from a quantized copy of `model` (quantize.py, `group_size`
    for grouped schemes, None: quantize.pick_group_size's), put in `quantized`
    (program name -> model) for the check. `after(entry)`, when given, checks each
    program as soon as it is written, inside its step; then its quantized copy is
    dropped, so one program's models are held at a time (docs/models.md, peak memory)."""
    from .modules import sidecar
    from .progress import PROGRESS
    from .quantize import SCHEMES, pick_group_size, quantized_copy

    model.requires_grad_(False)
    wanted = [GENERATION_PROGRAMS[n] for n in GENERATION_PROGRAMS if n in names]
    if any(spec.quantized_in_groups for spec in wanted):
        group_size, _ = pick_group_size(model, group_size)
    exported, entries = {}, []
    for spec in wanted:
        # One dict per program: the check writes its figures ("vs_float") into the entry returned.
        entry = spec.manifest_entry(max_seq_len, group_size)
        if spec.cache == "inputs":  # the buffers the caller holds (also read from the program's inputs)
            _, g = arch_and_geometry(model)
            entry["cache_geometry"] = {"layers": g.layers, "kv_heads": g.kv_heads, "head_dim": g.head_dim}
        entries.append(entry)
        with PROGRESS.step(f"{spec.file}: {spec.title}", program=spec.name):
            if spec.quantization:
                say(f"quantizing a copy of the model ({spec.quantization})")
                qmodel = quantized_copy(model, SCHEMES[spec.quantization], group_size)
                if quantized is not None and after is not None:
                    quantized[spec.name] = qmodel
                ep = export_for(spec.cache, qmodel, max_seq_len, "the quantized model")
                release_memory()  # torch.export's scratch: about its weights' size again at SmolLM2's
            else:
                if spec.cache not in exported:
                    exported[spec.cache] = export_for(spec.cache, model, max_seq_len, "the model")
                    release_memory()
                ep = exported[spec.cache]
            say(f"lowering {spec.file} ({'XnnpackPartitioner' if spec.delegate else 'no delegate'})")
            program, nodes = to_program(ep, spec.delegate is not None, out / spec.file,
                                        caller_cache=spec.cache == "inputs")
            write_program(out / spec.file, program)
            # The sidecar of `runlens layers`: each instruction's module (modules.py).
            write_atomic(out / spec.modules_file, sidecar(spec.file, nodes, program))
            # Gone before the next program is lowered: the serialised program, its edge graph and the
            # constants folded into it are each about the size of the weights (docs/models.md, peak memory).
            del program, nodes, ep
            rest = wanted[wanted.index(spec) + 1:]
            for cache in list(exported):  # a float graph no program left is lowered from
                if not any(s.cache == cache and not s.quantization for s in rest):
                    del exported[cache]
            release_memory()
            if after is not None:
                after(entry)
                if spec.quantization:
                    qmodel = None
                    if quantized is not None:
                        quantized.pop(spec.name, None)
                release_memory()
    return entries


# --- driving a program: the greedy loop as a Python user writes it ---------------------------

Forward = Callable[[list[torch.Tensor]], list[torch.Tensor]]


class CacheDecoder:
    """A KV-cache program: prefill with the prompt at positions 0..n-1 (in calls of at most
    `chunk` tokens), then one token per call; `filled`: the program takes key_positions 0..n
    (programs from before it take two inputs and read the whole cache)."""

    def __init__(self, forward: Forward, max_len: int, filled: bool = True, chunk: int | None = None):
        self.forward, self.max_len, self.filled, self.length = forward, max_len, filled, 0
        self.chunk = chunk or max_len

    def run(self, ids: list[int], start: int) -> torch.Tensor:
        end = start + len(ids)
        inputs = [torch.tensor([ids], dtype=torch.long), torch.arange(start, end, dtype=torch.long)]
        if self.filled:
            inputs.append(torch.arange(end, dtype=torch.long))
        self.length = end
        return self.forward(inputs)[0]

    def prefill(self, prompt: list[int]) -> torch.Tensor:
        prompt = list(prompt)
        for start in range(0, len(prompt), self.chunk):
            logits = self.run(prompt[start:start + self.chunk], start)
        return logits

    def step(self, token: int) -> torch.Tensor:
        return self.run([token], self.length)


class WindowDecoder:
    """A window program: the sequence so far left-padded into the window, recomputed per token."""

    def __init__(self, forward: Forward, max_len: int, pad_id: int):
        self.forward, self.max_len, self.pad_id = forward, max_len, pad_id
        self.ids: list[int] = []

    def run(self) -> torch.Tensor:
        n, length = len(self.ids), self.max_len
        input_ids = torch.full((1, length), self.pad_id, dtype=torch.long)
        input_ids[0, length - n:] = torch.tensor(self.ids, dtype=torch.long)
        mask = torch.zeros(1, length, dtype=torch.long)
        mask[0, length - n:] = 1
        out = self.forward([input_ids, mask])[0]
        return out[:, -1, :] if out.dim() == 3 else out  # [1, L, V]: position L-1 is the last real token

    def prefill(self, prompt: list[int]) -> torch.Tensor:
        self.ids = list(prompt)
        return self.run()

    def step(self, token: int) -> torch.Tensor:
        self.ids.append(token)
        return self.run()


def decoder_for(entry: dict, method: Callable[[str], Forward], max_seq_len: int, pad_id: int):
    """The driver of a program from its manifest entry; `method(name)` runs one of its methods."""
    if entry.get("cache") == "inputs":
        from .cache_inputs import CallerCache

        g = entry["cache_geometry"]
        return CallerCache(method, g["layers"], g["kv_heads"], g["head_dim"], max_seq_len, entry["prefill_chunk"])
    if entry.get("cache") == "static":
        return CacheDecoder(method("forward"), max_seq_len, filled=entry.get("attends") == "filled",
                            chunk=entry.get("prefill_chunk"))
    return WindowDecoder(method("forward"), entry.get("fixed_len") or max_seq_len, pad_id)


def generate(model, ids: list[int], max_new_tokens: int, stop: set[int]) -> list[int]:
    """transformers' greedy generate: the new ids, the EOS id included when it stopped there.
    Pure argmax, as the programs' loop: the checkpoint's generation_config.json (Qwen2.5's
    has repetition_penalty 1.1, top_k, temperature) fills every setting a call leaves
    unset in transformers 5, so it is swapped for a bare one during the call."""
    from transformers import GenerationConfig

    eos = sorted(stop)
    saved = model.generation_config
    model.generation_config = GenerationConfig(eos_token_id=eos or None, pad_token_id=eos[0] if eos else None,
                                               bos_token_id=saved.bos_token_id)
    try:
        with torch.inference_mode():
            out = model.generate(
                torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=eos or None,
                pad_token_id=eos[0] if eos else None,
            )
    finally:
        model.generation_config = saved
    return out[0, len(ids):].tolist()


def greedy(decoder, prompt: list[int], max_new_tokens: int, stop) -> list[int]:
    """Greedy ids as transformers' generate gives them: the EOS id included when
    it stops there. `stop`: the end-of-text id, or a collection of them (None: none)."""
    stop = set() if stop is None else {int(stop)} if isinstance(stop, int) else {int(s) for s in stop}
    if len(prompt) + max_new_tokens - 1 > decoder.max_len:
        raise ExportError(f"a prompt of {len(prompt)} tokens and {max_new_tokens} new ones do not fit in "
                          f"{decoder.max_len} positions; shorten the prompt or raise --max-seq-len")
    logits = decoder.prefill(prompt)
    ids: list[int] = []
    while True:
        token = int(torch.argmax(logits.reshape(-1)))
        ids.append(token)
        if len(ids) == max_new_tokens or token in stop:
            return ids
        logits = decoder.step(token)


def teacher_forced(decoder, prompt: list[int], ids: list[int]) -> tuple[torch.Tensor, list[int]]:
    """The program's first-step (prefill) logits, and its top-1 at each of `ids`'
    positions, fed `ids` one by one (teacher-forced) rather than its own picks."""
    first = logits = decoder.prefill(prompt).reshape(-1)
    picks: list[int] = []
    for k, token in enumerate(ids):
        picks.append(int(torch.argmax(logits)))
        if k + 1 < len(ids):
            logits = decoder.step(token).reshape(-1)
    return first, picks


def first_divergence(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
