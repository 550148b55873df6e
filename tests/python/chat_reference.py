"""Chat prompts and streamed text as transformers makes them, for runlens' tests
(tests/chat.rs) to compare the Rust side with.

    python tests/python/chat_reference.py --checkpoint DIR [--prompts assets/prompts.txt] --out OUTDIR

reads the Hugging Face checkpoint DIR (tokenizer.json, tokenizer_config.json,
chat_template.jinja or a `chat_template` in tokenizer_config.json) with
`AutoTokenizer` and writes OUTDIR/chat_reference.json:

  prompts   per prompt (the file's lines, then a few built in: non-ASCII, a
            newline, surrounding spaces): the text, the rendered chat string
            (`apply_chat_template(tokenize=False, add_generation_prompt=True)`,
            one user message), its ids (`apply_chat_template(...)`, tokenized
            as transformers does it: special tokens recognised, no extra BOS),
            their tokens, and the raw ids (`tokenizer(text)`); null fields and
            `chat_error` when the model has no template or it fails.
  streams   fixed id sequences, a prompt and new ids: decoded text pieces that
            split a multi-byte character across tokens (byte-level bytes, or
            SentencePiece byte-fallback <0xNN> pieces), invalid bytes, a special
            token and a newline among the new ids. For each, what transformers'
            `TextStreamer(skip_special_tokens=True)` prints, fed as `generate`
            feeds it (the prompt, then one new token at a time, then `end()`):
            `prompt_printed` (what `put(prompt)` printed), `printed` (one entry
            per new token, then `end()`'s), and the decodes
            (`skip_special_tokens=True`) of the prompt, of the new ids alone and
            of both; `skip_prompt_printed`: TextStreamer(skip_prompt=True)'s
            output for the same ids.
  features  a template written here that uses what Hugging Face templates use
            beyond the checkpoint's (Python methods, tojson's options, loop
            controls, namespaces), rendered by transformers' Jinja environment
            for the same prompts and the checkpoint's special tokens.

The ids of the streams are chosen here from the tokenizer (by token, so the
same on every run) and written out: the Rust side only reads them.
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
from transformers import AutoTokenizer, TextStreamer  # noqa: E402

ASSETS = Path(__file__).resolve().parents[2] / "assets"
# Prompts added to the file's: what typed text can hold that the file's lines do not.
EXTRA_PROMPTS = [
    "Grüße aus Zürich: café, naïve, 東京, ☕",
    "two lines\nof text",
    "  surrounded by spaces  ",
]


# A template that uses what Hugging Face templates use beyond the fixtures'
# (namespaces, loop filters, Python string and dict methods, tojson with its
# options, dict(), slicing, map/join): rendered here by transformers' own
# Jinja environment, compared with runlens' minijinja one.
FEATURES_TEMPLATE = """{%- set ns = namespace(n=0) %}
{%- for m in messages if m.role == 'user' %}{% set ns.n = ns.n + 1 %}{% endfor %}
{{- bos_token ~ '|' ~ ns.n ~ '|' }}
{%- for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}
{{- messages[0].content.strip().upper() ~ '|' ~ messages[0].content.split(' ') | tojson ~ '|' ~ messages[0].content.replace('e', 'E') }}
{{- '|' ~ (messages | map(attribute='role') | join(',')) ~ '|' ~ messages[0] | tojson }}
{{- '|' ~ {'b': [1, 2.5, none, true, 'x"y\n'], 'a': {}} | tojson(indent=2) ~ '|' ~ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}
{{- '|' ~ dict(x=1, y='é') | tojson ~ '|' ~ (messages[0].content | length) ~ '|' ~ messages[0].content[:3] ~ '|' ~ messages[0].content.title() }}
{%- for c in 'abcdef' %}{% if c == 'b' %}{% continue %}{% elif c == 'e' %}{% break %}{% endif %}{{ c }}{% endfor %}
{%- if messages[0].content.startswith(' ') %}|lead{% endif %}{% if messages[-1].content is string %}|string{% endif %}
{%- if add_generation_prompt %}{{ '|GEN' }}{% endif %}
"""


def features(tokenizer, texts: list[str]) -> dict:
    from transformers.utils.chat_template_utils import render_jinja_template
    rendered = []
    for text in texts:
        out, _ = render_jinja_template([[{"role": "user", "content": text}]], chat_template=FEATURES_TEMPLATE,
                                       add_generation_prompt=True, **tokenizer.special_tokens_map)
        rendered.append(out[0])
    return {"template": FEATURES_TEMPLATE, "texts": texts, "rendered": rendered}


class Recorder(TextStreamer):
    """TextStreamer that keeps what it would print instead of printing it."""

    def __init__(self, tokenizer, skip_prompt: bool):
        super().__init__(tokenizer, skip_prompt=skip_prompt, skip_special_tokens=True)
        self.pieces: list[str] = []

    def on_finalized_text(self, text: str, stream_end: bool = False):
        self.pieces.append(text)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-to-character table (its encoder.py): printable bytes stand
    for themselves, the others are shifted to U+0100 and up."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, shifted = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


def byte_token_ids(tokenizer, data: bytes) -> list[int]:
    """One token per byte: `<0xNN>` (byte fallback) if the vocabulary has them,
    else byte-level BPE's character for the byte (GPT-2's table)."""
    vocab = tokenizer.get_vocab()
    if "<0x41>" in vocab:
        names = [f"<0x{b:02X}>" for b in data]
    else:
        table = bytes_to_unicode()
        names = [table[b] for b in data]
    missing = [n for n in names if n not in vocab]
    if missing:
        raise SystemExit(f"chat_reference: the vocabulary has no byte token {missing[0]!r}")
    return [vocab[n] for n in names]


def token_id(tokenizer, text: str) -> int:
    """The one id that encodes `text` (a special token, or a piece the vocabulary has)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise SystemExit(f"chat_reference: {text!r} is not one token here ({ids})")
    return ids[0]


