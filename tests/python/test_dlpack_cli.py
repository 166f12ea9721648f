"""DLPack in and out (PyTorch when installed), and python -m dvm."""
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import MODELS
from dvmtest.onnxmodel import make_model
from dvmtest.paths import DVM
from onnx import TensorProto as T
from onnx import helper as h

import dvm


@pytest.fixture(scope="module")
def reshape_module():
    """flat = Reshape(x, [-1]) (a view of the input), twice = x + x."""
    return dvm.compile(make_model([h.make_node("Reshape", ["x", "s"], ["flat"]), h.make_node("Add", ["x", "x"], ["twice"])],
                                  [("x", T.FLOAT, ["n", 4])], [("flat", T.FLOAT, None), ("twice", T.FLOAT, None)],
                                  [h.make_tensor("s", T.INT64, [1], [-1])]))


class Producer:
    """Any object that speaks DLPack, and nothing else."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None, **kwargs):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_dlpack_in_and_out_without_copies(reshape_module):
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = reshape_module.run({"x": Producer(x)})
    assert out["flat"].ctypes.data == x.ctypes.data  # read in place
    np.testing.assert_array_equal(out["twice"], x + x)
    t = out["twice"].base
    assert isinstance(t, dvm.Tensor) and t.__dlpack_device__() == (1, 0)
    y = np.from_dlpack(t)  # dvm.Tensor speaks DLPack too
    assert y.ctypes.data == out["twice"].ctypes.data and y.shape == (2, 4)
    z = np.from_dlpack(out["twice"])  # and so do the arrays dvm returns
    assert z.ctypes.data == out["twice"].ctypes.data
    with pytest.raises(dvm.InvalidInput, match="not dense row-major"):
        reshape_module.run({"x": Producer(np.arange(8, dtype=np.float32).reshape(4, 2).T)})


def test_results_on_device_on_the_cpu(reshape_module):
    out = reshape_module.run([np.ones((1, 4), np.float32)], device="cpu", results_on_device=True)
    np.testing.assert_array_equal(out["twice"], [[2, 2, 2, 2]])  # the CPU's results are arrays


def test_run_with_stats_counts_one_call(reshape_module):
    """The counters are this call's, also on a VM that ran before."""
    x = np.ones((3, 4), np.float32)
    m = dvm.compile(make_model([h.make_node("Add", ["x", "x"], ["y"]), h.make_node("Mul", ["y", "x"], ["z"])],
                               [("x", T.FLOAT, ["n", 4])], [("z", T.FLOAT, None)]), fusion=False)
    out1, s1 = m.run_with_stats([x], device="cpu")
    del out1  # its memory goes back to the VM's pool, for the second call
    out2, s2 = m.run_with_stats([x], device="cpu")
    np.testing.assert_array_equal(out2["z"], 2 * x * x)
    assert s1["kernel_calls"] == s2["kernel_calls"] == 2 and s1["host_syncs"] == 0
    assert s1["instructions"] == s2["instructions"] > 2
    assert s2["cpu_pool"]["allocs"] == 0 and s2["cpu_pool"]["reuses"] >= 1  # the second call's only
    assert "cuda_pool" not in s1


TORCH_CHECK = """
import numpy as np, torch, dvm
from onnx import TensorProto as T, helper as h
vi = lambda n, t, d: h.make_tensor_value_info(n, t, d)
g = h.make_graph([h.make_node("Reshape", ["x", "s"], ["flat"]), h.make_node("Add", ["x", "x"], ["twice"])], "g",
                 [vi("x", T.FLOAT, ["n", 4])], [vi("flat", T.FLOAT, None), vi("twice", T.FLOAT, None)],
                 [h.make_tensor("s", T.INT64, [1], [-1])])
m = dvm.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
x = torch.arange(8, dtype=torch.float32).reshape(2, 4)
out = m.run({"x": x})                                   # a torch tensor in, through __dlpack__
assert out["flat"].ctypes.data == x.data_ptr()          # read in place
t = torch.from_dlpack(out["twice"])                     # a dvm result out, shared
assert t.data_ptr() == out["twice"].ctypes.data and torch.equal(t, x + x)
u = torch.utils.dlpack.from_dlpack(out["twice"].base)   # the dvm.Tensor itself
assert u.data_ptr() == t.data_ptr()
del out
assert torch.equal(t, x + x) and torch.equal(u, x + x)  # alive after the arrays went
print("ok", torch.__version__)
"""


