"""Research prototype (issue 42 item 3): what a decode step pays per position of filled
KV cache, in today's KV-cache program and in alternative cache layouts, all with standard
operators, XNNPACK-delegated, timed by ExecuTorch's Python runtime in one process.

What it builds (SmolLM2-135M's sizes, random weights, seed 0, float32, but --layers
layers instead of 30 to keep lowering short; L = --max-len positions):

  current   runlens' export as it is (runlens_export.decoder.export_with_cache +
            decoder.to_program): keys [kv_heads, head_dim, L] and values
            [kv_heads, L, head_dim] as mutable buffers, written by index_copy_
            (re-inplaced), sliced to F = key_positions' length before two bmm.
  posmajor  (b) the same mutable-buffer design with keys stored position-major
            [kv_heads, L, head_dim]: the scores are bmm(K[:, :F], q^T), so the cache
            is XNNPACK's A operand (not packed); the slice copies remain.
  inputs    (a) the cache owned by the caller, as program inputs: per layer and KV
            head past keys and values [1, F, head_dim] (a contiguous prefix of the
            caller's own [L, head_dim] buffer, zero-copy), F dynamic, row 0 a null
            slot kept at zero by the caller; the program returns the logits and the
            new keys and values [layers, kv_heads, 1, head_dim] that the caller
            writes at row position + 1. Decode only (S = 1): the new token's score
            takes the null slot's place (one-hot e0 = key_positions == 0), so there
            is no concatenation and no slice: bmm(K, q^T) (cache as A operand),
            softmax, bmm(p, V) (+ p0 * v_new). Lowered with the graph inputs not
            memory-planned (MemoryPlanningPass(alloc_graph_input=False)) so that
            Method::set_input shares the caller's memory instead of copying it.
  inputs-planned  the same program with the default memory planning: the runtime
            copies every input (the whole filled cache) into planned memory per call.
  inputs-max  as inputs, the new token's probability read by max.dim instead of a bmm
            against the one-hot (which XNNPACK packs as a B operand, 16 floats a position).
  inputs-linear  as inputs-max, the scores as linear(q [g, d], K [F, d]) with the keys a
            2-d input: XNNPACK's Fully Connected with a dynamic filter (packed per call,
            rows read contiguously), [g, F] straight into softmax; needs a partitioner
            config that delegates a linear whose weight is not a parameter (`partitioner`).
            The best of these here: the recommended layout.
  inputs-prefill  (export only, `export_inputs_prefill`; not timed) the prefill method for
            the same caller-owned cache: S new tokens (dynamic), past and new entries
            concatenated inside the delegate (one copy of the past per chunk).

What it measures:
  - the lowered graphs: every operator outside the delegate and inside each
    delegated partition, with whether it touches a tensor whose shape follows F;
  - decode-step time at positions --positions (default 64, 1000, 2000), all
    variants and positions interleaved in one process, medians of --reps steps,
    --threads threads (ExecuTorch's threadpool);
  - ETDump of every variant (the Python runtime's `enable_etdump`; XNNPACK's own nodes are
    profiled too): per operator, ms per step at each position, one loaded program per
    position with their calls interleaved; the operators whose time grows with F are
    the cache's cost. Under load these per-operator sums are steadier than the
    end-to-end medians, which the scheduler's time slices quantise;
  - micro programs (one operator, --layers x kv_heads caches of F positions, inputs
    zero-copy) giving each operator's own per-position cost: slice_copy on the
    default kernels, bmm with the cache as B (packed every call) and as A;
  - logits of every variant against the current program and transformers over
    --check-steps teacher-forced steps from position 0 (max |diff|).

Findings (2026-12-06, docs to be written from the JSON): see the report of the session.
The Python runtime shares an input's memory when the program does not plan it
(alloc_graph_input=False; pybindings wrap a torch tensor with for_blob, and
Method::set_input copies only memory-planned inputs), so "inputs" is zero-copy here as
it would be in C++ with from_blob; "inputs-planned" shows the copy the default
lowering adds.

Run:  .venv/bin/python scripts/kv_layout_proto.py [--layers 6] [--max-len 2048]
          [--threads 2] [--reps 40] [--check-steps 64] [--evict-mb 0] [--json out.json]
          [--variants current,posmajor,inputs,inputs-planned,inputs-max,inputs-linear]
      (about 8 minutes with all variants on 2 busy cores, most of it lowering;
      --prefill-check runs the prefill method for a 20-token prompt in two chunks, then
      the decode method, against transformers)
Programs are cached in /tmp/kv_layout_proto/ (delete to re-export).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

OUT = Path("/tmp/kv_layout_proto")
SMOLLM2 = dict(hidden_size=576, num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536,
               vocab_size=49152, max_position_embeddings=8192, tie_word_embeddings=True, rope_theta=100000.0)


def say(*a):
    print(*a, flush=True)


def load() -> str:
    return open("/proc/loadavg").read().split()[0]


def build(layers: int, seed: int = 0) -> torch.nn.Module:
    import transformers

    config = transformers.LlamaConfig(num_hidden_layers=layers, **SMOLLM2)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config).eval().requires_grad_(False).to(torch.float32)


def geometry(model):
    c = model.config
    return c.num_hidden_layers, c.num_key_value_heads, c.hidden_size // c.num_attention_heads, c.num_attention_heads


@contextlib.contextmanager
def attention(model, name, fn):
    from transformers import AttentionInterface

    AttentionInterface.register(name, fn)
    before = model.config._attn_implementation
    model.set_attn_implementation(name)
    try:
        yield
    finally:
        model.set_attn_implementation(before)


# --- (b) position-major keys in mutable buffers ------------------------------------------------

class PosMajorKV(torch.nn.Module):
    """As static_cache.StaticKV but keys [kv_heads, L, head_dim] like the values."""

    def __init__(self, layers, kv_heads, head_dim, max_len):
        super().__init__()
        for i in range(layers):
            self.register_buffer(f"key_cache_{i}", torch.zeros(kv_heads, max_len, head_dim), persistent=False)
            self.register_buffer(f"value_cache_{i}", torch.zeros(kv_heads, max_len, head_dim), persistent=False)

    def write(self, layer, key, value, cache_position, filled):
        keys, values = getattr(self, f"key_cache_{layer}"), getattr(self, f"value_cache_{layer}")
        keys.index_copy_(1, cache_position, key[0])
        values.index_copy_(1, cache_position, value[0])
        return keys[:, :filled], values[:, :filled]

    def call_kwargs(self, cache_position, key_positions, dtype):
        from runlens_export.static_cache import StaticKV

        return {"runlens_kv": self, "runlens_position": cache_position, "runlens_filled": key_positions.shape[0],
                "runlens_mask": StaticKV.mask(cache_position, key_positions, dtype)}


def attend_posmajor(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
    kv = kw["runlens_kv"]
    keys, values = kv.write(module.layer_idx, key, value, kw["runlens_position"], kw["runlens_filled"])
    _, heads, s, d = query.shape
    kv_heads, length = keys.shape[0], keys.shape[1]
    group = heads // kv_heads
    scaling = d ** -0.5 if scaling is None else scaling
    qt = (query.reshape(kv_heads, group * s, d) * scaling).transpose(1, 2)  # [kv, d, g*s] (small)
    scores = torch.bmm(keys, qt).transpose(1, 2)  # [kv, F, g*s] -> [kv, g*s, F]
    scores = scores.reshape(kv_heads, group, s, length) + kw["runlens_mask"]
    probs = torch.softmax(scores, dim=-1).view(kv_heads, group * s, length)
    out = torch.bmm(probs, values)
    return out.view(1, heads, s, d).transpose(1, 2), None


def export_posmajor(model, max_len):
    from runlens_export.decoder import DecoderWithStaticCache, prefill_chunk

    wrapper = DecoderWithStaticCache(model, max_len).eval()
    layers, kv_heads, head_dim, _ = geometry(model)
    wrapper.cache = PosMajorKV(layers, kv_heads, head_dim, max_len)
    seq = torch.export.Dim("seq", min=1, max=prefill_chunk(max_len))
    filled = torch.export.Dim("filled", min=1, max=max_len)
    example = (torch.zeros(1, 3, dtype=torch.long), torch.arange(2, 5), torch.arange(5))
    with attention(model, "proto_posmajor", attend_posmajor):
        return torch.export.export(wrapper, example, dynamic_shapes=({1: seq}, {0: seq}, {0: filled}), strict=True)


# --- (a) the cache as inputs owned by the caller -------------------------------------------------

class State:
    pass


def attend_inputs(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
    """Decode (S = 1). past keys/values [1, F, d] per KV head, row 0 the caller's null slot
    (zeros); the new key's score replaces row 0's (one-hot e0), its value is added with
    row 0's probability, so nothing is concatenated or sliced.
    st.scores: "bmm_A"  scores = bmm(K [1, F, d], q^T [1, d, g]): the cache is the A operand
               "linear" scores = linear(q [g, d], K [F, d]): XNNPACK Fully Connected with a
                        dynamic filter (packed per call, goi: rows read contiguously), [g, F]
                        directly in softmax's layout (needs the partitioner config below)
    st.p0:     "bmm"    the new token's probability p0 = bmm(p, e0) (e0 packed as a B operand)
               "max"    p0 = max over F of p * e0 (max.dim on a 4-d view)"""
    st = kw["proto_state"]
    layer = module.layer_idx
    _, heads, s, d = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    scaling = d ** -0.5 if scaling is None else scaling
    st.new_k[layer], st.new_v[layer] = key, value  # [1, kv, 1, d]
    q = query.reshape(kv_heads, group * s, d) * scaling  # [kv, g, d] (small)
    qt = q.transpose(1, 2)  # [kv, d, g]
    e0r = st.e0.view(1, -1)  # [1, F]
    outs = []
    for g in range(kv_heads):
        kp, vp = st.past_k[layer * kv_heads + g], st.past_v[layer * kv_heads + g]  # [1, F, d]
        q_g = qt[g:g + 1]  # [1, d, g]
        s_new = torch.bmm(key[:, g], q_g)  # [1, 1, g]
        if st.scores == "linear":
            rows = q[g:g + 1].view(group, d)
            scores = torch.nn.functional.linear(rows, kp)  # kp [F, d] (2-d input: a view would copy) -> [g, F]
            scores = (scores + e0r * s_new.view(group, 1)).view(1, group, -1)  # [1, g, F]
        else:
            s_past = torch.bmm(kp, q_g)  # [1, F, g]: the cache is the A operand
            scores = (s_past + st.e0 * s_new).transpose(1, 2)  # [1, g, F] (small)
        p = torch.softmax(scores, dim=-1)
        if st.p0 == "max":
            p0 = torch.max((p * e0r).view(1, 1, group, -1), dim=3, keepdim=True)[0].view(1, group, 1)
        else:
            p0 = torch.bmm(p, st.e0)  # [1, g, 1]
        outs.append(torch.bmm(p, vp) + p0 * value[:, g])  # [1, g, d]
    out = torch.cat(outs, 0)  # [kv, g, d]
    return out.view(1, heads, s, d).transpose(1, 2), None


def attend_inputs_prefill(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
    """Prefill (S new tokens, S dynamic) against the caller's past keys [F, d] and values
    [1, F, d] per KV head: the past and the new entries concatenated (one copy of the past per
    chunk, amortised over its S tokens), scores linear(q, K) [g * S, F + S], the mask
    [S, F + S] (the null slot hidden, the new tokens causal)."""
    st = kw["proto_state"]
    layer = module.layer_idx
    _, heads, s, d = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    scaling = d ** -0.5 if scaling is None else scaling
    st.new_k[layer], st.new_v[layer] = key, value  # [1, kv, S, d]
    q = query.reshape(kv_heads, group * s, d) * scaling  # rows r * S + s
    outs = []
    for g in range(kv_heads):
        kp, vp = st.past_k[layer * kv_heads + g], st.past_v[layer * kv_heads + g]  # [F, d], [1, F, d]
        k_all = torch.cat([kp, key[0, g]], 0)  # [F + S, d]
        v_all = torch.cat([vp, value[:, g]], 1)  # [1, F + S, d]
        scores = torch.nn.functional.linear(q[g], k_all)  # [g * S, F + S]
        scores = scores.view(group, s, -1) + st.mask
        p = torch.softmax(scores, dim=-1).view(1, group * s, -1)
        outs.append(torch.bmm(p, v_all))  # [1, g * S, d]
    out = torch.cat(outs, 0)  # [kv, g * S, d]
    return out.view(1, heads, s, d).transpose(1, 2), None


class InputsPrefill(torch.nn.Module):
    """forward(input_ids [1, S], cache_position [S], key_positions [F] (0..F-1: row 0 the null
    slot), past keys [F, d] x layers*kv, past values [1, F, d] x layers*kv) -> logits, new keys
    and values [layers, kv, S, d]."""

    def __init__(self, model):
        super().__init__()
        self.model, self.layers = model, model.config.num_hidden_layers

    def forward(self, input_ids, cache_position, key_positions, past_keys: list, past_values: list):
        st = State()
        st.past_k, st.past_v, st.new_k, st.new_v = past_keys, past_values, {}, {}
        low = torch.finfo(torch.float32).min
        past = torch.where(key_positions == 0, low, 0.0).view(1, -1).expand(cache_position.shape[0], -1)
        new = torch.where(cache_position.unsqueeze(0) <= cache_position.unsqueeze(1), 0.0, low)
        st.mask = torch.cat([past, new], 1)  # [S, F + S]
        out = self.model(input_ids=input_ids, use_cache=False, position_ids=cache_position.unsqueeze(0),
                         logits_to_keep=1, proto_state=st)
        new_k = torch.cat([st.new_k[i] for i in range(self.layers)], 0)
        new_v = torch.cat([st.new_v[i] for i in range(self.layers)], 0)
        return out.logits[:, -1, :], new_k, new_v


def export_inputs_prefill(model, max_len, chunk=256):
    layers, kv_heads, head_dim, _ = geometry(model)
    f, n = 5, 3
    filled = torch.export.Dim("filled", min=1, max=max_len)
    seq = torch.export.Dim("seq", min=1, max=min(chunk, max_len))
    past_k = [torch.zeros(f, head_dim) for _ in range(layers * kv_heads)]
    past_v = [torch.zeros(1, f, head_dim) for _ in range(layers * kv_heads)]
    example = (torch.zeros(1, n, dtype=torch.long), torch.arange(f - 1, f - 1 + n), torch.arange(f), past_k, past_v)
    dyn = ({1: seq}, {0: seq}, {0: filled}, [{0: filled}] * len(past_k), [{1: filled}] * len(past_v))
    with attention(model, "proto_inputs_prefill", attend_inputs_prefill):
        return torch.export.export(InputsPrefill(model).eval(), example, dynamic_shapes=dyn, strict=True)


class InputsDecoder(torch.nn.Module):
    def __init__(self, model, scores="bmm_A", p0="bmm"):
        super().__init__()
        self.model, self.scores, self.p0 = model, scores, p0
        self.layers = model.config.num_hidden_layers

    def forward(self, input_ids, cache_position, key_positions, past_keys: list, past_values: list):
        st = State()
        st.past_k, st.past_v, st.new_k, st.new_v = past_keys, past_values, {}, {}
        st.scores, st.p0 = self.scores, self.p0
        st.e0 = (key_positions == 0).to(torch.float32).view(1, -1, 1)  # [1, F, 1]
        out = self.model(input_ids=input_ids, use_cache=False, position_ids=cache_position.unsqueeze(0),
                         logits_to_keep=1, proto_state=st)
        new_k = torch.cat([st.new_k[i] for i in range(self.layers)], 0)  # [layers, kv, 1, d]
        new_v = torch.cat([st.new_v[i] for i in range(self.layers)], 0)
        return out.logits[:, -1, :], new_k, new_v


def export_inputs(model, max_len, scores="bmm_A", p0="bmm"):
    layers, kv_heads, head_dim, _ = geometry(model)
    wrapper = InputsDecoder(model, scores, p0).eval()
    f = 5
    filled = torch.export.Dim("filled", min=1, max=max_len)
    # Distinct tensors: an example tensor passed twice is traced as one input.
    # linear: keys [F, d] (XNNPACK copies an input it reshapes), else [1, F, d]
    kdim = 0 if scores == "linear" else 1
    past_k = [torch.zeros(*([f, head_dim] if kdim == 0 else [1, f, head_dim])) for _ in range(layers * kv_heads)]
    past_v = [torch.zeros(1, f, head_dim) for _ in range(layers * kv_heads)]
    example = (torch.zeros(1, 1, dtype=torch.long), torch.tensor([f - 1]), torch.arange(f), past_k, past_v)
    dyn = (None, None, {0: filled}, [{kdim: filled}] * len(past_k), [{1: filled}] * len(past_v))
    with attention(model, "proto_inputs", attend_inputs):
        return torch.export.export(wrapper, example, dynamic_shapes=dyn, strict=False)


# --- lowering and the lowered graph ---------------------------------------------------------------

def partitioner(dynamic_linear: bool = False):
    """XnnpackPartitioner; with dynamic_linear, a float linear whose weight is not a parameter
    (the cache: static_cache's scores as linear(q, K)) is delegated too, its filter a runtime
    value XNNPACK packs per call; linears on parameters are delegated as always (static,
    packed once). The stock option force_non_static_weights_for_f32_linear would make every
    weight dynamic."""
    from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
    from executorch.backends.xnnpack.partition.config.gemm_configs import LinearConfig
    from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.utils.utils import get_input_node, is_param_node

    if not dynamic_linear:
        return XnnpackPartitioner()

    class CacheLinearConfig(LinearConfig):
        def _get_weight_deps(self, node, ep, precision):
            if precision == ConfigPrecisionType.FP32 and not is_param_node(ep, get_input_node(node, self.weight_idx)):
                return True, []
            return super()._get_weight_deps(node, ep, precision)

    return XnnpackPartitioner(configs=[CacheLinearConfig if c is LinearConfig else c for c in ALL_PARTITIONER_CONFIGS])


def lower_plain(ep, planned_inputs: bool, dynamic_linear: bool = False):
    """XnnpackPartitioner; no mutable buffers. planned_inputs=False: graph inputs are not
    memory-planned, so the runtime shares the caller's tensors (zero-copy)."""
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass

    edge = to_edge_transform_and_lower(ep, partitioner=[partitioner(dynamic_linear)])
    census = graph_census(edge)
    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=planned_inputs))
    return edge.to_executorch(config), census


