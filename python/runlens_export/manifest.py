"""A program's entry in manifest.json's "programs" (docs/model-directory.md;
src/model/manifest.rs reads it), made in one place for every kind of program:
ExecuTorch's .pte programs (programs.py, decoder.py), llama.cpp's GGUF files
(gguf_files.py) and ONNX Runtime's files (onnx_files.py)."""

from __future__ import annotations


def program_entry(name: str, file: str, title: str, column: str, *, about: str, delegate: str | None,
                  quantization: str | None, runtime: str | None = None, **fields) -> dict:
    """The keys every program has, then `fields` in the order given. An ExecuTorch
    program names no runtime (absent: ExecuTorch) and says its `about` before its
    delegate; another runtime's entry names it after the column and says its `about`
    last, after its own fields (the order the manifests have always had)."""
    entry = {"name": name, "file": file, "title": title, "column": column}
    if runtime is None:
        entry["about"] = about
    else:
        entry["runtime"] = runtime
    entry["delegate"] = delegate
    entry["quantization"] = quantization
    entry.update(fields)
    if runtime is not None:
        entry["about"] = about
    return entry
