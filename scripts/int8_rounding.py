"""Is an int8 program's distance from the int8 model in PyTorch a kernel's error or
the model's own rounding noise? The measurement behind verify.py's
`rounding_sensitivity` (docs/quantization.md, "Checked at export, twice"), on a
model directory with real weights (SmolLM2-135M-Instruct by default):

    python scripts/int8_rounding.py [--model DIR] [--prompt TEXT] [--format raw|chat]
                                    [--layers N] [--levels 24,22,20,16] [--draws 10]

1. Each linear layer alone: the int8 copy of the model (quantize.quantized_copy, as
   the export makes it) runs the prompt in PyTorch; the N layers whose inputs reach
   the largest |value|, and the first and the head, are each lowered alone to
   XNNPACK and fed the very input that layer saw. Printed: its output against
   torchao's (relative L2 of the difference), the size of float32 rounding when
   the kernel is right, against the layer's own quantization error (int8 against
   the float layer) for scale.
2. The whole model's noise: every linear layer's input scaled by 1 + N(0, 2^-k)
   (k from --levels), --draws seeded draws each; printed: the median and the
   largest 1 - cosine of the last position's logits from the unperturbed ones.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

import torch  # noqa: E402


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def layer_inputs(qmodel, ids: torch.Tensor, layers: list) -> dict:
    seen = {}
    hooks = [layer.register_forward_hook(lambda _m, args, out, n=name: seen.__setitem__(n, (args[0], out)))
             for name, layer in layers]
    with torch.no_grad():
        qmodel(input_ids=ids)
    for hook in hooks:
        hook.remove()
    return seen


def on_xnnpack(layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    class Alone(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x):
            return self.layer(x)

    ep = torch.export.export(Alone().eval(), (x,))
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    with tempfile.NamedTemporaryFile(suffix=".pte") as f:
        f.write(program.buffer)
        f.flush()
        return Runtime.get().load_program(f.name).load_method("forward").execute([x])[0]


def noise(qmodel, ids: torch.Tensor, levels: list[int], draws: int) -> None:
    from runlens_export.verify import perturbed_drifts

    with torch.no_grad():
        base = qmodel(input_ids=ids).logits[0, -1]
    for k in levels:
        moved = sorted(d for d, _ in perturbed_drifts(qmodel, ids[0].tolist(), base, 2.0 ** -k, draws))
        print(f"  every linear input x (1 + N(0, 2^-{k})), {draws} draws: 1 - cosine median "
              f"{moved[len(moved) // 2]:.2e}, largest {moved[-1]:.2e}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="models/smollm2-135m-instruct")
    ap.add_argument("--prompt", default="What is the chemical symbol for gold?")
    ap.add_argument("--format", default="raw", choices=["raw", "chat"])
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--levels", default="24,22,20,16")
    ap.add_argument("--draws", type=int, default=10)
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM

    from runlens_export.quantize import SCHEMES, linear_layers, quantized_copy

    reference = json.loads((Path(args.model) / "reference.json").read_text())
    rows = [r for r in reference["sentences"] if r["text"] == args.prompt and r.get("prompt_format", "raw") == args.format]
    if not rows:
        sys.exit(f"{args.model}/reference.json has no {args.format} prompt {args.prompt!r}")
    ids = torch.tensor([rows[0]["ids"]], dtype=torch.long)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    qmodel = quantized_copy(model, SCHEMES["int8-dynamic"], 0)
    layers = linear_layers(qmodel)
    print(f"{args.model}, {args.format} {args.prompt!r} ({ids.shape[1]} tokens), int8-dynamic")
    seen = layer_inputs(qmodel, ids, layers)
    by_size = sorted(seen, key=lambda n: -float(seen[n][0].abs().max()))
    for name in dict.fromkeys(by_size[:args.layers] + [layers[0][0], layers[-1][0]]):
        x, torchao = seen[name]
        with torch.no_grad():
            float_out = model.get_submodule(name)(x)
        print(f"  {name:32} input |x| up to {float(x.abs().max()):7.1f}: XNNPACK alone vs torchao "
              f"{relative(on_xnnpack(dict(layers)[name], x), torchao):.1e}; int8 vs the float layer "
              f"{relative(torchao, float_out):.1e}", flush=True)
    noise(qmodel, ids, [int(k) for k in args.levels.split(",")], args.draws)


if __name__ == "__main__":
    main()
