"""Counts of a .pte file computed with ExecuTorch's own Python code.

    python tests/python/pte_counts.py IN.pte OUT.json

Writes the fields of `runlens inspect --json` that Python can compute, so the
Rust reader can be checked against an independent implementation:
  - the plans (instructions, kernel and delegate calls, operators, delegates,
    inputs, outputs) from `deserialize_pte_binary`, ExecuTorch's deserializer;
  - the file layout (program size, segments, constant and delegate bytes) from
    the extended header and the program as stored, before the deserializer
    moves segment data back into it;
  - XNNPACK node counts by decoding each XNNPACK blob's graph with the `flatc`
    shipped in the executorch wheel and the wheel's XNNPACK `schema.fbs`.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

import executorch
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader
from executorch.exir._serialize._flatbuffer import _get_flatc_path
from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
from executorch.exir._serialize._program import (
    _get_extended_header,
    deserialize_pte_binary,
)
from executorch.exir.schema import DataLocation, DelegateCall, KernelCall

XNNPACK_ID = "XnnpackBackend"
ET_DIR = list(executorch.__path__)[0]
XNNPACK_SCHEMA = os.path.join(ET_DIR, "backends", "xnnpack", "serialization", "schema.fbs")


def xnnpack_graph(blob: bytes) -> bytes:
    """The XNNPACK graph flatbuffer inside a delegate blob."""
    if blob[4:8] != XNNHeader.EXPECTED_MAGIC:
        return blob  # an old blob without the XH00 header
    header = XNNHeader.from_bytes(blob[: XNNHeader.EXPECTED_LENGTH])
    start = header.flatbuffer_offset
    return blob[start : start + header.flatbuffer_size]


def count_xnnpack_nodes(blobs: list[bytes]) -> list[Counter]:
    """Node counts by XNodeUnion member, one Counter per blob."""
    if not blobs:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        names = []
        for i, blob in enumerate(blobs):
            name = os.path.join(tmp, f"g{i}.bin")
            with open(name, "wb") as f:
                f.write(xnnpack_graph(blob))
            names.append(name)
        subprocess.run(
            [_get_flatc_path(), "--json", "--strict-json", "--raw-binary", "-o", tmp, XNNPACK_SCHEMA, "--"]
            + names,
            check=True,
        )
        out = []
        for name in names:
            with open(name[: -len(".bin")] + ".json") as f:
                # flatc writes non-finite floats as bare inf/nan, which JSON lacks.
                text = re.sub(r"(?<=[:\[,\s])(-?)(inf|nan)\b", r'"\1\2"', f.read())
            graph = json.loads(text)
            out.append(Counter(node.get("xnode_union_type", "(none)") for node in graph.get("xnodes", [])))
        return out


def plan_counts(program) -> list[dict]:
    plans = []
    for plan in program.execution_plan:
        instructions = kernel_calls = delegate_calls = 0
        operators: Counter = Counter()
        delegates: Counter = Counter()
        for chain in plan.chains:
            for instr in chain.instructions:
                instructions += 1
                args = instr.instr_args
                if isinstance(args, KernelCall):
                    kernel_calls += 1
                    op = plan.operators[args.op_index]
                    operators[op.name + ("." + op.overload if op.overload else "")] += 1
                elif isinstance(args, DelegateCall):
                    delegate_calls += 1
                    delegates[plan.delegates[args.delegate_index].id] += 1

        # After deserialize_pte_binary every delegate's data is inline.
        blobs = []
        for d in plan.delegates:
            if d.id == XNNPACK_ID:
                assert d.processed.location == DataLocation.INLINE
                blobs.append(bytes(program.backend_delegate_data[d.processed.index].data))
        nodes: Counter = Counter()
        for c in count_xnnpack_nodes(blobs):
            nodes.update(c)
        total = sum(nodes.values())
        plans.append(
            {
                "name": plan.name,
                "inputs": len(plan.inputs),
                "outputs": len(plan.outputs),
                "instructions": instructions,
                "kernel_calls": kernel_calls,
                "delegate_calls": delegate_calls,
                "operators": dict(operators),
                "delegates": dict(delegates),
                "xnnpack_nodes": dict(nodes),
                "coverage": total / (total + kernel_calls) if total + kernel_calls else 0.0,
            }
        )
    return plans


def layout_counts(data: bytes) -> dict:
    eh = _get_extended_header(data)
    program_size = eh.program_size if eh else len(data)
    stored = _flatbuffer_to_program(data[:program_size])
    segments = stored.segments or []

    delegate_bytes = 0
    delegate_segments = set()
    inline_seen = set()
    for plan in stored.execution_plan:
        for d in plan.delegates:
            ref = d.processed
            if ref.location == DataLocation.INLINE:
                if ref.index not in inline_seen:
                    inline_seen.add(ref.index)
                    delegate_bytes += len(stored.backend_delegate_data[ref.index].data)
            elif ref.index not in delegate_segments:
                delegate_segments.add(ref.index)
                delegate_bytes += segments[ref.index].size

    constant_bytes = sum(len(b.storage) for b in stored.constant_buffer or [])
    constant_segments = set()
    cs = stored.constant_segment
    if cs is not None and cs.offsets:
        constant_segments.add(cs.segment_index)
    for m in stored.mutable_data_segments or []:
        if m.offsets:
            constant_segments.add(m.segment_index)
    for nd in stored.named_data or []:
        constant_segments.add(nd.segment_index)
    constant_bytes += sum(segments[i].size for i in constant_segments - delegate_segments)

    return {
        "size_bytes": len(data),
        "program_bytes": program_size,
        "segment_count": len(segments),
        "constant_bytes": constant_bytes,
        "delegate_blob_bytes": delegate_bytes,
    }


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: python tests/python/pte_counts.py IN.pte OUT.json")
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, "rb") as f:
        data = f.read()
    counts = {"file": src, **layout_counts(data)}
    counts["plans"] = plan_counts(deserialize_pte_binary(data).program)
    with open(dst, "w") as f:
        json.dump(counts, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
