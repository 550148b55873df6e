#!/usr/bin/env bash
# make soak: a long run per backend (`runlens --backends K run --repeat N`, one
# process each, the same forward over and over) while its resident memory is
# sampled every second. Fails when memory at the end exceeds memory after the
# warm-up by more than SOAK_GROWTH_PCT percent.
#
#   SOAK_BACKENDS  comma list          [eager,xnnpack,xnnpack-int8,portable]
#   SOAK_RUNS      runs per backend    [10000]
#   SOAK_SECONDS   time cap per backend (the run is stopped there) [600]
#   SOAK_WARMUP    seconds of warm-up not judged [10]
#   SOAK_GROWTH_PCT allowed growth after the warm-up [3]
#   SOAK_THREADS   --threads for runlens [runlens' default: all cores]
#   SOAK_LOG       file to append every sample to ("backend seconds rss_kb") [none]
set -u
BIN=${BIN:-target/release/runlens}
BACKENDS=${SOAK_BACKENDS:-eager,xnnpack,xnnpack-int8,portable}
RUNS=${SOAK_RUNS:-10000}
SECONDS_CAP=${SOAK_SECONDS:-600}
WARMUP=${SOAK_WARMUP:-10}
GROWTH=${SOAK_GROWTH_PCT:-3}
LOG=${SOAK_LOG:-}
THREADS=${SOAK_THREADS:-}
TEXT="A kitten is sleeping on the sofa"
failed=0
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
for backend in ${BACKENDS//,/ }; do
    "$BIN" --backends "$backend" ${THREADS:+--threads "$THREADS"} run --repeat "$RUNS" "$TEXT" > /tmp/runlens-soak-$$.out 2>&1 &
    pid=$!
    start=$(date +%s); first=""; warm=""; last=""; peak=0
    while kill -0 "$pid" 2>/dev/null; do
        now=$(( $(date +%s) - start ))
        r=$(rss "$pid"); [ -n "$r" ] || break
        [ -n "$first" ] || first=$r
        if [ "$now" -ge "$WARMUP" ]; then
            [ -n "$warm" ] || warm=$r
            [ "$r" -gt "$peak" ] && peak=$r
        fi
        last=$r
        [ -z "$LOG" ] || echo "$backend $now $r" >> "$LOG"
        if [ "$now" -ge "$SECONDS_CAP" ]; then
            kill "$pid"; echo "$backend: stopped at the ${SECONDS_CAP} s cap"; break
        fi
        sleep 1
    done
    wait "$pid"; status=$?
    elapsed=$(( $(date +%s) - start ))
    warm=${warm:-$first}
    if [ -z "$warm" ]; then
        echo "$backend: FAILED (the process ended before memory could be read; status $status)"; cat /tmp/runlens-soak-$$.out; failed=1; continue
    fi
    growth=$(awk -v a="$warm" -v b="$peak" 'BEGIN { if (b < a) b = a; printf "%.1f", (b - a) * 100 / a }')
    verdict=ok
    awk -v g="$growth" -v lim="$GROWTH" 'BEGIN { exit !(g > lim) }' && { verdict="FAILED (grew more than ${GROWTH}%)"; failed=1; }
    [ "$status" -eq 0 ] || [ "$status" -eq 143 ] || { verdict="FAILED (exit status $status)"; failed=1; }
    printf '%s: %s runs asked, %d s; RSS start %.1f MB, after warm-up %.1f MB, peak after %.1f MB, end %.1f MB; growth %s%%: %s\n' \
        "$backend" "$RUNS" "$elapsed" "$(echo "$first/1024" | bc -l)" "$(echo "$warm/1024" | bc -l)" "$(echo "$peak/1024" | bc -l)" "$(echo "$last/1024" | bc -l)" "$growth" "$verdict"
    grep -E "latency|ms" /tmp/runlens-soak-$$.out | head -3 | sed 's/^/    /'
done
rm -f /tmp/runlens-soak-$$.out
exit $failed
