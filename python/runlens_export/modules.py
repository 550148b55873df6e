"""The sidecar `<program>.modules.json`: for every instruction of a lowered
program and every node inside its delegate blobs, the module of the model it
came from (`nn_module_stack`), so that runlens can add up runtime events per
module (`runlens layers`).

What survives into the .pte and the ETDump, and so what the sidecar is keyed by:

  instructions  ETDump names a kernel or delegate call by (chain, instruction
                index); the emitter's `debug_handle_map` says which edge-graph
                nodes (debug handles) an instruction came from.
  nodes         inside an XNNPACK blob every XNode keeps the debug handle of
                the edge-graph node it was made from (XNode.debug_handle);
                XNNPACK's own per-operator events carry no handle, runlens
                lines them up with the XNodes in order.

    {"runlens_modules": 1, "program": "xnnpack.pte", "method": "forward",
     "instructions": [{"chain": 0, "index": 5, "op": "aten::embedding.out",
                       "module": "model.bert.embeddings.word_embeddings",
                       "inherited": false, "handles": [6],
                       "node": "aten_embedding_default"}, ...],
     "nodes": [{"handle": 8, "op": "aten.add.Tensor",
                "module": "model.bert.embeddings", "inherited": false,
                "graph_node": "aten_add_tensor"}, ...]}

`node` is the edge-graph node the instruction was emitted from (its name in
the edge graph, kept in the node's meta through emission; a delegate call is
its `executorch_call_delegate` node), which is also its id in Model Explorer's
view of the edge graph (`<program>.graph.json`, model_explorer.py); a
buffer's write-back (`copy_` into a KV cache, which emission adds) is the
graph's `output` node, where the edge graph holds buffer mutations; null when
a pass made the emitted node otherwise. Each entry of `nodes` has its
`graph_node` (for a node inside a delegate: the call's).
`module` is the innermost entry of `nn_module_stack`, as the wrapper names it
(`model.` or `bert.` in front of the checkpoint's own keys); `""` is the
wrapper itself (pooling). A node without a stack (symbolic sizes, views the
passes insert) takes the module of the node before it: `"inherited": true`.
The lowering is not touched: the programs stay byte for byte what they were.
"""

from __future__ import annotations

import json
import operator

import torch

VERSION = 1
# Set on each node of the edge graph before emission: its name there, which is its id
# in Model Explorer's view (model_explorer.py). Emission's passes keep a node's meta
# but may rename it (a re-trace numbers `aten_add_tensor_2` anew) and its debug handles
# do not line up with instructions once views become `et_view`.
GRAPH_NODE = "runlens_graph_node"
WRITE_BACK_NODE = "output"
NO_STACK = "_empty_nn_module_stack_from_metadata_hook"


def module_of(node: torch.fx.Node) -> str | None:
    """The innermost module; `""` for the wrapper's own nodes (an empty stack),
    None when the node has no stack at all (passes made it)."""
    if "nn_module_stack" not in node.meta:
        return None
    stack = node.meta["nn_module_stack"]
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    if path == NO_STACK:
        return None
    return path


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    name = getattr(target, "__name__", None) if callable(target) and not hasattr(target, "_schema") else None
    return str(target) if name is None else name


def _graph_nodes(gm: torch.fx.GraphModule, out: list[dict], graph_node: str | None = None) -> None:
    """Appends every call_function node with a debug handle, with its module and
    `graph_node`: the node of the edge graph it is drawn as in Model Explorer
    (its own name; for a node inside a delegate, the delegate call's)."""
    last = ""
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        handle = node.meta.get("debug_handle")
        module = module_of(node)
        inherited = module is None
        module = last if module is None else module
        last = module
        if handle is not None:
            out.append({"handle": int(handle), "op": _op_name(node), "module": module, "inherited": inherited,
                        "graph_node": graph_node or node.name})


