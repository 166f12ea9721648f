"""The ONNX importer, through tests/compiler/import_dump (IR text or error).

Models are built with onnx.helper at test time, in a temporary folder. Valid
ones are checked through the printed IR; malformed ones through the error
code and message, which must start with the file's path and name the node,
tensor or attribute at fault.
"""
import os
import re
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from dvmtest.cli import assert_no_sanitizer_report  # noqa: E402
from dvmtest.onnxmodel import make_model, vi  # noqa: E402
from dvmtest.paths import BUILD, NODE_SUBSET  # noqa: E402

DUMP = os.environ.get("DVMC_IMPORT_DUMP", os.path.join(BUILD, "tests", "compiler", "import_dump"))

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def import_dump(path, memory=False):
    args = [DUMP] + (["--memory"] if memory else []) + [str(path)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert p.returncode in (0, 1), f"import_dump crashed ({p.returncode}): {p.stderr}"
    assert_no_sanitizer_report(p.stderr)  # which can come with exit code 1 too
    return p


def dump(path, memory=False):
    p = import_dump(path, memory)
    assert p.returncode == 0, p.stderr
    return p.stdout


def error(path, code, *fragments, memory=False):
    p = import_dump(path, memory)
    assert p.returncode == 1, p.stdout
    msg = p.stderr.strip()
    name = "<memory>" if memory else str(path)
    assert msg.startswith(f"import_dump: {code}: {name}: "), msg
    for f in fragments:
        assert f in msg, msg
    return msg


def onnx_file(m, tmp_path, name="model.onnx"):
    """The model (or bytes) written as tmp_path/name."""
    path = tmp_path / name
    path.write_bytes(m if isinstance(m, bytes) else m.SerializeToString())
    return path


def identity_model(init, **kw):
    """A model whose output is the initializer `init` (through Identity)."""
    return make_model([helper.make_node("Identity", [init.name], ["y"], name="id")], [],
                 [vi("y", init.data_type, None)], [init], **kw)


def const_line(out, name):
    m = re.search(rf"^  const  %{name}: (.*)$", out, re.M)
    assert m, out
    return m.group(1)


# ---- valid models ----


def test_simple_graph(tmp_path):
    m = make_model([helper.make_node("Add", ["x", "b"], ["s"], name="add0"),
                    helper.make_node("Relu", ["s"], ["y"])],
                   [vi("x", F, ["batch", "seq", 4])], [vi("y", F, ["batch", "seq", 4])],
                   [helper.make_tensor("b", F, [4], [1, 2, 3, 4.5])], name="main")
    out = dump(onnx_file(m, tmp_path))
    assert out.splitlines() == [
        "graph main",
        "  input  %x: f32[batch, seq, 4]",
        "  const  %b: f32[4] = [1.0, 2.0, 3.0, 4.5]",
        '  %s: ? = Add(%x, %b)  ; node "add0"',
        '  %y: ? = Relu(%s)  ; node "Relu_1"',
        "  output %y",
    ]


def test_memory_import_is_the_same(tmp_path):
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F, ["n"])], [vi("y", F, ["n"])])
    path = onnx_file(m, tmp_path)
    assert dump(path) == dump(path, memory=True)


def test_dim_params_shared_between_inputs(tmp_path):
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                   [vi("a", F, ["batch", "seq"]), vi("b", F, ["batch", 1]), vi("c", I64, [])],
                   [vi("y", F, None)])
    out = dump(onnx_file(m, tmp_path))
    assert "  input  %a: f32[batch, seq]\n" in out
    assert "  input  %b: f32[batch, 1]\n" in out
    assert "  input  %c: i64[]\n" in out


def input_dims(out, name):
    m = re.search(rf"^  input  %{name}: \w+\[(.*)\]$", out, re.M)
    assert m, out
    return [d.strip() for d in m.group(1).split(",")]


def test_unnamed_dims_become_fresh_symbols(tmp_path):
    x = vi("x", F, [None, "n", None])
    y = vi("y", F, [None])
    y.type.tensor_type.shape.dim[0].dim_param = ""  # an empty name is unnamed too
    m = make_model([helper.make_node("Add", ["x", "y"], ["z"])], [x, y], [vi("z", F, None)])
    out = dump(onnx_file(m, tmp_path))
    xd, yd = input_dims(out, "x"), input_dims(out, "y")
    fresh = [xd[0], xd[2], yd[0]]
    assert xd[1] == "n"
    assert len(set(fresh)) == 3 and "n" not in fresh and "?" not in fresh, out


def test_input_without_shape_has_unknown_rank(tmp_path):
    x = helper.make_tensor_value_info("x", F, None)
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [x], [vi("y", F, None)])
    assert "  input  %x: f32[*]\n" in dump(onnx_file(m, tmp_path))


def empty_tensor(name, dtype, dims):
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    return t


