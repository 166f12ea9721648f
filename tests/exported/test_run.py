"""The exported models end to end: each compiled once, run from that one
.dvmb at every shape of its corpus entry with `dvm run`, compared with ONNX
Runtime (1e-4 relative, a small absolute floor near 0)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import onnxruntime as ort
import pytest

from corpus import DVM, MODELS, feeds_for  # noqa: E402

EXPORTS = sorted(m for m in MODELS if not m.endswith("_fixture") and not m.startswith("ppocr"))


def run_dvm(path, feeds, nout, tmp_path, extra=()):
    cmd = [DVM, "run", str(path), *extra]
    for k, v in feeds.items():
        np.save(tmp_path / f"{k}.npy", v)
        cmd += ["--input", f"{k}={tmp_path / (k + '.npy')}"]
    outs = [tmp_path / f"out{i}.npy" for i in range(nout)]
    for p in outs:
        cmd += ["--output", str(p)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return [np.load(p) for p in outs], r.stderr


@pytest.mark.parametrize("model", EXPORTS)
def test_exported_model_matches_ort(model, tmp_path):
    onnx_path, spec, bindings = MODELS[model]
    if not os.path.exists(onnx_path):
        pytest.fail(f"{onnx_path} is missing: setup.sh exports it (tests/exported/export_models.py)")
    dvmb = tmp_path / f"{model}.dvmb"
    r = subprocess.run([DVM, "compile", onnx_path, "-o", str(dvmb)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    for env in bindings:
        feeds = feeds_for(spec, env, rng)
        want = sess.run(None, feeds)
        got, _ = run_dvm(dvmb, feeds, len(want), tmp_path)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape, env
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=str(env))


def shape_args(spec, env):
    args = []
    for name, (dt, dims, hi) in spec.items():
        args += ["--shape", name + "=" + "x".join(str(env[d] if isinstance(d, str) else d) for d in dims)]
        if dt == "i64":
            args += ["--range", f"{name}=0..{hi - 1}"]
    return args


@pytest.mark.parametrize("model", EXPORTS)
def test_memory_formula_is_the_measured_peak(model, tmp_path):
    """`dvm inspect --memory` at a shape equals the bytes the pool was asked
    for at its peak while running that shape (dvm bench's
    peak_requested_bytes): the plan covers every tensor."""
    onnx_path, spec, bindings = MODELS[model]
    dvmb = tmp_path / f"{model}.dvmb"
    subprocess.run([DVM, "compile", onnx_path, "-o", str(dvmb)], check=True)
    for env in bindings:
        dims = [f"--dim={k}={v}" for k, v in env.items()]
        out = subprocess.run([DVM, "inspect", "--memory", str(dvmb), *dims], capture_output=True, text=True,
                             check=True).stdout
        predicted = int(out.split(": ")[-1].split(" bytes")[0])
        bench = subprocess.run([DVM, "bench", str(dvmb), *shape_args(spec, env), "--iters", "1", "--warmup", "0",
                                "--threads", "1"], capture_output=True, text=True, check=True).stdout
        measured = int(bench.split('"peak_requested_bytes":')[1].split(",")[0])
        assert predicted == measured, f"{env}: inspect says {predicted} bytes, the run asked for {measured}"


@pytest.mark.parametrize("stitch", [True, False])
def test_bert_export_chains_fused(tmp_path, stitch):
    """In the exported BERT, the decomposed LayerNorm and GELU and the mask
    and residual arithmetic run as fused kernels: per layer, no elementwise
    op but the bias adds (one Add after each product) is its own call.
    Stitched (the default), each LayerNorm's reductions join its fused
    call too (fused@stitchN): no reduce_mean call is left. With the graph
    rewrites off: tests/compiler/test_passes.py counts the kernels with
    them on."""
    onnx_path = MODELS["bert_tiny"][0]
    dvmb = tmp_path / "bert.dvmb"
    off = sum((["--disable", p] for p in ("layernorm", "gelu", "epilogue", "skiplayernorm", "rmsnorm")), [])
    subprocess.run([DVM, "compile", onnx_path, "-o", str(dvmb), *off] + ([] if stitch else ["--no-stitch"]),
                   check=True)
    text = subprocess.run([DVM, "disasm", str(dvmb)], capture_output=True, text=True, check=True).stdout
    per_layer, loc = {}, ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(".loc"):
            loc = s.split(None, 1)[1].strip('"')
        elif s.startswith("invoke") and loc.startswith("/layers."):
            kernel = s.split()[1].rstrip(",").strip('"')
            kernel = "stitched" if kernel.startswith("fused@stitch") else kernel.split("@")[0]
            per_layer.setdefault(loc.split("/")[1], []).append(kernel)
    assert sorted(per_layer) == ["layers.0", "layers.1"], per_layer.keys()
    for layer, kernels in per_layer.items():
        counts = {k: kernels.count(k) for k in set(kernels)}
        standalone = {k: c for k, c in counts.items() if k in ("sub", "mul", "div", "pow", "sqrt", "erf", "tanh")}
        assert not standalone, f"{layer}: {counts}"
        if stitch:  # the two LayerNorms, each with the residual add before it
            assert counts.get("stitched") == 2 and "reduce_mean" not in counts, f"{layer}: {counts}"
            assert counts.get("add", 0) <= 6 and counts["fused"] >= 1, f"{layer}: {counts}"
        else:
            assert "stitched" not in counts and counts.get("add", 0) <= 6 and counts["fused"] >= 8, f"{layer}: {counts}"
        assert len(kernels) <= 30, f"{layer}: {len(kernels)} kernel calls: {counts}"
