"""Quantized weights for a decoder's XNNPACK programs (decoder.py), the way
ExecuTorch's LLM recipe does it with torchao, before the model is wrapped in
the static-cache module:

  int8-dynamic  every nn.Linear (the head included): 8-bit weights, one scale
                per output channel (symmetric), activations quantized to 8 bits
                per token at run time (Int8DynamicActivationIntxWeightConfig,
                weight int8, PerAxis(0))
  8da4w         the same with 4-bit weights, one scale per group of
                `group_size` input channels (PerGroup(group_size)): ExecuTorch's
                "8da4w" (8-bit dynamic activations, 4-bit weights)

XnnpackPartitioner takes the quantize / dequantize pattern torchao leaves in
the graph and runs each linear as one XNNPACK dynamically quantized
fully-connected node. The embeddings stay in float: ExecuTorch's recipe
quantizes them too (`--embedding-quantize 4,32`, `quantized_decomposed::embedding_*`
outside the delegate, kernels runlens links), but torchao's weight-only config on
an embedding leaves `torchao::dequantize_affine`, which has no ExecuTorch kernel
(docs/quantization.md: what it would take).

transformers' GPT-2 uses `Conv1D` (weight stored [in, out]) for its
projections, not nn.Linear: they are converted first, or `quantize_` leaves
them alone and the program stays fp32-sized. A head tied to the embedding is
untied (the head quantized, the embedding kept in float).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from .files import ExportError, say

# ExecuTorch's LLM export recipe for Llama 3.2 (examples/models/llama README):
# 8da4w with group size 128.
DEFAULT_GROUP_SIZE = 128


@dataclass(frozen=True)
class Scheme:
    name: str  # the manifest's "quantization"
    bits: int
    grouped: bool  # True: one scale per group of input channels; False: per output channel

    def describe(self, group_size: int | None) -> str:
        weights = (f"{self.bits}-bit weights in groups of {group_size}" if self.grouped
                   else f"{self.bits}-bit weights per output channel")
        return f"{self.name}: linear layers with {weights}, activations quantized to 8 bits per token at run time"


SCHEMES = {
    "int8-dynamic": Scheme("int8-dynamic", 8, False),
    "8da4w": Scheme("8da4w", 4, True),
}


def conv1d_to_linear(model: torch.nn.Module) -> int:
    """Replaces every transformers Conv1D by the nn.Linear it computes (weight
    transposed, same bias); returns how many."""
    from transformers.pytorch_utils import Conv1D

    count = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, Conv1D):
                n_in, n_out = child.weight.shape
                linear = torch.nn.Linear(n_in, n_out, bias=child.bias is not None)
                linear.weight = torch.nn.Parameter(child.weight.detach().t().contiguous(), requires_grad=False)
                if child.bias is not None:
                    linear.bias = torch.nn.Parameter(child.bias.detach().clone(), requires_grad=False)
                setattr(parent, name, linear)
                count += 1
    return count


def linear_layers(model: torch.nn.Module) -> list[tuple[str, torch.nn.Linear]]:
    return [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def float_parts() -> list[str]:
    """What the schemes leave in float, as the manifest names it: the embeddings
    (token, and GPT-2's positions), the norms, the attention arithmetic over the
    float KV cache."""
    return ["embedding", "norms", "attention", "kv-cache"]


def round_group_scales_to_bf16(model: torch.nn.Module) -> None:
    """XNNPACK's blockwise 4-bit kernels hold each group's scale as bfloat16:
    round the scales to bfloat16 values here, so that the program and the
    quantized model run by PyTorch compute with the same weights (without it
    their logits differ by up to 1e-1 on the tiny GPT-2)."""
    for _, layer in linear_layers(model):
        scale = getattr(layer.weight, "scale", None)
        if scale is None:
            raise ExportError(f"torchao's quantized weight {type(layer.weight).__name__} has no scale to round")
        scale.copy_(scale.to(torch.bfloat16).to(scale.dtype))


def quantized_copy(model: torch.nn.Module, scheme: Scheme, group_size: int) -> torch.nn.Module:
    """A copy of `model` with its linear layers quantized by `scheme` (the float model is left as it is)."""
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup

    q = copy.deepcopy(model).eval()
    converted = conv1d_to_linear(q)
    head = q.get_output_embeddings()
    embedding = q.get_input_embeddings()
    if head is not None and head.weight is embedding.weight:
        head.weight = torch.nn.Parameter(head.weight.detach().clone(), requires_grad=False)
    layers = linear_layers(q)
    if not layers:
        raise ExportError(f"{type(model).__name__} has no linear layers to quantize")
    if scheme.grouped:
        narrow = sorted({m.in_features for _, m in layers if m.in_features % group_size})
        if group_size < 1 or narrow:
            raise ExportError(f"--group-size {group_size}: must divide every linear layer's input width "
                              f"({', '.join(map(str, narrow))} do not); pass one that does (e.g. 32)")
    granularity = PerGroup(group_size) if scheme.grouped else PerAxis(0)
    dtype = torch.int4 if scheme.bits == 4 else torch.int8
    quantize_(q, Int8DynamicActivationIntxWeightConfig(weight_dtype=dtype, weight_granularity=granularity))
    if scheme.grouped:
        round_group_scales_to_bf16(q)
    say(f"quantized {len(layers)} linear layers ({converted} converted from Conv1D) to {scheme.describe(group_size if scheme.grouped else None)}")
    q.requires_grad_(False)
    return q