RAW_CASES = [
    (np.float32, TensorProto.FLOAT, [1.5, -2, 0.1], "f32[3] = [1.5, -2.0, 0.1]"),
    (np.float64, TensorProto.DOUBLE, [0.1, 1e300], "f64[2] = [0.1, 1e+300]"),
    (np.float16, TensorProto.FLOAT16, [0.5, -65504], "f16[2] = [0.5, -65504.0]"),
    (np.int8, TensorProto.INT8, [-128, 127], "i8[2] = [-128, 127]"),
    (np.int16, TensorProto.INT16, [-300, 300], "i16[2] = [-300, 300]"),
    (np.int32, TensorProto.INT32, [-(2**31), 7], "i32[2] = [-2147483648, 7]"),
    (np.int64, TensorProto.INT64, [-(2**63), 2**62], "i64[2] = [-9223372036854775808, 4611686018427387904]"),
    (np.uint8, TensorProto.UINT8, [0, 255], "u8[2] = [0, 255]"),
    (np.bool_, TensorProto.BOOL, [True, False], "bool[2] = [true, false]"),
    (np.uint16, TensorProto.UINT16, [0, 65535], "u16[2] = [0, 65535]"),
    (np.uint32, TensorProto.UINT32, [2**32 - 1, 7], "u32[2] = [4294967295, 7]"),
    (np.uint64, TensorProto.UINT64, [2**64 - 1, 2**63], "u64[2] = [18446744073709551615, 9223372036854775808]"),
]


@pytest.mark.parametrize("np_type,onnx_type,values,want", RAW_CASES, ids=lambda c: str(c))
def test_initializer_raw_data(tmp_path, np_type, onnx_type, values, want):
    t = empty_tensor("w", onnx_type, [len(values)])
    t.raw_data = np.array(values, np_type).tobytes()
    assert const_line(dump(onnx_file(identity_model(t), tmp_path)), "w") == want


def test_initializer_bfloat16_raw(tmp_path):
    t = empty_tensor("w", TensorProto.BFLOAT16, [2])
    t.raw_data = np.array([0x3FC0, 0xC000], np.uint16).tobytes()  # 1.5, -2
    assert const_line(dump(onnx_file(identity_model(t), tmp_path)), "w") == "bf16[2] = [1.5, -2.0]"


def test_initializer_bool_raw_bytes_become_0_or_1(tmp_path):
    t = empty_tensor("w", TensorProto.BOOL, [3])
    t.raw_data = bytes([0, 7, 255])
    assert const_line(dump(onnx_file(identity_model(t), tmp_path)), "w") == "bool[3] = [false, true, true]"


TYPED_CASES = [
    ("float_data", TensorProto.FLOAT, [1.25, -3], "f32[2] = [1.25, -3.0]"),
    ("double_data", TensorProto.DOUBLE, [2.5, 1e-300], "f64[2] = [2.5, 1e-300]"),
    ("int64_data", TensorProto.INT64, [-5, 2**40], "i64[2] = [-5, 1099511627776]"),
    ("int32_data", TensorProto.INT32, [-7, 2**30], "i32[2] = [-7, 1073741824]"),
    ("int32_data", TensorProto.INT16, [-32768, 32767], "i16[2] = [-32768, 32767]"),
    ("int32_data", TensorProto.INT8, [-1, 100], "i8[2] = [-1, 100]"),
    ("int32_data", TensorProto.UINT8, [200, 0], "u8[2] = [200, 0]"),
    ("int32_data", TensorProto.BOOL, [1, 0], "bool[2] = [true, false]"),
    ("int32_data", TensorProto.FLOAT16,
     [int(b) for b in np.array([1.5, -0.25], np.float16).view(np.uint16)], "f16[2] = [1.5, -0.25]"),
    ("int32_data", TensorProto.BFLOAT16, [0x3F80, 0x4049], "bf16[2] = [1.0, 3.140625]"),
    ("int32_data", TensorProto.UINT16, [65535, 0], "u16[2] = [65535, 0]"),
    ("uint64_data", TensorProto.UINT32, [2**32 - 1, 5], "u32[2] = [4294967295, 5]"),
    ("uint64_data", TensorProto.UINT64, [2**64 - 1, 2**63 + 1], "u64[2] = [18446744073709551615, 9223372036854775809]"),
]


@pytest.mark.parametrize("field,onnx_type,values,want", TYPED_CASES, ids=lambda c: str(c))
def test_initializer_typed_fields(tmp_path, field, onnx_type, values, want):
    t = empty_tensor("w", onnx_type, [len(values)])
    getattr(t, field).extend(values)
    assert const_line(dump(onnx_file(identity_model(t), tmp_path)), "w") == want


def test_initializer_scalar_empty_and_large(tmp_path):
    s = helper.make_tensor("s", F, [], [2.0])
    e = empty_tensor("e", F, [0, 3])
    big = helper.make_tensor("big", F, [4, 8], np.arange(32, dtype=np.float32).tobytes(), raw=True)
    m = make_model([helper.make_node("Concat", ["e", "e"], ["y"], axis=0)], [], [vi("y", F, None)],
                   [s, e, big])
    out = dump(onnx_file(m, tmp_path))
    assert const_line(out, "s") == "f32[] = [2.0]"
    assert const_line(out, "e") == "f32[0, 3] = []"
    assert const_line(out, "big") == "f32[4, 8]"


