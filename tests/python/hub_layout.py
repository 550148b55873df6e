"""The tiny decoders of tests/python/tiny_decoders.py laid out as the hub ships a
checkpoint (issue 33; `tiny_checkpoint.py --arch llama,qwen2,llama2-sp --size hub`):

  - bfloat16 weights (`model.to(torch.bfloat16)`, config.json's dtype "bfloat16"), as
    Qwen2.5, Llama 3.2, SmolLM2 and TinyLlama are published;
  - sharded: `save_pretrained(max_shard_size=SHARD_SIZE)` writes
    model-0000k-of-0000n.safetensors and model.safetensors.index.json;
  - a position limit of 4096, well above the export's default context; every
    width a multiple of 32 (llama2-sp's FFN 176 -> 192), as published models' are;
  - chat_template.jinja beside the tokenizer (transformers 5 writes it there);
  - generation_config.json's eos_token_id a list of two ids (llama: <|eot_id|>,
    <|end_of_text|>, both in config.json too; qwen2: <|im_end|>, <|endoftext|>, the
    second only in generation_config.json, as Qwen2.5-Instruct has them);
  - llama2-sp: a SentencePiece tokenizer.model trained here (sentencepiece, offline)
    and no tokenizer.json: the export has to make one.

Random weights seldom write an end id within a few tokens. So that the prompts'
greedy continuations (PROMPTS below, float32 from the bfloat16 weights, as
tests/python/hub_reference.py computes them) stop at each of the two end ids, the head
rows of the two ids are scaled by the smallest factors of SCALES that make one
prompt stop at the first id and another at the second, while at least half of
the prompts still write 16 tokens or more. Deterministic: the same seed writes
the same files.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import torch

ASSETS = Path(__file__).resolve().parents[2] / "assets"
HUB_POSITIONS = 4096
# Small enough for the tiny models (~0.2-0.3 MB in bfloat16) to come in 2 shards or more.
SHARD_SIZE = "100KB"
MAX_NEW_TOKENS = 24  # what python/export.py's reference and hub_reference.py generate
LONG_PROMPT_TOKENS = 400  # the long chat prompt has at least this many tokens
SCALES = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0)


def prompt_texts() -> list[str]:
    """assets/prompts.txt's lines, the export's reference prompts."""
    return [ln.strip() for ln in (ASSETS / "prompts.txt").read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.startswith("#")]


def chat_ids(tokenizer, text: str) -> list[int]:
    """`text` as one user message through the chat template, with the generation prompt."""
    out = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
    return list(out["input_ids"] if not isinstance(out, list) else out)


def long_text(tokenizer) -> str:
    """A user message long enough that its chat prompt has LONG_PROMPT_TOKENS tokens
    or more: assets/corpus.txt's lines in order, as many as it takes."""
    lines = [ln.strip() for ln in (ASSETS / "corpus.txt").read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.startswith("#")]
    text = "Summarise these notes:"
    for line in lines:
        text += " " + line
        if len(chat_ids(tokenizer, text)) >= LONG_PROMPT_TOKENS:
            return text
    raise SystemExit(f"hub_layout: assets/corpus.txt makes no chat prompt of {LONG_PROMPT_TOKENS} tokens")


def prompts(tokenizer) -> list[dict]:
    """The prompts of the hub checkpoints' references: each of assets/prompts.txt raw
    and through the chat template, then the long chat prompt (`long`: true)."""
    texts = prompt_texts()
    rows = [{"text": t, "prompt_format": "raw", "ids": list(tokenizer(t)["input_ids"]), "long": False} for t in texts]
    rows += [{"text": t, "prompt_format": "chat", "ids": chat_ids(tokenizer, t), "long": False} for t in texts]
    text = long_text(tokenizer)
    rows.append({"text": text, "prompt_format": "chat", "ids": chat_ids(tokenizer, text), "long": True})
    return rows


@torch.inference_mode()
def continuation(model, ids: list[int], n: int) -> list[int]:
    """`n` greedy tokens after `ids`, stopping at nothing (the whole sequence each step)."""
    seq = list(ids)
    for _ in range(n):
        seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(ids):]


def first_end(new: list[int], ends: list[int]) -> tuple[int, int] | None:
    """(the end id, its step) where `new` would stop, or None."""
    return next(((t, k) for k, t in enumerate(new) if t in ends), None)


