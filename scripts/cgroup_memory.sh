#!/bin/bash
# Runs a command under a cgroup v1 memory limit and samples what the cgroup holds every
# 2 s (docs/models.md, "the full set fits too"): its anonymous memory (memory.stat's
# total_rss, which nothing can reclaim without swap), that plus the mapped file pages
# (total_mapped_file), its page cache, and the processes in it. The cgroup's own
# usage counts page cache and sits at the limit, so it says little by itself.
#
#   scripts/cgroup_memory.sh LIMIT_BYTES LOG COMMAND...     (root; cgroup v1 mounted)
#
# At the end: the command's exit status, the cgroup's OOM kills, the file pages it read
# again (workingset_refault_file), and the highest samples while each set of processes
# ran (one set per worker of `export.py --apart`).
set -u
limit=$1 log=$2
shift 2
G=/sys/fs/cgroup/memory/runlens-$$
mkdir "$G" || { echo "cannot make a cgroup v1 memory group under /sys/fs/cgroup/memory (root, cgroup v1)" >&2; exit 2; }
echo "$limit" > "$G/memory.limit_in_bytes"
sync && echo 3 > /proc/sys/vm/drop_caches  # the page cache of earlier runs is not this one's
: > "$log"
(
  while [ -d "$G" ]; do
    eval "$(awk '/^total_rss /{print "rss="int($2/1e6)} /^total_mapped_file /{print "mapped="int($2/1e6)} /^total_cache /{print "cache="int($2/1e6)}' "$G/memory.stat" 2>/dev/null)"
    echo "$(date +%T) rss=${rss:-0}MB rss+mapped=$(( ${rss:-0} + ${mapped:-0} ))MB cache=${cache:-0}MB procs=$(tr '\n' ' ' < "$G/cgroup.procs" 2>/dev/null)" >> "$log"
    sleep 2
  done
) &
sampler=$!
sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$G" "$@"
status=$?
kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
echo "exit status $status; $(grep '^oom_kill ' "$G/memory.oom_control"); $(grep '^workingset_refault_file' "$G/memory.stat")"
awk '{split($2,a,"=");r=a[2]+0; split($3,b,"=");m=b[2]+0; p=$0; sub(/.*procs=/,"",p)
      if(!(p in R)){o[++n]=p; R[p]=0; M[p]=0; f[p]=$1}
      if(r>R[p])R[p]=r; if(m>M[p])M[p]=m}
     END{for(i=1;i<=n;i++) printf "from %s: anonymous %d MB, anonymous + mapped %d MB (processes %s)\n", f[o[i]], R[o[i]], M[o[i]], o[i]}' "$log"
rmdir "$G" 2>/dev/null
exit $status