def external_model(tmp_path, location, offset=None, length=None, values=(1.0, 2.0, 3.0)):
    t = empty_tensor("w", F, [len(values)])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return onnx_file(identity_model(t), tmp_path)


def test_external_data(tmp_path):
    data = b"\xee" * 16 + np.array([1.0, 2.0, 3.0], np.float32).tobytes() + b"\xee" * 4
    (tmp_path / "weights.bin").write_bytes(data)
    path = external_model(tmp_path, "weights.bin", offset=16, length=12)
    assert const_line(dump(path), "w") == "f32[3] = [1.0, 2.0, 3.0]"
    assert const_line(dump(path, memory=True), "w") == "f32[3] = [1.0, 2.0, 3.0]"


def test_external_data_in_subfolder_without_offset(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "w.bin").write_bytes(np.array([4, 5, 6], np.float32).tobytes())
    path = external_model(tmp_path, "./data/w.bin")
    assert const_line(dump(path), "w") == "f32[3] = [4.0, 5.0, 6.0]"


def test_external_data_with_onnx_save(tmp_path):
    w = helper.make_tensor("w", F, [64, 64], np.ones(64 * 64, np.float32).tobytes(), raw=True)
    m = identity_model(w)
    onnx.save_model(m, str(tmp_path / "model.onnx"), save_as_external_data=True,
                    location="model.onnx.data", size_threshold=0)
    assert const_line(dump(tmp_path / "model.onnx"), "w") == "f32[64, 64]"


def test_constant_nodes(tmp_path):
    nodes = [
        helper.make_node("Constant", [], ["t"], value=helper.make_tensor("v", I64, [2], [1, -1])),
        helper.make_node("Constant", [], ["f"], value_float=0.5),
        helper.make_node("Constant", [], ["fs"], value_floats=[1.0, 2.5]),
        helper.make_node("Constant", [], ["i"], value_int=-3),
        helper.make_node("Constant", [], ["is"], value_ints=[4, 5, 6]),
        helper.make_node("Reshape", ["x", "t"], ["y"]),
    ]
    m = make_model(nodes, [vi("x", F, [2, 3])], [vi("y", F, None)])
    out = dump(onnx_file(m, tmp_path))
    assert const_line(out, "t") == "i64[2] = [1, -1]"
    assert const_line(out, "f") == "f32[] = [0.5]"
    assert const_line(out, "fs") == "f32[2] = [1.0, 2.5]"
    assert const_line(out, "i") == "i64[] = [-3]"
    assert const_line(out, "is") == "i64[3] = [4, 5, 6]"
    assert "Constant(" not in out  # constants, not nodes
    assert re.search(r"^  %y: \? = Reshape\(%x, %t\)", out, re.M), out


def test_attributes_printed(tmp_path):
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
        helper.make_node("LeakyRelu", ["t"], ["l"], alpha=0.01),
        helper.make_node("DepthToSpace", ["l"], ["d"], blocksize=2, mode="CRD"),
        helper.make_node("ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("v", F, [1], [0.0])),
        helper.make_node("Custom", ["d"], ["y"], names=["a", 'q"b'], scales=[0.5, 1e-5]),
    ]
    m = make_model(nodes, [vi("x", F, [1, 2, 3]), vi("s", I64, [1])], [vi("y", F, None), vi("c", F, None)])
    out = dump(onnx_file(m, tmp_path))
    assert "= Transpose(%x) {perm=[0, 2, 1]}" in out
    assert "= LeakyRelu(%t) {alpha=0.01}" in out
    assert '= DepthToSpace(%l) {blocksize=2, mode="CRD"}' in out
    assert "= ConstantOfShape(%s) {value=f32[1] [0.0]}" in out
    assert r'= Custom(%d) {names=["a", "q\"b"], scales=[0.5, 1e-05]}' in out


def test_omitted_optional_inputs_and_outputs(tmp_path):
    nodes = [helper.make_node("Resize", ["x", "", "sc"], ["r"], mode="nearest"),
             helper.make_node("Dropout", ["r"], ["y", ""])]
    m = make_model(nodes, [vi("x", F, [1, 1, 2, 2]), vi("sc", F, [4])], [vi("y", F, None)])
    out = dump(onnx_file(m, tmp_path))
    assert "= Resize(%x, none, %sc)" in out
    assert "%y: ?, none = Dropout(%r)" in out


def test_initializer_listed_as_input_is_a_constant(tmp_path):
    w = helper.make_tensor("w", F, [2], [1, 2])
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", F, [2]), vi("w", F, [2])],
                   [vi("y", F, None)], [w])
    out = dump(onnx_file(m, tmp_path))
    assert "input  %w" not in out and const_line(out, "w") == "f32[2] = [1.0, 2.0]"


def test_names_that_need_quotes(tmp_path):
    m = make_model([helper.make_node("Neg", ["/enc/layer.0/x:0"], ["out put"], name="n\t1")],
                   [vi("/enc/layer.0/x:0", F, [1])], [vi("out put", F, None)])
    out = dump(onnx_file(m, tmp_path))
    assert '%"out put": ? = Neg(%/enc/layer.0/x:0)  ; node "n\\t1"' in out