def edge_nodes(edge_manager) -> list[dict]:
    """The nodes of the edge program and of each delegate's original subgraph,
    before `to_executorch` (whose emitter replaces the handles with
    instruction ids). Call it on the manager that is then emitted."""
    gm = edge_manager.exported_program().graph_module
    for node in gm.graph.nodes:
        node.meta[GRAPH_NODE] = node.name
    nodes: list[dict] = []
    _graph_nodes(gm, nodes)
    # lowered_module_3 -> executorch_call_delegate_3: the call node that runs it
    calls = {n.args[0].target: n.name for n in gm.graph.nodes
             if n.op == "call_function" and _op_name(n) == "executorch_call_delegate"}
    for name, sub in gm.named_children():
        original = getattr(sub, "original_module", None)
        if original is not None:
            _graph_nodes(original.graph_module, nodes, calls.get(name))
    return nodes


def _base(name: str) -> str:
    """`aten::expand_copy.out` / `aten.expand_copy.out` -> `expand_copy`."""
    name = name.replace("::", ".")
    parts = name.split(".")
    return parts[1] if len(parts) >= 3 else parts[-1]


def _same_op(instruction_op: str, node: torch.fx.Node) -> bool:
    name = _op_name(node)
    if instruction_op.startswith("delegate "):
        return name == "executorch_call_delegate"
    base = _base(instruction_op)
    node_base = _base(name) if "." in name else name
    return base == node_base or (base == "et_view" and node_base == "view")


def graph_node(node: torch.fx.Node | None) -> str | None:
    """The edge-graph node an emitted node came from. The write-back of a
    mutated buffer (a KV cache: `copy_` into the buffer, which emission adds)
    has none: in the edge graph a buffer mutation is an output of the graph, so
    it is the `output` node."""
    if node is None:
        return None
    if GRAPH_NODE in node.meta:
        return node.meta[GRAPH_NODE]
    return WRITE_BACK_NODE if _op_name(node).startswith("aten.copy_") else None


def instructions(program_manager, method: str = "forward") -> list[dict]:
    """Every instruction of `method` with its module, lined up in emission order
    with the nodes of the emitted graph (kernel calls, views, delegate calls)."""
    plan = next(p for p in program_manager.executorch_program.execution_plan if p.name == method)
    handle_map = program_manager.debug_handle_map.get(method, {})
    final = [
        n
        for n in program_manager.exported_program().graph_module.graph.nodes
        if n.op == "call_function" and n.target is not operator.getitem and _op_name(n) != "alloc"
    ]
    rows: list[dict] = []
    cursor, last = 0, ""
    for c, chain in enumerate(plan.chains):
        for i, instr in enumerate(chain.instructions):
            args = instr.instr_args
            kind = type(args).__name__
            if kind == "KernelCall":
                op = plan.operators[args.op_index]
                name = f"{op.name}.{op.overload}" if op.overload else op.name
            elif kind == "DelegateCall":
                name = f"delegate {plan.delegates[args.delegate_index].id}"
            else:
                continue
            handles = handle_map.get(i, [])
            handles = handles if isinstance(handles, list) else [handles]
            node = None
            for k in range(cursor, len(final)):
                if _same_op(name, final[k]):
                    node, cursor = final[k], k + 1
                    break
            module = module_of(node) if node is not None else None
            inherited = module is None
            module = last if module is None else module
            last = module
            rows.append({"chain": c, "index": i, "op": name, "module": module, "inherited": inherited,
                         "matched": node is not None, "handles": [int(h) for h in handles],
                         "node": graph_node(node)})
    return rows


def sidecar(program_file: str, nodes: list[dict], program_manager, method: str = "forward") -> bytes:
    rows = instructions(program_manager, method)
    by_handle = {n["handle"]: n for n in nodes}
    for row in rows:
        if row["op"].startswith("delegate "):
            # A delegate call is named after the nodes it runs (most of them).
            found = [by_handle[h]["module"] for h in row["handles"] if h in by_handle]
            if found:
                # A tie goes to the module met first (a set's order would change from run to run).
                row["module"] = max(dict.fromkeys(found), key=found.count)
                row["inherited"] = False
    unmatched = [r for r in rows if not r.pop("matched")]
    doc = {"runlens_modules": VERSION, "program": program_file, "method": method,
           "instructions": rows, "nodes": nodes}
    if unmatched:
        doc["unmatched_instructions"] = [r["index"] for r in unmatched]
    return (json.dumps(doc, indent=1) + "\n").encode()
