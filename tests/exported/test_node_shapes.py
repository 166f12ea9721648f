"""Shape inference on the ONNX node suite's models with their input dims
made symbolic: every dim dvm infers must equal the real one (the test
inputs' shapes bound to the symbols, the expected outputs' shapes and every
intermediate from ONNX Runtime), and every value whose shape ONNX
Runtime's symbolic inference knows (and gets the rank of right: it takes
Squeeze by axes it cannot read to squeeze nothing) must be known to dvm, a
dim that depends on data as a symbol read at run time, as ORT makes a fresh
symbol. (Unlike test_shapes.py this does not require dvm's dims to be
functions of the input symbols wherever ORT's are: here every input dim is
an independent symbol, and ORT's auto_merge then assumes what the model
does not say, such as two inputs' dims equal where they may broadcast.)"""
import glob
import json
import os
import re
import sys

import numpy as np
import onnx
from dvmtest.cli import dvm
from dvmtest.paths import NODE_SUITE as NODE
from onnx import numpy_helper

from test_shapes import actual_shapes, eval_dim, ort_known


def symbolic(model):
    """The model with every input dim a symbol s<input>_<dim> and its
    outputs' declared shapes dropped (inference must find them); the
    symbols' values for the test inputs."""
    for vi in model.graph.output:
        vi.type.tensor_type.ClearField("shape")
    env = {}
    for i, vi in enumerate(model.graph.input):
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value"):
                env[f"s{i}_{k}"] = d.dim_value
                d.ClearField("dim_value")
                d.dim_param = f"s{i}_{k}"
    return model, env


def node_case_dirs():
    return sorted(glob.glob(os.path.join(NODE, "test_*")))


def test_node_models_symbolic(tmp_path):
    if not node_case_dirs():
        raise AssertionError(f"no node tests under {NODE}")
    compiled = wrong = ort_only = values = 0
    bad, missing = [], []
    for case in node_case_dirs():
        name = os.path.basename(case)
        model, env = symbolic(onnx.load(os.path.join(case, "model.onnx")))
        path = str(tmp_path / f"{name}.onnx")
        onnx.save(model, path)
        out = tmp_path / "s.json"
        r = dvm("compile", path, "--dump-shapes", out)
        if r.returncode != 0:
            continue
        compiled += 1
        mine = {v["name"]: v for v in json.loads(out.read_text())["values"]}
        feeds = {}
        data = os.path.join(case, "test_data_set_0")
        for i, vi in enumerate(model.graph.input):
            f = os.path.join(data, f"input_{i}.pb")
            if os.path.exists(f):
                t = onnx.TensorProto()
                t.ParseFromString(open(f, "rb").read())
                feeds[vi.name] = numpy_helper.to_array(t)
        try:
            real = actual_shapes(path, feeds)
        except Exception:  # ONNX Runtime cannot run it: nothing to compare with
            continue
        try:
            known = ort_known(path)
        except Exception:
            known = {}
        for vname, v in mine.items():
            values += 1
            if vname in real and v["dims"] is not None:
                if len(v["dims"]) != len(real[vname]):
                    bad.append(f"{name}: {vname} rank {len(v['dims'])}, really {real[vname]}")
                    continue
                for e, d in zip(v["dims"], real[vname]):
                    got = None if e is None else eval_dim(e, env)
                    if got is not None and got != d:
                        bad.append(f"{name}: {vname} ({v.get('op')}) {v['dims']}, really {real[vname]}")
                        break
            ort_right = vname not in real or len(known.get(vname, ())) == len(real[vname])
            if vname in known and ort_right and (v["dims"] is None or None in v["dims"]):
                ort_only += 1
                missing.append(f"{name}: {vname} ({v.get('op')})")
    print(f"node models: {compiled} compiled with symbolic dims, {values} values, "
          f"{ort_only} known to ORT's inference but not to dvm", file=sys.stderr)
    assert not bad, "dims that disagree with the run:\n" + "\n".join(bad[:30])
    assert not missing, "values whose shape ORT's inference knows are unknown to dvm:\n" + "\n".join(missing)
    assert compiled >= 250, f"only {compiled} node models compiled with symbolic dims"
