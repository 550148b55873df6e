"""The KV cache inside a text-generation program, laid out so that a decode step
costs the default kernels nothing in proportion to the cache (docs/kv-cache.md).

transformers' StaticCache with its eager attention, as exported before, spent a
fifth of a GPT-2-sized XNNPACK decode step outside the delegate copying whole
caches: `index_put` wrote the new entry into a fresh copy of the cache, a
`copy_` copied it back into the buffer, and each `matmul` over the 4-d cache
became an `expand_copy` of the whole cache (Llama's `repeat_kv` one more, times
the group size). Here, with standard operators only:

  keys    [kv_heads, head_dim, L]   stored transposed, so q @ K is a plain bmm
  values  [kv_heads, L, head_dim]
  write   index_copy_ at cache_position (an in-place `index_put_` on the buffer
          once lowering re-inplaces it: lowering.py), the only default-kernel
          work per layer, as large as the new entries
  attend  bmm on the filled part of the buffers only: the program's third input,
          key_positions int64 [F] = 0..F-1 (F = the last position written + 1),
          carries the filled length in its shape (dynamic, 1..L), so a decode
          step at position p reads p + 1 cached entries, not L; the query heads
          of each KV head are folded into its rows ([kv_heads, group * S,
          head_dim]), so grouped-query attention never repeats the cache; the
          mask, [S, F] from cache_position and key_positions, is made once per
          call and added by broadcasting

The attention runs as a transformers attention implementation (registered in
AttentionInterface under ATTENTION, set on the model only while it is exported:
`attention_for_export`), inside each model's own attention module (projections,
RoPE, Qwen3's q/k norms are the model's), which hands it the cache, the
positions and the mask through the keyword arguments the model passes down.
transformers makes no mask of its own for an implementation it does not know.
"""

from __future__ import annotations

import contextlib

import torch

from .files import ExportError

# The name of the attention implementation while a KV-cache program is exported.
ATTENTION = "runlens_static_cache"
# The buffers' names (prefixes): they start as zeros in the program (lowering.py).
CACHE_BUFFERS = ("key_cache", "value_cache")


class StaticKV(torch.nn.Module):
    """The keys (transposed) and values of every layer for one sequence of `max_len` positions."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, max_len: int, dtype: torch.dtype):
        super().__init__()
        self.max_len = max_len
        for i in range(layers):
            self.register_buffer(f"key_cache_{i}", torch.zeros(kv_heads, head_dim, max_len, dtype=dtype), persistent=False)
            self.register_buffer(f"value_cache_{i}", torch.zeros(kv_heads, max_len, head_dim, dtype=dtype), persistent=False)
    @staticmethod
    def mask(cache_position: torch.Tensor, key_positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """[S, F]: 0 where query s may see cache entry j (j <= its position), the dtype's
        minimum elsewhere, as transformers' eager mask. Entries past F are never read;
        within F, those after a query's own position (the later prompt tokens of the
        same call) are hidden."""
        visible = key_positions.unsqueeze(0) <= cache_position.unsqueeze(1)
        return torch.where(visible, 0.0, torch.finfo(dtype).min).to(dtype)

    def write(self, layer: int, key: torch.Tensor, value: torch.Tensor, cache_position: torch.Tensor, filled: int):
        """Writes the S new keys and values ([1, kv_heads, S, head_dim] each) at
        cache_position; returns the layer's first `filled` entries (keys
        [kv_heads, head_dim, F], values [kv_heads, F, head_dim]), the only ones attention reads."""
        keys, values = getattr(self, f"key_cache_{layer}"), getattr(self, f"value_cache_{layer}")
        keys.index_copy_(2, cache_position, key[0].transpose(1, 2))
        values.index_copy_(1, cache_position, value[0])
        return keys[:, :, :filled], values[:, :filled, :]

    def call_kwargs(self, cache_position: torch.Tensor, key_positions: torch.Tensor, dtype: torch.dtype) -> dict:
        """What the model passes down to `attend` on every layer."""
        return {"runlens_kv": self, "runlens_position": cache_position, "runlens_filled": key_positions.shape[0],
                "runlens_mask": self.mask(cache_position, key_positions, dtype)}


def attend(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           attention_mask, scaling: float | None = None, dropout: float = 0.0, **kwargs):
    """A transformers attention function: query [1, heads, S, d], the new key and
    value [1, kv_heads, S, d]; returns ([1, S, heads, d], None)."""
    kv = kwargs.get("runlens_kv")
    if kv is None:
        raise ExportError(f"{ATTENTION} attention runs only inside the KV-cache program's wrapper (decoder.py)")
    if kwargs.get("sliding_window") is not None:
        raise ExportError("sliding-window attention has no static KV cache here; export full attention only")
    keys, values = kv.write(module.layer_idx, key, value, kwargs["runlens_position"], kwargs["runlens_filled"])
    kv_heads, length = keys.shape[0], keys.shape[2]
    return grouped_attention(query, keys, values, kv_heads, length, kwargs["runlens_mask"], scaling), None


def grouped_attention(query: torch.Tensor, keys_t: torch.Tensor, values: torch.Tensor, kv_heads: int, length: int,
                      mask: torch.Tensor, scaling: float | None) -> torch.Tensor:
    """Attention with grouped-query heads folded into their KV head's rows, so the
    cache is never repeated: query [1, heads, S, d], keys_t [kv_heads, d, T] (the keys
    transposed), values [kv_heads, T, d], mask broadcast to [kv_heads, group, S, T];
    returns [1, S, heads, d]. The KV-cache programs' `attend` and the ONNX decoder's
    (onnx_decoder.py) both call it."""
    _, heads, s, d = query.shape
    group = heads // kv_heads
    if scaling is None:
        scaling = d ** -0.5
    # Query head h = g * group + r reads KV head g: rows r * S + s of group g.
    q = query.reshape(kv_heads, group * s, d)
    scores = torch.bmm(q, keys_t) * scaling  # [kv_heads, group * S, T]
    scores = scores.view(kv_heads, group, s, length) + mask
    probs = torch.softmax(scores, dim=-1).view(kv_heads, group * s, length)
    out = torch.bmm(probs, values)  # [kv_heads, group * S, d]
    return out.view(1, heads, s, d).transpose(1, 2)


@contextlib.contextmanager
def attention_as(model: torch.nn.Module, name: str, attend_fn):
    """`attend_fn` registered in transformers' AttentionInterface under `name` and set as
    the model's attention while a program is traced; the model's own implementation
    again afterwards (the check at export runs transformers as it loaded). The KV-cache
    programs (here), the cache-inputs ones (cache_inputs.py) and the ONNX decoder
    (onnx_decoder.py) each trace with their own."""
    from transformers import AttentionInterface

    AttentionInterface.register(name, attend_fn)
    before = model.config._attn_implementation
    model.set_attn_implementation(name)
    try:
        yield
    finally:
        model.set_attn_implementation(before)


def attention_for_export(model: torch.nn.Module):
    """`attend` as the model's attention while the KV-cache program is exported."""
    return attention_as(model, ATTENTION, attend)
