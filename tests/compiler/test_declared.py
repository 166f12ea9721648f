"""Types a model declares for its outputs and value_info that contradict
inference (declared.c): dvm compile says so in one warning line per value
naming it, both types and its node, and compiles with the inferred type (as
ONNX Runtime warns and runs); declarations that agree, or only name
symbols, give no warning. (The Python package raises them as UserWarnings:
tests/python/test_module.py; `dvm serve` prints them when it compiles a
model.onnx at load.)"""
import os
import signal
import subprocess
import time

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from dvmtest.cli import dvm_ok, run_module  # noqa: E402
from dvmtest.onnxmodel import make_model, save_model, vi  # noqa: E402
from dvmtest.paths import DVM  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def relu_neg(tmp, out_decl, h_decl=None):
    """x [N, 4] -> Relu -> h -> Neg -> y, with y declared out_decl = (elem,
    shape) and h declared h_decl (or not at all)."""
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="r"), helper.make_node("Neg", ["h"], ["y"], name="n")]
    m = make_model(nodes, [vi("x", F, ["N", 4])], [vi("y", *out_decl)])
    if h_decl:
        m.graph.value_info.append(vi("h", *h_decl))
    return save_model(m, tmp / "m.onnx")


def compile_warnings(path):
    """The warning lines of compiling path (to path.dvmb)."""
    p = dvm_ok("compile", path, "-o", path + ".dvmb")
    return [l for l in p.stderr.splitlines() if "warning:" in l]


@pytest.mark.parametrize("out_decl,h_decl,want", [
    ((F, ["N", 3]), None, ['output "y" is declared f32[?, 3], inference gives f32[N, 4] (node "n")']),
    ((F, [2, 4, 1]), None, ['output "y" is declared f32[2, 4, 1], inference gives f32[N, 4] (node "n")']),
    ((I64, ["N", 4]), None, ['output "y" is declared i64[?, 4], inference gives f32[N, 4] (node "n")']),
    ((F, ["N", 4]), (F, ["N", 5]), ['value_info "h" is declared f32[?, 5], inference gives f32[N, 4] (node "r")']),
])
def test_contradiction_is_a_warning(tmp_path, out_decl, h_decl, want):
    path = relu_neg(tmp_path, out_decl, h_decl)
    got = compile_warnings(path)
    assert len(got) == len(want), got
    for line, w in zip(got, want, strict=True):
        assert line == f"dvm compile: warning: {w}: the declaration is ignored", line
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(run_module(path + ".dvmb", [x])[0], -np.maximum(x, 0))  # the inferred type is used


@pytest.mark.parametrize("out_decl,h_decl", [
    ((F, ["N", 4]), (F, ["N", 4])),
    ((F, ["batch", "d"]), (F, [None, None])),  # other or unknown symbols contradict nothing
    ((F, None), None),                         # no shape declared
])
def test_agreement_is_silent(tmp_path, out_decl, h_decl):
    assert compile_warnings(relu_neg(tmp_path, out_decl, h_decl)) == []



def test_serve_prints_the_warnings_of_a_model_it_compiles(tmp_path):
    model = relu_neg(tmp_path, (F, ["N", 3]))
    os.makedirs(tmp_path / "repo" / "m" / "1")
    os.rename(model, tmp_path / "repo" / "m" / "1" / "model.onnx")
    log = tmp_path / "serve.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([DVM, "serve", str(tmp_path / "repo"), "--http-port", "0"], stderr=f,
                                stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while "models loaded" not in log.read_text() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()
    lines = [l for l in log.read_text().splitlines() if "warning:" in l]
    assert lines == ['dvm serve: model m: warning: output "y" is declared f32[?, 3], inference gives f32[N, 4] '
                     '(node "n"): the declaration is ignored'], log.read_text()
    assert "1 models loaded, 0 failed" in log.read_text()
