"""The shared test library's own promises: outputs paired strictly, a
failed dvm run raised with its message, a sanitizer report failing the
test whatever the exit code, sequences read back as lists."""
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from dvmtest import devices  # noqa: E402
from dvmtest.cli import DvmError, assert_no_sanitizer_report, compile_onnx, dvm, run_module, try_run  # noqa: E402
from dvmtest.compare import check_with_ort, compare_outputs  # noqa: E402
from dvmtest.devices import device  # noqa: E402, F401 (the fixture)
from dvmtest.onnxmodel import make_model, save_model, seq_vi, vi  # noqa: E402

F = TensorProto.FLOAT
A, B = np.zeros((2, 3), np.float32), np.ones(4, np.int64)


@pytest.mark.parametrize("got,want,words", [
    ([A], [A, B], "1 outputs, expected 2"),         # one missing
    ([A, B, B], [A, B], "3 outputs, expected 2"),   # one extra
    ({"a": A}, {"a": A, "b": B}, "expected ['a', 'b']"),
    ({"a": A, "c": B}, {"a": A, "b": B}, "outputs ['a', 'c']"),
    ([A], {"a": A}, "list"),                        # by position against by name
    ([A.T], [A], "shape (3, 2), expected (2, 3)"),
    ([[A]], [[A, A]], "1 outputs, expected 2"),     # a sequence one item short
])
def test_pairing_is_strict(got, want, words):
    with pytest.raises(AssertionError, match=words.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        compare_outputs(got, want)


def test_values_dtype_and_tolerance():
    compare_outputs({"a": A + 1e-6}, {"a": A}, atol=1e-5)
    with pytest.raises(AssertionError, match="output a"):
        compare_outputs({"a": A + 1e-4}, {"a": A}, atol=1e-5)
    compare_outputs([B], [B.astype(np.int32)])
    with pytest.raises(AssertionError, match="dtype int64, expected int32"):
        compare_outputs([B], [B.astype(np.int32)], dtype=True)


def test_sanitizer_reports_fail():
    assert_no_sanitizer_report("dvm run: error: something\n")
    assert_no_sanitizer_report("==1==WARNING: AddressSanitizer failed to allocate 0x10000000000 bytes\n")
    for report in ["==7==ERROR: AddressSanitizer: heap-buffer-overflow", "x.c:3:5: runtime error: shift exponent"]:
        with pytest.raises(AssertionError):
            assert_no_sanitizer_report(report)


def neg_model(tmp_path):
    m = make_model([helper.make_node("Neg", ["x"], ["y"]), helper.make_node("Shape", ["x"], ["s"])],
                   [vi("x", F, ["n", 3])], [vi("y", F), vi("s", TensorProto.INT64)])
    return save_model(m, tmp_path / "neg.onnx")


def test_compile_and_run(tmp_path):
    path = neg_model(tmp_path)
    mod = compile_onnx(path)
    assert mod == str(tmp_path / "neg.dvmb")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y, s = run_module(mod, {"x": x}, 2)
    np.testing.assert_array_equal(y, -x)
    np.testing.assert_array_equal(s, [2, 3])
    assert np.array_equal(run_module(mod, [x], 1, threads=1)[0], -x)  # by position, on one thread
    got, want = check_with_ort(path, {"x": x}, mod=mod)
    assert len(got) == len(want) == 2
    p, outs = try_run(mod, {"x": np.zeros((2, 4), np.float32)}, 2)
    assert p.returncode != 0 and outs is None and 'input "x"' in p.stderr, p.stderr
    with pytest.raises(DvmError, match='input "x"') as e:
        run_module(mod, {"x": np.zeros((2, 4), np.float32)}, 2)
    assert e.value.rc == p.returncode


def test_compile_failure_is_raised(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    with pytest.raises(DvmError, match="not an ONNX model") as e:
        compile_onnx(tmp_path / "bad.onnx")
    assert e.value.rc != 0
    assert dvm("compile", tmp_path / "bad.onnx", "-o", tmp_path / "bad.dvmb").returncode == e.value.rc


def test_sequences_in_and_out(tmp_path):
    m = make_model([helper.make_node("SequenceInsert", ["s", "x"], ["t"]),
                    helper.make_node("SequenceLength", ["t"], ["n"])],
                   [seq_vi("s"), vi("x", F, ["k"])], [seq_vi("t"), vi("n", TensorProto.INT64, [])], ir_version=8)
    mod = compile_onnx(save_model(m, tmp_path / "seq.onnx"))
    items = [np.ones(2, np.float32), np.zeros(0, np.float32)]
    x = np.arange(3, dtype=np.float32)
    t, n = run_module(mod, {"s": items, "x": x}, kinds=["seq", "tensor"])
    compare_outputs([t, n], [items + [x], np.array(3)])


def test_cuda_unavailable_says_why(monkeypatch):
    monkeypatch.setenv("DVM_CUDA_DRIVER", "/nonexistent/libcuda.so.1")
    devices.cuda_unavailable.cache_clear()
    try:
        assert devices.cuda_unavailable() == "/nonexistent/libcuda.so.1 not found (no NVIDIA driver)"
    finally:
        devices.cuda_unavailable.cache_clear()


@pytest.fixture
def stand_in(monkeypatch):
    """The stand-in CUDA driver and cuBLAS (tests/cuda/fake_cuda.c) as dvm's."""
    fake = os.environ.get("DVM_FAKE_CUDA")
    if not fake:
        pytest.skip("DVM_FAKE_CUDA (the stand-in driver, built by meson) is not set")
    monkeypatch.setenv("DVM_CUDA_DRIVER", fake)
    monkeypatch.setenv("DVM_CUBLAS", fake)
    devices.cuda_unavailable.cache_clear()
    yield
    devices.cuda_unavailable.cache_clear()


def test_a_case_runs_on_its_device(stand_in, device, tmp_path):
    """Under the device fixture compile_onnx and run_module build and run for
    the case's device: on CUDA (here the stand-in) the module has main@cuda
    and runs it; outside the fixture, the CPU again."""
    mod = compile_onnx(neg_model(tmp_path))
    functions = dvm("inspect", mod).stdout
    assert ("main@cuda" in functions) == (device == "cuda"), functions
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y, _ = run_module(mod, {"x": x}, 2)
    np.testing.assert_array_equal(y, -x)
    assert devices.run_flags() == (["--device", "cuda"] if device == "cuda" else [])
