"""A model directory with the ONNX files a hub sentence-transformers repository
ships, and what ONNX Runtime's Python package makes of them (tests/onnxruntime.rs).

    python tests/python/st_onnx_layout.py --model models/minilm --out DIR

Writes into DIR (the model directory's files are symlinked there first):
  onnx/model.onnx               the checkpoint exported as Optimum writes it for
                                sentence-transformers' ONNX backend: inputs input_ids,
                                attention_mask, token_type_ids, output last_hidden_state,
                                axes named batch_size and sequence_length
  onnx/model_qint8_arm64.onnx   its 8-bit copy by ONNX Runtime's quantize_dynamic (QInt8
                                weights, a scale per tensor: the quantizer's defaults)
  modules.json, 1_Pooling/config.json   sentence-transformers' pipeline, pooling the CLS
                                token (not MiniLM's mean, so that a reader that ignores the
                                config is caught)
  st_embeddings.json            for each file, each reference sentence's embedding as ONNX
                                Runtime's Python package computes it, pooled at CLS and
                                L2-normalised as sentence-transformers does
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch


def export(model_dir: Path, onnx_dir: Path) -> None:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), dtype=torch.float32).eval()

    class Hidden(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    ids = torch.ones(1, 8, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch_size", 1: "sequence_length"} for n in names}
    axes["last_hidden_state"] = {0: "batch_size", 1: "sequence_length"}
    onnx_dir.mkdir(parents=True, exist_ok=True)
    with torch.inference_mode():
        torch.onnx.export(Hidden(model), (ids, ids, torch.zeros_like(ids)), str(onnx_dir / "model.onnx"), input_names=names,
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=14, dynamo=False)
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(onnx_dir / "model.onnx"), str(onnx_dir / "model_qint8_arm64.onnx"), weight_type=QuantType.QInt8)


def embed(path: Path, sentences: list[list[int]]) -> list[list[float]]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = []
    for ids in sentences:
        a = np.array([ids], dtype=np.int64)
        (hidden,) = session.run(["last_hidden_state"], {"input_ids": a, "attention_mask": np.ones_like(a), "token_type_ids": np.zeros_like(a)})
        v = hidden[0, 0].astype(np.float64)  # CLS pooling, as 1_Pooling/config.json says
        out.append((v / max(np.linalg.norm(v), 1e-12)).tolist())
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a runlens model directory of a BERT encoder (config.json, model.safetensors)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    for f in args.model.iterdir():
        if f.is_file() and not (out / f.name).exists():
            (out / f.name).symlink_to(f.resolve())
    export(args.model, out / "onnx")
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    (out / "modules.json").write_text(json.dumps(modules, indent=2))
    (out / "1_Pooling").mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": json.loads((args.model / "config.json").read_text())["hidden_size"],
               "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False}
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2))
    reference = json.loads((args.model / "reference.json").read_text())
    sentences = [s["ids"] for s in reference["sentences"]]
    result = {name: embed(out / "onnx" / f"{name.split('/')[1]}.onnx", sentences)
              for name in ("onnx/model", "onnx/model_qint8_arm64")}
    (out / "st_embeddings.json").write_text(json.dumps({"sentences": sentences, "embeddings": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
