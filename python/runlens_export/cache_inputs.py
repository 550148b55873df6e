"""The KV cache as the program's inputs: the caller owns it (issue 42 item 3, docs/kv-cache.md).

A `static` KV-cache program (static_cache.py) keeps the cache in mutable buffers and reads
the filled part through two slice copies per layer on the default kernels, and XNNPACK then
packs the slices again for its batch matrix products: a decode step pays its cache several
times over. Here the program keeps no cache. Per layer and KV head the caller holds the keys
and the values of L + 1 rows of head_dim floats, row 0 a slot kept at zero, position p at
row p + 1, and hands the program the filled prefix of each, F = filled + 1 rows, as inputs
that are not memory-planned (lowering.lower's `caller_cache`): ExecuTorch reads the
caller's memory where it is, the prefix of a row-major buffer being one contiguous block,
with no slice and no copy. The program returns the new keys and values for the caller to
write at rows start + 1 .. start + S.

Two methods, standard operators only, everything on the cache inside the delegate:

  forward   one new token (decode), positions [p]:
            inputs  input_ids int64 [1, 1], cache_position int64 [1] (= p),
                    key_positions int64 [F] (= 0..F-1, F = p + 1),
                    keys   float32 [F, head_dim]     x layers * kv_heads (layer-major),
                    values float32 [1, F, head_dim]  x layers * kv_heads
            The scores are linear(q, K) (XNNPACK's Fully Connected with the keys as a
            runtime weight), the new token's own score takes row 0's place (row 0 is zero,
            so its score is 0 before), its value is added with row 0's probability: nothing
            is concatenated, nothing copied.
  prefill   a prompt's chunk, S new tokens (1..prefill_chunk), positions start..start+S-1: the same inputs
            with F = start + 1; the past and the new entries concatenated inside the
            delegate (one copy of the past per chunk, shared by its S tokens), the mask
            [S, F + S] hiding row 0 and the later tokens of the chunk.
  outputs   logits float32 [1, V] (the last new token's), new keys and new values
            float32 [layers, kv_heads, S, head_dim].

runlens (src/backend/executorch/decoder.rs) and the Python driver below (`CallerCache`,
the check at export and bench_generate.py) call it the same way.
"""

from __future__ import annotations

import torch

from .archs import arch_and_geometry
from .files import ExportError
from .static_cache import attention_as

ATTENTION = "runlens_cache_inputs"
# The program's methods: one new token, and a chunk of a prompt.
STEP, PREFILL = "forward", "prefill"


class CallerKV:
    """What the model hands down to `attend` on every layer during one call: the past keys
    and values of each (layer, KV head), where each layer's new ones go, and the mask."""

    def __init__(self, past_keys: list, past_values: list, kv_heads: int, step: bool,
                 cache_position: torch.Tensor, key_positions: torch.Tensor, dtype: torch.dtype):
        self.past_keys, self.past_values, self.kv_heads, self.step = past_keys, past_values, kv_heads, step
        self.new_keys: dict[int, torch.Tensor] = {}
        self.new_values: dict[int, torch.Tensor] = {}
        low = torch.finfo(dtype).min
        if step:
            # [1, F]: 1 at row 0, whose score becomes the new token's own; and F at row 0,
            # whose mean over the F rows picks row 0's value out of a row (`attend`).
            self.row0 = (key_positions == 0).to(dtype).view(1, -1)
            self.row0_times_rows = self.row0 * key_positions.shape[0]
        else:
            # [S, F + S]: the past but row 0 visible to all, the new tokens causally.
            s = cache_position.shape[0]
            past = torch.where(key_positions == 0, low, 0.0).to(dtype).view(1, -1).expand(s, -1)
            new = torch.where(cache_position.unsqueeze(0) <= cache_position.unsqueeze(1), 0.0, low).to(dtype)
            self.mask = torch.cat([past, new], 1)

    def past(self, layer: int, head: int):
        i = layer * self.kv_heads + head
        return self.past_keys[i], self.past_values[i]


