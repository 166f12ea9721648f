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

EXPORTS = sorted(m for m in MODELS if not m.endswith("_fixture"))


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
        for g, w in zip(got, want):
            assert g.shape == w.shape, env
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=str(env))
