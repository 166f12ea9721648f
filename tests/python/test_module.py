"""dvm.compile, dvm.load, Module: signatures, saving, running, dtypes, zero copy, errors."""
import ctypes
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import MODELS, ONNX_TYPES, add_model, bert_inputs
from dvmtest.onnxmodel import make_model
from onnx import TensorProto as T
from onnx import helper as h

import dvm


def array_of(dtype, shape, rng):
    """Values that every dtype holds exactly."""
    vals = rng.integers(0, 2 if dtype == "bool" else 100, shape)
    if dtype == "bfloat16":
        import ml_dtypes
        return vals.astype(ml_dtypes.bfloat16)
    return vals.astype(dtype)


def test_compile_from_path_bytes_and_proto(tmp_path):
    mp = add_model()
    path = tmp_path / "add.onnx"
    path.write_bytes(mp.SerializeToString())
    x, y = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    for src in (str(path), path, mp.SerializeToString(), mp):
        out = dvm.compile(src).run({"x": x, "y": y})
        np.testing.assert_array_equal(out["z"], x + y)


def test_signatures(bert):
    fn = bert.functions["main"]
    assert [(v.name, v.kind, v.dtype, v.shape) for v in fn.inputs] == [
        ("ids", "tensor", np.dtype(np.int64), ["batch", "seq"]),
        ("mask", "tensor", np.dtype(np.int64), ["batch", "seq"])]
    assert [(v.name, v.dtype, v.shape) for v in fn.outputs] == [("hidden", np.dtype(np.float32), ["batch", "seq", 32])]
    assert fn.symbols == {"batch": (1, 64), "seq": (1, 64)}
    assert "batch" in fn.peak_memory and "seq" in fn.peak_memory
    assert fn.peak_bytes(batch=2, seq=8) > 0
    with pytest.raises(dvm.InvalidInput, match="seq"):
        fn.peak_bytes(batch=2)


def test_save_and_load_maps_the_file(bert, tmp_path):
    path = tmp_path / "bert.dvmb"
    bert.save(path)
    m = dvm.load(path)
    m.save(tmp_path / "copy.dvmb")
    assert (tmp_path / "copy.dvmb").read_bytes() == path.read_bytes()
    assert m.functions["main"].symbols == bert.functions["main"].symbols
    rng = np.random.default_rng(0)
    from conftest import bert_inputs
    feeds = bert_inputs(rng, 2, 5)
    np.testing.assert_array_equal(m.run(feeds)["hidden"], bert.run(feeds)["hidden"])


def test_packed_weights_plain_pages_are_given_back(tmp_path):
    """A MatMul weight packed at load is held once: the pages of its plain
    bytes in the module's copy of the file go back to the system
    (vm/extdata.c), and every row count reads the packed form. A weight
    that something also reads plain (Transpose) is kept whole."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((512, 384)).astype(np.float32)  # 768 KiB
    mp = make_model([h.make_node("MatMul", ["x", "w"], ["y"])],
                    [("x", T.FLOAT, ["m", 512])], [("y", T.FLOAT, None)],
                    [h.make_tensor("w", T.FLOAT, w.shape, w.tobytes(), raw=True)])
    path = tmp_path / "mm.dvmb"
    dvm.compile(mp, dims={"m": (1, 1024)}).save(path)
    m = dvm.load(path)
    released = m._sizes()["released_bytes"]
    assert w.nbytes - 8192 <= released <= w.nbytes  # all but the partial end pages
    for rows in (1, 2, 8, 97, 300):
        x = rng.standard_normal((rows, 512)).astype(np.float32)
        np.testing.assert_allclose(m.run({"x": x})["y"], x.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
    assert dvm.Module(path.read_bytes())._sizes()["released_bytes"] == 0  # its own copy: kept
    # the same weight also read plain: kept, and right
    mp.graph.node.append(h.make_node("Transpose", ["w"], ["wt"]))
    mp.graph.output.append(h.make_tensor_value_info("wt", T.FLOAT, None))
    dvm.compile(mp, dims={"m": (1, 1024)}).save(path)
    m = dvm.load(path)
    assert m._sizes()["released_bytes"] == 0
    out = m.run({"x": np.ones((3, 512), np.float32)})
    np.testing.assert_array_equal(out["wt"], w.T)
    np.testing.assert_allclose(out["y"], np.ones((3, 512)) @ w.astype(np.float64), rtol=1e-4, atol=1e-3)


OVERWRITE = """
import sys, numpy as np, dvm
path, other = sys.argv[1], sys.argv[2]
m = dvm.load(path)
x = np.random.default_rng(1).standard_normal((5, 64)).astype(np.float32)
ids = np.array([3, 0, 7], np.int64)
before = m.run({"x": x, "ids": ids})
new = open(other, "rb").read()
with open(path, "r+b") as f:  # in place, as cp and rsync --inplace write
    f.write(new)
