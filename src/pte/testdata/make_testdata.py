"""Writes the small .pte files in this folder and their Python counts.

    .venv/bin/python src/pte/testdata/make_testdata.py

Each file is written by ExecuTorch (executorch==1.5.1, torch==2.13.0); the
`.counts.json` beside it comes from tests/python/pte_counts.py. The files cover
what the Rust reader must handle besides MiniLM:
  multi_xnnpack   two methods, XNNPACK blobs in segments, weights in named data
  multi_portable  two methods, no delegates, constants in a segment
  flat_xnnpack    no extended header, XNNPACK blobs inline
  flat_portable   no extended header, constants inline (constant_buffer)
  foo_backend     an unknown backend id, its blobs inline
"""

import os
import subprocess
import sys

import torch
from torch.export import export

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from executorch.exir._serialize._program import _program_to_flatbuffer, deserialize_pte_binary

HERE = os.path.dirname(os.path.abspath(__file__))
COUNTS = os.path.abspath(os.path.join(HERE, "..", "..", "..", "tests", "python", "pte_counts.py"))


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 16)
        self.l2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        y = torch.relu(self.l1(x))
        y = torch.layer_norm(y, [16])
        return self.l2(y).softmax(-1) + x.sum()


class Other(torch.nn.Module):
    def forward(self, a, b):
        return (a * b + 1.0, a - b)


def write(name: str, data: bytes) -> None:
    path = os.path.join(HERE, name + ".pte")
    with open(path, "wb") as f:
        f.write(data)
    subprocess.run([sys.executable, COUNTS, name + ".pte", name + ".counts.json"], cwd=HERE, check=True)
    print(name, len(data))


def methods():
    x = (torch.randn(2, 8),)
    return {
        "forward": export(Small().eval(), x),
        "other": export(Other(), (torch.randn(3), torch.randn(3))),
    }


def flat(data: bytes, rename_backend: str = "") -> bytes:
    """The same program without segments: everything inline, no eh00 header."""
    program = deserialize_pte_binary(data).program
    if rename_backend:
        for plan in program.execution_plan:
            for d in plan.delegates:
                d.id = rename_backend
    return bytes(_program_to_flatbuffer(program).data)


def main() -> None:
    torch.manual_seed(0)
    write("multi_xnnpack", to_edge_transform_and_lower(methods(), partitioner=[XnnpackPartitioner()]).to_executorch().buffer)
    write("multi_portable", to_edge(methods()).to_executorch().buffer)
    x = (torch.randn(2, 8),)
    portable = to_edge(export(Small().eval(), x)).to_executorch().buffer
    inline = to_edge_transform_and_lower(export(Small().eval(), x), partitioner=[XnnpackPartitioner()]).to_executorch(
        ExecutorchBackendConfig(extract_delegate_segments=False)
    ).buffer
    write("flat_portable", flat(portable))
    write("flat_xnnpack", flat(inline))
    write("foo_backend", flat(inline, rename_backend="FooBackend"))


if __name__ == "__main__":
    main()