def attend(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           attention_mask, scaling: float | None = None, dropout: float = 0.0, **kwargs):
    """A transformers attention function: query [1, heads, S, d], the new key and value
    [1, kv_heads, S, d]; returns ([1, S, heads, d], None). Query head h = g * group + r
    reads KV head g, as static_cache.grouped_attention folds them."""
    kv: CallerKV | None = kwargs.get("runlens_caller_kv")
    if kv is None:
        raise ExportError(f"{ATTENTION} attention runs only inside the cache-inputs program's wrapper")
    if kwargs.get("sliding_window") is not None:
        raise ExportError("sliding-window attention has no cache-inputs layout here; export full attention only")
    layer = module.layer_idx
    _, heads, s, d = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    scaling = d ** -0.5 if scaling is None else scaling
    kv.new_keys[layer], kv.new_values[layer] = key, value
    q = query.reshape(kv_heads, group * s, d) * scaling  # rows r * S + s of KV head g
    outs = []
    for g in range(kv_heads):
        keys, values = kv.past(layer, g)  # [F, d], [1, F, d]
        if kv.step:
            # Static slices (narrow), not `select`, which XNNPACK does not take: a
            # select is a default kernel between two delegate calls, 9 a layer here.
            rows = q.narrow(0, g, 1)  # [1, group, d]
            new_key = key.narrow(1, g, 1).reshape(1, 1, d)
            new_value = value.narrow(1, g, 1).reshape(1, 1, d)
            own = torch.bmm(new_key, rows.transpose(1, 2)).view(group, 1)  # q . k_new
            scores = torch.nn.functional.linear(rows.view(group, d), keys) + kv.row0 * own  # [group, F]
            probs = torch.softmax(scores, dim=-1).view(1, group, -1)
            # Row 0's probability, the new token's: the mean over the F rows of probs x (F
            # at row 0), a global average pooling, whose cost follows F (`max` over the
            # rows lowers to a pooling window as wide as the bound L, paid at every step).
            p0 = torch.mean((probs * kv.row0_times_rows).view(1, group, -1, 1), dim=(2, 3), keepdim=True)
            outs.append(torch.bmm(probs, values) + p0.view(1, group, 1) * new_value)  # [1, group, d]
        else:
            keys_all = torch.cat([keys, key[0, g]], 0)  # [F + S, d]
            values_all = torch.cat([values, value[:, g]], 1)  # [1, F + S, d]
            scores = torch.nn.functional.linear(q[g], keys_all).view(group, s, -1) + kv.mask
            probs = torch.softmax(scores, dim=-1).view(1, group * s, -1)
            outs.append(torch.bmm(probs, values_all))  # [1, group * S, d]
    # One KV head (the tiny Qwen2 of the tests) has nothing to join: a cat of one
    # tensor is a copy on the default kernels, between two delegate calls.
    out = torch.cat(outs, 0) if len(outs) > 1 else outs[0]  # [kv_heads, group * S, d]
    return out.view(1, heads, s, d).transpose(1, 2), None


class DecoderWithCallerCache(torch.nn.Module):
    """A causal LM whose KV cache comes in as inputs and whose new entries go out (the
    module docstring's `forward` with step=True, `prefill` with step=False)."""

    def __init__(self, model: torch.nn.Module, step: bool):
        super().__init__()
        arch, geometry = arch_and_geometry(model)
        self.model, self.step = arch.prepare(model), step
        self.layers, self.kv_heads = geometry.layers, geometry.kv_heads

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor, key_positions: torch.Tensor,
                past_keys: list[torch.Tensor], past_values: list[torch.Tensor]):
        kv = CallerKV(past_keys, past_values, self.kv_heads, self.step, cache_position, key_positions,
                      past_keys[0].dtype)
        out = self.model(input_ids=input_ids, use_cache=False, position_ids=cache_position.unsqueeze(0),
                         logits_to_keep=1, runlens_caller_kv=kv)
        new_keys = torch.cat([kv.new_keys[i] for i in range(self.layers)], 0)  # [layers, kv_heads, S, d]
        new_values = torch.cat([kv.new_values[i] for i in range(self.layers)], 0)
        return out.logits[:, -1, :], new_keys, new_values


