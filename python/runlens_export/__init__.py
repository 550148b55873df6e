"""The pieces of `python/export.py`, one idea per file:

  checkpoint.py  a checkpoint directory: its architecture, the table of what
                 can be exported, loading, and the files eager needs
  tasks.py       one class per task: the program's wrapper, example inputs,
                 reference outputs, and how a program's output is compared
  programs.py    the programs (portable, xnnpack, xnnpack-int8, xnnpack-static):
                 lowering and their manifest entries
  verify.py      each written program run by ExecuTorch's Python runtime
                 against the reference outputs
  files.py       atomic writes, sha256, progress lines, compact floats
"""
