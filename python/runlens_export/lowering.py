"""An ExportedProgram lowered to an ExecuTorch program, one way for every
program runlens writes (programs.py, decoder.py, course.py):

    edge = to_edge(ep)                                      no delegate
    edge = to_edge_transform_and_lower(ep, [XnnpackPartitioner()])   XNNPACK
    program = edge.to_executorch(config)

with the edge graph's nodes and their modules read before emission (the
sidecar of modules.py needs them; emission replaces their debug handles), and,
given the program's path, the edge graph for Model Explorer next to it
(model_explorer.py; only when that optional package is installed).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import weakref
from pathlib import Path

from .files import ExportError, release_memory, say

XNNPACK = "XnnpackBackend"
# Operator namespaces the wheel's C++ runtime has kernels for (no custom ops):
# ATen's, ExecuTorch's dim-order copies and its own primitives (et_view, sym arithmetic).
STANDARD_OP_NAMESPACES = ("aten", "dim_order_ops", "executorch_prim")
# And of the wheel's quantized kernels library (libexecutorch_kernels_quantized, which
# runlens links), the operators the quantized decoders call for their embeddings
# (quantize.py): these, not the whole namespace.
LINKED_QUANTIZED_OPS = ("quantized_decomposed::embedding_byte", "quantized_decomposed::embedding_4bit")


def unlinked_operators(ops) -> list[str]:
    """The operators (`namespace::name`) of `ops` the runtime has no kernel for."""
    return [op for op in ops if op.split("::")[0] not in STANDARD_OP_NAMESPACES and op not in LINKED_QUANTIZED_OPS]


def lower(ep, delegate: bool, mutable_buffers: tuple[str, ...] = (), standard_ops_only: bool = False, pte=None,
          caller_cache: bool = False):
    """(program manager, edge nodes). `ep`: an ExportedProgram, or {method name:
    ExportedProgram} for a program of several methods ("forward" first: its nodes are
    the ones returned and drawn). `mutable_buffers`: names (prefixes) of
    mutable buffers that start as zeros in the program (InitializedMutableBufferPass;
    a KV cache) and are written in place (`write_buffers_in_place`).
    `standard_ops_only`: an ExportError when the program calls an operator
    outside the standard namespaces and LINKED_QUANTIZED_OPS, which runlens'
    runtime has no kernel for.
    `pte`: the program's path; its `<name>.graph.json` is written next to it.
    `caller_cache`: the KV cache comes in as inputs (cache_inputs.py): the graph's inputs
    are not memory-planned, so ExecuTorch reads the caller's memory in place instead of
    copying every input into its own per call, and XNNPACK takes a float linear whose
    weight is an input (the scores, linear(q, K)) as a Fully Connected with a runtime weight."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower

    from .modules import edge_nodes

    if delegate:
        with named_data_on_disk(pte.parent if pte is not None else None) as scratch:
            edge = to_edge_transform_and_lower(ep, partitioner=[runtime_weight_partitioner() if caller_cache
                                                                else XnnpackPartitioner()])
    else:
        edge = to_edge(ep)
        fold_constants(edge)
    # Each step's scratch (fake tensors, traced copies) is freed by now; handed back to the
    # system before emission, the step that peaks (docs/models.md, peak memory).
    release_memory()
    if mutable_buffers:
        write_buffers_in_place(edge)
    nodes = edge_nodes(edge)
    graph = None
    if pte is not None:
        from .model_explorer import graph_json

        graph = graph_json(edge, pte)
    if mutable_buffers:
        from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

        program = edge.to_executorch(config=ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(list(mutable_buffers))]))
    elif caller_cache:
        from executorch.exir.passes import MemoryPlanningPass

        program = edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)))
    else:
        program = edge.to_executorch()
    if delegate:
        # The blobs stay on disk until the program has been written and dropped (also when
        # the check below refuses it).
        weakref.finalize(program, shutil.rmtree, scratch, True)
    if standard_ops_only:
        ops = sorted({op.name for plan in program.executorch_program.execution_plan for op in plan.operators})
        custom = unlinked_operators(ops)
        if custom:
            raise ExportError(f"the program calls operators the ExecuTorch runtime runlens links has no kernels for: "
                              f"{', '.join(custom)}")
        say(f"  {len(ops)} operators, all with kernels in runlens' runtime: {', '.join(op.split('::')[1] for op in ops)}")
    if pte is not None:
        from .model_explorer import write_graph

        write_graph(pte, graph)
    forget_lowering_caches()
    return program, nodes


def runtime_weight_partitioner():
    """XnnpackPartitioner that also delegates a float32 linear whose weight is not a
    parameter (the keys of a cache-inputs program), its filter a runtime value XNNPACK
    packs per call; linears on parameters are delegated as always (packed once). The
    stock option `force_non_static_weights_for_f32_linear` would make every weight a
    runtime one."""
    from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
    from executorch.backends.xnnpack.partition.config.gemm_configs import LinearConfig
    from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.utils.utils import get_input_node, is_param_node

    class RuntimeWeightLinear(LinearConfig):
        def _get_weight_deps(self, node, ep, precision):
            weight = get_input_node(node, self.weight_idx)
            if precision == ConfigPrecisionType.FP32 and not is_param_node(ep, weight):
                return True, []
            return super()._get_weight_deps(node, ep, precision)

    return XnnpackPartitioner(configs=[RuntimeWeightLinear if c is LinearConfig else c for c in ALL_PARTITIONER_CONFIGS])


