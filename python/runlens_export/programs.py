"""The programs of a model directory and how each is lowered.

  portable         torch.export -> to_edge -> to_executorch, no delegate
  xnnpack          the same program with XnnpackPartitioner
  xnnpack-int8     XNNPACK, linear layers dynamically quantized to int8
                   (XNNPACKQuantizer, per-channel symmetric weights)
  xnnpack-static   XNNPACK with a fixed sequence length of max_seq_len
                   (the caller pads the input and masks the padding)

Every program takes (input_ids, attention_mask), int64 [1, S]. Next to each
program, `<name>.modules.json` maps its instructions and delegate nodes to the
model's modules (modules.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .files import release_memory, say, write_atomic, write_program
from .lowering import XNNPACK, lower as lower_program
from .manifest import program_entry
from .modules import sidecar


@dataclass(frozen=True)
class ProgramSpec:
    name: str
    title: str
    column: str
    delegate: str | None
    quantization: str | None
    static: bool

    @property
    def file(self) -> str:
        return f"{self.name}.pte"

    @property
    def modules_file(self) -> str:
        return f"{self.name}.modules.json"

    def about(self, max_seq_len: int) -> str:
        dynamic = f"dynamic length 2..{max_seq_len}"
        return {
            "portable": f"no delegate: every operator on ExecuTorch's default CPU kernels; {dynamic}",
            "xnnpack": f"XnnpackPartitioner: supported subgraphs on XNNPACK, the rest on the default kernels; {dynamic}",
            "xnnpack-int8": "linear layers dynamically quantized to int8 (XNNPACKQuantizer, per-channel weights), "
            f"then XnnpackPartitioner; {dynamic}",
            "xnnpack-static": f"exported for exactly {max_seq_len} tokens: the input is padded, the padding masked; "
            "XnnpackPartitioner",
        }[self.name]

    def manifest_entry(self, max_seq_len: int) -> dict:
        return program_entry(self.name, self.file, self.title, self.column, about=self.about(max_seq_len),
                             delegate=self.delegate, quantization=self.quantization,
                             fixed_len=max_seq_len if self.static else None, modules=self.modules_file)


PROGRAMS: dict[str, ProgramSpec] = {
    p.name: p
    for p in (
        ProgramSpec("portable", "ExecuTorch portable", "portable", None, None, False),
        ProgramSpec("xnnpack", "ExecuTorch XNNPACK", "xnnpack", XNNPACK, None, False),
        ProgramSpec("xnnpack-int8", "ExecuTorch XNNPACK int8", "xnnpack", XNNPACK, "int8-dynamic-linear", False),
        ProgramSpec("xnnpack-static", "ExecuTorch XNNPACK static", "xnnpack", XNNPACK, None, True),
    )
}


def drop_integer_add_zero(gm: torch.fx.GraphModule) -> int:
    """Remove `x + 0` on integer tensors (transformers' mask builder adds 0 to
    an `arange`). XNNPACKQuantizer.transform_for_annotation turns scalar operands
    into float tensor attributes, which would make those positions float and
    break the `index` that uses them. Returns how many nodes it removed."""
    removed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target != torch.ops.aten.add.Tensor:
            continue
        base, other = node.args[0], node.args[1]
        val = getattr(base, "meta", {}).get("val")
        if type(other) is int and other == 0 and val is not None and not val.dtype.is_floating_point:
            node.replace_all_uses_with(base)
            gm.graph.erase_node(node)
            removed += 1
    gm.recompile()
    return removed


def quantize_linear_int8(ep, example, dynamic_shapes):
    """Dynamically quantized int8 linear layers (activations quantized per token
    at run time, weights per channel, symmetric), re-exported for lowering."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)
    quantizer = XNNPACKQuantizer().set_module_type(torch.nn.Linear, config)
    gm = ep.module()
    removed = drop_integer_add_zero(gm)
    say(f"  drop_integer_add_zero removed {removed} integer `+ 0` node(s)")
    prepared = prepare_pt2e(gm, quantizer)
    prepared(*example)  # dynamic quantization: no calibration data needed, one pass to trace
    converted = convert_pt2e(prepared)
    return torch.export.export(converted, example, dynamic_shapes=dynamic_shapes, strict=False)


def example_inputs(length: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.ones(1, length, dtype=torch.long), torch.ones(1, length, dtype=torch.long)


def lower(wrapper: torch.nn.Module, names: list[str], max_seq_len: int, out: Path, after=None) -> list[dict]:
    """Writes the named programs into `out`, each followed by `after(entry)` when given (the
    check); returns their manifest entries in the order of PROGRAMS (portable, xnnpack,
    xnnpack-int8, xnnpack-static)."""
    entries = []

    def write(ep, spec: ProgramSpec) -> None:
        entry = spec.manifest_entry(max_seq_len)  # the one the check may add figures to
        entries.append(entry)
        program, nodes = lower_program(ep, delegate=spec.delegate is not None, pte=out / spec.file)
        write_program(out / spec.file, program)
        write_atomic(out / spec.modules_file, sidecar(spec.file, nodes, program))
        del program, nodes
        release_memory()
        if after is not None:
            after(entry)
            release_memory()

    from .progress import PROGRESS

    wanted = [PROGRAMS[n] for n in PROGRAMS if n in names]
    example = example_inputs(min(16, max_seq_len))
    seq = torch.export.Dim("seq", min=2, max=max_seq_len)
    dynamic_shapes = ({1: seq}, {1: seq})
    ep = None
    for spec in wanted:
        with PROGRESS.step(f"{spec.file}: {spec.title}", program=spec.name):
            if ep is None and not spec.static:
                say(f"torch.export with a dynamic sequence length 2..{max_seq_len}")
                ep = torch.export.export(wrapper, example, dynamic_shapes=dynamic_shapes, strict=False)
            if spec.name in ("portable", "xnnpack"):
                say(f"lowering {spec.file} ({'XnnpackPartitioner' if spec.delegate else 'no delegate'})")
                write(ep, spec)
            elif spec.name == "xnnpack-int8":
                say("quantizing the linear layers to int8 (dynamic, per-channel) and lowering xnnpack-int8.pte")
                write(quantize_linear_int8(ep, example, dynamic_shapes), spec)
            elif spec.name == "xnnpack-static":
                say(f"torch.export with a fixed length {max_seq_len} and lowering xnnpack-static.pte")
                write(torch.export.export(wrapper, example_inputs(max_seq_len), strict=False), spec)
    return entries
