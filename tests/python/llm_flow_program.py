"""A program as ExecuTorch's own LLM export flow makes them, for the tests of
programs runlens cannot run: its KV cache is written by the custom operator
`llama::update_cache`, whose kernel the executorch wheel ships only inside its
Python extension (`extension/llm/custom_ops/libcustom_ops_aot_lib.so`), not in
the C++ libraries runlens links. The program has a decoder's inputs and output
(input_ids int64 [1, S], cache_position int64 [S] -> float32 [1, V]), so the
only thing wrong with it, for runlens, is the missing kernel.

    python tests/python/llm_flow_program.py --out models/llm-flow [--vocab 512]

Writes OUT/update-cache.pte and OUT/programs.json (the operator it calls).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

OPERATOR = "llama::update_cache.out"


class CustomCacheDecoder(torch.nn.Module):
    """Embeds the ids, writes them into a [1, L, 1, D] cache with llama::update_cache
    at position 0, and reads logits off the cache: the shape of export_llm's programs."""

    def __init__(self, vocab: int, dim: int = 8, max_len: int = 32):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(vocab, dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, max_len, 1, dim), persistent=False)

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids).unsqueeze(2)  # [1, S, 1, D]
        torch.ops.llama.update_cache(x, self.k_cache, 0)
        return self.head(self.k_cache.sum(dim=(1, 2)))  # [1, V]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vocab", type=int, default=512)
    args = ap.parse_args(argv)

    # Registers the llama:: operators with PyTorch (loads the wheel's AOT library).
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
    from executorch.exir import to_edge
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
    from executorch.exir.capture._config import ExecutorchBackendConfig

    model = CustomCacheDecoder(args.vocab).eval()
    seq = torch.export.Dim("seq", min=1, max=16)
    example = (torch.zeros(1, 4, dtype=torch.long), torch.arange(4, dtype=torch.long))
    ep = torch.export.export(model, example, dynamic_shapes=({1: seq}, {0: seq}), strict=True)
    program = to_edge(ep).to_executorch(
        ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["k_cache"])]))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "update-cache.pte").write_bytes(program.buffer)
    calls = sorted({f"{op.name}.{op.overload}" if op.overload else op.name
                    for op in program.executorch_program.execution_plan[0].operators})
    if OPERATOR not in calls:
        print(f"error: the program does not call {OPERATOR} (it calls {calls})", file=sys.stderr)
        return 1
    (args.out / "programs.json").write_text(json.dumps(
        {"update-cache.pte": {"custom_operator": OPERATOR, "operators": calls}}, indent=2) + "\n")
    print(f"wrote {args.out / 'update-cache.pte'}: calls {', '.join(calls)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