def attention_for_export(model: torch.nn.Module):
    """`attend` as the model's attention while the program is traced."""
    return attention_as(model, ATTENTION, attend)


def export_methods(model: torch.nn.Module, max_len: int, chunk: int) -> dict:
    """{"forward": ..., "prefill": ...}: torch.export of both methods, F (the rows handed
    in, 1..L) dynamic, S (prefill's new tokens, 1..chunk) dynamic apart from F. Each
    example tensor is its own (a tensor passed twice would be traced as one input)."""
    _, geometry = arch_and_geometry(model)
    n = geometry.layers * geometry.kv_heads
    dtype = model.dtype
    filled = torch.export.Dim("filled", min=1, max=max_len)
    f = min(5, max_len)

    def past():
        return ([torch.zeros(f, geometry.head_dim, dtype=dtype) for _ in range(n)],
                [torch.zeros(1, f, geometry.head_dim, dtype=dtype) for _ in range(n)])

    methods = {}
    with attention_for_export(model):
        keys, values = past()
        example = (torch.zeros(1, 1, dtype=torch.long), torch.tensor([f - 1]), torch.arange(f), keys, values)
        dynamic = (None, None, {0: filled}, [{0: filled}] * n, [{1: filled}] * n)
        methods[STEP] = torch.export.export(DecoderWithCallerCache(model, True).eval(), example,
                                            dynamic_shapes=dynamic, strict=False)
        seq = torch.export.Dim("seq", min=1, max=max(1, min(chunk, max_len)))
        s = max(1, min(3, chunk))
        keys, values = past()
        example = (torch.zeros(1, s, dtype=torch.long), torch.arange(f - 1, f - 1 + s), torch.arange(f), keys, values)
        dynamic = ({1: seq}, {0: seq}, {0: filled}, [{0: filled}] * n, [{1: filled}] * n)
        methods[PREFILL] = torch.export.export(DecoderWithCallerCache(model, False).eval(), example,
                                               dynamic_shapes=dynamic, strict=True)
    return methods


class CallerCache:
    """The greedy loop's side of a cache-inputs program in Python: the keys and values of
    every (layer, KV head) as [L + 1, head_dim] tensors, row 0 zero; each call hands the
    program their first F rows (views: the runtime reads them in place) and writes the new
    entries it returns. `method(name)` gives a method's execute (list of tensors in, list out)."""

    def __init__(self, method, layers: int, kv_heads: int, head_dim: int, max_len: int, chunk: int):
        self.step_method, self.prefill_method = method(STEP), method(PREFILL)
        self.max_len, self.chunk, self.length = max_len, chunk, 0
        n = layers * kv_heads
        self.keys = [torch.zeros(max_len + 1, head_dim) for _ in range(n)]
        self.values = [torch.zeros(1, max_len + 1, head_dim) for _ in range(n)]
        self.kv_heads = kv_heads

    def run(self, ids: list[int], start: int, method) -> torch.Tensor:
        end, f = start + len(ids), start + 1
        inputs = [torch.tensor([ids], dtype=torch.long), torch.arange(start, end, dtype=torch.long),
                  torch.arange(f, dtype=torch.long)]
        inputs += [k[:f] for k in self.keys] + [v[:, :f] for v in self.values]
        logits, new_keys, new_values = method(inputs)[:3]
        layers = new_keys.shape[0]
        for i in range(layers * self.kv_heads):
            layer, head = divmod(i, self.kv_heads)
            self.keys[i][start + 1:end + 1] = new_keys[layer, head]
            self.values[i][0, start + 1:end + 1] = new_values[layer, head]
        self.length = end
        return logits

    def prefill(self, prompt: list[int]) -> torch.Tensor:
        prompt = list(prompt)
        for start in range(0, len(prompt), self.chunk):
            logits = self.run(prompt[start:start + self.chunk], start, self.prefill_method)
        return logits

    def step(self, token: int) -> torch.Tensor:
        return self.run([token], self.length, self.step_method)
