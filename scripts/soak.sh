#!/usr/bin/env bash
# make soak: long runs, one process per backend, while the process's resident
# memory is sampled; a backend fails when its peak after the warm-up exceeds
# its memory at the end of the warm-up by more than the allowed growth, or when
# the run fails (docs/soak.md). Two parts:
#
#  encoder: `runlens --backends K run --repeat N TEXT` on the default model
#  (MiniLM): the same forward over and over.
#   SOAK_BACKENDS  comma list          [eager,xnnpack,xnnpack-int8,portable]
#   SOAK_RUNS      runs per backend    [10000]
#   SOAK_SECONDS   time cap per backend (the run is stopped there) [600]
#   SOAK_WARMUP    seconds of warm-up not judged [10]
#
#  generation: `runlens --model M --backends K run --json --repeat N
#  --max-new-tokens T PROMPT`: N full greedy generations of T new tokens each
#  (the KV cache refilled from the prompt every time); the last generation's
#  JSON must show T tokens (neither the end-of-text id nor the model's length
#  cut it short).
#   SOAK_GEN_MODEL    model directory  [models/soak-gpt2: the tiny GPT-2, L = 128]
#   SOAK_GEN_BACKENDS comma list       [eager,eager-int8,eager-int4,portable,xnnpack,xnnpack-int8,xnnpack-8da4w]
#   SOAK_GEN_RUNS     generations per backend [1000; at least 200 to count as the issue's soak]
#   SOAK_GEN_TOKENS   new tokens per generation [64]
#   SOAK_GEN_PROMPT   the prompt ["The quick brown fox", raw]
#   SOAK_GEN_SECONDS  time cap per backend [600]
#   SOAK_GEN_WARMUP   seconds of warm-up not judged [5]
#
#  both:
#   SOAK_PARTS     which parts, comma list [encoder,generation]
#   SOAK_GROWTH_PCT allowed growth after the warm-up [3]
#   SOAK_INTERVAL  seconds between samples [encoder 1, generation 0.25]
#   SOAK_THREADS   --threads for runlens [runlens' default: all cores]
#   SOAK_LOG       file to append every sample to ("backend seconds rss_kb
#                  anon_kb", anon_kb being RssAnon, the heap and stacks without
#                  mapped files; generation rows are named gen:BACKEND) [none]
set -u
BIN=${BIN:-target/release/runlens}
PARTS=${SOAK_PARTS:-encoder,generation}
GROWTH=${SOAK_GROWTH_PCT:-3}
LOG=${SOAK_LOG:-}
THREADS=${SOAK_THREADS:-}
TEXT="A kitten is sleeping on the sofa"
GEN_MODEL=${SOAK_GEN_MODEL:-models/soak-gpt2}
GEN_TOKENS=${SOAK_GEN_TOKENS:-64}
GEN_PROMPT=${SOAK_GEN_PROMPT:-The quick brown fox}
OUT=$(mktemp -d /tmp/runlens-soak.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
failed=0

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
anon() { awk '/^RssAnon:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

# soak LABEL RUNS CAP WARMUP INTERVAL OUTFILE -- COMMAND...: start COMMAND,
# sample its RSS every INTERVAL s until it ends (or CAP s), print the verdict;
# sets `status` (the command's exit status) and returns 1 when it failed.
soak() {
    local label=$1 runs=$2 cap=$3 warmup=$4 interval=$5 out=$6
    shift 7
    "$@" > "$out" 2> "$out.err" &
    local pid=$! start now first="" warm="" last="" peak=0 samples=0 r
    start=$(date +%s.%N)
    while kill -0 "$pid" 2>/dev/null; do
        now=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
        r=$(rss "$pid"); [ -n "$r" ] || break
        [ -n "$first" ] || first=$r
        if awk -v n="$now" -v w="$warmup" 'BEGIN { exit !(n >= w) }'; then
            [ -n "$warm" ] || warm=$r
            [ "$r" -gt "$peak" ] && peak=$r
            samples=$((samples + 1))
        fi
        last=$r
        [ -z "$LOG" ] || echo "$label $now $r $(anon "$pid")" >> "$LOG"
        if awk -v n="$now" -v c="$cap" 'BEGIN { exit !(n >= c) }'; then
            kill "$pid"; echo "$label: stopped at the ${cap} s cap"; break
        fi
        sleep "$interval"
    done
    wait "$pid"; status=$?
    local elapsed
    elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
    if [ -z "$warm" ]; then
        if [ "$status" -ne 0 ]; then
            echo "$label: FAILED (exit status $status):"
        else
            echo "$label: FAILED (the process ended before the ${warmup} s warm-up was over, so nothing was judged: give more runs or a shorter warm-up)"
        fi
        tail -5 "$out.err"
        return 1
    fi
    local growth verdict=ok bad=0
    growth=$(awk -v a="$warm" -v b="$peak" 'BEGIN { if (b < a) b = a; printf "%.1f", (b - a) * 100 / a }')
    if awk -v g="$growth" -v lim="$GROWTH" 'BEGIN { exit !(g > lim) }'; then verdict="FAILED (grew more than ${GROWTH}%)"; bad=1; fi
    if [ "$status" -ne 0 ] && [ "$status" -ne 143 ]; then verdict="FAILED (exit status $status)"; bad=1; tail -5 "$out.err"; fi
    printf '%s: %s runs asked, %s s; RSS start %s MB, after warm-up %s MB, peak after %s MB, end %s MB (%d samples after the warm-up); growth %s%%: %s\n' \
        "$label" "$runs" "$elapsed" "$(mb "$first")" "$(mb "$warm")" "$(mb "$peak")" "$(mb "$last")" "$samples" "$growth" "$verdict"
    return $bad
}

if [[ ",$PARTS," == *,encoder,* ]]; then
    RUNS=${SOAK_RUNS:-10000}
    for backend in $(echo "${SOAK_BACKENDS:-eager,xnnpack,xnnpack-int8,portable}" | tr , ' '); do
        soak "$backend" "$RUNS" "${SOAK_SECONDS:-600}" "${SOAK_WARMUP:-10}" "${SOAK_INTERVAL:-1}" "$OUT/enc" -- \
            "$BIN" --backends "$backend" ${THREADS:+--threads "$THREADS"} run --repeat "$RUNS" "$TEXT" || failed=1
        grep -E "latency|ms" "$OUT/enc" | head -3 | sed 's/^/    /'
    done
fi

if [[ ",$PARTS," == *,generation,* ]]; then
    RUNS=${SOAK_GEN_RUNS:-1000}
    if [ ! -f "$GEN_MODEL/manifest.json" ]; then
        echo "generation soak: $GEN_MODEL/manifest.json not found: make it first (make $GEN_MODEL/manifest.json for the default), or set SOAK_GEN_MODEL"
        exit 1
    fi
    echo "generation soak: $GEN_MODEL, $RUNS generations of $GEN_TOKENS new tokens per backend, prompt \"$GEN_PROMPT\""
    for backend in $(echo "${SOAK_GEN_BACKENDS:-eager,eager-int8,eager-int4,portable,xnnpack,xnnpack-int8,xnnpack-8da4w}" | tr , ' '); do
        soak "gen:$backend" "$RUNS" "${SOAK_GEN_SECONDS:-600}" "${SOAK_GEN_WARMUP:-5}" "${SOAK_INTERVAL:-0.25}" "$OUT/gen.json" -- \
            "$BIN" --model "$GEN_MODEL" --backends "$backend" --prompt-format raw ${THREADS:+--threads "$THREADS"} \
            run --json --repeat "$RUNS" --max-new-tokens "$GEN_TOKENS" "$GEN_PROMPT" || failed=1
        if [ "$status" -ne 0 ]; then
            [ "$status" -ne 143 ] || echo "    (stopped at the cap before its $RUNS generations: not counted)"
            continue
        fi
        # The last generation's length and speed (every generation is the same greedy one).
        python3 - "$OUT/gen.json" "$GEN_TOKENS" "$RUNS" <<'EOF' || failed=1
import json, sys
report, want, runs = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
b = report["backends"][0]
if not b["ok"]:
    print(f"    FAILED: {b['error']}")
    sys.exit(1)
n = len(b["generated_ids"])
speed = b["decode_tokens_per_s"]
print(f"    {n} new tokens a generation (stopped at {b['stop']}), median generation {b['latency_ms']:.1f} ms, "
      f"last one's decode {speed:.0f} tokens/s; {runs} x {n} = {runs * n} tokens" if speed else f"    {n} new tokens")
if n != want:
    print(f"    FAILED: {n} new tokens, not {want}: pick a prompt or model where greedy runs {want} tokens without the end-of-text id (SOAK_GEN_PROMPT), with room in its length")
    sys.exit(1)
EOF
    done
fi
exit $failed
