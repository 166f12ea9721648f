#!/usr/bin/env bash
# Runs the whole test suite of the default build and ends with one line
# "N passed, N failed" (skipped tests are counted separately and listed,
# with why, on the lines before it). Extra arguments go to meson test (e.g. --suite asm).
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
# each skipped test and why: its line that says SKIP, else its last line
python3 - "$dir/meson-logs/testlog.json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t.get("result") == "SKIP":
        out = [l.strip() for l in (t.get("stdout") or "").splitlines() if l.strip()]
        why = next((l for l in out if "SKIP" in l), out[-1] if out else "(it gave no reason)")
        print(f"skipped: {t['name']}: {why}")
PY
echo "${ok:-0} passed, ${bad:-0} failed, ${skip:-0} skipped"
exit "$status"
