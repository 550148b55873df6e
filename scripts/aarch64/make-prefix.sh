#!/usr/bin/env bash
# The qemu-user prefix (-L DIR) for running aarch64 runlens on x86-64:
#   DIR/lib -> /usr/aarch64-linux-gnu/lib (Debian's aarch64 libc, ld-linux-aarch64.so.1)
#   DIR/proc/cpuinfo and DIR/sys/devices/system/cpu/cpuN/regs/identification/midr_el1
#     describing Cortex-A76 cores (one per host CPU). qemu looks absolute paths up
#     under -L first; without these, PyTorch's CPU probe reads the host's x86
#     /proc/cpuinfo and libtorch segfaults at start-up.
# Usage: make-prefix.sh DIR
set -euo pipefail
dir=$1
sysroot=/usr/aarch64-linux-gnu
[ -e "$sysroot/lib/ld-linux-aarch64.so.1" ] || { echo "error: $sysroot/lib/ld-linux-aarch64.so.1 missing: apt-get install g++-aarch64-linux-gnu" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir/proc" "$dir/sys/devices/system/cpu"
ln -s "$sysroot/lib" "$dir/lib"
n=$(nproc --all)
: > "$dir/proc/cpuinfo"
for ((i = 0; i < n; i++)); do
  cat >> "$dir/proc/cpuinfo" <<CPU
processor	: $i
BogoMIPS	: 108.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x4
CPU part	: 0xd0b
CPU revision	: 1

CPU
  d="$dir/sys/devices/system/cpu/cpu$i/regs/identification"
  mkdir -p "$d"
  echo 0x00000000414fd0b1 > "$d/midr_el1"
done