same = m.run({"x": x, "ids": ids})
with open(path, "r+b") as f:
    f.truncate(0)
cut = m.run({"x": x, "ids": ids})
for out in (same, cut):
    for k in before:
        np.testing.assert_array_equal(out[k], before[k])
print("unchanged")
"""


def test_a_file_overwritten_after_load_changes_nothing(tmp_path):
    """A loaded module depends on its file no more: written over in place
    by a model of the same size, then cut to nothing, the file neither
    changes an answer nor ends the process (SIGBUS) (vm/module.c)."""
    def build(seed):
        rng = np.random.default_rng(seed)
        w = rng.standard_normal((64, 48)).astype(np.float32)  # packed
        b = rng.standard_normal(48).astype(np.float32)  # read plain
        e = rng.standard_normal((10, 48)).astype(np.float32)  # a Gather's table
        return make_model([h.make_node("MatMul", ["x", "w"], ["xw"]), h.make_node("Add", ["xw", "b"], ["y"]),
                           h.make_node("Gather", ["e", "ids"], ["g"])],
                          [("x", T.FLOAT, ["m", 64]), ("ids", T.INT64, ["n"])],
                          [("y", T.FLOAT, None), ("g", T.FLOAT, None)],
                          [h.make_tensor(k, T.FLOAT, v.shape, v.tobytes(), raw=True)
                           for k, v in (("w", w), ("b", b), ("e", e))])
    path, other = tmp_path / "m.dvmb", tmp_path / "other.dvmb"
    dvm.compile(build(1)).save(path)
    dvm.compile(build(2)).save(other)
    assert path.stat().st_size == other.stat().st_size and path.read_bytes() != other.read_bytes()
    p = subprocess.run([sys.executable, "-c", OVERWRITE, str(path), str(other)], capture_output=True, text=True,
                       env=os.environ, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "unchanged", (p.returncode, p.stderr[-2000:])


@pytest.mark.parametrize("dtype", list(ONNX_TYPES))
def test_round_trip_every_dtype(dtype):
    t = ONNX_TYPES[dtype]
    m = dvm.compile(make_model([h.make_node("Identity", ["x"], ["same"]),
                                h.make_node("Concat", ["x", "x"], ["twice"], axis=0)],
                               [("x", t, ["n", 3])], [("same", t, None), ("twice", t, None)]))
    assert str(m.functions["main"].inputs[0].dtype) == dtype
    rng = np.random.default_rng(1)
    for n in (1, 2, 5):
        x = array_of(dtype, (n, 3), rng)
        out = m.run({"x": x})
        assert out["same"].dtype == x.dtype and out["twice"].dtype == x.dtype
        np.testing.assert_array_equal(out["same"], x)
        np.testing.assert_array_equal(out["twice"], np.concatenate([x, x]))


def test_zero_copy_in_and_out():
    m = dvm.compile(make_model([h.make_node("Reshape", ["x", "s"], ["flat"]), h.make_node("Add", ["x", "x"], ["sum"])],
                               [("x", T.FLOAT, ["n", 4])], [("flat", T.FLOAT, None), ("sum", T.FLOAT, None)],
                               [h.make_tensor("s", T.INT64, [1], [-1])]))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = m.run([x])
    # the VM's view of the input is the input's own memory, and the result wraps it
    assert out["flat"].ctypes.data == x.ctypes.data
    assert isinstance(out["flat"].base, dvm.Tensor) and out["flat"].base.data_ptr == x.ctypes.data
    # a computed result is the VM's memory, wrapped, not copied
    s = out["sum"]
    assert not s.flags.owndata and isinstance(s.base, dvm.Tensor) and s.base.data_ptr == s.ctypes.data
    np.testing.assert_array_equal(s, x + x)
    s += 1  # results are the caller's, writable
    np.testing.assert_array_equal(x, np.arange(12, dtype=np.float32).reshape(3, 4))  # input untouched
    # a non-contiguous input is copied to a contiguous one (and still right)
    xt = np.arange(12, dtype=np.float32).reshape(4, 3).T
    np.testing.assert_array_equal(m.run([xt])["sum"], xt + xt)
    # a non-native byte order is converted
    xb = x.astype(">f4")
    np.testing.assert_array_equal(m.run([xb])["sum"], x + x)


def test_constant_results_are_read_only():
    c = h.make_tensor("c", T.FLOAT, [3], [1.0, 2.0, 3.0])
    m = dvm.compile(make_model([h.make_node("Identity", ["c"], ["k"]), h.make_node("Identity", ["x"], ["y"])],
                               [("x", T.FLOAT, [3])], [("k", T.FLOAT, None), ("y", T.FLOAT, None)], [c]))
    out = m.run({"x": np.zeros(3, np.float32)})
    np.testing.assert_array_equal(out["k"], [1, 2, 3])
    if out["k"].base is not None and not out["k"].flags.owndata:  # a view of the module's constant
        assert not out["k"].flags.writeable
        with pytest.raises(ValueError):
            out["k"][0] = 5


def test_constant_results_go_out_through_dlpack_as_copies(tmp_path):
    """A result that is a module constant (here of a module loaded from its
    file, whose bytes are read-only) is read-only through its dvm.Tensor
    too: .numpy() is read-only and __dlpack__, which cannot mark a tensor
    read-only, exports a copy (copy=False: BufferError), so writing into
    what a consumer got changes no later answer and faults nothing. Other
    results are exported in place."""
    c = h.make_tensor("c", T.FLOAT, [3], [1.0, 2.0, 3.0])
    path = tmp_path / "c.dvmb"
    dvm.compile(make_model([h.make_node("Identity", ["c"], ["k"]), h.make_node("Neg", ["x"], ["y"])],
                           [("x", T.FLOAT, [3])], [("k", T.FLOAT, None), ("y", T.FLOAT, None)], [c])).save(path)
    m = dvm.load(path)
    out = m.run({"x": np.ones(3, np.float32)})
    k, y = out["k"].base, out["y"].base
    assert isinstance(k, dvm.Tensor) and isinstance(y, dvm.Tensor)
    assert not k.numpy().flags.writeable and y.numpy().flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        k.__dlpack__(copy=False)
    def consume(t, **kw):
        """Writes 7s where DLPack says t's data is, as a writing consumer
        (torch.from_dlpack) may; the data's address."""
        cap = t.__dlpack__(**kw)
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        data = ctypes.c_void_p.from_address(get(cap, b"dltensor")).value  # DLTensor.data comes first
        ctypes.memmove(data, np.full(3, 7, np.float32).ctypes.data, 12)
        return data
    for kw in ({}, {"copy": None}, {"copy": True}):
        assert consume(k, **kw) != k.data_ptr
    np.testing.assert_array_equal(m.run({"x": np.ones(3, np.float32)})["k"], [1, 2, 3])
    assert consume(y) == y.data_ptr
    np.testing.assert_array_equal(out["y"], [7, 7, 7])


