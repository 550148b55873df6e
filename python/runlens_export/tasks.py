"""One class per task. A task knows:
  - the wrapper the program is exported from (what its one output is),
  - its default sentences,
  - its fields of reference.json (Python transformers' outputs),
  - how a program's output is compared with those (verify.py).

Every program takes (input_ids, attention_mask), int64 [1, S]
(docs/model-directory.md). A `text-generation` task slots in as one more class
here and a row in checkpoint.SUPPORTED.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .files import ExportError, f32_list

ASSETS = Path(__file__).resolve().parents[2] / "assets"

# Float programs against Python transformers (verify.py); stated in the README.
FLOAT_MAX_DIFF = 1e-4  # logits/embedding: max |diff| <= this x max(1, max |reference|)
EMBED_MIN_COSINE = 0.99999
# int8 programs change the numbers on purpose; they must stay close, not equal.
INT8_MIN_COSINE = 0.98
INT8_MAX_PROB_DIFF = 0.05


@dataclass
class Comparison:
    ok: bool
    summary: str


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp(min=1e-30))


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double().reshape(-1) - b.double().reshape(-1)).abs().max())


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


TASKS: dict[str, Task] = {t.name: t for t in (FeatureExtraction(), FillMask(), TextClassification())}
