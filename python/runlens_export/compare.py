"""How near a program's output is to the reference it is checked against: the
figures a task's `compare` (tasks.py) and the ONNX files' check (onnx_files.py)
judge by, and what a comparison says."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Comparison:
    ok: bool
    summary: str


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp(min=1e-30))


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double().reshape(-1) - b.double().reshape(-1)).abs().max())