def test_torch_dlpack():
    """PyTorch tensors in and out without copies: with this Python's torch,
    or with Debian's python3-torch under /usr/bin/python3 when that is the
    same Python version (the extension's ABI)."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(dvm.__file__)))
    try:
        import torch  # noqa: F401
        python = sys.executable
    except ImportError:
        python = "/usr/bin/python3"
        probe = subprocess.run([python, "-c", "import sys, torch, onnx; print(sys.version_info[:2])"],
                               capture_output=True, text=True) if os.path.exists(python) else None
        if not probe or probe.returncode != 0 or probe.stdout.strip() != str(sys.version_info[:2]):
            pytest.skip("PyTorch is not installed for this Python, nor (with onnx) for /usr/bin/python3 "
                        "of the same version (Debian: python3-torch)")
    r = subprocess.run([python, "-c", TORCH_CHECK], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr


def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(dvm.__file__)))  # this dvm
    return subprocess.run([sys.executable, "-m", "dvm", *args], env=env, capture_output=True, text=True)


def test_python_m_dvm(tmp_path):
    bert = os.path.join(MODELS, "bert.onnx")
    out = str(tmp_path / "bert.dvmb")
    r = run_cli("compile", bert, "-o", out, "--dim", "batch=1..8", "--dim", "seq=1..32")
    assert r.returncode == 0, r.stderr
    for args in (["inspect", out], ["inspect", out, "--memory", "--dim", "batch=2", "--dim", "seq=8"]):
        r = run_cli(*args)
        c = subprocess.run([DVM, *args], capture_output=True, text=True)
        assert r.returncode == 0 and c.returncode == 0 and r.stdout == c.stdout, r.stderr  # as the C command prints it
    assert "peak = " in r.stdout and "at batch=2, seq=8: " in r.stdout
    ids, mask = np.ones((2, 5), np.int64), np.ones((2, 5), np.int64)
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "mask.npy", mask)
    res = str(tmp_path / "hidden.npy")
    r = run_cli("run", out, "--input", f"ids={tmp_path / 'ids.npy'}", "--input", str(tmp_path / "mask.npy"),
                "--output", res, "--device", "cpu")
    assert r.returncode == 0, r.stderr
    want = dvm.load(out).run({"ids": ids, "mask": mask})["hidden"]
    np.testing.assert_array_equal(np.load(res), want)
    args = ["run", out, "--input", f"ids={tmp_path / 'ids.npy'}", "--input", f"mask={tmp_path / 'ids.npy'}", "--show", "5"]
    r = run_cli(*args)
    c = subprocess.run([DVM, *args], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("hidden: f32[2,5,32] min=") and r.stdout == c.stdout
    r = run_cli(*args, "--stats", "--device", "cpu", "--threads", "1")
    c = subprocess.run([DVM, *args, "--stats", "--device", "cpu", "--threads", "1"], capture_output=True, text=True)
    assert r.returncode == 0 and c.returncode == 0, r.stderr
    assert "\nstats: instructions=" in r.stdout and " cpu_pool: in_use=" in r.stdout
    assert r.stdout == c.stdout  # the same counts and pool figures as the C command's fresh VM
    np.save(tmp_path / "long.npy", np.ones((1, 40), np.int64))
    r = run_cli("run", out, "--input", str(tmp_path / "long.npy"), "--input", str(tmp_path / "long.npy"))
    assert r.returncode == 2 and 'input "ids" dim 1 (seq) must be <= 32, got 40' in r.stderr
    r = run_cli("run", out, "--input", str(tmp_path / "ids.npy"))
    assert r.returncode == 2 and 'input 1 ("mask") is missing' in r.stderr
    r = run_cli("compile", bert, "--dump-ir", "--dim", "seq=1..32")
    c = subprocess.run([DVM, "compile", bert, "--dump-ir", "--dim", "seq=1..32"], capture_output=True, text=True)
    assert r.returncode == 0 and c.returncode == 0 and r.stdout == c.stdout  # as the C command prints it
    args = ["compile", bert, "--dump-ir", "--disable", "gelu"]
    r, c = run_cli(*args), subprocess.run([DVM, *args], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == c.stdout and "= Erf(" in r.stdout
    r = run_cli("compile", bert, "-o", out, "--disable", "nosuch")
    assert r.returncode == 2 and "no pass 'nosuch'" in r.stderr
    r = run_cli("compile", str(tmp_path / "missing.onnx"), "-o", out)
    assert r.returncode == 2 and "error:" in r.stderr


def test_cuda_target():
    """compile(target="cpu,cuda") adds NAME@cuda (NVRTC, no GPU needed);
    "auto" runs where it can and says why; results can stay on the GPU."""
    try:
        m = dvm.compile(os.path.join(MODELS, "mlp.onnx"), target="cpu,cuda")
    except dvm.Error as e:
        pytest.skip(f"no CUDA code generation here: {e}")
    assert list(m.functions) == ["main"] and [s[0] for s in m._signatures()] == ["main", "main@cuda"]
    x = np.random.default_rng(5).standard_normal((3, 16)).astype(np.float32)
    want = m.run([x], device="cpu")["y"]
    present, why = dvm._dvm.probe("cuda")
    dev, reason = m.auto_device
    if not present:
        assert dev == "cpu" and why in reason
        with pytest.raises(dvm.DeviceError, match="not available"):
            m.run([x], device="cuda")
        return
    assert dev == "cuda"
    np.testing.assert_allclose(m.run([x])["y"], want, rtol=1e-4, atol=1e-5)
    t = m.run([x], results_on_device=True)["y"]
    assert isinstance(t, dvm.Tensor) and t.device == "cuda" and t.__dlpack_device__()[0] == 2
    with pytest.raises(dvm.InvalidInput, match="on the cuda device"):
        t.numpy()


NUMPY1_CHECK = """
import numpy as np, dvm
from onnx import TensorProto as T, helper as h
assert np.__version__.startswith("1."), np.__version__
types = {"float32": T.FLOAT, "float16": T.FLOAT16, "float64": T.DOUBLE, "int8": T.INT8, "int16": T.INT16,
         "int32": T.INT32, "int64": T.INT64, "uint8": T.UINT8, "bool": T.BOOL, "bfloat16": T.BFLOAT16,
         "uint16": T.UINT16, "uint32": T.UINT32, "uint64": T.UINT64}