def test_scalars_lists_and_call(add_module):
    out = add_module.run({"x": [1.0, 2.0], "y": [3.0, 4.0]})
    np.testing.assert_array_equal(out["z"], [4, 6])
    m = dvm.compile(add_model(shape=()))
    assert m.run({"x": 1.5, "y": 2})["z"] == np.float32(3.5)
    np.testing.assert_array_equal(add_module(np.ones(2, np.float32), np.ones(2, np.float32))["z"], [2, 2])
    np.testing.assert_array_equal(add_module(x=np.ones(1, np.float32), y=np.ones(1, np.float32))["z"], [2])


def test_errors_carry_the_vms_message(add_module, bert):
    x = np.ones(3, np.float32)
    with pytest.raises(dvm.InvalidInput, match=r'input "x": dtype must be f32, got i64') as e:
        add_module.run({"x": x.astype(np.int64), "y": x})
    assert e.value.code == "INVALID_ARGUMENT" and isinstance(e.value, dvm.Error)
    with pytest.raises(dvm.InvalidInput, match=r'input "y": rank must be 1, got 2'):
        add_module.run({"x": x, "y": x.reshape(1, 3)})
    with pytest.raises(dvm.InvalidInput, match=r'input "y" dim 0 \(n\) must be 3, the value of n bound by an earlier input, got 2'):
        add_module.run({"x": x, "y": x[:2]})
    with pytest.raises(dvm.InvalidInput, match=r'input 1 \("y"\) is empty'):
        add_module.run({"x": x})
    with pytest.raises(dvm.InvalidInput, match=r'takes 2 inputs, got 3'):
        add_module.run([x, x, x])
    with pytest.raises(dvm.InvalidInput, match=r"has no input named 'w'"):
        add_module.run({"x": x, "y": x, "w": x})
    with pytest.raises(dvm.InvalidInput, match=r'input "ids" dim 1 \(seq\) must be <= 64, got 65'):
        bert.run({"ids": np.zeros((1, 65), np.int64), "mask": np.ones((1, 65), np.int64)})
    with pytest.raises(dvm.InvalidInput, match="NumPy dtype complex64 has no dvm dtype"):
        add_module.run({"x": x.astype(np.complex64), "y": x})
    with pytest.raises(dvm.InvalidInput, match='input "x": dtype must be f32, got u16'):
        add_module.run({"x": x.astype(np.uint16), "y": x})
    with pytest.raises(dvm.InvalidInput, match='input "y": could not convert string to float'):
        add_module.run({"x": x, "y": ["a", "b", "c"]})
    with pytest.raises(dvm.Error, match='no function "nope"'):
        add_module.run({"x": x, "y": x}, function="nope")
    with pytest.raises(ValueError, match="unknown device"):
        add_module.run({"x": x, "y": x}, device="tpu")
    with pytest.raises(dvm.Error, match="bad magic"):
        dvm.Module(b"not a module at all, just some bytes")
    with pytest.raises(dvm.Error) as e:
        dvm.load("/nonexistent/x.dvmb")
    assert e.value.code in ("NOT_FOUND", "IO")


