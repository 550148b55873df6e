#!/usr/bin/env bash
# Make sure commands exist, installing the Debian packages that provide them.
#   scripts/ensure-apt.sh COMMAND[|COMMAND...]:PACKAGE ...
# e.g. ensure-apt.sh cc:gcc 'qemu-aarch64-static|qemu-aarch64:qemu-user-static'
# A pair is satisfied when any of its commands is on PATH. The missing packages
# are installed with apt-get when running as root (refreshing the package lists
# only if the first attempt fails); otherwise the script names them and exits 1.
set -euo pipefail
missing=()
for pair in "$@"; do
  commands=${pair%%:*}
  package=${pair##*:}
  found=""
  IFS='|' read -r -a alternatives <<< "$commands"
  for c in "${alternatives[@]}"; do
    if command -v "$c" > /dev/null; then found=1; break; fi
  done
  [ -n "$found" ] || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
  echo "installing ${missing[*]} (apt-get)"
  if ! apt-get install -y -q "${missing[@]}" > /dev/null 2>&1; then
    apt-get update -q > /dev/null && apt-get install -y -q "${missing[@]}" > /dev/null \
      || { echo "error: could not install ${missing[*]}: run 'sudo apt-get install ${missing[*]}'" >&2; exit 1; }
  fi
else
  echo "error: missing ${missing[*]}: install with 'sudo apt-get install ${missing[*]}'" >&2
  exit 1
fi
