#!/usr/bin/env bash
# Runs the whole test suite of the default build and ends with one line
# "N passed, N failed" (skipped tests say why in the log and are counted
# separately). Extra arguments go to meson test (e.g. --suite asm).
set -uo pipefail
cd "$(dirname "$0")"
dir=${BUILD_DIR:-build}
[ -d "$dir" ] || meson setup "$dir" >/dev/null || exit 1
ninja -C "$dir" >/dev/null || { ninja -C "$dir"; exit 1; }
log=$(mktemp)
meson test -C "$dir" --print-errorlogs "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
ok=$(awk '/^Ok:/ {print $2}' "$log")
bad=$(awk '/^(Fail|Timeout|Unexpected Pass):/ {s += $NF} END {print s + 0}' "$log")
skip=$(awk '/^Skipped:/ {print $2}' "$log")
rm -f "$log"
echo "${ok:-0} passed, ${bad:-0} failed, ${skip:-0} skipped"
exit "$status"
