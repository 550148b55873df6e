"""Runs llama.cpp's own converter (convert_hf_to_gguf.py, vendored in the
llama-cpp-python sdist; mk/gguf-converter.mk unpacks it) on one checkpoint
directory, in a process of its own: gguf_files.py starts this script, so a converter
that fails, calls sys.exit or holds a model's weights in memory cannot take the
export down with it.

    python gguf_convert.py --converter DIR --checkpoint CKPT --out OUT.gguf
                           --pre-tokenizer NAME [--mean-pooling] --report REPORT.json

What it changes in the converter, from outside (nothing in its files is edited):
  - TextModel.get_vocab_base_pre: the converter recognises a BPE pre-tokenizer by
    the sha256 of the ids its tokenizer gives a fixed text and refuses any other
    (NotImplementedError). A retrained tokenizer (every test model's) is unknown
    to it, so on that error the name llama.cpp knows for the family is written
    instead (--pre-tokenizer: gpt-2, llama-bpe, qwen2, or default for BERT's
    WordPiece, where llama.cpp ignores the name). runlens tokenizes for every
    column and hands llama.cpp ids, so the name only has to load.
  - --mean-pooling (BERT for feature-extraction): `bert.pooling_type` = 1 (mean)
    whatever the checkpoint's sentence-transformers files say (the converter
    writes one only from modules.json / 1_Pooling): runlens' embedding is the
    masked mean of the last hidden state, as in the .pte programs.
  - GPT-2: config.json as transformers 5 writes it has no `n_ctx`, which the
    converter reads for the context length; it is `n_positions`.
Then it calls the converter's main() with argv
`[checkpoint, --outtype, f32, --outfile, OUT]`, reads the written file back with
the vendored gguf-py (GGUFReader) and writes REPORT.json: the architecture,
tensor count and types, vocabulary size, the pre-tokenizer written and whether it
was forced, the pooling type. Exit 0 only when OUT was written and read back.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--converter", type=Path, required=True,
                    help="the folder holding convert_hf_to_gguf.py, conversion/ and gguf-py/")
    ap.add_argument("--checkpoint", type=Path, required=True, help="a Hugging Face checkpoint directory")
    ap.add_argument("--out", type=Path, required=True, help="the F32 GGUF to write")
    ap.add_argument("--pre-tokenizer", required=True,
                    help="the llama.cpp pre-tokenizer name to write when the converter does not know the tokenizer")
    ap.add_argument("--mean-pooling", action="store_true", help="write bert.pooling_type = 1 (mean)")
    ap.add_argument("--report", type=Path, required=True, help="where to write what was converted (JSON)")
    return ap.parse_args(argv)


def field_value(reader, key: str):
    field = reader.get_field(key)
    if field is None:
        return None
    value = field.contents()
    return value


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    converter = args.converter.resolve()
    script = converter / "convert_hf_to_gguf.py"
    if not script.is_file() or not (converter / "conversion").is_dir() or not (converter / "gguf-py" / "gguf").is_dir():
        print(f"error: {converter} lacks convert_hf_to_gguf.py, conversion/ or gguf-py/", file=sys.stderr)
        return 2
    sys.path.insert(0, str(converter / "gguf-py"))
    sys.path.insert(0, str(converter))

    import gguf  # the vendored gguf-py, which the converter was written against

    if Path(gguf.__file__).resolve().parents[1] != (converter / "gguf-py").resolve():
        print(f"error: imported gguf from {gguf.__file__}, not from {converter / 'gguf-py'}", file=sys.stderr)
        return 2
    import convert_hf_to_gguf as cli
    from conversion import base

    report: dict = {"pre_tokenizer_forced": False, "checkpoint_pooling": None}
    log = logging.getLogger("hf-to-gguf")

    original_pre = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer) -> str:
        level = log.level
        log.setLevel(logging.ERROR)  # its 14-line banner about an unknown hash: we say it in one
        try:
            return original_pre(self, tokenizer)
        except NotImplementedError:
            report["pre_tokenizer_forced"] = True
            print(f"gguf_convert: the converter does not know this tokenizer's pre-tokenizer (hash); "
                  f"writing {args.pre_tokenizer!r}, the name llama.cpp knows for the family", file=sys.stderr)
            return args.pre_tokenizer
        finally:
            log.setLevel(level)

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre

    if args.mean_pooling:
        from conversion.bert import BertModel

        original_params = BertModel.set_gguf_parameters

        def set_gguf_parameters(self) -> None:
            original_params(self)
            key = gguf.Keys.LLM.POOLING_TYPE.format(arch=self.gguf_writer.arch)
            said = next((kv[key].value for kv in self.gguf_writer.kv_data if key in kv), None)
            report["checkpoint_pooling"] = gguf.PoolingType(said).name.lower() if said is not None else None
            self.gguf_writer.remove_key(key)
            self.gguf_writer.add_pooling_type(gguf.PoolingType.MEAN)

        BertModel.set_gguf_parameters = set_gguf_parameters

    from conversion.gpt2 import GPT2Model

    original_gpt2 = GPT2Model.set_gguf_parameters

    def gpt2_parameters(self) -> None:
        if "n_ctx" not in self.hparams and "n_positions" in self.hparams:
            self.hparams["n_ctx"] = self.hparams["n_positions"]
        original_gpt2(self)

    GPT2Model.set_gguf_parameters = gpt2_parameters

    args.out.parent.mkdir(parents=True, exist_ok=True)
    sys.argv = [str(script), str(args.checkpoint), "--outtype", "f32", "--outfile", str(args.out)]
    try:
        cli.main()
    except SystemExit as e:
        if e.code not in (None, 0):
            print(f"error: convert_hf_to_gguf.py exited with {e.code}", file=sys.stderr)
            return 1
    if not args.out.is_file():
        print(f"error: convert_hf_to_gguf.py wrote no {args.out}", file=sys.stderr)
        return 1

    reader = gguf.GGUFReader(args.out)
    arch = field_value(reader, "general.architecture")
    tokens = reader.get_field("tokenizer.ggml.tokens")
    pooling = field_value(reader, f"{arch}.pooling_type")
    types = sorted({t.tensor_type.name for t in reader.tensors})
    report.update({
        "architecture": arch,
        "tensors": len(reader.tensors),
        "tensor_types": types,
        "tensor_names": [t.name for t in reader.tensors],
        "n_vocab": len(tokens.data) if tokens is not None else None,
        "tokenizer_model": field_value(reader, "tokenizer.ggml.model"),
        "pre_tokenizer": field_value(reader, "tokenizer.ggml.pre"),
        "pooling_type": int(pooling) if pooling is not None else None,
        "bytes": args.out.stat().st_size,
    })
    args.report.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
