"""The fixture models compiled with --target cpu,cuda and run with
`dvm run --device cuda` on the stand-in driver (tests/cuda/fake_cuda.c),
which runs every generated kernel on the host with the emulation of
shim.h: the results must equal the CPU run's and ONNX Runtime's within
1e-4 relative, at four shapes per model, with the duplicated-tail variants and again with the
bounds-checked baseline (DVM_CUDA_BASELINE=1). Across the runs every
variant dvm_v0..dvm_v{T-1} and the baseline must have run. Host syncs per
invocation are counted and checked.
With --real DIR it checks the packaged real models of tests/real instead
(silero-vad, PP-OCR det, rec and cls) at two shapes each, every output,
host syncs printed but not fixed.
usage: test_standin.py DVM MODELS_DIR FAKE_CUDA_LIB [--real REAL_MODELS_DIR [NAME,NAME...]]
Skips (77) without NVRTC (no cuda target) or without g++."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

ort.set_default_logger_severity(3)  # no warnings about the real models' unused initializers
dvm, models, fake = sys.argv[1:4]
real = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--real" else None
only = sys.argv[6].split(",") if real and len(sys.argv) > 6 else None  # a subset of REAL
TILE = 4
rng = np.random.default_rng(17)

# four shapes per model: the dynamic dims take values of every residue
# mod 4 (bert's seq and batch * seq, resnet's spatial extents, control's n)
def model_feeds(model):
    if model == "mlp":
        return [{"x": rng.standard_normal((b, 16), dtype=np.float32)} for b in (1, 2, 3, 7)]
    if model == "bert":
        out = []
        for b, s in ((1, 1), (2, 7), (1, 14), (3, 5)):
            mask = (rng.random((b, s)) < 0.8).astype(np.int64)
            mask[:, 0] = 1
            out.append({"ids": rng.integers(0, 100, (b, s), dtype=np.int64), "mask": mask})
        return out
    if model == "resnet":
        return [{"image": rng.standard_normal(d, dtype=np.float32)}
                for d in ((1, 3, 17, 19), (2, 3, 8, 8), (1, 3, 13, 6), (1, 3, 22, 21))]
    return [{"x": rng.standard_normal((n,), dtype=np.float32)} for n in (1, 5, 6, 11)]

# host waits per invocation (docs/cuda.md, Measured): one, for the
# result, where every op runs on the device, as in resnet since its Convs
# and pools do; control's whole-tensor ReduceSum runs on the host, and its
# If and Loop read their conditions there
HOST_SYNCS = {"mlp": 1, "bert": 1, "resnet": 1, "control": 6}


def page(b, h, w):
    """A normalized page-like image, as PP-OCR feeds them."""
    return (rng.standard_normal((b, 3, h, w)) * 0.5).astype(np.float32)


# the packaged real models, two shapes each (small: every generated kernel
# runs on the host, one emulated thread at a time)
REAL = {
    "silero_vad_op18_ifless": [
        {"input": (0.3 * rng.standard_normal((1, 576))).astype(np.float32), "sr": np.array(16000, np.int64),
         "state": np.zeros((2, 1, 128), np.float32)},
        {"input": (0.3 * rng.standard_normal((2, 288))).astype(np.float32), "sr": np.array(8000, np.int64),
         "state": (0.1 * rng.standard_normal((2, 2, 128))).astype(np.float32)}],
    "ch_ppocr_mobile_v2.0_cls_infer": [{"x": page(1, 48, 192)}, {"x": page(3, 48, 101)}],
    "ch_PP-OCRv4_rec_infer": [{"x": page(1, 48, 80)}, {"x": page(2, 48, 123)}],
    "ch_PP-OCRv4_det_infer": [{"x": page(1, 32, 32)}, {"x": page(1, 64, 96)}],
}

tmp = tempfile.mkdtemp()
env = dict(os.environ, DVM_CUDA_DRIVER=fake, DVM_CUBLAS=fake, FAKE_CUDA_TRACE=os.path.join(tmp, "trace"))
env.setdefault("FAKE_CUDA_CACHE", os.path.join(tmp, "cache"))
failures = []


def relative_error(got, want):
    """Each element's error relative to the larger of it and 1% of the
    tensor's scale (its largest magnitude, at least 1): float32 chains
    round in proportion to the values they pass through, not to a result
    near 0."""
    want = np.asarray(want, np.float64)
    scale = max(1.0, float(np.nanmax(np.abs(want), initial=0.0))) if want.size else 1.0
    err = np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 1e-2 * scale)
    return float(np.nanmax(err)) if err.size else 0.0


def run_dvm(args, extra_env=None):
    return subprocess.run([dvm] + args, env=dict(env, **(extra_env or {})), capture_output=True, text=True)


def skip(why):
    print("SKIP:", why)
    shutil.rmtree(tmp)
    sys.exit(77)


if shutil.which("g++") is None:
    skip("no g++ to compile the generated CUDA C for the host")
def check_model(model, onnx_path, cases):
    dvmb = os.path.join(tmp, model + ".dvmb")
    c = run_dvm(["compile", onnx_path, "-o", dvmb, "--target", "cpu,cuda"])
    if c.returncode:
        if "NVRTC is not available" in c.stderr:
            skip(c.stderr.strip())
        failures.append(f"{model}: compile failed: {c.stderr.strip()}")
        return
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    nout = len(session.get_outputs())
    for k, inputs in enumerate(cases):
        args = ["run", dvmb]
        for name, value in inputs.items():
            path = os.path.join(tmp, f"{model}.{k}.{name}.npy")
            np.save(path, value)
            args += ["--input", f"{name}={path}"]
        what = f"{model} " + " ".join(f"{n}{list(v.shape)}" for n, v in inputs.items())
        cpu_outs = [os.path.join(tmp, f"cpu{i}.npy") for i in range(nout)]
        c = run_dvm(args + ["--device", "cpu"] + [a for o in cpu_outs for a in ("--output", o)])
        if c.returncode:
            failures.append(f"{what}: the CPU run failed: {c.stderr.strip()}")
            continue
        refs = [np.load(o) for o in cpu_outs]
        onnx = session.run(None, inputs)
        for mode, extra in (("variants", {}), ("baseline", {"DVM_CUDA_BASELINE": "1"})):
            outs = [os.path.join(tmp, f"cuda{i}.npy") for i in range(nout)]
            c = run_dvm(args + ["--device", "cuda", "--stats"] + [a for o in outs for a in ("--output", o)], extra)
            if c.returncode:
                failures.append(f"{what} on the stand-in ({mode}): {c.stderr.strip()}")
                continue
            syncs = re.search(r"host_syncs=(\d+)", c.stdout)
            for i, (out, ref, want) in enumerate(zip(outs, refs, onnx, strict=True)):
                got = np.load(out)
                worst = relative_error(got, ref)
                worst_ort = relative_error(got, want) if got.shape == want.shape else float("inf")
                same_nan = np.array_equal(np.isnan(got), np.isnan(ref))
                print(f"{what} output {i} ({mode}): max relative error {worst:.2e} to the CPU, {worst_ort:.2e} "
                      f"to ONNX Runtime, host_syncs={syncs and syncs[1]}")
                if got.shape != ref.shape or not same_nan or not worst <= 1e-4:
                    failures.append(f"{what} output {i} ({mode}): differs from the CPU by {worst:.2e} "
                                    f"(shape {got.shape})")
                if not worst_ort <= 1e-4:
                    failures.append(f"{what} output {i} ({mode}): differs from ONNX Runtime by {worst_ort:.2e}")
            if not syncs:
                failures.append(f"{what} ({mode}): no host_syncs count")
            elif model in HOST_SYNCS and int(syncs[1]) != HOST_SYNCS[model]:
                failures.append(f"{what} ({mode}): {syncs[1]} host syncs, expected {HOST_SYNCS[model]}")


if real:
    for model, cases in REAL.items():
        if only is None or model in only:
            check_model(model, os.path.join(real, model + ".onnx"), cases)
else:
    for model in ("mlp", "bert", "resnet", "control"):
        check_model(model, os.path.join(models, model + ".onnx"), model_feeds(model))

entries = set()
if os.path.exists(env["FAKE_CUDA_TRACE"]):
    entries = {line.split()[0] for line in open(env["FAKE_CUDA_TRACE"])}
want = {f"dvm_v{r}" for r in range(TILE)} | {"dvm_b"}
print("entries run:", " ".join(sorted(entries)))
# every residue is the fixtures' job (their shapes are chosen for it); a
# real model's dims are what they are, so there only the baseline must run
if not (want if not real else {"dvm_b"}) <= entries:
    failures.append(f"never ran: {' '.join(sorted(want - entries))}")
shutil.rmtree(tmp)
for f in failures:
    print("FAIL:", f)
print(f"stand-in model runs: {len(failures)} failed")
sys.exit(1 if failures else 0)
