"""dvm.InferenceSession against onnxruntime.InferenceSession on the fixture
models: the same calling code runs with either module and gives the same
outputs."""
import os

import numpy as np
import onnxruntime
import pytest
from conftest import MODELS, add_model

import dvm

SHAPES = {  # the shapes of tests/models/test_models.py, by model
    "mlp": [{"x": (1, 16)}, {"x": (7, 16)}, {"x": (64, 16)}],
    "bert": [{"ids": (1, 1)}, {"ids": (2, 13)}, {"ids": (3, 64)}],
    "resnet": [{"image": (1, 3, 8, 8)}, {"image": (2, 3, 17, 23)}],
    "control": [{"x": (1,)}, {"x": (31,)}, {"x": (100,)}],
}
NUMPY_OF = {"tensor(float)": np.float32, "tensor(int64)": np.int64}


def user_code(rt, path, shapes, seed):
    """What a user of onnxruntime writes; `rt` is onnxruntime or dvm."""
    sess = rt.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in sess.get_inputs():
        shape = shapes.get(inp.name) or shapes["ids"]  # the mask has the ids' shape
        if NUMPY_OF[inp.type] == np.int64:
            feeds[inp.name] = (rng.integers(0, 100, shape) if inp.name == "ids" else np.ones(shape)).astype(np.int64)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
    names = [o.name for o in sess.get_outputs()]
    everything = sess.run(None, feeds)
    last_only = sess.run(names[-1:], feeds)
    sig = ([(i.name, i.type, i.shape) for i in sess.get_inputs()], [(o.name, o.type) for o in sess.get_outputs()])
    return sig, everything, last_only


@pytest.mark.parametrize("name", list(SHAPES))
def test_same_outputs_as_onnxruntime(name):
    path = os.path.join(MODELS, name + ".onnx")
    for i, shapes in enumerate(SHAPES[name]):
        want_sig, want, want_last = user_code(onnxruntime, path, shapes, i)
        got_sig, got, got_last = user_code(dvm, path, shapes, i)
        assert got_sig == want_sig
        assert len(got) == len(want)
        for g, w in zip(got + got_last, want + want_last, strict=True):
            assert isinstance(g, np.ndarray) and g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{name} {shapes}")


def test_cache_and_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("DVM_CACHE_DIR", str(tmp_path / "cache"))
    path = os.path.join(MODELS, "mlp.onnx")
    s1 = dvm.InferenceSession(path)
    cached = os.listdir(tmp_path / "cache")
    assert len(cached) == 1 and cached[0].endswith(".dvmb")
    first = os.stat(tmp_path / "cache" / cached[0]).st_ino
    with open(path, "rb") as f:
        s2 = dvm.InferenceSession(f.read())  # same bytes: the same cached file, not compiled again
    assert os.listdir(tmp_path / "cache") == cached
    assert os.stat(tmp_path / "cache" / cached[0]).st_ino == first
    s3 = dvm.InferenceSession(tmp_path / "cache" / cached[0])  # a .dvmb directly
    x = np.ones((3, 16), np.float32)
    outs = [s.run(None, {"x": x})[0] for s in (s1, s2, s3)]
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    # a damaged cache file is compiled again
    (tmp_path / "cache" / cached[0]).write_bytes(b"junk")
    np.testing.assert_array_equal(dvm.InferenceSession(path).run(None, {"x": x})[0], outs[0])


def test_cache_bound(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("DVM_CACHE_DIR", str(cache))
    mlp, bert = os.path.join(MODELS, "mlp.onnx"), os.path.join(MODELS, "bert.onnx")
    dvm.InferenceSession(mlp)
    (entry,) = os.listdir(cache)
    os.utime(cache / entry, (1, 1))  # long unused
    (cache / "tmpx.tmp").write_bytes(b"half")  # a writer that died an hour ago or more
    os.utime(cache / "tmpx.tmp", (1, 1))
    (cache / "tmpy.tmp").write_bytes(b"half")  # one writing now
    (cache / "mine.dvmb").write_bytes(b"not the cache's")  # not named as entries are: kept
    os.utime(cache / "mine.dvmb", (1, 1))
    monkeypatch.setenv("DVM_CACHE_MAX_BYTES", "1")  # below any entry: only the newest stays
    dvm.InferenceSession(bert)
    left = sorted(os.listdir(cache))
    assert len(left) == 3 and entry not in left and "tmpy.tmp" in left and "mine.dvmb" in left, left
    # a hit renews its entry's time, so the entries used last are kept
    newest = next(n for n in left if n.endswith(".dvmb") and n != "mine.dvmb")
    os.utime(cache / newest, (1, 1))
    dvm.InferenceSession(bert)  # a hit: renewed
    assert os.stat(cache / newest).st_mtime > 1
    monkeypatch.setenv("DVM_CACHE_MAX_BYTES", str(10 << 30))
    dvm.InferenceSession(mlp)
    assert len([n for n in os.listdir(cache) if n.endswith(".dvmb") and n != "mine.dvmb"]) == 2
    monkeypatch.setenv("DVM_CACHE_MAX_BYTES", "lots")
    with pytest.raises(dvm.Error, match="DVM_CACHE_MAX_BYTES: want a number of bytes"):
        dvm.InferenceSession(mlp)


def test_metadata_options_and_unsupported(tmp_path):
    path = os.path.join(MODELS, "bert.onnx")
    want = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).get_modelmeta()
    opts = dvm.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = dvm.InferenceSession(path, sess_options=opts)
    got = sess.get_modelmeta()
    for key in ("producer_name", "graph_name", "domain", "description", "version", "custom_metadata_map"):
        assert getattr(got, key) == getattr(want, key), key
    assert sess.get_providers() in (["CPUExecutionProvider"], ["CUDAExecutionProvider", "CPUExecutionProvider"])
    sess2 = dvm.InferenceSession(path, sess_options=onnxruntime.SessionOptions())  # ORT's options work too
    assert sess2.get_inputs()[0].name == "ids"
    with pytest.raises(dvm.Error, match="provider 'TensorrtExecutionProvider' is not supported"):
        dvm.InferenceSession(path, providers=["TensorrtExecutionProvider"])
    with pytest.raises(dvm.Error, match="end_profiling is not supported"):
        sess.end_profiling()
    with pytest.raises(dvm.InvalidInput, match="no output named 'nope'"):
        sess.run(["nope"], {"ids": np.ones((1, 2), np.int64), "mask": np.ones((1, 2), np.int64)})
    with pytest.raises(dvm.InvalidInput, match='input "ids": dtype must be i64, got f32'):
        sess.run(None, {"ids": np.ones((1, 2), np.float32), "mask": np.ones((1, 2), np.int64)})
    m = dvm.InferenceSession(add_model().SerializeToString())
    assert [(i.name, i.type, i.shape) for i in m.get_inputs()] == [("x", "tensor(float)", ["n"]),
                                                                 ("y", "tensor(float)", ["n"])]


REAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "real", "models")
REAL_CASES = {  # the ONNX files the silero-vad and rapidocr-onnxruntime wheels ship (tests/real)
    "ch_PP-OCRv4_det_infer.onnx": [{"x": (1, 3, 64, 96)}, {"x": (2, 3, 96, 160)}],
    "ch_PP-OCRv4_rec_infer.onnx": [{"x": (1, 3, 48, 80)}, {"x": (3, 3, 48, 320)}],
    "ch_ppocr_mobile_v2.0_cls_infer.onnx": [{"x": (2, 3, 48, 192)}],
    "silero_vad_op18_ifless.onnx": [{"input": (1, 512), "state": (2, 1, 128), "sr": ()},
                                    {"input": (3, 256), "state": (2, 3, 128), "sr": ()}],
}


def real_model_code(rt, path, shapes, seed):
    """The same user code for a packaged model: feeds by the session's own
    input list, all outputs."""
    sess = rt.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in sess.get_inputs():
        if inp.name == "sr":
            feeds["sr"] = np.array(16000 if shapes["input"][1] == 512 else 8000, np.int64)
        else:
            feeds[inp.name] = (0.5 * rng.standard_normal(shapes[inp.name])).astype(np.float32)
    return sess.run(None, feeds)


@pytest.mark.parametrize("name", sorted(REAL_CASES))
def test_packaged_models_same_outputs_as_onnxruntime(name):
    path = os.path.join(REAL, name)
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: setup.sh fetches it (tests/real/fetch_models.py)")
    for i, shapes in enumerate(REAL_CASES[name]):
        want, got = real_model_code(onnxruntime, path, shapes, i), real_model_code(dvm, path, shapes, i)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.dtype == w.dtype, (name, shapes)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max())),
                                       err_msg=f"{name} {shapes}")


def iobinding_code(rt, path, x):
    """onnxruntime's IO binding and OrtValue calls, as a user writes them."""
    sess = rt.InferenceSession(path, providers=["CPUExecutionProvider"])
    io = sess.io_binding()
    io.bind_cpu_input("x", x)
    io.bind_output("y", "cpu")
    sess.run_with_iobinding(io)
    first = io.copy_outputs_to_cpu()[0]
    v = io.get_outputs()[0]
    facts = (v.device_name(), v.shape(), v.data_type(), v.is_tensor())
    io.clear_binding_inputs()
    io.bind_ortvalue_input("x", rt.OrtValue.ortvalue_from_numpy(2 * x))
    sess.run_with_iobinding(io)
    second = io.copy_outputs_to_cpu()[0]
    third = sess.run_with_ort_values(["y"], {"x": rt.OrtValue.ortvalue_from_numpy(3 * x)})[0]
    return facts, first, second, third.numpy(), third.data_type()


def test_iobinding_as_onnxruntime():
    path = os.path.join(MODELS, "mlp.onnx")
    x = np.random.default_rng(3).standard_normal((5, 16)).astype(np.float32)
    got = iobinding_code(dvm, path, x)
    if os.environ.get("DVM_SANITIZED"):
        # ONNX Runtime's IO binding throws C++ exceptions inside, which abort
        # in a Python that has the ASan runtime preloaded: its plain run
        # gives the values there, and the facts are ORT's spelling of them
        ref = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        ys = [ref.run(["y"], {"x": k * x})[0] for k in (1, 2, 3)]
        want = (("cpu", [5, 4], "tensor(float)", True), *ys, "tensor(float)")
    else:
        want = iobinding_code(onnxruntime, path, x)
    assert got[0] == want[0] and got[4] == want[4]
    for g, w in zip(got[1:4], want[1:4], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    sess = dvm.InferenceSession(path)
    io = sess.io_binding()
    with pytest.raises(dvm.Error, match="raw buffer pointer is not supported"):
        io.bind_input("x", "cpu", 0, np.float32, [5, 16], x.ctypes.data)
    with pytest.raises(dvm.Error, match="preallocated buffer is not supported"):
        io.bind_output("y", "cpu", 0, np.float32, [5, 4], 12345)
    io.bind_cpu_input("x", x)
    io.bind_output("y", "cuda")
    if sess.get_providers()[0] != "CUDAExecutionProvider":
        with pytest.raises(dvm.InvalidInput, match="session runs on the CPU"):
            sess.run_with_iobinding(io)
    with pytest.raises(dvm.Error, match="is not supported"):
        dvm.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
