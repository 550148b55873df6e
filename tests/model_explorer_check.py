"""Reads what `runlens layers --model-explorer DIR` wrote with Model Explorer's
own package (tests/model_explorer.rs runs it through the venv's Python):

    model_explorer_check.py DIR PROGRAM...

For each program, `DIR/<program>.graph.json` is read into the package's
`GraphCollection` (graph_builder) and each node-data file `DIR/<program>.<kind>.json`
into its `GraphNodeData` (node_data_builder), strictly (an unknown or
mistyped field fails), and every node id the node data names is looked up in
the graph of the same graph id. Prints one JSON object:

    {"<program>": {"graph_id": "graph", "labels": {"<node id>": "<label>", ...},
                   "files": {"time": {"results": {"<node id>": value, ...},
                                      "missing": ["<id not in the graph>", ...]}, ...}}}

Exit status 3 when the package is not installed (the test then skips).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

KINDS = ("time", "gap", "where")


def main() -> int:
    try:
        import dacite
        from model_explorer.graph_builder import GraphCollection
        from model_explorer.node_data_builder import GraphNodeData, ModelNodeData
    except ImportError as e:
        print(f"Model Explorer's package is not installed: {e}", file=sys.stderr)
        return 3
    strict = dacite.Config(strict=True, check_types=True)
    out_dir = Path(sys.argv[1])
    report = {}
    for program in sys.argv[2:]:
        raw = json.loads((out_dir / f"{program}.graph.json").read_text())
        collection = dacite.from_dict(GraphCollection, raw, config=strict)
        if len(collection.graphs) != 1:
            raise SystemExit(f"{program}: {len(collection.graphs)} graphs, expected one")
        graph = collection.graphs[0]
        labels = {node.id: node.label for node in graph.nodes}
        if len(labels) != len(graph.nodes):
            raise SystemExit(f"{program}: node ids repeat in the graph")
        files = {}
        for kind in KINDS:
            doc = json.loads((out_dir / f"{program}.{kind}.json").read_text())
            data = ModelNodeData(graphsData={gid: dacite.from_dict(GraphNodeData, g, config=strict) for gid, g in doc.items()})
            if set(data.graphsData) != {graph.id}:
                raise SystemExit(f"{program}.{kind}: node data for graphs {sorted(data.graphsData)}, the graph is {graph.id!r}")
            results = data.graphsData[graph.id].results
            files[kind] = {
                "results": {node: r.value for node, r in results.items()},
                "missing": sorted(node for node in results if node not in labels),
            }
            json.loads(data.to_json_string())  # the package writes it back
        report[program] = {"graph_id": graph.id, "labels": labels, "files": files}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