def lower_runlens(ep):
    """As runlens exports today (lowering.lower via decoder.to_program), plus the census."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
    from runlens_export.lowering import write_buffers_in_place
    from runlens_export.static_cache import CACHE_BUFFERS

    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    write_buffers_in_place(edge)
    census = graph_census(edge)
    program = edge.to_executorch(config=ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(list(CACHE_BUFFERS))]))
    return program, census


F_SYMBOLS: set = set()  # the symbols of F (key_positions' length) in the graph being counted


def _dynamic(node) -> bool:
    """Does the node take or make a tensor whose size follows F (the filled length)?"""
    vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    for v in vals:
        for t in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(t, torch.Tensor) and any(
                    not isinstance(x, int) and any(sym in str(x) for sym in F_SYMBOLS) for x in t.shape):
                return True
    return False


def _shape(node):
    v = node.meta.get("val")
    return list(v.shape) if isinstance(v, torch.Tensor) else None


def graph_census(edge) -> dict:
    """Operators outside the delegate and inside each partition; per op: count, and how many
    touch a dynamically sized tensor (with an example shape)."""
    from executorch.exir.backend.utils import get_delegates

    ep = edge.exported_program()
    gm = ep.graph_module
    F_SYMBOLS.clear()
    for spec, node in zip(ep.graph_signature.input_specs, [n for n in gm.graph.nodes if n.op == "placeholder"]):
        if "key_positions" in str(spec.arg.name) or "key_positions" in node.name:
            F_SYMBOLS.update(str(x) for x in node.meta["val"].shape)

    def count(graph, into):
        for n in graph.nodes:
            if n.op != "call_function" or "getitem" in str(n.target) or "executorch_call_delegate" in str(n.target):
                continue
            name = str(getattr(n.target, "__name__", n.target))
            row = into.setdefault(name, {"calls": 0, "F_sized": 0, "example_F_shape": None})
            row["calls"] += 1
            if _dynamic(n):
                row["F_sized"] += 1
                if row["example_F_shape"] is None:
                    row["example_F_shape"] = [str(x) for x in (_shape(n) or [])] + ["<- " + ",".join(
                        str([str(x) for x in (_shape(a) or [])]) for a in n.all_input_nodes)]
        return into

    outside = count(gm.graph, {})
    inside: dict = {}
    partitions = 0
    for node in get_delegates(gm.graph):
        partitions += 1
        lowered = getattr(gm, node.name)
        count(lowered.original_module.graph, inside)
    return {"outside_delegate": outside, "inside_delegate": inside, "partitions": partitions}


def program_for(name, model, max_len, layers):
    """(pte path, census) for a variant; cached on disk."""
    OUT.mkdir(parents=True, exist_ok=True)
    pte, cen = OUT / f"{name}-l{layers}-L{max_len}.pte", OUT / f"{name}-l{layers}-L{max_len}.census.json"
    if pte.exists() and cen.exists():
        return pte, json.loads(cen.read_text())
    t = time.time()
    say(f"exporting {name} ...")
    if name == "current":
        from runlens_export.decoder import export_with_cache

        program, census = lower_runlens(export_with_cache(model, max_len))
    elif name == "posmajor":
        program, census = lower_runlens(export_posmajor(model, max_len))
    elif name in ("inputs", "inputs-planned"):
        program, census = lower_plain(export_inputs(model, max_len), planned_inputs=name == "inputs-planned")
    elif name == "inputs-prefill":
        program, census = lower_plain(export_inputs_prefill(model, max_len), planned_inputs=False, dynamic_linear=True)
    elif name == "inputs-max":
        program, census = lower_plain(export_inputs(model, max_len, "bmm_A", "max"), planned_inputs=False)
    elif name == "inputs-linear":
        program, census = lower_plain(export_inputs(model, max_len, "linear", "max"), planned_inputs=False,
                                      dynamic_linear=True)
    else:
        raise SystemExit(f"unknown variant {name}")
    from runlens_export.lowering import unlinked_operators

    ops = sorted({op.name for plan in program.executorch_program.execution_plan for op in plan.operators})
    census["program_operators"] = ops
    census["non_standard"] = unlinked_operators(ops)
    pte.write_bytes(program.buffer)
    cen.write_text(json.dumps(census, indent=1))
    say(f"  {name}: {time.time() - t:.0f} s, {pte.stat().st_size / 1e6:.1f} MB")
    return pte, census


# --- drivers: a decode step's inputs at a position -----------------------------------------------

class Buffered:
    """A mutable-buffer program (current, posmajor): inputs (ids, [p], arange(p + 1))."""

    def __init__(self, method, max_len):
        self.method = method

    def inputs(self, token, pos):
        return [torch.tensor([[token]]), torch.tensor([pos]), torch.arange(pos + 1)]

    def step(self, inputs):
        return self.method.execute(inputs)[0]

    def commit(self, outs, pos):
        pass


class Caller:
    """The inputs program: the caller's cache, per layer and KV head [L, d] (row 0 null)."""

    def __init__(self, method, max_len, layers, kv_heads, head_dim, keys_2d=False):
        self.method, self.layers, self.kv, self.keys_2d = method, layers, kv_heads, keys_2d
        self.k = [torch.zeros(max_len, head_dim) for _ in range(layers * kv_heads)]
        self.v = [torch.zeros(max_len, head_dim) for _ in range(layers * kv_heads)]

    def randomize(self):
        for t in self.k + self.v:
            t[1:].normal_(0, 0.05)

    def inputs(self, token, pos):
        f = pos + 1  # the null slot and positions 0..pos-1 at rows 1..pos
        return [torch.tensor([[token]]), torch.tensor([pos]), torch.arange(f),
                *[t[:f] if self.keys_2d else t[:f].unsqueeze(0) for t in self.k], *[t[:f].unsqueeze(0) for t in self.v]]

    def step(self, inputs):
        self.last = self.method.execute(inputs)
        return self.last[0]

    def commit(self, outs, pos):
        _, new_k, new_v = self.last
        for l in range(self.layers):
            for g in range(self.kv):
                self.k[l * self.kv + g][pos + 1] = new_k[l, g, 0]
                self.v[l * self.kv + g][pos + 1] = new_v[l, g, 0]


