"""The pieces of `python/export.py`, one idea per file:

  archs/         one file per architecture (bert, distilbert, gpt2, ...): its
                 config fields, the transformers class of each task, how a
                 decoder is wrapped and its cache geometry; archs/__init__.py
                 is the one table, keyed by config.json's model_type
  checkpoint.py  a checkpoint directory: its architecture (from the table),
                 loading, and the files eager needs
  tasks.py       one class per task: the program's wrapper, example inputs,
                 reference outputs, and how a program's output is compared
  programs.py    the encoder programs (portable, xnnpack, xnnpack-int8,
                 xnnpack-static): lowering and their manifest entries
  decoder.py     the text-generation programs (KV cache, window) and the greedy loops
  lowering.py    an ExportedProgram to an ExecuTorch program, one way for all
  course.py      programs made the way Arm's course makes them (export_course.py)
  modules.py     the sidecar of `runlens layers`: each instruction's module
  verify.py      each written program run by ExecuTorch's Python runtime
                 against the reference outputs
  apart.py       each program lowered and checked in a child forked for it,
                 so one program's leftovers are gone before the next (--apart)
  files.py       atomic writes, sha256, progress lines, compact floats
  compare.py     cosine and max|diff| between an output and its reference
  manifest.py    a program's entry in manifest.json, one way for every runtime

The modules import in layers, without a circle (tests/layering.rs,
PYTHON_LAYERS; docs/architecture.md).
"""
