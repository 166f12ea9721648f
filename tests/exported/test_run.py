"""The exported models end to end: each compiled once, run from that one
.dvmb at every shape of its corpus entry with `dvm run`, compared with ONNX
Runtime (1e-4 relative, a small absolute floor near 0)."""
import os

import numpy as np
import pytest
from dvmtest.cli import compile_onnx, dvm_ok, run_module
from dvmtest.compare import ort_session
from dvmtest.corpus import MODELS, feeds_for

EXPORTS = sorted(m for m in MODELS if not m.endswith("_fixture") and not m.startswith("ppocr"))


@pytest.mark.parametrize("model", EXPORTS)
def test_exported_model_matches_ort(model, tmp_path):
    onnx_path, spec, bindings = MODELS[model]
    if not os.path.exists(onnx_path):
        pytest.fail(f"{onnx_path} is missing: setup.sh exports it (tests/exported/export_models.py)")
    dvmb = tmp_path / f"{model}.dvmb"
    compile_onnx(onnx_path, out=dvmb)
    sess = ort_session(onnx_path)
    rng = np.random.default_rng(3)
    for env in bindings:
        feeds = feeds_for(spec, env, rng)
        want = sess.run(None, feeds)
        got = run_module(dvmb, feeds, len(want))
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape, env
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=str(env))


def shape_args(spec, env):
    args = []
    for name, (dt, dims, hi) in spec.items():
        args += ["--shape", name + "=" + "x".join(str(env[d] if isinstance(d, str) else d) for d in dims)]
        if dt == "i64":
            args += ["--range", f"{name}=0..{hi - 1}"]
    return args


@pytest.mark.parametrize("model", EXPORTS)
def test_memory_formula_is_the_measured_peak(model, tmp_path):
    """`dvm inspect --memory` at a shape equals the bytes the pool was asked
    for at its peak while running that shape (dvm bench's
    peak_requested_bytes): the plan covers every tensor."""
    onnx_path, spec, bindings = MODELS[model]
    dvmb = tmp_path / f"{model}.dvmb"
    compile_onnx(onnx_path, out=dvmb)
    for env in bindings:
        dims = [f"--dim={k}={v}" for k, v in env.items()]
        out = dvm_ok("inspect", "--memory", dvmb, *dims).stdout
        predicted = int(out.split(": ")[-1].split(" bytes")[0])
        bench = dvm_ok("bench", dvmb, *shape_args(spec, env), "--iters", "1", "--warmup", "0", "--threads", "1").stdout
        measured = int(bench.split('"peak_requested_bytes":')[1].split(",")[0])
        assert predicted == measured, f"{env}: inspect says {predicted} bytes, the run asked for {measured}"


def test_gpt2_logits_held_at_their_size(tmp_path):
    """The GPT-2 export's peak is at its logits (a result, which the plan
    counts at its size): the pool holds them in a block of exactly their
    bytes, not of a size class (458,752 bytes at 3 x 33 before), so what
    it holds at its peak is the plan's peak but for the rounding of the
    intermediates' blocks."""
    onnx_path, spec, _ = MODELS["gpt2_tiny"]
    dvmb = tmp_path / "gpt2.dvmb"
    compile_onnx(onnx_path, out=dvmb)
    ids = tmp_path / "ids.npy"
    np.save(ids, np.random.default_rng(5).integers(0, 1000, (3, 33)))
    stats = dvm_ok("run", dvmb, "--input", ids, "--stats").stdout.split("cpu_pool:")[1]
    logits = 3 * 33 * 1000 * 4
    assert int(stats.split("in_use=")[1].split()[0]) == logits  # the result, still held when stats print
    out = dvm_ok("inspect", "--memory", dvmb, "--dim=batch=3", "--dim=seq=33").stdout
    planned = int(out.split(": ")[-1].split(" bytes")[0])
    held = int(stats.split("peak=")[1].split()[0])
    assert planned <= held < planned + planned // 100, (held, planned)


@pytest.mark.parametrize("stitch", [True, False])
def test_bert_export_chains_fused(tmp_path, stitch):
    """In the exported BERT, the decomposed LayerNorm and GELU and the mask
    and residual arithmetic run as fused kernels: per layer, no elementwise
    op but the bias adds (one Add after each product) is its own call.
    Stitched (the default), each LayerNorm's reductions join its fused
    call too (fused@stitchN): no reduce_mean call is left. With the graph
    rewrites off: tests/compiler/test_passes.py counts the kernels with
    them on."""
    onnx_path = MODELS["bert_tiny"][0]
    dvmb = tmp_path / "bert.dvmb"
    off = sum((["--disable", p] for p in ("layernorm", "gelu", "epilogue", "skiplayernorm", "rmsnorm")), [])
    compile_onnx(onnx_path, *off, *([] if stitch else ["--no-stitch"]), out=dvmb)
    text = dvm_ok("disasm", dvmb).stdout
    per_layer, loc = {}, ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(".loc"):
            loc = s.split(None, 1)[1].strip('"')
        elif s.startswith("invoke") and loc.startswith("/layers."):
            kernel = s.split()[1].rstrip(",").strip('"')
            kernel = "stitched" if kernel.startswith("fused@stitch") else kernel.split("@")[0]
            per_layer.setdefault(loc.split("/")[1], []).append(kernel)
    assert sorted(per_layer) == ["layers.0", "layers.1"], per_layer.keys()
    for layer, kernels in per_layer.items():
        counts = {k: kernels.count(k) for k in set(kernels)}
        standalone = {k: c for k, c in counts.items() if k in ("sub", "mul", "div", "pow", "sqrt", "erf", "tanh")}
        assert not standalone, f"{layer}: {counts}"
        if stitch:  # the two LayerNorms, each with the residual add before it
            assert counts.get("stitched") == 2 and "reduce_mean" not in counts, f"{layer}: {counts}"
            assert counts.get("add", 0) <= 6 and counts["fused"] >= 1, f"{layer}: {counts}"
        else:
            assert "stitched" not in counts and counts.get("add", 0) <= 6 and counts["fused"] >= 8, f"{layer}: {counts}"
        assert len(kernels) <= 30, f"{layer}: {len(kernels)} kernel calls: {counts}"
