#!/usr/bin/env bash
# The plot of docs/performance.md redrawn from its own tables
# (plot_load.py under Debian's python3-matplotlib): it must find the
# tables it names and write a PNG; a table index past the end must fail.
# usage: test_plot.sh SOURCE_ROOT; skips (77) without matplotlib.
set -u
root=$1
py=/usr/bin/python3
if ! "$py" -c 'import matplotlib' 2>/dev/null; then
  echo "SKIP: no matplotlib for $py (Debian: python3-matplotlib, in setup.sh)"; exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" "$root/tests/serve/plot_load.py" --out "$out/p.png" \
  --table "fixture=$root/docs/performance.md:2" --table "BERT-base=$root/docs/performance.md:3" || exit 1
[ "$(head -c 8 "$out/p.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || { echo "not a PNG"; exit 1; }
[ "$(stat -c %s "$out/p.png")" -gt 20000 ] || { echo "PNG too small to hold the plot"; exit 1; }
if "$py" "$root/tests/serve/plot_load.py" --out "$out/q.png" --table "x=$root/docs/performance.md:99" 2>/dev/null; then
  echo "a missing table was not an error"; exit 1
fi
echo "ok"