def make_driver(name, method, max_len, geo):
    layers, kv_heads, head_dim, _ = geo
    if name.startswith("inputs"):
        return Caller(method, max_len, layers, kv_heads, head_dim, keys_2d=name == "inputs-linear")
    return Buffered(method, max_len)


# --- micro programs: one operator's per-position cost ------------------------------------------

class Micro(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, small: torch.Tensor, caches: list):
        outs = []
        for c in caches:
            if self.kind == "bmm_cache_as_B_keys":  # today's scores: q [kv, g, d] @ K [kv, d, F]
                outs.append(torch.bmm(small, c))
            elif self.kind == "bmm_cache_as_B_values":  # today's / (a)'s output: p [kv, g, F] @ V [kv, F, d]
                outs.append(torch.bmm(small, c))
            elif self.kind == "bmm_cache_as_A":  # (a)/(b) scores: K [kv, F, d] @ q^T [kv, d, g]
                outs.append(torch.bmm(c, small))
            elif self.kind == "linear_cache_as_filter":  # (a, linear) scores: linear(q [g, d], K [F, d])
                outs.append(torch.nn.functional.linear(small, c))
        return torch.cat([o.reshape(-1) for o in outs]).sum(0, keepdim=True)


def micro_program(kind, n, kv, d, g, max_len):
    """n caches of [kv, ..F.., d] (as inputs, zero-copy); F dynamic."""
    OUT.mkdir(parents=True, exist_ok=True)
    pte = OUT / f"micro-{kind}-n{n}-L{max_len}.pte"
    f = 7
    filled = torch.export.Dim("filled", min=2, max=max_len)
    if kind == "bmm_cache_as_B_keys":
        small, cache, dim = torch.randn(kv, g, d), torch.randn(kv, d, f), 2
        sdyn = None
    elif kind == "linear_cache_as_filter":  # one [F, d] cache per KV head
        small, cache, dim, n = torch.randn(g, d), torch.randn(f, d), 0, n * kv
        sdyn = None
    elif kind == "bmm_cache_as_B_values":
        small, cache, dim = torch.randn(kv, g, f), torch.randn(kv, f, d), 1
        sdyn = {2: filled}
    else:
        small, cache, dim = torch.randn(kv, d, g), torch.randn(kv, f, d), 1
        sdyn = None
    if not pte.exists():
        ep = torch.export.export(Micro(kind), (small, [cache.clone() for _ in range(n)]), dynamic_shapes=(sdyn, [{dim: filled}] * n),
                                 strict=False)
        program, _ = lower_plain(ep, planned_inputs=False, dynamic_linear=kind == "linear_cache_as_filter")
        pte.write_bytes(program.buffer)
    return pte, dim, sdyn is not None


