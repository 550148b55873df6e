"""A decoder's ONNX file with its KV cache as inputs and outputs, as Optimum lays
one out (`past_key_values.{i}.key` / `.value` in, `present.{i}.key` / `.value`
out), so that generation is one ONNX Runtime run per token (onnx_files.py writes
it and its 8-bit copy; docs/onnxruntime.md).

    inputs   input_ids        int64 [1, S]       the new tokens (the prompt, then one a step)
             attention_mask   int64 [1, P + S]   ones over the past and the new tokens
             position_ids     int64 [1, S]       P .. P + S - 1
             past_key_values.{i}.key / .value    float32 [1, kv_heads, P, head_dim] (P = 0 first)
    outputs  logits           float32 [1, S, V]
             present.{i}.key / .value            float32 [1, kv_heads, P + S, head_dim]

The attention runs as a transformers attention implementation registered while
the file is exported (as static_cache.py does for the ExecuTorch programs): inside
each model's own attention module (projections, RoPE, Qwen3's q/k norms are the
model's), it appends the new keys and values to the layer's past (`Concat`), keeps
them as the layer's present, and attends over all of them with a mask made from
the positions (key j is visible to query s when j <= its position and the mask has
a one there). Grouped-query heads are folded into the KV heads' rows, so the cache
is never repeated. Standard ONNX operators only; the TorchScript exporter, opset 17.

What it costs (SmolLM2-135M-Instruct, W = 538 MB of float32 weights, this exporter
alone in a process that held 0.95 GiB with the model loaded): 13 s and a peak of
2.83 GiB, about 3.5 x W above the loaded model (the traced graph, the ModelProto with
its initializers and its serialised bytes), which onnx_files.py checks before it starts.
Each linear layer's weight is traced already transposed (`linear_weights_transposed`),
so that ONNX Runtime's quantizer sees it: one more copy of W while the file is written.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from .files import ExportError
from .static_cache import attention_as, grouped_attention

ATTENTION = "runlens_onnx_past"
TRANSPOSED = "runlens_weight_t"  # the buffer linear_weights_transposed adds while tracing


class PastPresent:
    """The past keys and values of every layer handed to the attention, and the presents it makes."""

    def __init__(self, past: list[torch.Tensor], attention_mask: torch.Tensor, position_ids: torch.Tensor, dtype):
        self.past = past
        self.presents: list[torch.Tensor | None] = [None] * len(past)
        # Key j is visible to query s when j <= position s and the mask keeps it: [S, P + S].
        key_positions = attention_mask[0].cumsum(0) - 1
        visible = (key_positions.unsqueeze(0) <= position_ids[0].unsqueeze(1)) & (attention_mask[0] > 0).unsqueeze(0)
        self.mask = torch.where(visible, 0.0, torch.finfo(dtype).min).to(dtype)

    def append(self, layer: int, key: torch.Tensor, value: torch.Tensor):
        keys = torch.cat([self.past[2 * layer], key], dim=2)
        values = torch.cat([self.past[2 * layer + 1], value], dim=2)
        self.presents[2 * layer], self.presents[2 * layer + 1] = keys, values
        return keys, values


def attend(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           attention_mask, scaling: float | None = None, dropout: float = 0.0, **kwargs):
    """A transformers attention function: query [1, heads, S, d], the new key and
    value [1, kv_heads, S, d]; returns ([1, S, heads, d], None)."""
    kv = kwargs.get("runlens_past")
    if kv is None:
        raise ExportError(f"{ATTENTION} attention runs only inside the ONNX decoder's wrapper (onnx_decoder.py)")
    if kwargs.get("sliding_window") is not None:
        raise ExportError("sliding-window attention is not written to ONNX here; export full attention only")
    keys, values = kv.append(module.layer_idx, key, value)  # [1, kv_heads, T, d]
    return grouped_attention(query, keys[0].transpose(1, 2), values[0], keys.shape[1], keys.shape[2], kv.mask, scaling), None


def attention_for_export(model: torch.nn.Module):
    """`attend` as the model's attention while the ONNX graph is traced."""
    return attention_as(model, ATTENTION, attend)


