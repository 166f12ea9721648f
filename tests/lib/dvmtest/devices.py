"""The devices a test case runs on: the CPU always, CUDA where dvm finds
a GPU (as `dvm run --device cuda` does: the stand-in driver of tests/cuda,
given as DVM_CUDA_DRIVER, counts as one). The `device` fixture runs a case
once per device, CUDA skipped with the reason where it is not there; while
a case runs on CUDA, compile_onnx and try_run (dvmtest.cli) compile for
`cpu,cuda` and run with `--device cuda`."""
import functools
import os
import subprocess
import tempfile

import pytest

from dvmtest.paths import DVM

# a CUDA function that returns its argument: what dvm says running it is
# the answer (the driver is loaded by dvm, never into this process, which
# a sanitized stand-in driver would abort)
PROBE = """.func "main@cuda" regs=1
  .param x int
  .result y int
  ret (r0)
.end
"""

DEVICES = ("cpu", "cuda")
_active = ["cpu"]


@functools.cache
def cuda_unavailable():
    """Why dvm cannot run on CUDA here, or None."""
    with tempfile.TemporaryDirectory() as d:
        src, mod = os.path.join(d, "probe.dvms"), os.path.join(d, "probe.dvmb")
        with open(src, "w") as f:
            f.write(PROBE)
        for args in (["asm", src, "-o", mod], ["run", "--device", "cuda", mod, "-i", "x=1"]):
            p = subprocess.run([DVM, *args], capture_output=True, text=True, timeout=120)
            if p.returncode:
                return p.stderr.strip().split("not available: ")[-1]
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