class SliceMicro(torch.nn.Module):
    """Today's reads: n mutable buffers per kind ([kv, d, L] keys, [kv, L, d] values) sliced to F
    on the default kernels, each slice summed by a trivial op so it is not dead."""

    def __init__(self, n, kv, d, max_len):
        super().__init__()
        self.n = n
        for i in range(n):
            self.register_buffer(f"key_cache_{i}", torch.zeros(kv, d, max_len), persistent=False)
            self.register_buffer(f"value_cache_{i}", torch.zeros(kv, max_len, d), persistent=False)

    def forward(self, key_positions):
        f = key_positions.shape[0]
        acc = []
        for i in range(self.n):
            k = getattr(self, f"key_cache_{i}")[:, :, :f]
            v = getattr(self, f"value_cache_{i}")[:, :f]
            acc.append(k[:, :1, :1].reshape(-1))
            acc.append(v[:, :1, :1].reshape(-1))
        return torch.cat(acc)


def slice_micro_program(n, kv, d, max_len):
    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    pte = OUT / f"micro-slice_copy-n{n}-L{max_len}.pte"
    if not pte.exists():
        filled = torch.export.Dim("filled", min=2, max=max_len - 1)  # F = L would be a view, not a slice
        ep = torch.export.export(SliceMicro(n, kv, d, max_len), (torch.arange(7),), dynamic_shapes=({0: filled},),
                                 strict=False)
        program = to_edge(ep).to_executorch(ExecutorchBackendConfig(
            passes=[InitializedMutableBufferPass(["key_cache", "value_cache"])]))
        pte.write_bytes(program.buffer)
    return pte