def test_default_domain_spelled_ai_onnx(tmp_path):
    n = helper.make_node("Neg", ["x"], ["y"], domain="ai.onnx")
    m = make_model([n], [vi("x", F, [1])], [vi("y", F, None)],
                   opsets=[helper.make_opsetid("ai.onnx", 13), helper.make_opsetid("ai.onnx.ml", 3)])
    assert "= Neg(%x)" in dump(onnx_file(m, tmp_path))


def test_if_with_outer_references(tmp_path):
    then_g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["t"])], "then", [],
                               [vi("t", F, None)])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, None)])
    nodes = [helper.make_node("If", ["c"], ["y"], name="if0", then_branch=then_g, else_branch=else_g)]
    m = make_model(nodes, [vi("c", TensorProto.BOOL, []), vi("x", F, ["n"])], [vi("y", F, None)],
                   [helper.make_tensor("w", F, [1], [2])])
    out = dump(onnx_file(m, tmp_path))
    assert out.splitlines()[-8:] == [
        '  %y: ? = If(%c)  ; node "if0"',
        "    else_branch: graph else",
        '      %e: ? = Neg(%x)  ; node "Neg_1"',
        "      output %e",
        "    then_branch: graph then",
        '      %t: ? = Add(%x, %w)  ; node "Add_2"',
        "      output %t",
        "  output %y",
    ]


def test_loop_with_outer_reference(tmp_path):
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "step"], ["acc2"]), helper.make_node("Identity", ["cond"], ["cond2"])],
        "body", [vi("i", I64, []), vi("cond", TensorProto.BOOL, []), vi("acc", F, ["n"])],
        [vi("cond2", TensorProto.BOOL, []), vi("acc2", F, ["n"])])
    nodes = [helper.make_node("Loop", ["trip", "", "a0"], ["a"], body=body)]
    m = make_model(nodes, [vi("trip", I64, []), vi("a0", F, ["n"]), vi("step", F, ["n"])], [vi("a", F, None)])
    out = dump(onnx_file(m, tmp_path))
    assert "= Loop(%trip, none, %a0)" in out
    assert "    body: graph body\n      input  %i: i64[]\n      input  %cond: bool[]\n" \
           "      input  %acc: f32[n]\n" in out
    assert "      %acc2: ? = Add(%acc, %step)" in out


def test_many_nodes(tmp_path):
    n = 20000
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(n)]
    m = make_model(nodes, [vi("v0", F, ["n"])], [vi(f"v{n}", F, None)])
    out = dump(onnx_file(m, tmp_path))
    assert out.count("= Relu(") == n and f"  output %v{n}\n" in out


# ---- malformed and refused models ----


def test_missing_file(tmp_path):
    error(tmp_path / "nope.onnx", "not found", "cannot open")


def test_directory(tmp_path):
    error(tmp_path, "invalid argument", "not a regular file")


def small_valid():
    return make_model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F, [2])], [vi("y", F, None)])


def test_truncated_file(tmp_path):
    data = small_valid().SerializeToString()
    error(onnx_file(data[: len(data) - 7], tmp_path), "corrupt", "malformed")


def test_not_a_protobuf(tmp_path):
    error(onnx_file(b"\xff" * 16, tmp_path), "corrupt", "not an ONNX model")
    error(onnx_file(b"just some text\n", tmp_path, "text.onnx"), "corrupt", "not an ONNX model")


def test_empty_file(tmp_path):
    error(onnx_file(b"", tmp_path), "corrupt", "has no graph")


@pytest.mark.parametrize("opset", [0, 29])
def test_unsupported_opset(tmp_path, opset):
    m = small_valid()
    m.opset_import[0].version = opset
    error(onnx_file(m, tmp_path), "unimplemented", f"opset {opset} of the default domain is not supported")


def test_no_default_opset(tmp_path):
    m = small_valid()
    m.opset_import[0].domain = "ai.onnx.ml"
    error(onnx_file(m, tmp_path), "corrupt", "is in the default ONNX domain, but the model imports no opset of it")
    del m.opset_import[:]
    error(onnx_file(m, tmp_path), "corrupt", "the model imports no opset of the default ONNX domain")


def test_other_domain_only(tmp_path):
    """A model importing only a domain dvm lacks: its first node is refused
    by name and domain."""
    n = helper.make_node("Binarizer", ["x"], ["y"], name="b1", domain="org.pytorch.aten")
    m = make_model([n], [vi("x", F, [2])], [vi("y", F, None)], opsets=[helper.make_opsetid("org.pytorch.aten", 1)])
    error(onnx_file(m, tmp_path), "unimplemented", 'node "b1" (Binarizer): is in domain "org.pytorch.aten"')


def test_unknown_domain(tmp_path):
    n = helper.make_node("Gelu", ["x"], ["y"], name="g1", domain="org.pytorch.aten")
    m = make_model([n], [vi("x", F, [2])], [vi("y", F, None)],
                   opsets=[helper.make_opsetid("", 17), helper.make_opsetid("org.pytorch.aten", 1)])
    error(onnx_file(m, tmp_path), "unimplemented", 'node "g1" (Gelu): is in domain "org.pytorch.aten"')