def arrange_end_ids(model, rows: list[dict], ends: list[int]) -> tuple[float, ...]:
    """Scales the head rows of `ends` (kept in bfloat16) by the smallest factors that
    make some short prompt stop at each end id at its third token or later, with at
    least half of them writing 16 tokens or more; returns the factors."""
    head = model.get_output_embeddings().weight
    base = head.detach().clone()
    short = [r for r in rows if not r["long"]]
    for scales in sorted(itertools.product(SCALES, repeat=len(ends)), key=lambda s: (sum(s), s)):
        with torch.no_grad():
            for i, s in zip(ends, scales):
                head[i] = (base[i] * s).to(torch.bfloat16).to(torch.float32)
        stops = [first_end(continuation(model, r["ids"], MAX_NEW_TOKENS), ends) for r in short]
        hit = all(any(s is not None and s[0] == e and s[1] >= 2 for s in stops) for e in ends)
        long_enough = sum(1 for s in stops if s is None or s[1] >= 16)
        if hit and 2 * long_enough >= len(short):
            return scales
    raise SystemExit(f"hub_layout: no head scaling of {SCALES} makes the prompts stop at each of {ends}; try another --seed")


def sentencepiece_files(vocab: int, lines: list[str], template: str, out: Path) -> None:
    """tokenizer.model (a SentencePiece BPE as Llama 2's: <unk> <s> </s> at 0 1 2, byte
    fallback, a dummy prefix, digits split), tokenizer_config.json and
    chat_template.jinja; no tokenizer.json."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab, model_type="bpe", byte_fallback=True,
        character_coverage=0.995, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, split_digits=True, add_dummy_prefix=True,
        remove_extra_whitespaces=False, normalization_rule_name="identity", num_threads=1, minloglevel=2,
    )
    (out / "tokenizer.model").write_bytes(model.getvalue())
    config = {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
              "add_bos_token": True, "add_eos_token": False, "legacy": False, "model_max_length": HUB_POSITIONS,
              "clean_up_tokenization_spaces": False}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    (out / "chat_template.jinja").write_text(template, encoding="utf-8")


def build_hub_decoder(d, seed: int, init_range: float, out: Path, lines: list[str]):
    """Write `d`'s tiny checkpoint into `out` as the hub lays it out; returns the model (bfloat16)."""
    from transformers import AutoTokenizer, GenerationConfig

    from tiny_decoders import decoder_model, decoder_tokenizer

    # Widths a 4-bit group of 32 divides, as published models' are (the export's default
    # xnnpack-8da4w needs one; tiny-llama2-sp's FFN of 176 has none).
    d = replace(d, positions=HUB_POSITIONS, ffn=-(-d.ffn // 32) * 32)
    if d.tokenizer == "sentencepiece":
        sentencepiece_files(d.vocab, lines, d.template, out)
        bos, eos, ends = 1, 2, []
    else:
        fast, bos, _, _ = decoder_tokenizer(d, lines)
        ids = fast.convert_tokens_to_ids
        if d.tokenizer == "llama3":
            ends = [ids("<|eot_id|>"), ids("<|end_of_text|>")]
            eos = ends
        else:
            ends = [ids("<|im_end|>"), ids("<|endoftext|>")]
            eos = ends[0]
        fast.save_pretrained(str(out))
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    model = decoder_model(d, len(tokenizer), seed, init_range, bos, eos)
    model.to(torch.bfloat16).to(torch.float32)  # the search sees the weights as saved
    if ends:
        scales = arrange_end_ids(model, prompts(tokenizer), ends)
        print(f"hub_layout: head rows of the end ids {ends} scaled by {scales}")
    model.generation_config = GenerationConfig(bos_token_id=bos, eos_token_id=ends or eos,
                                               pad_token_id=tokenizer.pad_token_id)
    model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(str(out), max_shard_size=SHARD_SIZE)
    check_layout(out, bool(ends))
    return model


def check_layout(out: Path, end_list: bool) -> None:
    """What the hub layout promises, checked on the files written."""
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    config = json.loads((out / "config.json").read_text())
    generation = json.loads((out / "generation_config.json").read_text())
    problems = [
        *([f"{len(shards)} shard(s)"] if len(shards) < 2 else []),
        *([] if not (out / "model.safetensors").exists() else ["a model.safetensors beside the shards"]),
        *([] if config.get("dtype") == "bfloat16" else [f"config.json dtype {config.get('dtype')!r}"]),
        *([] if config.get("max_position_embeddings") == HUB_POSITIONS else ["max_position_embeddings"]),
        *([] if (out / "chat_template.jinja").is_file() else ["no chat_template.jinja"]),
        *([] if not end_list or len(generation.get("eos_token_id") or []) == 2 else ["generation_config's end ids"]),
    ]
    if problems:
        raise SystemExit(f"hub_layout: {out} is not laid out as the hub's: {', '.join(problems)}")
