#!/usr/bin/env python3
"""The plot of docs/performance.md's `dvm serve` load tests: throughput and
p50/p99 latency against concurrency, one line per mode, from the markdown
tables that tests/serve/load_test.py prints.

  /usr/bin/python3 tests/serve/plot_load.py --out docs/serve_load.png \\
      --table "fixture=docs/performance.md:2" --table "BERT-base=docs/performance.md:3"

FILE:N is the N-th load table (1-based) in FILE. Needs matplotlib (Debian:
python3-matplotlib, for /usr/bin/python3)."""
import argparse
import sys

HEADER = "| mode | concurrency | req/s | p50 ms | p99 ms |"


def load_tables(path):
    """Every load_test table in a markdown file: a list of rows
    (mode, concurrency, req/s, p50, p99)."""
    tables, rows = [], None
    for line in open(path, encoding="utf-8"):
        if line.startswith(HEADER):
            rows = []
            tables.append(rows)
        elif rows is not None and line.startswith("| ") and not line.startswith("| ---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.append((cells[0], int(cells[1]), float(cells[2]), float(cells[3]), float(cells[4])))
        elif rows is not None and not line.startswith("|"):
            rows = None
    return tables


def pick(spec):
    label, _, where = spec.partition("=")
    path, _, index = where.rpartition(":")
    tables = load_tables(path)
    n = int(index)
    if not 1 <= n <= len(tables):
        sys.exit(f"plot_load.py: {path} has {len(tables)} load tables, not {n}")
    return label, tables[n - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--table", action="append", required=True, metavar="LABEL=FILE:N")
    a = ap.parse_args()
    picked = [pick(t) for t in a.table]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, len(picked), figsize=(5.5 * len(picked), 7), squeeze=False)
    styles = {"batching": ("tab:blue", "o"), "off": ("tab:gray", "s"), "pad-to-max": ("tab:red", "^")}
    for col, (label, rows) in enumerate(picked):
        top, bottom = axes[0][col], axes[1][col]
        for mode in sorted({r[0] for r in rows}, key=list(styles).index):
            pts = sorted(r for r in rows if r[0] == mode)
            conc = [p[1] for p in pts]
            color, marker = styles[mode]
            top.plot(conc, [p[2] for p in pts], color=color, marker=marker, label=mode)
            bottom.plot(conc, [p[3] for p in pts], color=color, marker=marker, label=f"{mode} p50")
            bottom.plot(conc, [p[4] for p in pts], color=color, marker=marker, linestyle="--", label=f"{mode} p99")
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({r[1] for r in rows}), [str(c) for c in sorted({r[1] for r in rows})])
            ax.set_xlabel("concurrent clients")
            ax.grid(True, alpha=0.3)
        top.set_title(label)
        top.set_ylabel("requests / s")
        top.set_ylim(bottom=0)
        bottom.set_ylabel("latency, ms (log)")
        bottom.set_yscale("log")
        top.legend(fontsize=8)
        bottom.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(a.out, dpi=90, metadata={"Software": None})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