for name, t in types.items():
    vi = lambda n: h.make_tensor_value_info(n, t, None if n != "x" else ["n", 3])
    g = h.make_graph([h.make_node("Concat", ["x", "x"], ["y"], axis=0)], "g", [vi("x")], [vi("y")])
    m = dvm.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
    # without ml_dtypes, bfloat16 is uint16 bit patterns both ways
    x = (np.arange(6).reshape(2, 3) % 2).astype("uint16" if name == "bfloat16" else name)
    if name == "bfloat16":
        x = x * 0x3f80  # 0.0 and 1.0
        try:
            import ml_dtypes
            x = x.view(ml_dtypes.bfloat16)
        except ImportError:
            pass
    try:
        y = m.run({"x": x})["y"]
    except dvm.InvalidInput:
        assert name == "bfloat16"  # uint16 arrays are not bfloat16 inputs
        continue
    assert (y == np.concatenate([x, x])).all() and y.dtype == x.dtype, name
print("ok", np.__version__)
"""


def test_numpy_1x():
    """The extension, built against NumPy 2's headers, under NumPy 1.x:
    Debian's /usr/bin/python3 (python3-numpy 1.24, python3-onnx) when it is
    the same Python version."""
    python = "/usr/bin/python3"
    probe = subprocess.run([python, "-c", "import sys, numpy, onnx; print(sys.version_info[:2], numpy.__version__)"],
                           capture_output=True, text=True) if os.path.exists(python) else None
    if (not probe or probe.returncode != 0 or not probe.stdout.startswith(str(sys.version_info[:2]) + " 1.")):
        pytest.skip("no /usr/bin/python3 of this Python version with NumPy 1.x and onnx (Debian: python3-numpy, python3-onnx)")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(dvm.__file__)))
    r = subprocess.run([python, "-c", NUMPY1_CHECK], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("ok 1."), r.stderr


STANDIN_CHECK = """
import numpy as np, dvm
from onnx import TensorProto as T, helper as h
vi = lambda n, d: h.make_tensor_value_info(n, T.FLOAT, d)
g = h.make_graph([h.make_node("Add", ["x", "x"], ["y"])], "g", [vi("x", ["n", 4])], [vi("y", None)])
m = dvm.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), target="cpu,cuda")
assert m.auto_device[0] == "cuda", m.auto_device
x = np.arange(12, dtype=np.float32).reshape(3, 4)
t = m.run({"x": x}, results_on_device=True)["y"]           # 2x, left on the (stand-in) device
assert isinstance(t, dvm.Tensor) and t.device == "cuda" and t.__dlpack_device__() == (2, 0)

