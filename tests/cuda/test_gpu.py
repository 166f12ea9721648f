"""GPU tests: every fixture model compiled with --target cpu,cuda and run
with --device cuda and --device cpu at several shapes, compared within 1e-4
relative; a token id out of range, which the device gather records and
the next host wait reports; the cuBLAS matmul at awkward shapes (1,
primes, past a tile, batch broadcasting, f16) against numpy. Without a CUDA device it says so
and exits 77 (meson's skip)."""
import os
import sys
import tempfile

import numpy as np
from dvmtest.cli import dvm, try_run
from dvmtest.devices import cuda_unavailable
from dvmtest.paths import MODELS

sys.path.insert(0, MODELS)
rng = np.random.default_rng(11)


def close_to_cpu(got, want, what):
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    tol = 1e-4 * np.abs(want.astype(np.float64)) + 1e-5
    if got.shape != want.shape or not np.all(err <= tol):
        worst = float(err.max()) if err.size else 0.0
        raise AssertionError(f"{what}: shapes {got.shape} {want.shape}, worst error {worst}")


def on_cuda_and_cpu(dvmb, feeds, tag):
    """Runs on cuda and cpu; returns {device: its output 0}."""
    outs = {}
    for dev in ("cuda", "cpu"):
        r, got = try_run(dvmb, feeds, 1, "--device", dev)
        if r.returncode != 0:
            raise AssertionError(f"{tag} on {dev}: {r.stderr}")
        outs[dev] = got[0]
    return outs


def test_models(d, failures):
    import test_models as tm  # the shapes and inputs of the CPU end-to-end test
    for name, shapes_list in tm.CASES.items():
        dvmb = os.path.join(d, name + ".dvmb")
        r = dvm("compile", os.path.join(MODELS, name + ".onnx"), "--target", "cpu,cuda", "-o", dvmb)
        if r.returncode != 0:
            failures.append(f"{name}: compile --target cpu,cuda: {r.stderr}")
            continue
        for i, shapes in enumerate(shapes_list):
            try:
                o = on_cuda_and_cpu(dvmb, tm.inputs(name, shapes), f"{name}{i}")
                close_to_cpu(o["cuda"], o["cpu"], f"{name} {shapes}")
            except AssertionError as e:
                failures.append(str(e))


def test_bad_index(d, failures):
    """The embedding gather on the device: a bad id fails the run with the
    device's record of it (position 13 of the flattened [2, 9] ids)."""
    import test_models as tm
    dvmb = os.path.join(d, "bert.dvmb")
    feeds = tm.inputs("bert", {"ids": (2, 9)})
    feeds["ids"][1, 4] = 10**6
    r, _ = try_run(dvmb, feeds, 1, "--device", "cuda")
    if r.returncode == 0 or "indices[13] = 1000000 is out of range" not in r.stderr:
        failures.append(f"bert with a bad id on cuda: exit {r.returncode}, {r.stderr.strip()}")


MATMUL = """.kernel matmul cuda 1
.shapefn matmul
.func "main@cuda" regs=7
  .param a tensor {dt} [?, ?, ?]
  .param b tensor {dt} [?, ?]
  .result y tensor f32 [?, ?, ?]
  copy r2, r0, cuda
  copy r3, r1, cuda
  shapefn matmul, (r4), (r2, r3)
  alloc r5, f32, r4, cuda
  invoke matmul, -, (r5), (r2, r3), ()
  copy r6, r5, cpu
  ret (r6)
.end
"""


def test_matmul(d, failures):
    for dt, npdt, tol in (("f32", np.float32, 1e-4), ("f16", np.float16, 2e-3)):
        src = os.path.join(d, f"mm_{dt}.dvms")
        with open(src, "w") as f:
            f.write(MATMUL.format(dt=dt))
        dvmb = os.path.join(d, f"mm_{dt}.dvmb")
        r = dvm("asm", src, "-o", dvmb)
        if r.returncode != 0:
            failures.append(f"asm matmul {dt}: {r.stderr}")
            continue
        for batch, m, k, n in ((1, 1, 1, 1), (3, 7, 13, 5), (2, 65, 129, 33), (5, 1, 768, 3), (1, 257, 31, 1)):
            a = rng.standard_normal((batch, m, k)).astype(npdt)
            b = rng.standard_normal((k, n)).astype(npdt)
            want = a.astype(np.float64) @ b.astype(np.float64)
            r, outs = try_run(dvmb, {"a": a, "b": b}, 1, "--device", "cuda")
            if r.returncode != 0:
                failures.append(f"matmul {dt} {a.shape}x{b.shape}: {r.stderr}")
                continue
            got = outs[0]
            err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
            if got.shape != want.shape or err > tol:
                failures.append(f"matmul {dt} {a.shape}x{b.shape}: relative error {err}")


def main():
    why = cuda_unavailable()
    if why:
        print(f"skipped: no CUDA device here ({why})")
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as d:
        test_matmul(d, failures)
        test_models(d, failures)
        test_bad_index(d, failures)
    for f in failures:
        print("FAIL:", f)
    print(f"cuda gpu: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