def piece_ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def chat(tokenizer, text: str) -> dict:
    messages = [{"role": "user", "content": text}]
    try:
        rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        out = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    except Exception as e:  # no template, or one that fails: the Rust side must say so too
        return {"rendered": None, "chat_ids": None, "chat_tokens": None, "chat_error": f"{type(e).__name__}: {e}"}
    ids = out["input_ids"] if not isinstance(out, list) else out
    # Checked here so a reference that disagrees with itself is never written.
    assert ids == tokenizer(rendered, add_special_tokens=False)["input_ids"], "apply_chat_template's ids"
    return {"rendered": rendered, "chat_ids": ids, "chat_tokens": tokenizer.convert_ids_to_tokens(ids), "chat_error": None}


def stream(tokenizer, name: str, prompt: list[int], new: list[int]) -> dict:
    full = Recorder(tokenizer, skip_prompt=False)
    full.put(torch.tensor([prompt]))
    prompt_printed = "".join(full.pieces)
    full.pieces.clear()
    for token in new:
        full.put(torch.tensor([token]))
    full.end()
    skip = Recorder(tokenizer, skip_prompt=True)
    skip.put(torch.tensor([prompt]))
    for token in new:
        skip.put(torch.tensor([token]))
    skip.end()
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    return {
        "name": name,
        "prompt_ids": prompt,
        "new_ids": new,
        "new_tokens": tokenizer.convert_ids_to_tokens(new),
        "prompt_printed": prompt_printed,
        "printed": full.pieces,
        "skip_prompt_printed": "".join(skip.pieces),
        "prompt_text": decode(prompt),
        "new_text": decode(new),
        "text": decode(prompt + new),
    }


def streams(tokenizer, chat_prompt: list[int] | None) -> list[dict]:
    raw_prompt = tokenizer("Once upon a time")["input_ids"]
    # The end-of-sequence token the model stops at: a special token, skipped in the text.
    eos = tokenizer.eos_token_id
    nl = piece_ids(tokenizer, "\n")
    out = [
        # Ordinary text with characters the tiny vocabulary spells in bytes.
        stream(tokenizer, "text", raw_prompt, piece_ids(tokenizer, " there was a café in Zürich, 東京 ☕ and more")),
        # One token per byte: é (2 bytes), € (3), 日 (3), 🙂 (4), then a word.
        stream(tokenizer, "split-bytes", raw_prompt,
               byte_token_ids(tokenizer, "é€日🙂".encode()) + piece_ids(tokenizer, " done")),
        # Bytes no later token completes: a lead byte before ASCII, a lone
        # continuation byte, an unfinished character at the very end.
        stream(tokenizer, "invalid-bytes", raw_prompt,
               piece_ids(tokenizer, " ok") + byte_token_ids(tokenizer, b"\xc3") + piece_ids(tokenizer, " then")
               + byte_token_ids(tokenizer, b"\xa9") + piece_ids(tokenizer, " x") + byte_token_ids(tokenizer, b"\xe2\x82")),
        # A special token among the new ids, and newlines (TextStreamer flushes at one).
        stream(tokenizer, "special-and-newline", raw_prompt,
               piece_ids(tokenizer, " Hi") + ([eos] if eos is not None else []) + nl + piece_ids(tokenizer, " there")
               + nl + nl + piece_ids(tokenizer, "and é")),
    ]
    if chat_prompt is not None:
        # The continuation of a chat prompt (it ends with the assistant's header).
        out.append(stream(tokenizer, "chat", chat_prompt, piece_ids(tokenizer, "Hello! Ça va? 東京") + nl + piece_ids(tokenizer, "Bye")))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, type=Path, help="a Hugging Face checkpoint directory")
    ap.add_argument("--prompts", type=Path, default=ASSETS / "prompts.txt")
    ap.add_argument("--out", required=True, type=Path, help="directory to write chat_reference.json into")
    args = ap.parse_args()
    if not (args.checkpoint / "tokenizer.json").is_file():
        print(f"chat_reference: {args.checkpoint} has no tokenizer.json", file=sys.stderr)
        return 2
    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    texts = [ln.rstrip("\n") for ln in args.prompts.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.startswith("#")]
    prompts = []
    for text in texts + EXTRA_PROMPTS:
        raw = tokenizer(text)["input_ids"]
        prompts.append({"text": text, "raw_ids": raw, "raw_tokens": tokenizer.convert_ids_to_tokens(raw), **chat(tokenizer, text)})
    first_chat = next((p["chat_ids"] for p in prompts if p["chat_ids"] is not None), None)
    doc = {
        "checkpoint": args.checkpoint.name,
        "tokenizer_class": type(tokenizer).__name__,
        "special_tokens": tokenizer.special_tokens_map,
        "prompts": prompts,
        "streams": streams(tokenizer, first_chat),
        "features": features(tokenizer, texts + EXTRA_PROMPTS),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "chat_reference.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    print(f"chat_reference: {len(prompts)} prompts, {len(doc['streams'])} streams in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