def test_unknown_ml_op(tmp_path):
    """An ai.onnx.ml op dvm lacks is refused naming op and domain."""
    n = helper.make_node("CastMap", ["x"], ["y"], name="b1", domain="ai.onnx.ml")
    m = make_model([n], [vi("x", F, [2])], [vi("y", F, None)], opsets=[helper.make_opsetid("ai.onnx.ml", 1)])
    error(onnx_file(m, tmp_path), "unimplemented", 'node "b1" (CastMap): op "CastMap" of domain ai.onnx.ml is not supported')


def test_string_tensor(tmp_path):
    t = empty_tensor("names", TensorProto.STRING, [2])
    t.string_data.extend([b"a", b"\xc3\xa9"])
    assert "string[2]" in dump(onnx_file(identity_model(t), tmp_path))


@pytest.mark.parametrize("field,values,fragment", [
    ("string_data", [b"a"], 'tensor "names": string_data has 1 values, expected 2'),
    ("raw_data", b"ab", 'tensor "names" of type STRING has its data in raw_data, expected string_data'),
    ("int64_data", [1, 2], 'tensor "names" of type STRING has its data in int64_data, expected string_data'),
])
def test_string_tensor_malformed(tmp_path, field, values, fragment):
    t = empty_tensor("names", TensorProto.STRING, [2])
    if field == "raw_data":
        t.raw_data = values
    else:
        getattr(t, field).extend(values)
    error(onnx_file(identity_model(t), tmp_path), "corrupt", fragment)


@pytest.mark.parametrize("onnx_type,name", [(TensorProto.COMPLEX64, "COMPLEX64"),
                                            (TensorProto.FLOAT8E4M3FN, "FLOAT8E4M3FN")])
def test_unsupported_element_type(tmp_path, onnx_type, name):
    t = empty_tensor("w", onnx_type, [0])
    error(onnx_file(identity_model(t), tmp_path), "unimplemented", f'tensor "w" has element type {name}')


def test_rank_9_initializer(tmp_path):
    t = empty_tensor("w", F, [1] * 9)
    t.raw_data = b"\0" * 4
    error(onnx_file(identity_model(t), tmp_path), "unimplemented", 'tensor "w" has rank 9, more than')


def test_rank_9_input(tmp_path):
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F, [1] * 9)], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "unimplemented", 'input "x" has rank 9')


def test_bad_raw_data_size(tmp_path):
    t = empty_tensor("w", F, [3])
    t.raw_data = b"\0" * 8
    error(onnx_file(identity_model(t), tmp_path), "corrupt", 'tensor "w": raw_data has 8 bytes, expected 12')


def test_typed_count_mismatch(tmp_path):
    t = empty_tensor("w", F, [3])
    t.float_data.extend([1, 2])
    error(onnx_file(identity_model(t), tmp_path), "corrupt", 'tensor "w": float_data has 2 values, expected 3')


def test_wrong_typed_field(tmp_path):
    t = empty_tensor("w", F, [2])
    t.int64_data.extend([1, 2])
    error(onnx_file(identity_model(t), tmp_path), "corrupt", "has its data in int64_data, expected float_data")


@pytest.mark.parametrize("field,onnx_type,value,name", [("uint64_data", TensorProto.UINT32, 2**32, "u32"),
                                                       ("int32_data", TensorProto.UINT16, 65536, "u16"),
                                                       ("int32_data", TensorProto.UINT16, -1, "u16")])
def test_typed_value_out_of_range(tmp_path, field, onnx_type, value, name):
    t = empty_tensor("w", onnx_type, [2])
    getattr(t, field).extend([1, value])
    error(onnx_file(identity_model(t), tmp_path), "corrupt", f"[1] = {value} is out of range for {name}")


def test_raw_and_typed_data(tmp_path):
    t = empty_tensor("w", F, [1])
    t.float_data.append(1)
    t.raw_data = b"\0" * 4
    error(onnx_file(identity_model(t), tmp_path), "corrupt", "both raw_data and float_data")


def test_no_data(tmp_path):
    error(onnx_file(identity_model(empty_tensor("w", F, [2])), tmp_path), "corrupt", 'tensor "w" has no data')


def test_negative_dim(tmp_path):
    t = empty_tensor("w", F, [2, -1])
    error(onnx_file(identity_model(t), tmp_path), "corrupt", 'tensor "w": dim 1 is -1, negative')


def test_element_count_overflow(tmp_path):
    t = empty_tensor("w", F, [2**40, 2**40])
    error(onnx_file(identity_model(t), tmp_path), "corrupt", "overflows dvm's limit of 2^48 elements")
    t = empty_tensor("w", F, [0, 2**62])  # no elements, but strides would overflow
    error(onnx_file(identity_model(t), tmp_path), "corrupt", "overflows dvm's limit of 2^48 elements")
    x = vi("x", F, [2**60])
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [x], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'input "x": dim 0 is 1152921504606846976, more than')


@pytest.mark.parametrize("onnx_type,value", [(TensorProto.INT8, 128), (TensorProto.UINT8, -1),
                                             (TensorProto.BOOL, 2), (TensorProto.FLOAT16, 70000)])
