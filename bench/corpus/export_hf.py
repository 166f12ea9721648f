"""Builds the corpus's transformers architectures (manifest.HF) from their
small configs with random weights and exports each with torch.onnx
(TorchScript exporter, opset 17, every symbolic dim of the manifest's inputs
a dynamic axis). Run by a Python that has torch and transformers
(build-data/genai-venv/bin/python); bench_corpus.py calls it.

usage: export_hf.py OUTDIR NAME...
Prints one line per model: "ok NAME" or "error NAME: MESSAGE"; exits 0.
"""
import importlib
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manifest  # noqa: E402


class _FirstOutput(torch.nn.Module):
    """Calls the model with keyword inputs (transformers' forward takes them by
    name) and returns its first output."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *xs):
        return self.model(**dict(zip(self.names, xs)))[0]


def _example(kind, dims, shape):
    size = [shape.get(d, d) if isinstance(d, str) else d for d in dims]
    if kind.startswith("ids:"):
        return torch.randint(0, int(kind[4:]), size)
    if kind in ("ones", "zeros"):
        return (torch.ones if kind == "ones" else torch.zeros)(size, dtype=torch.long)
    return torch.randn(size)


def export(entry, path):
    cfg_cls, model_cls, kwargs = manifest.HF[entry["family"]]
    config = getattr(transformers, cfg_cls)(**kwargs)
    config._attn_implementation = "eager"  # plain MatMul/Softmax attention, as the TorchScript exporter traces it
    torch.manual_seed(0)
    owner, _, cls = ("." + model_cls).rpartition(".")
    model = getattr(importlib.import_module("transformers" + owner), cls)(config).eval()
    names = [n for n, _, _ in entry["inputs"]]
    shape = entry["shapes"][-1]
    args = tuple(_example(k, d, shape) for _, k, d in entry["inputs"])
    axes = {n: {i: d for i, d in enumerate(dims) if isinstance(d, str)} for n, _, dims in entry["inputs"]}
    with torch.no_grad():
        torch.onnx.export(_FirstOutput(model, names), args, path + ".tmp", input_names=names, output_names=["output"],
                          dynamic_axes={n: a for n, a in axes.items() if a}, opset_version=17, dynamo=False)
    os.replace(path + ".tmp", path)


def main():
    import warnings
    warnings.filterwarnings("ignore")
    outdir, names = sys.argv[1], sys.argv[2:]
    os.makedirs(outdir, exist_ok=True)
    for entry in manifest.MODELS:
        if entry["name"] not in names or entry["source"] != "hf":
            continue
        try:
            export(entry, os.path.join(outdir, entry["name"] + ".onnx"))
            print(f"ok {entry['name']}", flush=True)
        except Exception as e:  # noqa: BLE001 - reported to the caller, which lists it
            msg = " ".join(str(e).split())[:300] or type(e).__name__
            print(f"error {entry['name']}: {type(e).__name__}: {msg}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
