"""One class per task. A task knows:
  - the wrapper the program is exported from (what its one output is),
  - its default sentences,
  - its fields of reference.json (Python transformers' outputs),
  - how a program's output is compared with those (verify.py).

The encoder tasks' programs take (input_ids, attention_mask), int64 [1, S]
(docs/model-directory.md): one forward pass, one output, compared with one
transformers output. `text-generation` (the decoders) is a peer with other programs
(decoder.py: a KV-cache program and a window one) and a different reference
(transformers' greedy `generate`), so a task also says how its reference is
made, how its programs are lowered and how they are checked (`reference`,
`program_specs`, `lower`, `verify`; the encoder tasks share one way).
"""

from __future__ import annotations

from pathlib import Path

import torch

from .compare import Comparison, cosine, max_diff
from .files import ExportError, f32_list

ASSETS = Path(__file__).resolve().parents[2] / "assets"

# Float programs against Python transformers (verify.py); stated in the README.
FLOAT_MAX_DIFF = 1e-4  # logits/embedding: max |diff| <= this x max(1, max |reference|)
EMBED_MIN_COSINE = 0.99999
# int8 programs change the numbers on purpose; they must stay close, not equal.
INT8_MIN_COSINE = 0.98
INT8_MAX_PROB_DIFF = 0.05


class SentenceEmbedder(torch.nn.Module):
    """BERT + masked mean pooling + L2 normalisation (the sentence-transformers recipe)."""

    def __init__(self, bert: torch.nn.Module):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # [1, seq, H]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # [1, seq, 1]
        summed = (hidden * mask).sum(dim=1)  # [1, H]
        pooled = summed / mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)


