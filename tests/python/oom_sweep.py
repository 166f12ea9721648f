"""Allocation failure sweeps of the Python package, in SQLite's manner: the
k-th allocation of the extension fails, for k = 1, 2, ... until a call no
longer reaches a k-th, in dvm.Module(bytes), dvm.load(path), Module.run (on
a new VM, its pool empty) and dvm.InferenceSession (an .onnx model whose
compiled module is in the cache, and a .dvmb) with its run, dvm.compile,
and a run whose input and result go by DLPack. Each failure
must raise dvm.OutOfMemory (code OUT_OF_MEMORY) or MemoryError, never crash
or give another error; the extension must hold no block more than before
the call once its objects are gone; and the same call right after must
give the unfailed answer.

It runs on a build of the extension for this test only (oom_ext.c, from
tests/python/meson.build): its own allocations (the extension's, libdvm's
and the compiler's: the static libraries linked into it) are counted and
failed, and the blocks it holds recorded; CPython's and NumPy's are not
(arming them would test CPython's handling of its own failures).
Usage: oom_sweep.py EXTENSION PACKAGE_DIR MLP.onnx"""
import ctypes
import gc
import os
import sys
import tempfile

import numpy as np


def import_dvm(ext, pkg, tmp):
    """The dvm package of PACKAGE_DIR's Python files over the test extension."""
    ext, pkg, d = os.path.abspath(ext), os.path.abspath(pkg), os.path.join(tmp, "dvm")
    os.mkdir(d)
    for f in os.listdir(pkg):
        if f.endswith(".py"):
            os.symlink(os.path.join(pkg, f), os.path.join(d, f))
    os.symlink(ext, os.path.join(d, os.path.basename(ext)))
    sys.path.insert(0, tmp)
    import dvm
    loaded = sys.modules["dvm._dvm"].__file__
    assert os.path.realpath(loaded) == os.path.realpath(ext), loaded
    return dvm


def main():
    ext, pkg, onnx_path = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="dvm_oom_")
    os.environ["DVM_CACHE_DIR"] = os.path.join(tmp, "cache")
    dvm = import_dvm(ext, pkg, tmp)
    hook = ctypes.CDLL(ext)
    hook.dvm_oom_arm.argtypes = [ctypes.c_long]
    hook.dvm_oom_disarm.restype = hook.dvm_oom_live.restype = ctypes.c_long
    problems = []

    def is_oom(e):
        return isinstance(e, MemoryError) or (isinstance(e, dvm.OutOfMemory) and e.code == "OUT_OF_MEMORY")

    def sweep(name, call, same, settle=lambda: None):
        """Fails each k-th allocation of call(); same(result) is the
        unfailed answer; settle() releases what the object under test
        keeps between calls (idle VMs)."""
        failed = k = 0
        while True:
            k += 1
            settle()
            gc.collect()
            held = hook.dvm_oom_live()
            hook.dvm_oom_arm(k)
            try:
                result, err = call(), None
            except Exception as e:  # noqa: BLE001 - every exception is checked
                result, err = None, e
            reached = hook.dvm_oom_disarm()
            if err is not None:
                failed += 1
                if not is_oom(err):
                    problems.append(f"{name}, allocation {k}: {type(err).__name__}: {err}")
            elif not same(result):
                problems.append(f"{name}, allocation {k}: a different answer")
            del result, err
            settle()
            gc.collect()
            if hook.dvm_oom_live() != held:
                problems.append(f"{name}, allocation {k}: {hook.dvm_oom_live() - held} blocks left behind")
            try:
                if not same(call()):
                    problems.append(f"{name}, after allocation {k}: a different answer")
            except Exception as e:  # noqa: BLE001
                problems.append(f"{name}, after allocation {k}: {type(e).__name__}: {e}")
            if reached < k or len(problems) > 20:
                break
        if failed < 5:  # each of these allocates: a sweep that failed none tested nothing
            problems.append(f"{name}: only {failed} allocations failed")
        print(f"{name}: {k - 1} allocations, {failed} failed with out of memory")

    rng = np.random.default_rng(33)
    x = rng.standard_normal((7, 16)).astype(np.float32)  # 7 rows: not a vector width
    ref_module = dvm.compile(onnx_path, dims={"batch": (1, 64)})
    dvmb = os.path.join(tmp, "mlp.dvmb")
    ref_module.save(dvmb)
    with open(dvmb, "rb") as f:
        data = f.read()
    want = ref_module.run({"x": x}, threads=1)["y"].copy()
    del ref_module

    def answers(m):
        return np.array_equal(m.run({"x": x}, threads=1)["y"], want)

    sweep("compile", lambda: dvm.compile(onnx_path, dims={"batch": (1, 64)}), answers)
    sweep("Module(bytes)", lambda: dvm.Module(data), answers)
    sweep("load(path)", lambda: dvm.load(dvmb), answers)

    m = dvm.load(dvmb)
    sweep("Module.run", lambda: m.run({"x": x}, threads=1)["y"], lambda y: np.array_equal(y, want),
          settle=m.close_vms)

    class Producer:
        """An input that speaks DLPack and nothing else."""
        def __dlpack__(self, stream=None, **kwargs):
            return x.__dlpack__()

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    def through_dlpack():  # in by DLPack, and the result out by DLPack as a copy
        return np.from_dlpack(m.run({"x": Producer()}, threads=1)["y"].base, copy=True)

    sweep("Module.run, DLPack in and out", through_dlpack, lambda y: np.array_equal(y, want), settle=m.close_vms)
    del m

    opts = dvm.SessionOptions()
    opts.intra_op_num_threads = 1
    dvm.InferenceSession(onnx_path, opts)  # compiled once, into the cache
    cache = os.path.join(tmp, "cache")
    entry = [os.path.join(cache, f) for f in os.listdir(cache) if f.endswith(".dvmb")]
    inodes = [os.stat(f).st_ino for f in entry]  # a compile replaces the file (its time is touched on use)

    def session(path):
        return dvm.InferenceSession(path, opts).run(None, {"x": x})[0]

    sweep("InferenceSession(.onnx, cached) and run", lambda: session(onnx_path), lambda y: np.array_equal(y, want))
    if [os.stat(f).st_ino for f in entry] != inodes:
        problems.append("InferenceSession: a failed load of the cached module was taken for a damaged entry "
                        "and compiled again")
    sweep("InferenceSession(.dvmb) and run", lambda: session(dvmb), lambda y: np.array_equal(y, want))

    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
