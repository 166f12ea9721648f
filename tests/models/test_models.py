"""End-to-end: each fixture model compiled once with `dvm compile`, run at
several shapes from that one file with `dvm run`, compared with ONNX
Runtime (1e-4 relative, and a small absolute floor for values near 0)."""
import os

import numpy as np
import pytest
from dvmtest.cli import compile_onnx, dvm, dvm_ok, run_module, try_run
from dvmtest.compare import ort_session

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)

CASES = {
    "mlp": [{"x": (1, 16)}, {"x": (2, 16)}, {"x": (7, 16)}, {"x": (64, 16)}],
    "bert": [{"ids": (1, 1)}, {"ids": (1, 8)}, {"ids": (2, 13)}, {"ids": (3, 64)}],
    "resnet": [{"image": (1, 3, 8, 8)}, {"image": (2, 3, 17, 23)}, {"image": (1, 3, 32, 31)},
               {"image": (3, 3, 9, 40)}],
    "control": [{"x": (1,)}, {"x": (5,)}, {"x": (31,)}, {"x": (100,)}],
}


def inputs(model, shapes):
    feeds = {}
    for name, shape in shapes.items():
        if name == "ids":
            feeds["ids"] = rng.integers(0, 100, shape).astype(np.int64)
            mask = np.ones(shape, np.int64)
            mask[:, shape[1] // 2 + 1:] = 0  # padding positions
            feeds["mask"] = mask
        else:
            feeds[name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = {}
    d = tmp_path_factory.mktemp("models")
    for name in CASES:
        path = str(d / f"{name}.dvmb")
        r = dvm("compile", os.path.join(HERE, f"{name}.onnx"), "-o", path)
        out[name] = (path, r)
    return out


@pytest.mark.parametrize("model", list(CASES))
def test_model(model, compiled):
    path, r = compiled[model]
    assert r.returncode == 0, r.stderr
    sess = ort_session(os.path.join(HERE, f"{model}.onnx"))
    for shapes in CASES[model]:
        feeds = inputs(model, shapes)
        want = sess.run(None, feeds)
        rr, outs = try_run(path, feeds, len(want))
        assert rr.returncode == 0, f"{shapes}: {rr.stderr}"
        for got, w in zip(outs, want, strict=True):
            assert got.shape == w.shape, shapes
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5, err_msg=str(shapes))


def test_bert_is_folded_and_fused(compiled, tmp_path):
    """The BERT fixture's shape arithmetic is folded into registers (no shape
    function runs) and its elementwise chains are fused; without fusion the
    results are the same."""
    path, r = compiled["bert"]
    assert r.returncode == 0, r.stderr
    text = dvm_ok("disasm", path).stdout
    assert "fused@" in text
    assert "\n  shapefn " not in text
    plain = str(tmp_path / "plain.dvmb")
    compile_onnx(os.path.join(HERE, "bert.onnx"), "--no-fusion", out=plain)
    outs = run_each((path, plain), inputs("bert", {"ids": (2, 9)}))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)


def run_each(mods, feeds):
    """The output of `dvm run` of each module on the same inputs."""
    return [run_module(mod, feeds)[0] for mod in mods]


def peak_of(path, **dims):
    """`dvm inspect --memory`'s formula and its value at dims."""
    out = dvm_ok("inspect", "--memory", path, *[f"--dim={k}={v}" for k, v in dims.items()]).stdout
    formula = out.split("peak = ")[1].split(" bytes")[0]
    return formula, int(out.split(": ")[-1].split(" bytes")[0])


def bench_peak(path, shapes):
    """The pool's peak over one `dvm bench` invocation (its JSON line)."""
    cmd = ["bench", path, "--iters", "1", "--warmup", "0", "--threads", "1"]
    for k, v in shapes.items():
        dims = "x".join(map(str, v))
        cmd += ["--shape", f"{k}={dims}"]
        if k == "ids":
            cmd += ["--shape", f"mask={dims}", "--range", "ids=0..99", "--range", "mask=0..1"]
    out = dvm_ok(*cmd).stdout
    return int(out.split('"peak_bytes":')[1].split(",")[0].split("}")[0])


