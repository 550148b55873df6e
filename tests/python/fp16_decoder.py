"""A decoder's ONNX file in float16, as transformers.js' repositories ship it beside the
float32 one (`onnx/model_fp16.onnx`), from runlens' own (tests/onnxruntime.rs).

ONNX Runtime's own converter (`onnxruntime.transformers.float16.convert_float_to_float16`,
in the wheel) turns the weights, the inputs and outputs of float type (the pasts, the
presents and the logits) and every float computation into float16: the layout a runner
must feed with float16 caches and read float16 logits from.

Usage: fp16_decoder.py --onnx models/tiny-llama/model.onnx --out DIR
"""

import argparse
from pathlib import Path

import onnx
from onnxruntime.transformers.float16 import convert_float_to_float16

NAME = "model_fp16.onnx"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnx", type=Path, required=True, help="a decoder's model.onnx from runlens' export")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    model = convert_float_to_float16(onnx.load(str(args.onnx)), keep_io_types=False)
    kinds = {i.name: i.type.tensor_type.elem_type for i in list(model.graph.input) + list(model.graph.output)}
    assert kinds["past_key_values.0.key"] == kinds["logits"] == onnx.TensorProto.FLOAT16, kinds
    args.out.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(args.out / NAME))
    print(f"wrote {args.out / NAME}")


if __name__ == "__main__":
    main()
