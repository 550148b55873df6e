"""Edge-graph rewrites that let XNNPACK take two operators a decoder's step has per
layer, so the step is fewer delegate calls (docs/kv-cache.md, "What a step pays besides
the cache").

ExecuTorch's XNNPACK partitioner leaves on the default kernels:

  unsqueeze_copy   on any dimension but the last (RoPE's `cos.unsqueeze(1)` and
                   `sin.unsqueeze(1)`, twice per layer);
  mean.dim         on anything but a 4-d tensor over its last two dimensions (the RMS
                   norm's `x.pow(2).mean(-1, keepdim=True)`, twice per layer, four
                   times in Qwen3 with its query and key norms).

Each such operator between two delegated ones ends a delegate call and starts another.
Where the shapes are static, the same computations have forms XNNPACK takes:

  unsqueeze_copy(x, d)        -> view_copy(x, the same shape)   (Static Reshape)
  mean.dim(x [..., c], [-1])  -> view_copy to [1, rows, c, 1], mean.dim over [2, 3]
                                 (Global Average Pooling), view_copy to [..., 1]

Same values (a mean is a mean; the pooling sums in its own order, as any kernel may).
Dynamic shapes are left as they are: XNNPACK takes no reshape to a symbolic size. So
this serves the decode step of a cache-inputs program (cache_inputs.py: `forward` takes
one token, only the filled length F varies), whose step went from 93 delegate calls and
399 kernel calls to 3 and 10 at SmolLM2's sizes, not the static-cache programs, whose one
method takes 1 to 256 new tokens.
"""

from __future__ import annotations

import math

import torch


def _static_shape(node) -> list[int] | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if value is None or not all(isinstance(d, int) for d in value.shape):
        return None
    return list(value.shape)


def delegable_step_pass():
    """An ExportPass for `to_edge_transform_and_lower(transform_passes=[...])`."""
    from executorch.exir.dialects._ops import ops as exir_ops
    from executorch.exir.pass_base import ExportPass, PassResult

    unsqueeze = exir_ops.edge.aten.unsqueeze_copy.default
    view = exir_ops.edge.aten.view_copy.default
    mean = exir_ops.edge.aten.mean.dim

    def last_dim_mean(node) -> list[int] | None:
        """The input's static shape when `node` is mean(x, [last], keepdim=True)."""
        if node.target != mean or len(node.args) < 3 or not node.args[2] or node.kwargs.get("dtype") is not None:
            return None
        shape = _static_shape(node.args[0])
        if shape is None or len(shape) < 2 or list(node.args[1]) not in ([-1], [len(shape) - 1]):
            return None
        return shape

    class DelegableStep(ExportPass):
        def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
            graph = graph_module.graph
            changed = False
            for node in list(graph.nodes):
                if node.op != "call_function":
                    continue
                if node.target == unsqueeze and _static_shape(node) is not None:
                    with graph.inserting_before(node):
                        reshaped = graph.call_function(view, (node.args[0], _static_shape(node)))
                    reshaped.meta = dict(node.meta)
                    node.replace_all_uses_with(reshaped)
                    graph.erase_node(node)
                    changed = True
                elif (shape := last_dim_mean(node)) is not None:
                    rows = math.prod(shape[:-1])
                    with graph.inserting_before(node):
                        four = graph.call_function(view, (node.args[0], [1, rows, shape[-1], 1]))
                        pooled = graph.call_function(mean, (four, [2, 3], True))
                        back = graph.call_function(view, (pooled, shape[:-1] + [1]))
                    for created in (four, pooled, back):
                        created.meta = {k: v for k, v in node.meta.items() if k != "val"}
                    four.meta["val"] = node.args[0].meta["val"].reshape(1, rows, shape[-1], 1)
                    pooled.meta["val"] = four.meta["val"].mean(dim=(2, 3), keepdim=True)
                    back.meta["val"] = node.meta["val"]
                    node.replace_all_uses_with(back)
                    graph.erase_node(node)
                    changed = True
            if not changed:
                return PassResult(graph_module, False)
            graph.lint()
            graph_module.recompile()
            return PassResult(super().call(graph_module).graph_module, True)

    return DelegableStep()