def test_int32_data_out_of_range(tmp_path, onnx_type, value):
    t = empty_tensor("w", onnx_type, [1])
    t.int32_data.append(value)
    error(onnx_file(identity_model(t), tmp_path), "corrupt", f"int32_data[0] = {value} is out of range")


def test_undefined_input(tmp_path):
    m = make_model([helper.make_node("Add", ["x", "nope"], ["y"], name="add1")], [vi("x", F, [1])],
                   [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'node "add1" (Add): input 1 "nope" is not defined')


def test_input_defined_by_a_later_node(tmp_path):
    m = make_model([helper.make_node("Neg", ["t"], ["y"]), helper.make_node("Neg", ["x"], ["t"])],
                   [vi("x", F, [1])], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'node "Neg_0" (Neg): input 0 "t" is not defined')


def test_duplicate_output(tmp_path):
    m = make_model([helper.make_node("Neg", ["x"], ["y"], name="a"), helper.make_node("Abs", ["x"], ["y"], name="b")],
                   [vi("x", F, [1])], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt",
          'node "b" (Abs): output "y" is already defined by node "a" (Neg)')


def test_output_redefines_an_input(tmp_path):
    m = make_model([helper.make_node("Neg", ["x"], ["x"], name="n")], [vi("x", F, [1])], [vi("x", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'node "n" (Neg): output "x" is already defined as an input')


def test_duplicate_initializer(tmp_path):
    a, b = helper.make_tensor("w", F, [1], [1]), helper.make_tensor("w", F, [1], [2])
    m = make_model([helper.make_node("Neg", ["w"], ["y"])], [], [vi("y", F, None)], [a, b])
    error(onnx_file(m, tmp_path), "corrupt", 'initializer "w" is already defined as a constant')


def test_duplicate_input(tmp_path):
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F, [1]), vi("x", F, [1])],
                   [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'input "x" is already defined as an input')


def test_undefined_graph_output(tmp_path):
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F, [1])], [vi("z", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'output "z" is not defined')


def test_bad_attribute_type(tmp_path):
    n = helper.make_node("Conv", ["x", "w"], ["y"], name="Conv_3", auto_pad=[1, 2])
    m = make_model([n], [vi("x", F, [1, 1, 3, 3]), vi("w", F, [1, 1, 1, 1])], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt",
          'node "Conv_3" (Conv): attribute "auto_pad" has type INTS, expected STRING')


def test_attribute_without_type(tmp_path):
    n = helper.make_node("Neg", ["x"], ["y"], name="n", foo=1)
    n.attribute[0].ClearField("type")
    m = make_model([n], [vi("x", F, [1])], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'node "n" (Neg): attribute "foo" has no type')


def test_duplicate_attribute(tmp_path):
    n = helper.make_node("Softmax", ["x"], ["y"], name="s", axis=1)
    n.attribute.append(helper.make_attribute("axis", 0))
    m = make_model([n], [vi("x", F, [1])], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'node "s" (Softmax): attribute "axis" is given twice')


def test_attribute_string_with_nul(tmp_path):
    n = helper.make_node("Custom", ["x"], ["y"], name="c", s=b"a\0b")
    m = make_model([n], [vi("x", F, [1])], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'attribute "s": a string contains a NUL byte')


def test_tensors_attribute(tmp_path):
    n = helper.make_node("Custom", ["x"], ["y"], name="c", ts=[helper.make_tensor("a", F, [1], [1])])
    m = make_model([n], [vi("x", F, [1])], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "unimplemented", 'attribute "ts" has type TENSORS')


def test_ref_attr_name(tmp_path):
    n = helper.make_node("Softmax", ["x"], ["y"], name="s")
    a = n.attribute.add()
    a.name, a.ref_attr_name, a.type = "axis", "outer_axis", onnx.AttributeProto.INT
    m = make_model([n], [vi("x", F, [1])], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "unimplemented", 'attribute "axis" refers to "outer_axis" (ref_attr_name)')


def test_node_without_op_type(tmp_path):
    n = helper.make_node("Neg", ["x"], ["y"], name="n")
    n.ClearField("op_type")
    m = make_model([n], [vi("x", F, [1])], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'node "n" (): has no op_type')


def test_sparse_initializer(tmp_path):
    m = small_valid()
    sp = m.graph.sparse_initializer.add()
    sp.values.CopyFrom(helper.make_tensor("sv", F, [1], [1]))
    sp.indices.CopyFrom(helper.make_tensor("si", I64, [1], [0]))
    sp.dims.append(4)
    error(onnx_file(m, tmp_path), "unimplemented", "sparse initializers")


def test_sequence_input(tmp_path):
    """Sequences of tensors and optionals are taken (the IR prints their
    kind); sequences of sequences, optionals of optionals and maps are not."""
    seq = helper.make_tensor_sequence_value_info("xs", F, None)
    m = make_model([helper.make_node("SequenceLength", ["xs"], ["y"])], [seq], [vi("y", I64, [])])
    assert "seq(f32)" in dump(onnx_file(m, tmp_path))
    seq2 = helper.make_value_info("xs", helper.make_sequence_type_proto(
        helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))))
    m = make_model([helper.make_node("SequenceLength", ["xs"], ["y"])], [seq2], [vi("y", I64, [])])
    error(onnx_file(m, tmp_path), "unimplemented", 'input "xs" has a sequence of sequences type')


