"""`<program>.graph.json`: a lowered program's edge graph as Google's Model
Explorer shows it, for `runlens layers --model-explorer DIR` to colour
(docs/model-explorer.md).

Model Explorer's PyTorch support reads an ExportedProgram saved with
`torch.export.save` (`.pt2`, its builtin adapter `builtin_pytorch_exportedprogram`).
An edge program cannot go that way: `torch.export.save` refuses a graph with
`executorch_call_delegate` nodes, and a `.pt2` of edge operators (no delegate)
saves but does not load back (torch cannot resolve EdgeOpOverload targets).
So the export runs that adapter's own converter (`PytorchExportedProgramAdapterImpl`)
on the edge program in process, as ExecuTorch's `devtools.visualization` does,
and writes what it returns as a graph collection, which Model Explorer opens
with its builtin JSON loader: `{"label": ..., "graphs": [{"id": "graph", "nodes": [...]}]}`.
Node ids are the adapter's (the fx node's name: `aten_addmm_default_3`,
`executorch_call_delegate_7`); the sidecar (modules.py) names, for each
instruction, the node it was emitted from, the same names.

One change to the converter: its output metadata (shapes) fails on symbolic
sizes (a program with a dynamic sequence length has `SymInt` outputs and shapes
with `s0`), so this writes each output's dtype and shape itself. Ids, labels,
namespaces (the module hierarchy), edges and attributes are the adapter's.

The package (`ai-edge-model-explorer`) is optional: without it, or when its
adapter cannot convert a graph, the export says so and writes no graph.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .files import say, write_atomic

GRAPH_SUFFIX = ".graph.json"
PACKAGE = "ai-edge-model-explorer"


def graph_path(pte: Path) -> Path:
    """`xnnpack.pte` -> `xnnpack.graph.json`."""
    return pte.with_name(pte.stem + GRAPH_SUFFIX)


def _shape(shape) -> list:
    return [int(d) if str(d).isdigit() else str(d) for d in shape]


def graph_document(exported_program, label: str) -> dict | None:
    """The graph collection Model Explorer opens; None without the package."""
    try:
        import torch
        from model_explorer import consts
        from model_explorer.graph_builder import KeyValue, MetadataItem
        from model_explorer.pytorch_exported_program_adapter_impl import PytorchExportedProgramAdapterImpl
        from model_explorer.utils import convert_adapter_response
    except ImportError:
        return None

    class Adapter(PytorchExportedProgramAdapterImpl):
        def get_inputs_map(self):
            # Constant values are not shown (the weights stay in the .pte); this also
            # skips the adapter's warning about missing example inputs.
            return {}

        def add_outputs_metadata(self, fx_node, node):
            vals = fx_node.meta.get("val")
            for i, val in enumerate(vals if isinstance(vals, (tuple, list)) else [vals]):
                if isinstance(val, torch.Tensor):
                    shape = f"{val.dtype}{json.dumps(_shape(val.shape))}"
                    node.outputsMetadata.append(MetadataItem(id=str(i), attrs=[KeyValue(key="tensor_shape", value=shape)]))

    graphs = Adapter(exported_program, dict(consts.DEFAULT_SETTINGS)).convert()
    return {"label": label, "graphs": convert_adapter_response(graphs)["graphs"]}


def graph_json(edge_manager, pte: Path) -> bytes | None:
    """`<program>.graph.json` for the program `pte`, from the edge program that is
    then emitted (call it before `to_executorch`); None, said, when Model
    Explorer's package is absent or its adapter cannot convert the graph."""
    name = graph_path(pte).name
    start = time.process_time()
    try:
        doc = graph_document(edge_manager.exported_program(), pte.name)
    except Exception as e:  # an optional extra: a graph the adapter cannot convert costs the picture, not the export
        say(f"  no {name}: Model Explorer's adapter cannot convert this edge graph: {type(e).__name__}: {e}")
        return None
    if doc is None:
        say(f"  no {name}: Model Explorer's package is not installed (pip install {PACKAGE})")
        return None
    say(f"  {name}: {len(doc['graphs'][0]['nodes'])} nodes for Model Explorer ({time.process_time() - start:.1f} s CPU)")
    return (json.dumps(doc) + "\n").encode()


def write_graph(pte: Path, data: bytes | None) -> None:
    """Writes what graph_json made next to the program; for None, removes the
    graph of an earlier export (its node names need not be this program's)."""
    if data is not None:
        write_atomic(graph_path(pte), data)
    else:
        graph_path(pte).unlink(missing_ok=True)
