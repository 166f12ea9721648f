"""BatchNormalization folded into the Conv before it (compiler/fold.c):
gone from the IR where the pattern holds, kept where it does not, and the
results match ONNX Runtime either way."""
import os
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DVM = os.environ.get("DVM", os.path.join(HERE, "../../build/tools/dvm"))
F = TensorProto.FLOAT
rng = np.random.default_rng(5)


def const(name, *shape, lo=-1.0, hi=1.0):
    return numpy_helper.from_array(rng.uniform(lo, hi, shape).astype(np.float32), name)


def model(tmp, nodes, inits, inputs=(("x", ["n", 3, "h", "w"]),), name="m.onnx"):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, d) for n, d in inputs],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    path = str(tmp / name)
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString())
    return path


def bn_inits(c, prefix="bn"):
    return [const(f"{prefix}_s", c, lo=0.5, hi=1.5), const(f"{prefix}_b", c), const(f"{prefix}_m", c),
            const(f"{prefix}_v", c, lo=0.2, hi=2.0)]


def bn(x, y, prefix="bn", **kw):
    return helper.make_node("BatchNormalization", [x, f"{prefix}_s", f"{prefix}_b", f"{prefix}_m", f"{prefix}_v"],
                            [y], name=prefix, **kw)


def compare(tmp, path, feeds):
    mod = path.replace(".onnx", ".dvmb")
    r = subprocess.run([DVM, "compile", path, "-o", mod], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cmd = [DVM, "run", mod, "--output", str(tmp / "y.npy")]
    for k, v in feeds.items():
        np.save(tmp / f"{k}.npy", v)
        cmd += ["--input", f"{k}={tmp / (k + '.npy')}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(np.load(tmp / "y.npy"), want, rtol=1e-4, atol=1e-5)


def ir(path):
    r = subprocess.run([DVM, "compile", path, "--dump-ir"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("bias,group", [(True, 1), (False, 1), (True, 2)])
def test_folded(tmp_path, bias, group):
    """Conv (with or without its bias, grouped) then BatchNormalization:
    one Conv with new weights, the results of both."""
    inits = [const("w", 4, 3 if group == 1 else 2, 3, 3)] + ([const("b", 4)] if bias else []) + bn_inits(4)
    x_in = [("x", ["n", 3 if group == 1 else 4, "h", "w"])]
    nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["c"], pads=[1, 1, 1, 1],
                              group=group, name="conv"), bn("c", "y", epsilon=1e-3)]
    path = model(tmp_path, nodes, inits, x_in)
    text = ir(path)
    assert "BatchNormalization" not in text and "%y: f32[n, 4, h, w] = Conv(%x, %bn.W, %bn.B)" in text, text
    for shape in [(1, x_in[0][1][1], 5, 7), (2, x_in[0][1][1], 8, 3)]:
        compare(tmp_path, path, {"x": rng.standard_normal(shape).astype(np.float32)})


def test_not_folded(tmp_path):
    """Kept apart: the Conv's output read elsewhere too, statistics that are
    an input, a BatchNormalization not after a Conv."""
    inits = [const("w", 3, 3, 1, 1)] + bn_inits(3) + bn_inits(3, "bn2")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), bn("c", "t"),
             helper.make_node("Add", ["t", "c"], ["u"], name="add"),
             helper.make_node("BatchNormalization", ["u", "bn2_s", "bn2_b", "bn2_m", "v"], ["y"], name="bn2")]
    path = model(tmp_path, nodes, inits, [("x", ["n", 3, "h", "w"]), ("v", [3])])
    assert ir(path).count("BatchNormalization") == 2
    compare(tmp_path, path, {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32),
                             "v": rng.uniform(0.5, 1.5, 3).astype(np.float32)})