def test_optional_and_map_types(tmp_path):
    opt = helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [1])))
    m = make_model([helper.make_node("OptionalHasElement", ["o"], ["y"])], [opt], [vi("y", TensorProto.BOOL, [])])
    assert "opt(f32)" in dump(onnx_file(m, tmp_path))
    opt2 = helper.make_value_info("o", helper.make_optional_type_proto(opt.type))
    m = make_model([helper.make_node("OptionalHasElement", ["o"], ["y"])], [opt2], [vi("y", TensorProto.BOOL, [])])
    error(onnx_file(m, tmp_path), "unimplemented", 'input "o" has an optional of an optional type')
    mp = helper.make_value_info("m", helper.make_map_type_proto(I64, helper.make_tensor_type_proto(F, [1])))
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F, [1])], [mp])
    error(onnx_file(m, tmp_path), "unimplemented", 'output "m" has a map type')


def test_local_functions(tmp_path):
    m = small_valid()
    f = m.functions.add()
    f.name, f.domain = "f", "local"
    error(onnx_file(m, tmp_path), "unimplemented", "local functions")


def test_training_info(tmp_path):
    m = small_valid()
    m.training_info.add()
    error(onnx_file(m, tmp_path), "unimplemented", "training info")


@pytest.mark.parametrize("attr,value,shape", [("value_string", "hi", "string[]"),
                                              ("value_strings", ["a", "", "b"], "string[3]")])
def test_constant_value_string(tmp_path, attr, value, shape):
    n = helper.make_node("Constant", [], ["s"], **{attr: value})
    m = make_model([n, helper.make_node("Identity", ["s"], ["y"])], [], [vi("y", TensorProto.STRING, None)])
    assert shape in dump(onnx_file(m, tmp_path))