class Logits(torch.nn.Module):
    """A transformers model with a head, returning its logits: [1, S, V] for a
    masked-LM head, [1, C] for a sequence-classification head."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


class Task:
    name: str
    sentences: str  # file name in assets/
    output: str  # the program's output, for the log and the manifest's wording
    default_max_seq_len = 128  # src/model/files.rs's MAX_SEQ_LEN for MiniLM

    # --- what export.py calls; the encoder tasks share these ---

    def program_specs(self) -> dict:
        from .programs import PROGRAMS

        return PROGRAMS

    def default_programs(self) -> list[str]:
        """What an export writes without --programs."""
        return list(self.program_specs())

    def reference(self, model, tokenizer, texts: list[str], max_seq_len: int) -> list[dict]:
        """reference.json's sentences: the wrapper's output on each text, one forward pass."""
        from .files import say

        say(f"reference outputs for {len(texts)} sentences (transformers eager, {self.name})")
        wrapper = self.wrap(model)
        rows = []
        with torch.inference_mode():
            for text in texts:
                enc = tokenizer(text, truncation=True, max_length=max_seq_len, return_tensors="pt")
                ids = enc["input_ids"][0].tolist()
                output = wrapper(enc["input_ids"], enc["attention_mask"])
                rows.append({"text": text, "ids": ids, **self.reference_row(output, ids, model, tokenizer)})
        note = self.notes(rows)
        if note:
            say(f"  {note}")
        return rows

    def lower(self, model, names: list[str], max_seq_len: int, out: Path, after=None) -> list[dict]:
        """Writes the named programs into `out`, calling `after(entry)` (the check) once each is
        written, before the next one is lowered; returns their manifest entries."""
        from .programs import lower

        return lower(self.wrap(model), names, max_seq_len, out, after)

    def verify(self, out: Path, programs: list[dict], rows: list[dict], pad_id: int, max_seq_len: int) -> dict[str, list[str]]:
        from .verify import verify

        return verify(out, programs, self.compare, rows, pad_id)

    def extra_fields(self, model, tokenizer) -> dict:
        """Fields of manifest.json and reference.json this task adds (none for the encoders)."""
        return {}

    def write_files(self, ckpt, model, tokenizer, out: Path) -> dict:
        """Files beside tokenizer.json this task needs; their manifest fields (none for the encoders)."""
        return {}

    # --- the encoder tasks' parts ---

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        raise NotImplementedError

    def texts(self, lines: list[str], tokenizer) -> list[str]:
        return lines

    def reference_row(self, output: torch.Tensor, ids: list[int], model, tokenizer) -> dict:
        """The task's fields of one reference.json sentence from the wrapper's output."""
        raise NotImplementedError

    def compare(self, row: dict, output: torch.Tensor, quantized: bool) -> Comparison:
        raise NotImplementedError

    def notes(self, rows: list[dict]) -> str:
        """A line for the log about the reference (e.g. how clear the winners are)."""
        return ""


class FeatureExtraction(Task):
    name = "feature-extraction"
    sentences = "sentences.txt"
    output = "[1, H] embedding (masked mean pooling, L2-normalised)"

    def wrap(self, model):
        return SentenceEmbedder(model).eval()

    def reference_row(self, output, ids, model, tokenizer):
        return {"embedding": [float(v) for v in output[0]]}

    def compare(self, row, output, quantized):
        ref = torch.tensor(row["embedding"])
        cos, diff = cosine(output, ref), max_diff(output, ref)
        ok = cos >= INT8_MIN_COSINE if quantized else (cos >= EMBED_MIN_COSINE and diff <= FLOAT_MAX_DIFF)
        return Comparison(ok, f"cosine {cos:.7f} max|diff| {diff:.1e}")


class FillMask(Task):
    name = "fill-mask"
    sentences = "fill-mask.txt"
    output = "[1, S, V] masked-LM logits at every position"
    TOP = 10

    def wrap(self, model):
        return Logits(model).eval()

    def texts(self, lines, tokenizer):
        mask = tokenizer.mask_token
        if mask is None:
            raise ExportError("the checkpoint's tokenizer has no mask token, so it cannot fill masks")
        return [line.replace("[MASK]", mask) for line in lines]

    def reference_row(self, output, ids, model, tokenizer):
        masks = []
        for pos, tid in enumerate(ids):
            if tid != tokenizer.mask_token_id:
                continue
            logits = output[0, pos]
            probs = torch.softmax(logits.double(), dim=-1)
            top = torch.topk(probs, self.TOP)
            masks.append({
                "position": pos,
                "logits": f32_list(logits),
                "top": [
                    {"id": int(i), "token": tokenizer.convert_ids_to_tokens(int(i)), "prob": float(p)}
                    for p, i in zip(top.values, top.indices)
                ],
            })
        return {"masks": masks}

    def compare(self, row, output, quantized):
        worst_diff, worst_cos, same_top1, n = 0.0, 1.0, 0, 0
        ok = True
        for m in row["masks"]:
            ref = torch.tensor(m["logits"])
            got = output[0, m["position"]]
            n += 1
            diff, cos = max_diff(got, ref), cosine(got, ref)
            top1 = int(got.argmax()) == m["top"][0]["id"]
            same_top1 += top1
            worst_diff, worst_cos = max(worst_diff, diff), min(worst_cos, cos)
            scale = max(1.0, float(ref.abs().max()))
            ok &= cos >= INT8_MIN_COSINE if quantized else (top1 and diff <= FLOAT_MAX_DIFF * scale)
        return Comparison(ok and n > 0, f"{n} masks, same top-1 {same_top1}/{n}, max|diff| {worst_diff:.1e}, min cosine {worst_cos:.6f}")

    def notes(self, rows):
        gaps = []
        for r in rows:
            for m in r["masks"]:
                top2 = sorted(m["logits"], reverse=True)[:2]
                gaps.append(top2[0] - top2[1])
        n = len(gaps)
        return f"{n} masks; smallest logit gap between the two best tokens: {min(gaps):.3g}" if gaps else "no masks"


class TextClassification(Task):
    name = "text-classification"
    sentences = "sentences.txt"
    output = "[1, C] class logits"

    def wrap(self, model):
        return Logits(model).eval()

    def reference_row(self, output, ids, model, tokenizer):
        logits = output[0]
        probs = torch.softmax(logits.double(), dim=-1)
        id2label = model.config.id2label
        return {
            "logits": f32_list(logits),
            "probs": [float(p) for p in probs],
            "labels": [str(id2label.get(i, f"LABEL_{i}")) for i in range(logits.shape[0])],
        }

    def compare(self, row, output, quantized):
        ref = torch.tensor(row["logits"])
        got = output.reshape(-1)
        if got.shape != ref.shape:
            return Comparison(False, f"{got.shape[0]} classes, reference {ref.shape[0]}")
        order_same = torch.argsort(got, descending=True).tolist() == torch.argsort(ref, descending=True).tolist()
        diff = max_diff(got, ref)
        prob_diff = max_diff(torch.softmax(got.double(), -1), torch.tensor(row["probs"]))
        if quantized:
            ok = prob_diff <= INT8_MAX_PROB_DIFF
        else:
            ok = order_same and diff <= FLOAT_MAX_DIFF * max(1.0, float(ref.abs().max()))
        return Comparison(ok, f"label order {'same' if order_same else 'DIFFERENT'}, max|diff| logits {diff:.1e}, probs {prob_diff:.1e}")

    def notes(self, rows):
        gaps = []
        for r in rows:
            p = sorted(r["probs"], reverse=True)
            gaps += [p[i] - p[i + 1] for i in range(len(p) - 1)]
        return f"smallest gap between neighbouring label probabilities: {min(gaps):.3g}" if gaps else ""


class TextGeneration(Task):
    """A decoder of archs/ (GPT-2, Llama, Qwen2, Qwen3): greedy continuation of a prompt (decoder.py holds the programs)."""

    name = "text-generation"
    sentences = "prompts.txt"
    output = "[1, V] next-token logits (KV-cache and window programs)"
    # L without --max-seq-len, capped by the model's own position limit (export.py): a chat
    # template's system line plus a few turns fit (a Qwen template's default system line and
    # one question are about 30 tokens, a reply a few hundred), and the static cache holds L
    # positions. Not more by default: the planned activation memory of a prefill grows with
    # L x L per head (its attention scores), and the cache with L.
    default_max_seq_len = 1024
    max_new_tokens = 24  # what reference.json is generated with (export.py --max-new-tokens)
    check_window = True  # the padded-window wrapper in eager against generate (export.py: with a window program checked)
    group_size = None  # 8da4w's weight group (export.py --group-size; None: quantize.py's default)
    check_all = False  # export.py --check-all: every prompt checked whatever the model's size

    def program_specs(self) -> dict:
        from .decoder import GENERATION_PROGRAMS

        return GENERATION_PROGRAMS

    def extra_fields(self, model, tokenizer) -> dict:
        """eos_token_id (the first end-of-text id, as before), eos_token_ids (all
        of them: config.json's and generation_config.json's eos_token_id, either
        may be a list; Llama 3 has three), bos_token_id when the tokenizer puts one
        in front of a raw prompt, pad_token_id (what the window is left-padded with)."""
        eos = eos_ids(model)
        pad = model.config.pad_token_id if model.config.pad_token_id is not None else (eos[0] if eos else None)
        if pad is None:
            raise ExportError("the checkpoint's config has neither pad_token_id nor eos_token_id: "
                              "nothing to left-pad the no-cache window with")
        fields = {"eos_token_id": eos[0] if eos else None, "eos_token_ids": eos}
        bos = added_bos(tokenizer)
        if bos is not None:
            fields["bos_token_id"] = bos
        return {**fields, "pad_token_id": int(pad), "max_new_tokens": self.max_new_tokens}

    def write_files(self, ckpt, model, tokenizer, out: Path) -> dict:
        """generation_config.json (its eos ids), tokenizer_config.json (the special
        tokens' text, which a chat template names as bos_token / eos_token) and
        chat_template.jinja (the template, from its own file or from
        tokenizer_config.json's `chat_template`) beside tokenizer.json; their
        manifest fields."""
        import shutil

        fields = {}
        if (ckpt.path / "generation_config.json").is_file():
            shutil.copyfile(ckpt.path / "generation_config.json", out / "generation_config.json")
        else:  # what transformers made of config.json
            model.generation_config.to_json_file(str(out / "generation_config.json"), use_diff=True)
        fields["generation_config"] = "generation_config.json"
        if (ckpt.path / "tokenizer_config.json").is_file():
            shutil.copyfile(ckpt.path / "tokenizer_config.json", out / "tokenizer_config.json")
            fields["tokenizer_config"] = "tokenizer_config.json"
        template = getattr(tokenizer, "chat_template", None)
        if isinstance(template, dict):  # several named templates: the default one
            template = template.get("default")
        if (ckpt.path / "chat_template.jinja").is_file():
            shutil.copyfile(ckpt.path / "chat_template.jinja", out / "chat_template.jinja")
            fields["chat_template"] = "chat_template.jinja"
        elif isinstance(template, str) and template.strip():
            (out / "chat_template.jinja").write_text(template, encoding="utf-8")
            fields["chat_template"] = "chat_template.jinja"
        return fields

    def encode(self, tokenizer, text: str) -> list[int]:
        """A raw prompt's ids, as transformers' text-generation pipeline makes them:
        the tokenizer's own special tokens added (Llama's BOS; GPT-2 adds none)."""
        return tokenizer(text)["input_ids"]

    def encode_chat(self, tokenizer, text: str) -> list[int] | None:
        """A prompt through the model's chat template as one user message with the
        generation prompt (transformers' apply_chat_template); None without a template."""
        if not getattr(tokenizer, "chat_template", None):
            return None
        out = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        return list(out["input_ids"] if not isinstance(out, list) else out)

    def stop_ids(self, extra: dict) -> set[int]:
        """The ids generation stops at (the manifest's end-of-text ids)."""
        return {int(i) for i in extra.get("eos_token_ids") or []}

    def reference(self, model, tokenizer, texts, max_seq_len):
        from .decoder import generate
        from .files import say

        say(f"reference continuations of {len(texts)} prompts (transformers generate, greedy, "
            f"max_new_tokens {self.max_new_tokens})")
        rows = []
        stop = self.stop_ids(self.extra_fields(model, tokenizer))
        for text in texts:
            ids = self.encode(tokenizer, text)
            if not ids:
                raise ExportError(f"the prompt {text!r} encodes to no tokens")
            if len(ids) + self.max_new_tokens - 1 > max_seq_len:
                raise ExportError(f"the prompt {text!r} is {len(ids)} tokens: with {self.max_new_tokens} new tokens "
                                  f"it does not fit in --max-seq-len {max_seq_len}; shorten it")
            generated = generate(model, ids, self.max_new_tokens, stop)
            rows.append({"text": text, "ids": ids, "generated_ids": generated,
                         "generated_text": continuation_text(tokenizer, ids, generated), "prompt_format": "raw"})
        # An instruct model's prompts as runlens feeds them by default: through its chat template.
        chat_rows = 0
        for text in texts:
            ids = self.encode_chat(tokenizer, text)
            if ids is None:
                break
            if len(ids) + self.max_new_tokens - 1 > max_seq_len:
                say(f"  the chat prompt of {text!r} is {len(ids)} tokens: too long for --max-seq-len {max_seq_len}, "
                    "not in the reference")
                continue
            generated = generate(model, ids, self.max_new_tokens, stop)
            rows.append({"text": text, "ids": ids, "generated_ids": generated,
                         "generated_text": continuation_text(tokenizer, ids, generated), "prompt_format": "chat"})
            chat_rows += 1
        if chat_rows:
            say(f"  {chat_rows} of the prompts also through the chat template (apply_chat_template)")
        say(f"  {self.notes(rows)}")
        if self.check_window:
            self.check_window_wrapper(model, tokenizer, rows, max_seq_len)
        return rows

    def check_window_wrapper(self, model, tokenizer, rows, max_seq_len):
        """The window programs compute positions from the mask: the padded window
        must give transformers' ids too (the wrapper itself, in eager)."""
        from .decoder import DecoderWindow, WindowDecoder, first_divergence, greedy
        from .files import say

        window = DecoderWindow(model).eval()
        extra = self.extra_fields(model, tokenizer)
        pad, stop = extra["pad_token_id"], self.stop_ids(extra)
        with torch.inference_mode():
            for row in rows:
                got = greedy(WindowDecoder(lambda args: [window(*args)], max_seq_len, pad), row["ids"],
                             self.max_new_tokens, stop)
                if got != row["generated_ids"]:
                    raise ExportError(f"the left-padded window wrapper differs from transformers on {row['text']!r} "
                                      f"at new token {first_divergence(got, row['generated_ids'])}")
        say(f"  the left-padded window wrapper (eager, positions from the mask) gives the same ids on all {len(rows)} prompts")

    def notes(self, rows):
        n = sum(len(r["generated_ids"]) for r in rows)
        distinct = len({t for r in rows for t in r["generated_ids"]})
        stopped = sum(1 for r in rows if len(r["generated_ids"]) < self.max_new_tokens)
        return f"{n} new tokens over {len(rows)} prompts, {distinct} distinct ids, {stopped} stopped at the end-of-text id"

    def default_programs(self) -> list[str]:
        from .decoder import DEFAULT_GENERATION_PROGRAMS

        return list(DEFAULT_GENERATION_PROGRAMS)

    def lower(self, model, names, max_seq_len, out, after=None):
        from .decoder import lower_decoder

        # The float model and the quantized copy of the program being checked, for verify.
        self.models = {"float": model}
        return lower_decoder(model, names, max_seq_len, out, self.group_size, self.models, after)

    def verify(self, out, programs, rows, pad_id, max_seq_len):
        import json

        from .verify import verify_generation

        config = json.loads((out / "config.json").read_text())
        generation = json.loads((out / "generation_config.json").read_text())
        stop = set(as_ids(config.get("eos_token_id")) + as_ids(generation.get("eos_token_id")))
        return verify_generation(out, programs, rows, pad_id, max_seq_len, self.max_new_tokens, stop, self.models,
                                  self.check_all)


def as_ids(value) -> list[int]:
    """An eos_token_id field: an id, a list of ids, or null."""
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


def eos_ids(model) -> list[int]:
    """config.json's end-of-text ids, then generation_config.json's that are not among them."""
    ids = as_ids(model.config.eos_token_id)
    generation = getattr(model, "generation_config", None)
    for i in as_ids(getattr(generation, "eos_token_id", None)):
        if i not in ids:
            ids.append(i)
    return ids


def added_bos(tokenizer) -> int | None:
    """The BOS id the tokenizer puts in front of a text, or None (GPT-2's adds nothing)."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return None
    with_special = tokenizer("a")["input_ids"]
    without = tokenizer("a", add_special_tokens=False)["input_ids"]
    return int(bos) if with_special[:1] == [bos] and without[:1] != [bos] else None


def continuation_text(tokenizer, prompt: list[int], generated: list[int]) -> str:
    """What transformers' TextStreamer prints after the prompt: the decode of
    prompt and new tokens (special tokens skipped) minus the prompt's own text.
    A SentencePiece tokenizer keeps the first new word's space this way, which
    decoding the new ids alone would strip."""
    prompt_text = tokenizer.decode(prompt, skip_special_tokens=True)
    return tokenizer.decode(prompt + generated, skip_special_tokens=True)[len(prompt_text):]


TASKS: dict[str, Task] = {t.name: t for t in (FeatureExtraction(), FillMask(), TextClassification(), TextGeneration())}