@pytest.mark.parametrize("model", list(CASES))
def test_plan_peak_not_above_pool(model, compiled, tmp_path):
    """With the plan, the pool's measured peak is never above that of
    allocating each tensor at its site and returning it at its death
    (--no-plan), at every shape the model is tested at and a larger one,
    and well below it where calls run in place."""
    path, r = compiled[model]
    assert r.returncode == 0, r.stderr
    # the ResNet's Conv + Relu pairs are FusedConvs (pass conv_act), BERT's
    # attention one Attention (pass attention): no activation or softmax over
    # the scores is left to run in place, so their peaks are compared without
    extra = {"resnet": ["--disable", "conv_act"], "bert": ["--disable", "attention"]}.get(model, [])
    if extra:
        path = str(tmp_path / "planned.dvmb")
        compile_onnx(os.path.join(HERE, f"{model}.onnx"), *extra, out=path)
    plain = str(tmp_path / "plain.dvmb")
    compile_onnx(os.path.join(HERE, f"{model}.onnx"), "--no-plan", *extra, out=plain)
    larger = {"mlp": {"x": (1000, 16)}, "bert": {"ids": (8, 64)}, "resnet": {"image": (1, 3, 64, 64)},
              "control": {"x": (1000,)}}
    for shapes in CASES[model] + [larger[model]]:
        planned, pooled = bench_peak(path, shapes), bench_peak(plain, shapes)
        assert 0 < planned <= pooled, f"{shapes}: plan {planned} > no-plan {pooled}"
    # outputs taking a dying input's storage (softmax over the attention
    # scores, the convolutions' fused activations) lower the peak itself
    if model in ("bert", "resnet"):
        assert planned < 0.75 * pooled, f"{larger[model]}: plan {planned}, no-plan {pooled}"


def test_bert_memory_plan(compiled, tmp_path):
    """The BERT fixture's intermediates share slots (storages that tensors
    of one size take in turn); inspect's peak formula evaluates as Python
    evaluates it, and the pool really holds that much at its peak; --no-plan
    gives the same results."""
    path, r = compiled["bert"]
    assert r.returncode == 0, r.stderr
    text = dvm_ok("disasm", path).stdout
    slots = [l.split(",")[1].strip() for l in text.splitlines() if l.strip().startswith("alloc_tensor ")]
    assert len(slots) > len(set(slots)) > 0, "tensors reuse slots"
    assert text.count("alloc_storage ") == len(set(slots))
    plain = str(tmp_path / "plain.dvmb")
    compile_onnx(os.path.join(HERE, "bert.onnx"), "--no-plan", out=plain)
    ptext = dvm_ok("disasm", plain).stdout
    assert "alloc_storage" not in ptext and ".info" not in ptext
    env = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "max": max, "min": min}
    for batch, seq in [(1, 1), (2, 13), (3, 64)]:
        formula, value = peak_of(path, batch=batch, seq=seq)
        assert value == eval(formula.replace("^", "**"), dict(env, batch=batch, seq=seq))
        bench = dvm_ok("bench", path, "--shape", f"ids={batch}x{seq}", "--shape", f"mask={batch}x{seq}",
                       "--range", "ids=0..99", "--range", "mask=0..1", "--iters", "1", "--warmup", "0",
                       "--threads", "1").stdout
        assert int(bench.split('"peak_bytes":')[1].split(",")[0]) >= value
        outs = run_each((path, plain), inputs("bert", {"ids": (batch, seq)}))
        np.testing.assert_array_equal(outs[0], outs[1])


def test_inspect_memory_errors(compiled):
    path, _ = compiled["bert"]
    r = dvm("inspect", "--memory", path, "--dim", "batch=2")
    assert r.returncode == 2 and "give every symbol a value" in r.stderr
    r = dvm("inspect", "--memory", path, "--dim", "seq=x")
    assert r.returncode == 2 and "expected SYMBOL=N" in r.stderr
    r = dvm("inspect", path, "--dim", "seq=2")
    assert r.returncode == 2
