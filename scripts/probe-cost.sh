#!/bin/bash
# What runlens' probe costs a `run`: wall time of `runlens --backends B run`, probe
# off (RUNLENS_PROBE=0), probe with an empty cache (first load of a file), probe
# with the verdict cached; the three interleaved, REPS times each; medians in ms.
# Usage: scripts/probe-cost.sh [REPS]   (from the repository root, after make build models)
set -euo pipefail
REPS=${1:-7}
BIN=target/release/runlens
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ms() { local s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; echo $(( ($(date +%s%N) - s) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for backend in xnnpack portable; do
  : > "$TMP/off"; : > "$TMP/first"; : > "$TMP/cached"
  RUNLENS_CACHE_DIR="$TMP/warm" $BIN --backends $backend run -- "hello world" >/dev/null
  for i in $(seq "$REPS"); do
    RUNLENS_PROBE=0 ms $BIN --backends $backend --threads 1 run -- "hello world" >> "$TMP/off"
    RUNLENS_CACHE_DIR="$TMP/cold$i" ms $BIN --backends $backend --threads 1 run -- "hello world" >> "$TMP/first"
    RUNLENS_CACHE_DIR="$TMP/warm" ms $BIN --backends $backend --threads 1 run -- "hello world" >> "$TMP/cached"
  done
  echo "$backend: probe off $(median < "$TMP/off") ms, first load (probe runs) $(median < "$TMP/first") ms, cached verdict $(median < "$TMP/cached") ms"
done