def forget_lowering_caches() -> None:
    """Drops what ExecuTorch and torch keep of a lowering in module-level caches, which
    otherwise hold its graphs (and through them every delegate's ExportedProgram, its
    constants and serialised data) until the process ends: `is_same_node`'s unbounded
    lru_cache (keyed by the graph's nodes), the XNNPACK partitioner configs' module-level
    `WhyNoPartition` reporters (the last node each rejected) and ShapeEnv's per-instance
    method caches (lru_caches on the class, keyed by the ShapeEnv, whose fake-tensor
    cache keys hold the lowered modules). Each program's step left the one before's
    graphs behind, step after step (docs/models.md, peak memory). Caches only: what is
    lowered next is the same."""
    import sys

    from executorch.exir.backend import utils as backend_utils
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    backend_utils.is_same_node.cache_clear()
    for name, module in list(sys.modules.items()):
        if name.startswith("executorch.") and module is not None:
            for value in list(vars(module).values()):
                if isinstance(value, backend_utils.WhyNoPartition):
                    value.node = None
    for value in vars(ShapeEnv).values():
        if hasattr(value, "cache_clear"):
            value.cache_clear()


# A blob smaller than this stays in memory (a layer norm's weight: many small files would
# cost more than they save). Small enough that the tiny test models' largest weights (their
# heads, 179 kB at tiny-llama's) take the file-backed path, so the tests' parity checks cover it.
SPILL_BYTES = 64 << 10


@contextlib.contextmanager
def named_data_on_disk(near: Path | None):
    """While XNNPACK lowers a program, each constant it serialises (a linear layer's
    weight, copied into a `bytes`: about the model's float32 weights in all) goes to a
    file in a scratch folder instead of staying in memory until the program is written.
    ExecuTorch's named data store takes file-backed blobs (`FileBackedData`) and its
    serialiser copies them into the `.pte` in chunks, so the file is the same byte for
    byte; XNNPACK's preprocess only ever hands the store `bytes`. At SmolLM2-135M's sizes
    this is 0.54 GiB less at the lowering's peak, which set the export's
    (docs/models.md, peak memory). The folder is made beside the program (`near`; not
    the system's temporary folder, which may be memory) and removed when the program is
    dropped (`lower`), or at exit. Yields the folder."""
    from executorch.exir._serialize._cord import FileBackedData
    from executorch.exir._serialize._named_data_store import NamedDataStore

    scratch = Path(tempfile.mkdtemp(prefix=".lowering-", dir=near))
    original = NamedDataStore.add_named_data
    count = [0]

    def add_named_data(self, key, data, *args, **kwargs):
        if isinstance(data, bytes) and len(data) >= SPILL_BYTES:
            count[0] += 1
            path = scratch / f"{count[0]}.bin"
            path.write_bytes(data)
            data = FileBackedData(str(path), cleanup=True)
        return original(self, key, data, *args, **kwargs)

    NamedDataStore.add_named_data = add_named_data
    try:
        yield scratch
    except BaseException:
        shutil.rmtree(scratch, True)
        raise
    finally:
        NamedDataStore.add_named_data = original


def fold_constants(edge) -> None:
    """ExecuTorch's constant propagation on a program without a delegate: an operator
    whose inputs are all weights (a linear layer's `permute_copy` of its weight, which
    `to_edge` puts in front of every `mm`/`addmm`) is computed once here and stored as a
    constant, so the program no longer copies every weight transposed on every call
    (the portable decoder spent most of a decode step doing that: docs/profile.md). The
    file grows by what a transposed copy of a shared weight adds (a tied LM head's
    embedding is stored twice, once in each layout)."""
    from executorch.exir.passes.constant_prop_pass import constant_prop_pass

    ep = edge.exported_program()
    # The pass pops folded weights from these dicts, which the edge program shares with the
    # ExportedProgram it came from (decoder.py lowers the XNNPACK programs from that one next).
    ep._state_dict = dict(ep.state_dict)
    ep._constants = dict(ep.constants)
    before = sum(1 for n in ep.graph.nodes if n.op == "call_function")
    folded = constant_prop_pass(ep)
    edge._edge_programs["forward"] = folded
    after = sum(1 for n in folded.graph.nodes if n.op == "call_function")
    say(f"  constant propagation: {before - after} operators on weights alone computed at export "
        f"({before} -> {after} calls)")


def write_buffers_in_place(edge) -> None:
    """ExecuTorch's reinplace pass on the edge program: a mutable buffer's
    `index_put` (a KV cache write, static_cache.py) becomes `index_put_` on the
    buffer itself, so no call makes a fresh copy of the buffer and emission adds
    no `copy_` back into it. Run here rather than in `to_executorch` (its
    `run_reinplace_pass`) so that the edge nodes keep their modules for the
    sidecar (modules.py) and Model Explorer: the pass makes new nodes without
    them, in the order of those it replaces."""
    from executorch.exir.passes.reinplace import reinplace_pass

    ep = edge.exported_program()

    def puts():
        return [n for n in ep.graph.nodes if n.op == "call_function" and "index_put" in str(n.target)]

    before = [dict(n.meta) for n in puts()]
    reinplace_pass(ep)
    after = puts()
    if len(after) == len(before):
        for node, meta in zip(after, before):
            for key, value in meta.items():
                node.meta.setdefault(key, value)
    ep.graph_module.recompile()
