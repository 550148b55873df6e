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
fully-connected node.

The embeddings (every nn.Embedding: the tokens', and GPT-2's positions') are
quantized weight-only as ExecuTorch's recipe does (`--embedding-quantize`):
8-bit with one scale per row for int8-dynamic, 4-bit in groups of 32 (the
recipe's `4,32`) for 8da4w, by QuantizedEmbedding below, which calls
`quantized_decomposed::embedding_byte` / `embedding_4bit` itself. XNNPACK has no
embedding node, so the op stays outside the delegate, on the kernels of the
wheel's libexecutorch_kernels_quantized, which runlens links (lowering.py's
operator check allows exactly these). torchao's weight-only config on an
embedding would leave `torchao::dequantize_affine` instead, which has no
ExecuTorch kernel.

transformers' GPT-2 uses `Conv1D` (weight stored [in, out]) for its
projections, not nn.Linear: they are converted first, or `quantize_` leaves
them alone and the program stays fp32-sized. A head tied to the embedding is
untied: the head is quantized as a linear layer (inside the delegate), the
embedding as an embedding; the program holds both copies, as the float
program does (the delegate keeps its own copy of the head's weight).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass

import torch

from .files import ExportError, say

# ExecuTorch's LLM export recipe for Llama 3.2 (examples/models/llama README):
# 8da4w with group size 128, and 4-bit embeddings in groups of 32 (`--embedding-quantize 4,32`).
# Without --group-size the largest of GROUP_SIZES that divides every linear layer's
# input width (SmolLM2's 576 takes 64). XNNPACK delegates a grouped 4-bit weight only
# when its group is a multiple of 32 (executorch/backends/xnnpack/operators/node_visitor.py
# asserts it at lowering), so 16 is not among them.
DEFAULT_GROUP_SIZE = 128
GROUP_SIZES = (128, 64, 32)
XNNPACK_GROUP_MULTIPLE = 32
EMBEDDING_GROUP_SIZE = 32
# The embedding operators the programs call, as lowering.py's check and the
# manifest name them; their kernels are in libexecutorch_kernels_quantized.
EMBEDDING_OPS = {8: "quantized_decomposed::embedding_byte", 4: "quantized_decomposed::embedding_4bit"}


@dataclass(frozen=True)
class Scheme:
    name: str  # the manifest's "quantization"
    bits: int
    grouped: bool  # True: one scale per group of input channels; False: per output channel

    @property
    def embedding_group_size(self) -> int | None:
        """The embeddings' group (None: one scale per row)."""
        return EMBEDDING_GROUP_SIZE if self.grouped else None

    def embedding_describe(self) -> str:
        group = self.embedding_group_size
        return f"embeddings {self.bits}-bit " + (f"in groups of {group}" if group else "per row")

    def describe(self, group_size: int | None) -> str:
        weights = (f"{self.bits}-bit weights in groups of {group_size}" if self.grouped
                   else f"{self.bits}-bit weights per output channel")
        return (f"{self.name}: linear layers with {weights}, activations quantized to 8 bits per token at run time, "
                f"{self.embedding_describe()}")


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


def linear_widths(model: torch.nn.Module) -> list[int]:
    """The distinct input widths of the model's linear layers (nn.Linear, and
    transformers' Conv1D, whose weight is stored [in, out])."""
    from transformers.pytorch_utils import Conv1D

    widths = {m.in_features for _, m in linear_layers(model)}
    widths |= {int(m.weight.shape[0]) for m in model.modules() if isinstance(m, Conv1D)}
    return sorted(widths)


def pick_group_size(model: torch.nn.Module, asked: int | None) -> tuple[int, str]:
    """The 4-bit weights' group and why: `asked` (--group-size) when it divides every
    linear layer's input width and XNNPACK takes it, else an ExportError; without
    it the largest of GROUP_SIZES that divides them all."""
    widths = linear_widths(model)
    if asked is not None:
        narrow = [w for w in widths if asked < 1 or w % asked]
        if narrow or asked % XNNPACK_GROUP_MULTIPLE:
            fits = [g for g in GROUP_SIZES if all(w % g == 0 for w in widths)]
            why = (f"must divide every linear layer's input width ({', '.join(map(str, narrow))} do not)" if narrow
                   else f"XNNPACK takes groups that are a multiple of {XNNPACK_GROUP_MULTIPLE} only")
            raise ExportError(f"--group-size {asked}: {why}; "
                              + (f"pass {fits[0]} or leave it out" if fits else "no group of 128, 64 or 32 fits"))
        return asked, "--group-size"
    for g in GROUP_SIZES:
        if all(w % g == 0 for w in widths):
            return g, f"the largest of {', '.join(map(str, GROUP_SIZES))} dividing every linear input width ({', '.join(map(str, widths))})"
    raise ExportError(f"no 4-bit weight group of {', '.join(map(str, GROUP_SIZES))} divides every linear layer's input "
                      f"width ({', '.join(map(str, widths))}; XNNPACK takes multiples of {XNNPACK_GROUP_MULTIPLE} only)")


def float_parts() -> list[str]:
    """What the schemes leave in float, as the manifest names it: the norms, the
    attention arithmetic over the float KV cache (and the biases, the scales,
    the rotary tables)."""
    return ["norms", "attention", "kv-cache"]


def embedding_fields(scheme: Scheme) -> dict:
    """The manifest's record of how the embeddings are quantized."""
    return {"embedding_bits": scheme.bits, "embedding_group_size": scheme.embedding_group_size,
            "embedding_operator": EMBEDDING_OPS[scheme.bits]}


def register_quantized_ops() -> None:
    """Defines the `quantized_decomposed` embedding operators in PyTorch (their
    reference implementations and out variants: ExecuTorch's exir module)."""
    import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401


def load_quantized_kernels() -> None:
    """Registers the wheel's quantized kernels (quantized_decomposed::*.out) with
    ExecuTorch's Python runtime, which does not load them by itself: the check at
    export runs the programs there (verify.py). runlens links the same library."""
    register_quantized_ops()
    import executorch.kernels.quantized  # noqa: F401


class QuantizedEmbedding(torch.nn.Module):
    """An nn.Embedding with weight-only quantized rows, computed by ExecuTorch's
    `quantized_decomposed` embedding operator (the float32 rows it returns are
    (q - zero point) x scale):

      bits 8: int8 [V, D], one float32 scale and zero point per row   -> embedding_byte
      bits 4: uint8 [V, D/2], two values a byte (the even column in the high
              nibble, stored +8), one float32 scale and zero point per group
              of `group_size` columns, [V, D/group_size]               -> embedding_4bit

    Asymmetric over each row's or group's range (0 included), using every level:
    scale = (max - min) / (2^bits - 1), zero point = qmin - round(min / scale).
    A symmetric grid (max|w| / qmax, ExecuTorch's default) would do on a trained
    model, but on the test checkpoints, whose RMSNorm weights are all ones, layer
    0's input is then a row of integers times one number per token, which the
    linear layers' per-token 8-bit activation quantization meets at exact
    rounding ties that XNNPACK and PyTorch break differently (logits apart by up
    to 0.26). Over the full range a row's values are integers minus the zero
    point times range/255 (or /15), which that quantization maps to integers
    again: no ties (docs/quantization.md)."""

    def __init__(self, weight: torch.Tensor, bits: int, group_size: int | None):
        super().__init__()
        if bits not in EMBEDDING_OPS:
            raise ExportError(f"{bits}-bit embeddings: runlens quantizes embeddings to 8 or 4 bits")
        rows, dim = weight.shape
        group = group_size or dim
        if dim % group or (bits == 4 and group % 2):
            raise ExportError(f"an embedding {dim} wide cannot be split into groups of {group}; "
                              f"{bits}-bit embeddings need a width that is a multiple of {group}")
        qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        w = weight.detach().float().reshape(rows, dim // group, group)
        lo = w.amin(dim=-1).clamp(max=0.0)
        hi = w.amax(dim=-1).clamp(min=0.0)
        scales = ((hi - lo) / (qmax - qmin)).clamp(min=torch.finfo(torch.float32).tiny)
        zero_points = (qmin - torch.round(lo / scales)).clamp(qmin, qmax)
        q = (torch.round(w / scales.unsqueeze(-1)) + zero_points.unsqueeze(-1)).clamp(qmin, qmax)
        q = q.to(torch.int8).reshape(rows, dim)
        if bits == 4:
            shifted = (q + 8).to(torch.uint8).reshape(rows, dim // 2, 2)
            q = shifted[..., 0] * 16 + shifted[..., 1]
        self.bits, self.group_size, self.num_embeddings, self.embedding_dim = bits, group_size, rows, dim
        self.register_buffer("weight", q.contiguous())
        shape = (rows,) if group == dim else (rows, dim // group)
        self.register_buffer("scales", scales.reshape(shape).contiguous())
        self.register_buffer("zero_points", zero_points.reshape(shape).contiguous())

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        if self.bits == 8:
            return torch.ops.quantized_decomposed.embedding_byte(self.weight, self.scales, self.zero_points, -128, 127, indices)
        return torch.ops.quantized_decomposed.embedding_4bit(self.weight, self.scales, self.zero_points, -8, 7, indices)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, bits={self.bits}, group_size={self.group_size}"


def quantize_embeddings(model: torch.nn.Module, scheme: Scheme) -> list[str]:
    """Replaces every nn.Embedding of `model` by its QuantizedEmbedding; returns their names."""
    register_quantized_ops()
    names = []
    for parent_name, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Embedding):
                setattr(parent, name, QuantizedEmbedding(child.weight, scheme.bits, scheme.embedding_group_size))
                names.append(f"{parent_name}.{name}" if parent_name else name)
    if not names:
        raise ExportError(f"{type(model).__name__} has no nn.Embedding to quantize")
    return names


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

    # The copy shares the float model's tensors instead of holding a second float model
    # (0.54 GB at SmolLM2-135M's sizes, 2 GB at Qwen2.5-0.5B's, at the export's peak):
    # quantizing replaces each linear layer's and embedding's weight by a new tensor
    # (torchao's quantize_, QuantizedEmbedding) and never writes into one, which the
    # tensors' version counters confirm below.
    shared = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    versions = [(t, t._version) for t in shared.values()]
    q = copy.deepcopy(model, dict(shared)).eval()
    converted = conv1d_to_linear(q)
    layers = linear_layers(q)
    if not layers:
        raise ExportError(f"{type(model).__name__} has no linear layers to quantize")
    if scheme.grouped:
        group_size, _ = pick_group_size(q, group_size)
    granularity = PerGroup(group_size) if scheme.grouped else PerAxis(0)
    dtype = torch.int4 if scheme.bits == 4 else torch.int8
    quantize_(q, Int8DynamicActivationIntxWeightConfig(weight_dtype=dtype, weight_granularity=granularity))
    if scheme.grouped:
        round_group_scales_to_bf16(q)
    embeddings = quantize_embeddings(q, scheme)
    say(f"quantized {len(layers)} linear layers ({converted} converted from Conv1D) and {len(embeddings)} "
        f"embeddings ({', '.join(embeddings)}) to {scheme.describe(group_size if scheme.grouped else None)}")
    q.requires_grad_(False)
    written = [t for t, v in versions if t._version != v]
    if written:
        raise ExportError(f"quantizing wrote into {len(written)} of the float model's tensors, which the "
                          f"quantized copy shares with it (quantize.quantized_copy)")
    return q