class Producer:                                             # a foreign CUDA DLPack producer
    def __init__(self, t): self.t = t
    def __dlpack__(self, stream=None, **kw): return self.t.__dlpack__()
    def __dlpack_device__(self): return self.t.__dlpack_device__()

for src in (t, Producer(t)):
    out, stats = m.run_with_stats({"x": src}, results_on_device=True)
    u = out["y"]                                            # 4x, computed from the device input in place
    assert u.device == "cuda"
    back = m.run({"x": Producer(u)}, device="cuda")["y"]    # 8x, copied to the host at the end
    np.testing.assert_array_equal(back, 8 * x)
    # the imported input was not uploaded again: no copy to the device, the one wait for the producer
    assert stats["host_syncs"] == 2, stats                  # the producer's wait and the result's
try:
    m.run({"x": t}, device="cpu")
    raise SystemExit("a CUDA tensor ran on the CPU")
except dvm.InvalidInput as e:
    assert 'input 0 ("x") is on the cuda device' in str(e), e
# the session's IO binding: outputs left on the device and bound back in place
sess = dvm.InferenceSession(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString(),
                            providers=["CUDAExecutionProvider"])
assert sess.get_providers()[0] == "CUDAExecutionProvider"
io = sess.io_binding()
io.bind_cpu_input("x", x)
io.bind_output("y", "cuda")
sess.run_with_iobinding(io)
v = io.get_outputs()[0]
assert v.device_name() == "cuda" and v.shape() == [3, 4] and v.data_type() == "tensor(float)"
io.bind_ortvalue_input("x", v)                             # 2x, on the device, read in place
io.bind_output("y", "cpu")
sess.run_with_iobinding(io)
np.testing.assert_array_equal(io.copy_outputs_to_cpu()[0], 4 * x)
w = sess.run_with_ort_values(None, {"x": dvm.OrtValue.from_dlpack(Producer(t))})[0]
assert w.device_name() == "cuda"
np.testing.assert_array_equal(m.run({"x": w}, device="cuda")["y"], 8 * x)
print("ok")
"""


def test_cuda_dlpack_inputs_on_the_standin():
    """CUDA tensors in through DLPack, in place, on the stand-in driver
    (tests/cuda/fake_cuda.c, which runs generated kernels on the host and
    faults when the host touches device memory); a CPU function refuses them."""
    fake = os.environ.get("DVM_FAKE_CUDA")
    if not fake or not os.path.exists(fake):
        pytest.skip("DVM_FAKE_CUDA (the stand-in driver, built by meson) is not set")
    try:
        dvm.compile(os.path.join(MODELS, "mlp.onnx"), target="cpu,cuda")
    except dvm.Error as e:
        pytest.skip(f"no CUDA code generation here: {e}")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(dvm.__file__)),
               DVM_CUDA_DRIVER=fake, DVM_CUBLAS=fake)
    r = subprocess.run([sys.executable, "-c", STANDIN_CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
