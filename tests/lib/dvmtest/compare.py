"""Outputs against a reference: paired strictly (by name for dicts, by
position for lists), so that a missing or an extra output fails; and ONNX
Runtime's outputs as that reference."""
import os

import numpy as np


def paired(got, want):
    """[(key, got, want)]: dicts by name (the same names on both sides),
    sequences by position (the same count)."""
    if isinstance(want, dict) or isinstance(got, dict):
        assert isinstance(got, dict) and isinstance(want, dict), (type(got), type(want))
        assert got.keys() == want.keys(), f"outputs {sorted(got)}, expected {sorted(want)}"
        return [(k, got[k], want[k]) for k in want]
    got, want = list(got), list(want)
    assert len(got) == len(want), f"{len(got)} outputs, expected {len(want)}"
    return [(i, g, w) for i, (g, w) in enumerate(zip(got, want, strict=True))]


def compare_outputs(got, want, rtol=1e-7, atol=0, dtype=False, what=""):
    """Each output of got as its partner in want: the same shape (and dtype
    when asked), values within np.testing.assert_allclose's rtol and atol;
    a sequence output (a list of arrays) item by item."""
    for key, g, w in paired(got, want):
        where = f"{what} output {key}".strip()
        if isinstance(w, list):
            assert isinstance(g, list), f"{where}: {type(g).__name__}, expected a sequence"
            compare_outputs(g, w, rtol, atol, dtype, f"{where} item")
            continue
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{where}: shape {g.shape}, expected {w.shape}"
        if dtype:
            assert g.dtype == w.dtype, f"{where}: dtype {g.dtype}, expected {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=where)


def ort_session(model):
    """An ONNX Runtime CPU session of a model file or ModelProto."""
    import onnxruntime as ort

    src = str(model) if isinstance(model, (str, os.PathLike)) else model.SerializeToString()
    return ort.InferenceSession(src, providers=["CPUExecutionProvider"])


def ort_outputs(model, feeds):
    """ONNX Runtime's outputs (a list, in the graph's order) of a model file
    or ModelProto on feeds (name -> array)."""
    return ort_session(model).run(None, feeds)


def check_with_ort(model_path, feeds, mod=None, run_flags=(), rtol=1e-7, atol=0, dtype=False):
    """`dvm run MOD RUN_FLAGS...` of the module mod (by default, the model
    compiled beside it) against ONNX Runtime's run of the model, on feeds,
    by compare_outputs; both outputs, (dvm's, ONNX Runtime's)."""
    from dvmtest.cli import compile_onnx, run_module

    want = ort_outputs(model_path, feeds)
    seqs = any(isinstance(w, list) for w in want)  # read from .pb files
    kinds = ["seq" if isinstance(w, list) else "tensor" for w in want] if seqs else None
    got = run_module(mod or compile_onnx(model_path), feeds, len(want), *run_flags, kinds=kinds)
    compare_outputs(got, want, rtol=rtol, atol=atol, dtype=dtype)
    return got, want