def test_constant_with_two_values(tmp_path):
    n = helper.make_node("Constant", [], ["s"], name="k", value_int=1, value_float=2.0)
    m = make_model([n, helper.make_node("Identity", ["s"], ["y"])], [], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt", 'node "k" (Constant): has 2 attributes')


@pytest.mark.parametrize("location,fragment", [
    ("../w.bin", "leaves the model's directory"),
    ("sub/../../w.bin", "leaves the model's directory"),
    ("/etc/passwd", "is an absolute path"),
    ("", "has no location"),
])
def test_external_data_refused_paths(tmp_path, location, fragment):
    (tmp_path / "w.bin").write_bytes(b"\0" * 12)
    d = tmp_path / "m"
    d.mkdir()
    error(external_model(d, location), "corrupt", 'tensor "w": external data', fragment)


def test_external_data_links_out_of_the_folder_refused(tmp_path):
    """Issue 18: a link in the model's folder that leads out of it (to a file, or a
    folder on the way) is refused after resolving, like ONNX Runtime's "External data
    path escapes model directory"; the file's bytes never become a constant."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "w.bin").write_bytes(np.array([7, 8, 9], np.float32).tobytes())
    d = tmp_path / "m"
    d.mkdir()
    os.symlink(secret / "w.bin", d / "link.bin")
    os.symlink(secret, d / "out")
    os.symlink("../secret/w.bin", d / "rel.bin")
    for loc in ("link.bin", "out/w.bin", "rel.bin", "./out/w.bin"):
        p = import_dump(external_model(d, loc))
        assert p.returncode == 1 and "7.0" not in p.stdout, p.stdout
        assert "escapes the model's directory" in p.stderr, p.stderr
        assert 'tensor "w": external data path' in p.stderr, p.stderr


def test_external_data_links_inside_the_folder_allowed(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "w.bin").write_bytes(np.array([4, 5, 6], np.float32).tobytes())
    os.symlink("data/w.bin", tmp_path / "link.bin")
    os.symlink("data", tmp_path / "d2")
    for loc in ("link.bin", "d2/w.bin"):
        assert const_line(dump(external_model(tmp_path, loc)), "w") == "f32[3] = [4.0, 5.0, 6.0]"
    # The model's own folder may be reached through a link.
    os.symlink(tmp_path, tmp_path.parent / (tmp_path.name + "_link"))
    m = tmp_path.parent / (tmp_path.name + "_link") / "model.onnx"
    assert const_line(dump(m), "w") == "f32[3] = [4.0, 5.0, 6.0]"


def test_external_data_missing_file(tmp_path):
    error(external_model(tmp_path, "absent.bin"), "not found", "cannot open external data file")


def test_external_data_past_the_end(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 12)
    error(external_model(tmp_path, "w.bin", offset=4), "corrupt", "lies past the end")


def test_external_data_bad_length_and_offset(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 12)
    error(external_model(tmp_path, "w.bin", length=8), "corrupt", "length is 8 bytes, expected 12")
    error(external_model(tmp_path, "w.bin", offset="-4"), "corrupt", 'offset is "-4", not a byte count')


def test_external_data_is_a_directory(tmp_path):
    (tmp_path / "dir.bin").mkdir()
    error(external_model(tmp_path, "dir.bin"), "corrupt", "not a regular file")


def test_subgraph_shadowing_an_outer_name(tmp_path):
    then_g = helper.make_graph([helper.make_node("Neg", ["c2"], ["x"], name="inner")], "then", [],
                               [vi("x", F, None)])
    else_g = helper.make_graph([helper.make_node("Neg", ["c2"], ["e"])], "else", [], [vi("e", F, None)])
    nodes = [helper.make_node("Cast", ["c"], ["c2"], to=F),
             helper.make_node("If", ["c"], ["y"], name="if0", then_branch=then_g, else_branch=else_g)]
    m = make_model(nodes, [vi("c", TensorProto.BOOL, []), vi("x", F, [])], [vi("y", F, None)])
    error(onnx_file(m, tmp_path), "corrupt",
          'node "if0" (If): attribute "then_branch": node "inner" (Neg): output "x" is already defined '
          "as an input of an enclosing graph")


def test_subgraph_error_names_the_path(tmp_path):
    then_g = helper.make_graph([helper.make_node("Neg", ["nope"], ["t"], name="inner")], "then", [],
                               [vi("t", F, None)])
    nodes = [helper.make_node("If", ["c"], ["y"], name="if0", then_branch=then_g, else_branch=then_g)]
    m = make_model(nodes, [vi("c", TensorProto.BOOL, [])], [vi("y", F, None)])
    # make_node sorts attributes by name: else_branch is imported first.
    error(onnx_file(m, tmp_path), "corrupt",
          'node "if0" (If): attribute "else_branch": node "inner" (Neg): input 0 "nope" is not defined')


def varint(v):
    out = b""
    while True:
        b, v = v & 0x7F, v >> 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def field(number, payload):
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def test_nesting_too_deep(tmp_path):
    # graph.node(1) -> node.attribute(5) -> attribute.g(6) -> graph ..., by
    # hand: Python's protobuf refuses to build it past 100 levels too.
    g = b""
    for _ in range(40):
        g = field(1, field(5, field(6, g)))
    data = small_valid().SerializeToString() + field(7, g)  # a second graph field is merged
    error(onnx_file(data, tmp_path), "corrupt", "nest deeper than")


def test_parse_memory_bound(tmp_path):
    # 4M empty nodes: 8 MiB of file, but over 400 MiB once unpacked.
    graph = b"\x0a\x00" * (4 << 20)
    data = small_valid().SerializeToString() + field(7, graph)
    error(onnx_file(data, tmp_path), "corrupt", "bytes of memory to parse, more than")


def test_graph_without_outputs(tmp_path):
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F, [1])], [])
    error(onnx_file(m, tmp_path), "corrupt", "has no outputs")


def test_negative_and_zero_dims_are_unknown(tmp_path):
    # Exporters write -1 (Paddle) or 0 for "any size"; outputs and
    # value_info may say -1 too (they are not read for shapes).
    x = vi("x", F, [2, 3, 4, 5])
    for i, d in enumerate((-1, 0, -2)):
        x.type.tensor_type.shape.dim[i].dim_value = d
    y = vi("y", F, [-1, 3, 4, 5])
    m = make_model([helper.make_node("Neg", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])], [x], [y])
    m.graph.value_info.append(vi("t", F, [-1, -1, 7, 5]))
    xd = input_dims(dump(onnx_file(m, tmp_path)), "x")
    assert len(set(xd[:3])) == 3 and all(not d.lstrip("-").isdigit() for d in xd[:3]) and xd[3] == "5", xd


def test_malformed_in_memory(tmp_path):
    data = small_valid().SerializeToString()
    error(onnx_file(data[:-3], tmp_path), "corrupt", "malformed", memory=True)


# ---- the ONNX node test models ----


def node_models():
    if not os.path.isdir(NODE_SUBSET):
        return []
    return sorted(d for d in os.listdir(NODE_SUBSET) if os.path.exists(os.path.join(NODE_SUBSET, d, "model.onnx")))


# Valid ONNX that dvm refuses on purpose (opsets outside 11..21, unsigned and
# other element types dvm has no dtype for).
REFUSED = re.compile(r"opset \d+ of the default domain is not supported|has element type "
                     r"(UINT16|UINT32|UINT64|STRING)")


def test_onnx_node_models():
    names = node_models()
    assert names, f"no ONNX node tests under {NODE_SUBSET}: python3 tests/onnx_node/gen_node_data.py writes them"
    imported = refused = 0
    for name in names:
        p = import_dump(os.path.join(NODE_SUBSET, name, "model.onnx"))
        if p.returncode == 0:
            imported += 1
            assert p.stdout.startswith("graph "), name
        else:
            assert "import_dump: unimplemented: " in p.stderr and REFUSED.search(p.stderr), p.stderr
            refused += 1
    print(f"onnx node models: {imported} imported, {refused} refused")
    assert imported >= len(names) // 2