def test_compile_disable_passes(bert):
    """disable= skips graph rewrites as `dvm compile --disable` does: the
    fixture's decomposed GELUs stay Erf chains, the results agree."""
    path, dims = os.path.join(MODELS, "bert.onnx"), [("batch", 1, 64), ("seq", 1, 64)]
    # (with epilogue on the Gelu is its product's: activation="Gelu")
    assert 'activation="Gelu"' in dvm._dvm.compile(path, dims, dump_ir=True, lower=False)[1]
    assert "= Gelu(" in dvm._dvm.compile(path, dims, dump_ir=True, lower=False, disable=["epilogue"])[1]
    ir = dvm._dvm.compile(path, dims, dump_ir=True, lower=False, disable=["gelu"])[1]
    assert "= Gelu(" not in ir and "= Erf(" in ir
    plain = dvm.compile(path, dims={"batch": (1, 64), "seq": (1, 64)},
                        disable=["layernorm", "gelu", "epilogue", "skiplayernorm", "rmsnorm"])
    feeds = bert_inputs(np.random.default_rng(2), 2, 7)
    a, b = bert.run(feeds), plain.run(feeds)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="no pass 'nosuch'"):
        dvm.compile(add_model(), disable="nosuch")


def test_compile_warns_of_contradicted_declarations():
    """A declared output type that inference contradicts is a UserWarning
    (as `dvm compile` prints it), and the module uses the inferred type."""
    m = make_model([h.make_node("Neg", ["x"], ["y"], name="n")], [("x", T.FLOAT, ["N", 4])], [("y", T.FLOAT, ["N", 3])])
    with pytest.warns(UserWarning) as w:
        mod = dvm.compile(m)
    assert [str(x.message) for x in w] == [
        'output "y" is declared f32[?, 3], inference gives f32[N, 4] (node "n"): the declaration is ignored']
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(mod.run({"x": x})["y"], -x)

