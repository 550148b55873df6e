"""What runlens' `eager-int8` / `eager-int4` columns must compute, computed
independently: the checkpoint loaded by transformers, every linear layer (GPT-2's
Conv1D projections and the LM head included) replaced by the dequantized weight
of the scheme (docs/quantization.md, "Quantized eager columns"), its input
rounded to bfloat16 and its output to bfloat16 as ATen's packed kernels do.

  int8: symmetric per output channel, scale = max|w| / 127.5 rounded to
        bfloat16, q = clamp(round(w / scale), -128, 127)
  int4: symmetric per group of G input channels (the largest of 256, 128, 64,
        32 not above the asked size that divides the width; a layer none
        divides stays float), scale = max|w| / 7.5 rounded to bfloat16,
        q = clamp(round(w / scale), -8, 7)

Usage: eager_quant_reference.py MODEL_DIR FORMAT [--group-size G] --ids 1,2,3 [--new-tokens N]
Prints JSON: {"first_logits": [...], "greedy_ids": [...], "teacher_logits_argmax": [...]}
(greedy from the prompt; and the argmax at each position of prompt + greedy ids).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch


def scales_of(amax: torch.Tensor, half_range: float) -> torch.Tensor:
    return (amax / half_range).clamp_min(torch.finfo(torch.float32).eps).to(torch.bfloat16).float()


def dequantize(w: torch.Tensor, fmt: str, group: int) -> torch.Tensor | None:
    n, k = w.shape
    if fmt == "int8":
        s = scales_of(w.abs().amax(1), 127.5)[:, None]
        return (w / s).round().clamp(-128, 127) * s
    g = next((g for g in (256, 128, 64, 32) if g <= max(group, 32) and k % g == 0), None)
    if g is None:
        return None
    wg = w.reshape(n, k // g, g)
    s = scales_of(wg.abs().amax(2), 7.5)[..., None]
    return ((wg / s).round().clamp(-8, 7) * s).reshape(n, k)


def quantized_forward(weight: torch.Tensor, bias: torch.Tensor | None):
    """The reference: the dequantized weight, bfloat16 input and output."""
    def forward(x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.linear(x.to(torch.bfloat16).float(), weight).to(torch.bfloat16).float()
        return y if bias is None else y + bias
    return forward


def packed_forward(w: torch.Tensor, fmt: str, group: int, bias: torch.Tensor | None):
    """The same scheme on ATen's packed kernels, as runlens' eager-int8 / eager-int4
    call them (python/bench_generate.py's Python counterparts); None when a 4-bit
    layer's width takes no group size (it stays float)."""
    w = w.contiguous()
    n, k = w.shape
    if fmt == "int8":
        s = scales_of(w.abs().amax(1), 127.5)
        q = (w / s[:, None]).round().clamp(-128, 127).to(torch.int8)
        s = s.to(torch.bfloat16)

        def mm(x):
            return torch._weight_int8pack_mm(x, q, s)
    else:
        g = next((g for g in (256, 128, 64, 32) if g <= max(group, 32) and k % g == 0), None)
        if g is None:
            return None
        wg = w.reshape(n, k // g, g)
        s = scales_of(wg.abs().amax(2), 7.5)
        u = ((wg / s[..., None]).round().clamp(-8, 7) + 8).reshape(n, k).to(torch.int32)
        padded = -(-n // 16) * 16
        u = torch.nn.functional.pad(u, (0, 0, 0, padded - n))
        s = torch.nn.functional.pad(s, (0, 0, 0, padded - n))
        packed = torch._convert_weight_to_int4pack_for_cpu(u, 2)
        sz = torch.stack([s, torch.zeros_like(s)], 2).transpose(0, 1).contiguous().to(torch.bfloat16)

        def mm(x):
            return torch._weight_int4pack_mm_for_cpu(x, packed, g, sz)[:, :n]

    def forward(x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = mm(x.reshape(-1, k).to(torch.bfloat16)).float().reshape(*shape[:-1], n)
        return y if bias is None else y + bias
    return forward


def quantize_linears(model: torch.nn.Module, fmt: str, group: int, packed: bool) -> int:
    """Every linear layer of a transformers decoder (GPT-2's Conv1D and the LM head
    included) computed by the scheme: the dequantized reference, or ATen's
    packed kernels. Returns how many layers were quantized."""
    from transformers.pytorch_utils import Conv1D

    count = 0
    for module in list(model.modules()):
        if isinstance(module, Conv1D):
            w = module.weight.detach().t()  # Conv1D stores [in, out]
        elif isinstance(module, torch.nn.Linear):
            w = module.weight.detach()
        else:
            continue
        bias = None if module.bias is None else module.bias.detach()
        if packed:
            forward = packed_forward(w.float(), fmt, group, bias)
        else:
            deq = dequantize(w.float(), fmt, group)
            forward = None if deq is None else quantized_forward(deq, bias)
        if forward is not None:
            module.forward = forward
            count += 1
    return count


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("format", choices=["int8", "int4"])
    ap.add_argument("--group-size", type=int, default=128)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--new-tokens", type=int, default=16)
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, torch_dtype=torch.float32, attn_implementation="eager").eval()
    quantize_linears(model, args.format, args.group_size, packed=False)
    ids = [int(t) for t in args.ids.split(",")]
    with torch.no_grad():
        first = model(torch.tensor([ids])).logits[0, -1]
        seq = list(ids)
        for _ in range(args.new_tokens):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
        teacher = model(torch.tensor([seq])).logits[0].argmax(-1).tolist()
    json.dump({"first_logits": first.tolist(), "greedy_ids": seq[len(ids):], "teacher_logits_argmax": teacher}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
