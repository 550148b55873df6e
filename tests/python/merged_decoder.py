"""A decoder's ONNX file in Optimum's merged layout, from runlens' own (tests/onnxruntime_merged.rs).

Optimum's `decoder_model_merged.onnx` joins a decoder without a cache and one with it
under an `If` node on a boolean input `use_cache_branch` [1]: false for the prompt's
run, true for each token after it. A hub repository of a large model keeps the weights
beside it in external data (`decoder_model_merged.onnx_data`).

This writes that layout from the `model.onnx` runlens' export makes (past/present,
which also runs with an empty past):
- the then-branch (`use_cache_branch` true): the graph as it is, reading the pasts;
- the else-branch (false): the same graph with every past replaced by an empty
  constant, so that it ignores the pasts fed to it, as Optimum's no-cache branch does
  (a runner that sets the flag false after the prompt gets the wrong logits);
- the weights stay in the outer graph, shared by both branches, in external data.

Usage: merged_decoder.py --onnx models/tiny-llama/model.onnx --out DIR
"""

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

NAME = "decoder_model_merged.onnx"


def branch(graph: onnx.GraphProto, prefix: str, pasts: dict[str, list[int]] | None) -> onnx.GraphProto:
    """The graph's nodes as a subgraph: each value it makes renamed under `prefix`
    (a subgraph may not reuse an outer name); `pasts` (name -> shape with 0 past
    positions) replaced by empty constants when given."""
    made = {o for n in graph.node for o in n.output}
    rename = {name: prefix + name for name in made}
    nodes = []
    if pasts is not None:
        for name, shape in pasts.items():
            rename[name] = prefix + name
            empty = numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name=prefix + name + "/value")
            nodes.append(helper.make_node("Constant", [], [prefix + name], name=prefix + name + "/empty", value=empty))
    for n in graph.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(n)
        copy.name = prefix + n.name
        copy.input[:] = [rename.get(i, i) for i in n.input]
        copy.output[:] = [rename[o] for o in n.output]
        nodes.append(copy)
    outputs = []
    for o in graph.output:
        out = onnx.ValueInfoProto()
        out.CopyFrom(o)
        out.name = rename[o.name]
        outputs.append(out)
    return helper.make_graph(nodes, prefix.rstrip("/"), [], outputs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnx", type=Path, required=True, help="runlens' decoder model.onnx (past/present)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    model = onnx.load(args.onnx)
    g = model.graph
    pasts = {}
    for i in g.input:
        if i.name.startswith("past_key_values."):
            dims = [d.dim_value if d.HasField("dim_value") else 0 for d in i.type.tensor_type.shape.dim]
            pasts[i.name] = [1, dims[1], 0, dims[3]]
    assert pasts, f"{args.onnx}: no past_key_values inputs"

    with_past = branch(g, "with_past/", None)
    no_past = branch(g, "no_past/", pasts)
    flag = helper.make_tensor_value_info("use_cache_branch", onnx.TensorProto.BOOL, [1])
    merged_if = helper.make_node(
        "If", ["use_cache_branch"], [o.name for o in g.output], name="optimum::if", then_branch=with_past, else_branch=no_past
    )
    graph = helper.make_graph([merged_if], g.name, list(g.input) + [flag], list(g.output), initializer=list(g.initializer))
    merged = helper.make_model(graph, opset_imports=list(model.opset_import), producer_name="runlens tests (Optimum's merged layout)")
    merged.ir_version = model.ir_version
    onnx.checker.check_model(merged)

    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / NAME
    onnx.save_model(merged, out, save_as_external_data=True, all_tensors_to_one_file=True, location=NAME + "_data", size_threshold=0)
    print(f"merged_decoder: {out} (+ {NAME}_data): If on use_cache_branch over {len(g.node)} nodes a branch, {len(pasts)} pasts")


if __name__ == "__main__":
    main()