@contextlib.contextmanager
def linear_weights_transposed(model: torch.nn.Module):
    """Every `nn.Linear` of the model computes `x @ W^T (+ b)` from a copy of its weight
    stored transposed, `[in, out]`, while the file is traced, so that each MatMul's
    weight is an initializer of its own.

    Traced as the module is, a linear layer's MatMul reads its weight through a
    `Transpose` node: ONNX Runtime folds those when a session opens, but its quantizer
    (quantize_dynamic) quantizes only a MatMul whose weight is an initializer, so
    SmolLM2's 8-bit copy quantized nothing but the embedding table (434 MiB against
    514 MiB, found 2026-12-06). Folding the file afterwards (onnx's Python package) peaked
    at 3.1 GB for that model: its protobuf arena keeps every replaced tensor. A tied
    head's table is stored twice, as the exporter's own folding would store it.
    GPT-2's `Conv1D` keeps `[in, out]` already (a `Gemm`, which quantize_dynamic leaves).
    """
    patched = []
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            # A persistent buffer, in the state dict the exporter names initializers from (a
            # captured tensor or a non-persistent buffer becomes a Constant node, which the
            # quantizer passes over too).
            module.register_buffer(TRANSPOSED, module.weight.detach().t().contiguous())

            def forward(x, module=module):
                y = torch.matmul(x, getattr(module, TRANSPOSED))
                return y if module.bias is None else y + module.bias

            module.forward = forward  # an instance attribute: shadows nn.Linear.forward
            patched.append(module)
    try:
        yield
    finally:
        for module in patched:
            del module.forward
            delattr(module, TRANSPOSED)


class DecoderWithPast(torch.nn.Module):
    def __init__(self, model: torch.nn.Module, layers: int):
        super().__init__()
        from .decoder import arch_and_geometry

        arch, _ = arch_and_geometry(model)
        self.model, self.layers = arch.prepare(model), layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        kv = PastPresent(list(past), attention_mask, position_ids, self.model.dtype)
        out = self.model(input_ids=input_ids, position_ids=position_ids, use_cache=False, runlens_past=kv)
        return (out.logits, *kv.presents)


def names(layers: int) -> tuple[list[str], list[str]]:
    """The graph's input and output names, as Optimum's decoders name them."""
    past = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    return ["input_ids", "attention_mask", "position_ids", *past], ["logits", *present]


def export(model: torch.nn.Module, path: Path, opset: int) -> tuple[list[str], str]:
    """Writes the decoder with past/present to `path`; its inputs and its logits' name."""
    from .decoder import arch_and_geometry

    _, g = arch_and_geometry(model)
    inputs, outputs = names(g.layers)
    wrapper = DecoderWithPast(model, g.layers).eval()
    p, s = 3, 2  # an example with a past, so that every length is traced as a dimension
    past = [torch.zeros(1, g.kv_heads, p, g.head_dim, dtype=model.dtype) for _ in range(2 * g.layers)]
    example = (torch.ones(1, s, dtype=torch.long), torch.ones(1, p + s, dtype=torch.long),
               torch.arange(p, p + s, dtype=torch.long).unsqueeze(0), *past)
    axes = {"input_ids": {1: "sequence"}, "attention_mask": {1: "total"}, "position_ids": {1: "sequence"},
            "logits": {1: "sequence"}}
    axes.update({n: {2: "past"} for n in inputs[3:]})
    axes.update({n: {2: "total"} for n in outputs[1:]})
    with attention_for_export(model), linear_weights_transposed(model), torch.inference_mode():
        torch.onnx.export(wrapper, example, str(path), input_names=inputs, output_names=outputs, dynamic_axes=axes,
                          opset_version=opset, dynamo=False,
                          # Folded, the exporter holds a transposed copy of every weight beside the
                          # model's (SmolLM2: 3.15 GiB peak against 2.83 GiB); the weights are given
                          # to it transposed instead (linear_weights_transposed).
                          do_constant_folding=False)
    return inputs, outputs[0]



def greedy(session, prompt: list[int], n: int, layers: int, kv_heads: int, head_dim: int) -> tuple[list[int], "np.ndarray"]:
    """`n` greedy tokens after `prompt` through ONNX Runtime's Python package, one run
    for the prompt and one a token, the presents fed back as the pasts; and the
    first step's logits [V]."""
    import numpy as np

    inputs, outputs = names(layers)
    past = {name: np.zeros((1, kv_heads, 0, head_dim), dtype=np.float32) for name in inputs[3:]}
    ids, filled, out, first = list(prompt), 0, [], None
    new = list(prompt)
    for _ in range(n):
        s = len(new)
        feeds = {"input_ids": np.array([new], dtype=np.int64), "attention_mask": np.ones((1, filled + s), dtype=np.int64),
                 "position_ids": np.arange(filled, filled + s, dtype=np.int64)[None, :], **past}
        result = session.run(outputs, feeds)
        logits = result[0][0, -1]
        if first is None:
            first = logits
        token = int(np.argmax(logits))
        out.append(token)
        past = dict(zip(inputs[3:], result[1:]))
        filled += s
        new = [token]
        ids.append(token)
    return out, first
