"""The devices a test case runs on: the CPU always, CUDA where dvm's
driver finds a GPU (DVM_CUDA_DRIVER as dvm reads it, so the stand-in
driver of tests/cuda counts as one). The `device` fixture runs a case once
per device, CUDA skipped with the reason where it is not there; while a
case runs on CUDA, compile_onnx and try_run (dvmtest.cli) compile for
`cpu,cuda` and run with `--device cuda`."""
import ctypes
import functools
import os

import pytest

DEVICES = ("cpu", "cuda")
_active = ["cpu"]


@functools.cache
def cuda_unavailable():
    """Why dvm cannot run on CUDA here, or None."""
    lib = os.environ.get("DVM_CUDA_DRIVER", "libcuda.so.1")
    try:
        cuda = ctypes.CDLL(lib)
    except OSError:
        return f"{lib} not found (no NVIDIA driver)"
    n = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value < 1:
        return "no CUDA device"
    return None


def active():
    """The device of the case that is running: "cpu" outside the fixture."""
    return _active[0]


def compile_flags():
    return ["--target", "cpu,cuda"] if active() == "cuda" else []


def run_flags():
    return ["--device", "cuda"] if active() == "cuda" else []


@pytest.fixture(params=DEVICES)
def device(request):
    """The case's device, active while it runs."""
    if request.param == "cuda" and cuda_unavailable():
        pytest.skip(f"cuda: {cuda_unavailable()}")
    _active[0] = request.param
    yield request.param
    _active[0] = "cpu"
