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


def lower(ep, delegate: bool, mutable_buffers: tuple[str, ...] = (), standard_ops_only: bool = False, pte=None):
    """(program manager, edge nodes). `mutable_buffers`: names (prefixes) of
    mutable buffers that start as zeros in the program (InitializedMutableBufferPass;
    a KV cache) and are written in place (`write_buffers_in_place`).
    `standard_ops_only`: an ExportError when the program calls an operator
    outside the standard namespaces and LINKED_QUANTIZED_OPS, which runlens'
    runtime has no kernel for.
    `pte`: the program's path; its `<name>.graph.json` is written next to it."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower

    from .modules import edge_nodes

    if delegate:
        edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
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
    else:
        program = edge.to_executorch()
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
    return program, nodes


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
