"""The plot of bench_generate.py's --json: decode and prefill tokens per second
for each engine at each precision, batch and thread count.

    python3 bench/plot_generate.py RESULTS.json OUT.png

Needs matplotlib (Debian: python3-matplotlib, which setup.sh installs)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ENGINES = ["dvm", "ortgenai", "llamacpp", "torch"]
LABELS = {"dvm": "dvm", "ortgenai": "ONNX Runtime GenAI", "llamacpp": "llama.cpp", "torch": "PyTorch eager"}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data = json.load(open(sys.argv[1]))
    rows = data["rows"]
    points = sorted({(r["precision"], r["batch"], r["threads"]) for r in rows})
    engines = [e for e in ENGINES if any(r["engine"] == e for r in rows)]
    at = {(r["precision"], r["batch"], r["threads"], r["engine"]): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(engines)
    for ax, key, title in zip(axes, ["decode_tps", "prefill_tps"], ["decode", "prefill"]):
        for i, eng in enumerate(engines):
            xs = [j + (i - (len(engines) - 1) / 2) * width for j in range(len(points))]
            # a point an engine has no figure for (torch at int4) is left out, not drawn as 0
            ys = [at[p + (eng,)][key] if p + (eng,) in at else float("nan") for p in points]
            ax.bar(xs, ys, width, label=LABELS[eng])
        ax.set_xticks(range(len(points)))
        ax.set_xticklabels([f"{p}\nbatch {b}, {t} thr" for p, b, t in points], fontsize=8)
        ax.set_ylabel("tokens per second")
        ax.set_title(f"{title} (higher is better)")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
