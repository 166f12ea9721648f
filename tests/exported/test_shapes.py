"""dvm's shape inference against ONNX Runtime's, on models nobody here wrote.

For each model of the corpus (PyTorch exports made at setup by
export_models.py, and the fixture models), every value whose shape ONNX
Runtime's symbolic shape inference (auto_merge=True) knows must be known to
dvm (`dvm compile --dump-shapes`), and every dim dvm infers must equal the
shape the value really has: each model runs in ONNX Runtime with all its
values as outputs at several input shapes, and dvm's expressions are
evaluated at the symbols' values there.
"""
import json
import os
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from dvmtest.cli import dvm
from dvmtest.corpus import MODELS, feeds_for
from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference


def ort_known(path):
    """name -> list of dims (int or sympy-printed str) for every value ORT's
    symbolic inference knows completely."""
    m = SymbolicShapeInference.infer_shapes(onnx.load(path), auto_merge=True)
    known = {}
    for vi in list(m.graph.value_info) + list(m.graph.output):
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            continue
        dims = []
        for d in t.shape.dim:
            if d.HasField("dim_value"):
                dims.append(d.dim_value)
            elif d.HasField("dim_param"):
                dims.append(d.dim_param)
            else:
                break
        else:
            known[vi.name] = dims
    return known


def dvm_shapes(path, tmp_path):
    out = tmp_path / "shapes.json"
    r = dvm("compile", path, "--dump-shapes", out)
    assert r.returncode == 0, r.stderr
    return {v["name"]: v for v in json.loads(out.read_text())["values"]}, r.stderr


def as_precise(mine, theirs, inputs):
    """dvm's dims are known wherever ORT's are, and a function of the input
    symbols wherever ORT's is (not a symbol read at run time)."""
    if mine is None or None in mine or len(mine) != len(theirs):
        return False
    for e, t in zip(mine, theirs, strict=True):
        ort_names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", str(t))) - {"floor", "ceiling", "Min", "Max", "Mod"}
        if ort_names <= inputs and eval_dim(e, {s: 1 for s in inputs}) is None:
            return False
    return True


def eval_dim(expr, env):
    """A dvm dim expression ("3072*batch*seq + 48", "floordiv(seq + 1, 2)")
    at the symbols' values; None if it names a symbol not in env."""
    names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", expr)) - {"floordiv", "mod", "min", "max"}
    if not names <= env.keys():
        return None
    fns = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "min": min, "max": max}
    return eval(expr.replace("^", "**"), {"__builtins__": {}}, {**fns, **env})


def actual_shapes(path, feeds):
    """Every value's real shape, from ONNX Runtime with all values as outputs."""
    m = onnx.load(path)
    m = onnx.shape_inference.infer_shapes(m)
    have = {o.name for o in m.graph.output}
    inits = {i.name for i in m.graph.initializer}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have and o not in inits:
                m.graph.output.append(onnx.helper.ValueInfoProto(name=o))
                have.add(o)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, (np.asarray(r).shape for r in s.run(names, feeds))))


@pytest.mark.parametrize("model", sorted(MODELS))
def test_shapes_match_ort(model, tmp_path):
    path, spec, bindings = MODELS[model]
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: setup.sh exports it (tests/exported/export_models.py)")
    known = ort_known(path)
    mine, stderr = dvm_shapes(path, tmp_path)
    inputs = {d for _, dims, _ in spec.values() for d in dims if isinstance(d, str)}
    unknown = [n for n in known if n in mine and not as_precise(mine[n]["dims"], known[n], inputs)]
    rng = np.random.default_rng(0)
    wrong = []
    for env in bindings:
        real = actual_shapes(path, feeds_for(spec, env, rng))
        for name, v in mine.items():
            if name not in real or v["dims"] is None:
                continue
            if len(v["dims"]) != len(real[name]):
                wrong.append(f"{name}: rank {len(v['dims'])}, really {real[name]} at {env}")
                continue
            for d, (e, r) in enumerate(zip(v["dims"], real[name])):
                got = None if e is None else eval_dim(e, env)
                if got is not None and got != r:
                    wrong.append(f"{name} ({v.get('op')}) dim {d}: {e} = {got} at {env}, really {r}")
    print(f"{model}: {len(mine)} values, ORT knows {len(known)}, unknown to dvm {len(unknown)}, "
          f"wrong {len(wrong)}", file=sys.stderr)
    assert not wrong, "dims that disagree with the run:\n" + "\n".join(wrong[:20])
    assert not unknown, (f"{len(unknown)} values whose shape ORT's inference knows are unknown to dvm, first: "
                         + ", ".join(f"{n} ({mine[n].get('op')}: {mine[n]['dims']}, ORT {known[n]})"
                                     for n in unknown[:8]))
