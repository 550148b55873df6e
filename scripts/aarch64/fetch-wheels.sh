#!/usr/bin/env bash
# Fetch the aarch64 wheels runlens links (torch, executorch, and the two CUDA
# runtime packages libtorch_cpu needs even on CPU) and the one it opens at run
# time (onnxruntime: capi/libonnxruntime.so.1.31.1) into $1/wheels and unzip them
# into $1/site, a site-packages layout: torch/lib's own rpath
# ($ORIGIN/../../nvidia/cu13/lib) then finds libcudart/libcupti without
# LD_LIBRARY_PATH. Never installs anything into .venv.
# Usage: fetch-wheels.sh OUT_DIR [PYTHON]   (PYTHON runs pip; default python3)
set -euo pipefail
out=$1
py=${2:-python3}
mkdir -p "$out/wheels"
common=(download --no-deps --only-binary=:all: --python-version 3.11 -d "$out/wheels")
# pip matches --platform tags exactly: torch/executorch/cupti are manylinux_2_28 /
# _2_25; nvidia-cuda-runtime 13.0.96 for aarch64 is tagged manylinux_2_17 (manylinux2014).
"$py" -m pip "${common[@]}" --platform manylinux_2_28_aarch64 \
  torch==2.13.0 executorch==1.5.1 onnxruntime==1.31.1
"$py" -m pip "${common[@]}" --platform manylinux_2_28_aarch64 --platform manylinux_2_25_aarch64 \
  --platform manylinux_2_17_aarch64 --platform manylinux2014_aarch64 \
  nvidia-cuda-runtime==13.0.96 nvidia-cuda-cupti==13.0.85
rm -rf "$out/site.tmp"
mkdir -p "$out/site.tmp"
for whl in "$out"/wheels/*.whl; do
  "$py" -m zipfile -e "$whl" "$out/site.tmp/"
done
rm -rf "$out/site"
mv "$out/site.tmp" "$out/site"
for f in torch/lib/libtorch_cpu.so executorch/lib/libexecutorch.so nvidia/cu13/lib/libcudart.so.13 nvidia/cu13/lib/libcupti.so.13 \
  onnxruntime/capi/libonnxruntime.so.1.31.1; do
  [ -e "$out/site/$f" ] || { echo "error: $out/site/$f missing after unzipping the wheels" >&2; exit 1; }
done