# --- timing ------------------------------------------------------------------------------------------

def timed(fn, inputs):
    t = time.perf_counter()
    fn(inputs)
    return (time.perf_counter() - t) * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--positions", default="64,1000,2000")
    ap.add_argument("--variants", default="current,posmajor,inputs,inputs-planned,inputs-max,inputs-linear")
    ap.add_argument("--prefill-check", action="store_true")
    ap.add_argument("--check-steps", type=int, default=48)
    ap.add_argument("--no-micro", action="store_true")
    ap.add_argument("--no-etdump", action="store_true")
    ap.add_argument("--evict-mb", type=int, default=0,
                    help="stream through this many MB before every timed step (0: off; 600 evicts this VM's L3)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    positions = [int(p) for p in args.positions.split(",")]
    variants = args.variants.split(",")
    result = {"args": {k: str(v) for k, v in vars(args).items()}, "load_start": load(),
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    model = build(args.layers)
    geo = geometry(model)
    layers, kv_heads, head_dim, heads = geo
    bytes_per_pos = layers * kv_heads * head_dim * 4 * 2  # keys and values, float32
    ptes = {}
    result["census"] = {}
    for v in variants:
        ptes[v], result["census"][v] = program_for(v, model, args.max_len, args.layers)
        c = result["census"][v]
        say(f"{v}: {c['partitions']} partitions; outside the delegate: "
            + ", ".join(f"{k} x{r['calls']} ({r['F_sized']} F-sized)" for k, r in c["outside_delegate"].items()))
        say("   inside: " + ", ".join(f"{k} x{r['calls']} ({r['F_sized']} F-sized)" for k, r in c["inside_delegate"].items()))
        if c["non_standard"]:
            say(f"   NON-STANDARD operators: {c['non_standard']}")

    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    portable_lib._unsafe_reset_threadpool(args.threads)
    result["threads"] = portable_lib._threadpool_get_thread_count()
    runtime = Runtime.get()
    drivers = {}
    for v in variants:
        method = runtime.load_program(ptes[v]).load_method("forward")
        drivers[v] = make_driver(v, method, args.max_len, geo)

    # 1. logits against the current program, teacher-forced from position 0.
    if args.check_steps and "current" in drivers:
        torch.manual_seed(1)
        ids = torch.randint(0, model.config.vocab_size, (args.check_steps,)).tolist()
        logits = {v: [] for v in variants}
        for v in variants:
            d = drivers[v]
            for p, tok in enumerate(ids):
                x = d.inputs(tok, p)
                out = d.step(x)
                d.commit(None, p)
                logits[v].append(out.reshape(-1).clone())
        with torch.no_grad():
            eager = model(input_ids=torch.tensor([ids])).logits[0]
        result["check"] = {}
        for v in variants:
            got = torch.stack(logits[v])
            result["check"][v] = {
                "steps": len(ids),
                "max_diff_vs_current": float((got - torch.stack(logits["current"])).abs().max()),
                "max_diff_vs_eager": float((got - eager).abs().max()),
                "same_argmax_vs_current": bool((got.argmax(-1) == torch.stack(logits["current"]).argmax(-1)).all())}
            say(f"check {v}: {result['check'][v]}")

    if args.prefill_check:
        result["prefill_check"] = prefill_check(model, args.max_len, geo)

    # 2. decode steps at each position, interleaved.
    for d in drivers.values():
        if isinstance(d, Caller):
            d.randomize()
    evict = Evictor(args.evict_mb)
    result["evict_mb"] = args.evict_mb
    prepared = {(v, p): drivers[v].inputs(7, p) for v in variants for p in positions}
    for _ in range(3):
        for (v, p), x in prepared.items():
            drivers[v].step(x)
    times = {k: [] for k in prepared}
    loads = []
    keys = list(prepared)
    for r in range(args.reps):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for k in order:
            evict()
            times[k].append(timed(drivers[k[0]].step, prepared[k]))
        if r % 10 == 0:
            loads.append(load())
    loads.append(load())
    result["step_ms"] = {}
    say(f"\ndecode step, median of {args.reps} (threads {result['threads']}, evict {args.evict_mb} MB before each, "
        f"load {' '.join(loads)})")
    say(f"cache bytes per position: {bytes_per_pos} ({layers} layers)")
    for v in variants:
        med = {p: statistics.median(times[(v, p)]) for p in positions}
        row = {"ms": med, "p25_p75": {p: statistics.quantiles(times[(v, p)], n=4)[::2] for p in positions}}
        row.update(growth(med, positions, bytes_per_pos))
        result["step_ms"][v] = row
        say(f"  {v:15} " + "  ".join(f"@{p}: {med[p]:6.2f} ms" for p in positions)
            + "   growth " + "  ".join(f"{p}: {g:5.2f} GB/s" for p, g in row["growth_GBps"].items()))
    result["step_loads"] = loads

    # 3. ETDump of every variant: per operator (default kernels and XNNPACK's own nodes).
    if not args.no_etdump:
        result["etdump"] = {}
        for v in variants:
            result["etdump"][v] = etdump_profile(v, ptes[v], positions, max(5, args.reps // 4), geo, args.max_len,
                                                 evict, bytes_per_pos)

    # 4. micro programs.
    if not args.no_micro:
        result["micro"] = micro(args, layers, kv_heads, head_dim, heads // kv_heads, positions)
    result["load_end"] = load()
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
        say(f"wrote {args.json}")
    return 0


def prefill_check(model, max_len, geo):
    """inputs-prefill for a 20-token prompt in chunks of 12 and 8, then inputs-linear for 10
    decode steps, the caller writing the returned entries into its cache; max |diff| of the
    logits against transformers (eager, the whole sequence at once)."""
    from executorch.runtime import Runtime

    layers, kv, d, _ = geo
    pre = Runtime.get().load_program(program_for("inputs-prefill", model, max_len, layers)[0]).load_method("forward")
    dec = Runtime.get().load_program(program_for("inputs-linear", model, max_len, layers)[0]).load_method("forward")
    torch.manual_seed(2)
    ids = torch.randint(0, model.config.vocab_size, (30,)).tolist()
    with torch.no_grad():
        eager = model(input_ids=torch.tensor([ids])).logits[0]
    ks = [torch.zeros(max_len, d) for _ in range(layers * kv)]
    vs = [torch.zeros(max_len, d) for _ in range(layers * kv)]
    diffs, pos = [], 0
    for n in (12, 8) + (1,) * 10:
        f = pos + 1
        method = pre if n > 1 else dec
        logits, new_k, new_v = method.execute([torch.tensor([ids[pos:pos + n]]), torch.arange(pos, pos + n),
                                               torch.arange(f), *[x[:f] for x in ks],
                                               *[x[:f].unsqueeze(0) for x in vs]])
        for i in range(layers * kv):
            ks[i][pos + 1:pos + 1 + n] = new_k[i // kv, i % kv]
            vs[i][pos + 1:pos + 1 + n] = new_v[i // kv, i % kv]
        pos += n
        diffs.append(float((logits.reshape(-1) - eager[pos - 1]).abs().max()))
    say(f"prefill (12 + 8 tokens) then 10 decode steps, caller-owned cache, vs transformers: "
        f"max |diff| {max(diffs):.2e}")
    return {"max_diff_vs_eager": max(diffs), "per_call": diffs}


def growth(med, positions, bytes_per_pos):
    base = positions[0]
    return {"growth_ms": {p: med[p] - med[base] for p in positions[1:]},
            "growth_GBps": {p: (p - base) * bytes_per_pos / ((med[p] - med[base]) * 1e-3) / 1e9
                            if med[p] > med[base] else float("inf") for p in positions[1:]}}


class Evictor:
    """Streams through a buffer larger than the last-level cache (this VM: 300 MB L3), so the
    next step reads its cache (and weights) from DRAM as on a Pi 5 (2 MB L3). 0: off."""

    def __init__(self, mb):
        self.buf = torch.ones(mb * 2 ** 20 // 4) if mb else None

    def __call__(self):
        if self.buf is not None:
            self.buf.add_(1.0)


def etdump_profile(name, pte, positions, reps, geo, max_len, evict, bytes_per_pos):
    """Per operator name (ETDump's: default kernels `native_call_*`, XNNPACK's own node
    names), the median time per call summed over its calls in a step, at each position;
    and which of them grow with F."""
    from executorch.runtime import Runtime

    try:
        from executorch.devtools import Inspector
    except Exception as e:  # noqa: BLE001
        return {"error": f"no Inspector: {e}"}
    out = {}
    try:
        # One program per position (each its own ETDump), their calls interleaved.
        runs = {}
        for p in positions:
            program = Runtime.get().load_program(pte, enable_etdump=True, debug_buffer_size=0)
            driver = make_driver(name, program.load_method("forward"), max_len, geo)
            if isinstance(driver, Caller):
                driver.randomize()
            runs[p] = (program, driver, driver.inputs(7, p))
        for r in range(reps):
            for p in positions[r % len(positions):] + positions[:r % len(positions)]:
                evict()
                runs[p][1].step(runs[p][2])
        for p, (program, _, _) in runs.items():
            path = OUT / f"etdump-{name}-{p}.etdp"
            program.write_etdump_result_to_file(str(path), str(OUT / f"debug-{name}-{p}.bin"))
            inspector = Inspector(etdump_path=str(path))
            per = {}
            for block in inspector.event_blocks:
                if block.name != "Execute":
                    continue
                for ev in block.events:
                    if ev.perf_data is None:
                        continue
                    row = per.setdefault(ev.name, {"calls": 0, "ms": 0.0})
                    row["calls"] += 1
                    row["ms"] += statistics.median(ev.perf_data.raw[1:] or ev.perf_data.raw)
            out[p] = per
    except Exception as e:  # noqa: BLE001
        out = {p: {"error": repr(e)} for p in positions}
    if any("error" in out[p] for p in positions):
        say(f"etdump {name}: {out}")
        return out
    base, last = positions[0], positions[-1]
    names = sorted(out[base], key=lambda k: -(out[last].get(k, {"ms": 0})["ms"] - out[base][k]["ms"]))
    say(f"\netdump {name} (load {load()}): ms per step by operator, @" + " @".join(map(str, positions))
        + f"; growth {base}->{last} as GB/s of the whole cache")
    table = {}
    for k in names:
        ms = {p: out[p].get(k, {"ms": 0.0})["ms"] for p in positions}
        grow = ms[last] - ms[base]
        table[k] = {"calls": out[base][k]["calls"], "ms": ms}
        if abs(grow) >= 0.05 or k in ("Method::execute", "DELEGATE_CALL"):
            say(f"  {k:45} x{out[base][k]['calls']:<4}" + " ".join(f"{ms[p]:8.3f}" for p in positions)
                + f"   +{grow:7.3f} ms" + (f" ({(last - base) * bytes_per_pos / (grow * 1e-3) / 1e9:.1f} GB/s)"
                                           if grow > 0 else ""))
    return table


def micro(args, layers, kv, d, g, positions):
    """ms per call and GB/s of growth per micro program; caches total layers x kv x F x d floats."""
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    n = layers
    progs = {}
    for kind in ("bmm_cache_as_B_keys", "bmm_cache_as_B_values", "bmm_cache_as_A", "linear_cache_as_filter"):
        pte, dim, small_dyn = micro_program(kind, n, kv, d, g, args.max_len)
        method = runtime.load_program(pte).load_method("forward")
        progs[kind] = (method, dim, small_dyn)
    slice_method = runtime.load_program(slice_micro_program(n, kv, d, args.max_len)).load_method("forward")
    prepared = {}
    for p in positions:
        f = p + 1
        for kind, (method, dim, small_dyn) in progs.items():
            if kind == "linear_cache_as_filter":
                caches = [torch.randn(f, d) for _ in range(n * kv)]
            else:
                caches = [torch.randn(*([kv, d, f] if dim == 2 else [kv, f, d])) for _ in range(n)]
            if kind == "bmm_cache_as_B_keys":
                small = torch.randn(kv, g, d)
            elif kind == "bmm_cache_as_B_values":
                small = torch.softmax(torch.randn(kv, g, f), -1)
            elif kind == "linear_cache_as_filter":
                small = torch.randn(g, d)
            else:
                small = torch.randn(kv, d, g)
            prepared[(kind, p)] = (method.execute, [small, *caches])
        prepared[("slice_copy_keys+values", p)] = (slice_method.execute, [torch.arange(f)])
    for _ in range(3):
        for fn, x in prepared.values():
            fn(x)
    times = {k: [] for k in prepared}
    keys = list(prepared)
    evict = Evictor(args.evict_mb)
    for r in range(args.reps):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            evict()
            times[k].append(timed(prepared[k][0], prepared[k][1]))
    out = {}
    one = n * kv * d * 4  # bytes per position of ONE of keys/values over n layers
    say(f"\nmicro programs ({n} caches of kv {kv} x F x d {d}; load {load()}): median ms per call")
    for kind in sorted({k for k, _ in keys}):
        med = {p: statistics.median(times[(kind, p)]) for p in positions}
        per_pos = one * (2 if kind.startswith("slice") else 1)
        gbps = {p: (p - positions[0]) * per_pos / ((med[p] - med[positions[0]]) * 1e-3) / 1e9
                if med[p] > med[positions[0]] else float("inf") for p in positions[1:]}
        out[kind] = {"ms": med, "growth_GBps_of_cache_read": gbps}
        say(f"  {kind:24} " + "  ".join(f"@{p}: {med[p]:6.3f}" for p in positions)
            + "   growth " + "  ".join(f"{p}: {x:5.2f} GB/s" for p, x in gbps.items()))
    return out


if __name__ == "__main__":
    sys.exit(main())