def test_compile_errors():
    bad = make_model([h.make_node("NoSuchOp", ["x"], ["y"])], [("x", T.FLOAT, [2])], [("y", T.FLOAT, None)])
    with pytest.raises(dvm.UnsupportedOp, match="NoSuchOp") as e:
        dvm.compile(bad)
    assert isinstance(e.value, dvm.CompileError)
    with pytest.raises(dvm.CompileError):
        dvm.compile(b"\x08\x07garbage")
    with pytest.raises(dvm.CompileError, match='no input of the model has a dim named "zzz"'):
        dvm.compile(add_model(), dims={"zzz": (1, 2)})
    with pytest.raises(TypeError, match="unknown options"):
        dvm.compile(add_model(), fast=True)
    m = dvm.compile(add_model(), dims={"n": (2, 4)})
    with pytest.raises(dvm.InvalidInput, match=r"must be >= 2, got 1"):
        m.run({"x": np.ones(1, np.float32), "y": np.ones(1, np.float32)})


def test_device_auto_and_cuda_absent(add_module):
    dev, why = add_module.auto_device
    assert dev in ("cpu", "cuda") and why
    ok, what = dvm._dvm.probe("cuda")
    if not ok:
        with pytest.raises(dvm.DeviceError, match="CUDA|cuda"):
            add_module.run({"x": [1.0], "y": [2.0]}, device="cuda")
        with pytest.raises(dvm.DeviceError):
            dvm.device_info("cuda")


def test_help_on_every_public_name():
    for name in dvm.__all__:
        obj = getattr(dvm, name)
        if name == "__version__":
            continue
        doc = inspect.getdoc(obj)
        assert doc and len(doc) > 20, f"dvm.{name} has no useful docstring"
    for meth in ("run", "save", "functions"):
        assert inspect.getdoc(getattr(dvm.Module, meth)), meth
    for meth in ("run", "get_inputs", "get_outputs", "get_modelmeta"):
        assert inspect.getdoc(getattr(dvm.InferenceSession, meth)), meth
    assert "results_on_device" in str(inspect.signature(dvm.Module.run))
    assert os.path.exists(os.path.join(os.path.dirname(dvm.__file__), "py.typed"))
    assert os.path.exists(os.path.join(os.path.dirname(dvm.__file__), "_dvm.pyi"))


def test_sequences_in_and_out():
    """A sequence input is a list of arrays, a sequence result a tuple of
    them; an optional is [] or [value] in, () or (value,) out."""
    seq = h.make_tensor_sequence_value_info
    g = h.make_graph([h.make_node("SequenceInsert", ["s", "x"], ["t"]), h.make_node("OptionalGetElement", ["o"], ["v"])],
                     "g", [seq("s", T.FLOAT, None), h.make_tensor_value_info("x", T.FLOAT, [2]),
                           h.make_value_info("o", h.make_optional_type_proto(h.make_tensor_type_proto(T.INT64, None)))],
                     [seq("t", T.FLOAT, None), h.make_tensor_value_info("v", T.INT64, None)])
    m = dvm.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))
    kinds = {v.name: (v.kind, v.dtype) for v in m.functions["main"].inputs}
    assert kinds["s"] == ("tuple", np.dtype("float32")) and kinds["o"] == ("tuple", np.dtype("int64")), kinds
    a, x = np.arange(3, dtype=np.float32), np.ones(2, np.float32)
    out = m.run({"s": [a], "x": x, "o": [np.arange(4)]})
    assert isinstance(out["t"], tuple) and len(out["t"]) == 2
    np.testing.assert_array_equal(out["t"][0], a)
    np.testing.assert_array_equal(out["t"][1], x)
    np.testing.assert_array_equal(out["v"], np.arange(4))
    with pytest.raises(dvm.InvalidInput, match="empty optional"):
        m.run({"s": [], "x": x, "o": None})
    with pytest.raises(dvm.InvalidInput, match="pass a list of arrays"):
        m.run({"s": a, "x": x, "o": []})
    with pytest.raises(dvm.InvalidInput, match="every item must be a f32 tensor"):
        m.run({"s": [np.arange(2)], "x": x, "o": []})
