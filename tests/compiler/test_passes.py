"""The graph rewrites (compiler/pass_*.c): each pass fires where its pattern
holds and leaves the graph alone where a condition is not proven; results
are the same with the pass on and off (and ONNX Runtime's) at several
shapes, seq 1 and primes included; on the PyTorch exports each pass fires
and the kernel calls drop."""
import os

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from dvmtest.cli import compile_onnx, dump_ir, dvm, dvm_ok, run_module  # noqa: E402
from dvmtest.compare import ort_session  # noqa: E402
from dvmtest.corpus import MODELS, feeds_for  # noqa: E402
from dvmtest.onnxmodel import const, make_model, save_model  # noqa: E402
from dvmtest.paths import REAL_MODELS  # noqa: E402

F = TensorProto.FLOAT
D = 24
SHAPES = [(1, 1, D), (1, 7, D), (3, 13, D)]
rng = np.random.default_rng(11)


def pass_model(tmp, nodes, inits, opset=14, outputs=("y",), name="m.onnx", x_shape=("batch", "seq", D)):
    """x [x_shape] through nodes to outputs, saved as tmp/name."""
    m = make_model(nodes, [("x", F, list(x_shape))], [(o, F, None) for o in outputs], inits, opset=opset,
                   ir_version=8)
    return save_model(m, tmp / name)


def on_off(tmp, path, pass_name, feeds_list, nout=1, rtol=1e-5, atol=1e-5, with_ort=True):
    """The model with the pass on and off, at each feed, against each other
    and ONNX Runtime."""
    on, off = str(tmp / "on.dvmb"), str(tmp / "off.dvmb")
    compile_onnx(path, out=on)
    compile_onnx(path, "--disable", pass_name, out=off)
    sess = ort_session(path)
    for feeds in feeds_list:
        a, b, want = run_module(on, feeds, nout), run_module(off, feeds, nout), sess.run(None, feeds)
        for x, y, w in zip(a, b, want, strict=True):
            assert x.shape == y.shape == w.shape
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)
            if with_ort:
                np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-4)


def xs(scale=1.0, shift=0.0):
    return [{"x": (rng.standard_normal(s) * scale + shift).astype(np.float32)} for s in SHAPES]


# ---- layernorm -------------------------------------------------------------

def layernorm_nodes(square="pow", swap=False, bias=True, axes_input=False, eps_name="eps", axis=-1):
    ax = {} if axes_input else {"axes": [axis]}
    mean_in = (lambda v: [v, "axes"]) if axes_input else (lambda v: [v])
    nodes = [helper.make_node("ReduceMean", mean_in("x"), ["m"], **ax),
             helper.make_node("Sub", ["x", "m"], ["d"])]
    nodes.append(helper.make_node("Pow", ["d", "two"], ["p"]) if square == "pow" else
                 helper.make_node("Mul", ["d", "d"], ["p"]))
    nodes += [helper.make_node("ReduceMean", mean_in("p"), ["v"], **ax),
              helper.make_node("Add", [eps_name, "v"] if swap else ["v", eps_name], ["ve"]),
              helper.make_node("Sqrt", ["ve"], ["s"]),
              helper.make_node("Div", ["d", "s"], ["n"]),
              helper.make_node("Mul", ["g", "n"] if swap else ["n", "g"], ["y" if not bias else "yg"])]
    if bias:
        nodes.append(helper.make_node("Add", ["b", "yg"] if swap else ["yg", "b"], ["y"]))
    return nodes


def layernorm_inits(g_shape=(D,), eps=1e-5, two=2.0):
    return [const("two", two), const("eps", eps), const("g", rng.uniform(0.5, 1.5, g_shape)),
            const("b", rng.uniform(-1, 1, (D,))), numpy_helper.from_array(np.array([-1], np.int64), "axes")]


@pytest.mark.parametrize("variant", [
    dict(), dict(square="mul"), dict(swap=True), dict(bias=False), dict(axes_input=True, opset=18),
    dict(axis=2)])
def test_layernorm(tmp_path, variant):
    opset = variant.pop("opset", 14)
    path = pass_model(tmp_path, layernorm_nodes(**variant), layernorm_inits(eps=1e-12 if variant.get("swap") else 1e-5),
                      opset=opset)
    text = dump_ir(path)
    assert "LayerNormalization(%x, %g" in text and "ReduceMean" not in text and "Sqrt" not in text, text
    assert "LayerNormalization" not in dump_ir(path, "--disable", "layernorm")
    on_off(tmp_path, path, "layernorm", xs() + xs(scale=0.5, shift=4.0))


@pytest.mark.parametrize("case", ["exponent3", "eps_vector", "axis1", "scale_broadcast", "d_escapes",
                                  "keepdims0_sub"])
def test_layernorm_not_rewritten(tmp_path, case):
    """A condition not proven: the graph is left as it is (and runs)."""
    nodes, inits, outputs = layernorm_nodes(), layernorm_inits(), ("y",)
    if case == "exponent3":
        inits = layernorm_inits(two=3.0)
    elif case == "eps_vector":
        inits = [i for i in inits if i.name != "eps"] + [const("eps", np.full((D,), 1e-5))]
    elif case == "axis1":
        nodes = layernorm_nodes(axis=1)
    elif case == "scale_broadcast":
        inits = layernorm_inits(g_shape=(1,))
    elif case == "d_escapes":
        outputs = ("y", "d")
    elif case == "keepdims0_sub":  # the mean without the axis still broadcasts against x
        nodes = [n for n in nodes]
        nodes[0] = helper.make_node("ReduceMean", ["x"], ["m0"], axes=[-1], keepdims=0)
        nodes.insert(1, helper.make_node("Unsqueeze", ["m0", "axes"], ["m"]))
    path = pass_model(tmp_path, nodes, inits, outputs=outputs)
    assert "LayerNormalization" not in dump_ir(path)
    # x^3's mean can be negative, its square root NaN; ONNX Runtime's own
    # LayerNorm fusion gives numbers there
    on_off(tmp_path, path, "layernorm", xs()[1:], nout=len(outputs), with_ort=case != "exponent3")


# ---- gelu ------------------------------------------------------------------

def gelu_erf_nodes(form):
    if form == "bert":  # (x * (1 + erf(x / sqrt2))) * 0.5
        return [helper.make_node("Div", ["x", "sqrt2"], ["z"]), helper.make_node("Erf", ["z"], ["e"]),
                helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["x", "e1"], ["xe"]),
                helper.make_node("Mul", ["xe", "half"], ["y"])]
    # 0.5 * x first, the argument as x * (1 / sqrt2), operands swapped
    return [helper.make_node("Mul", ["rsqrt2", "x"], ["z"]), helper.make_node("Erf", ["z"], ["e"]),
            helper.make_node("Add", ["one", "e"], ["e1"]), helper.make_node("Mul", ["half", "x"], ["hx"]),
            helper.make_node("Mul", ["e1", "hx"], ["y"])]


def gelu_tanh_nodes():
    return [helper.make_node("Mul", ["x", "half"], ["hx"]), helper.make_node("Pow", ["x", "three"], ["x3"]),
            helper.make_node("Mul", ["x3", "k"], ["kx3"]), helper.make_node("Add", ["x", "kx3"], ["w"]),
            helper.make_node("Mul", ["w", "c"], ["u"]), helper.make_node("Tanh", ["u"], ["t"]),
            helper.make_node("Add", ["t", "one"], ["t1"]), helper.make_node("Mul", ["hx", "t1"], ["y"])]


def gelu_inits(sqrt2=np.sqrt(2.0), c=np.sqrt(2.0 / np.pi)):
    return [const("sqrt2", sqrt2), const("rsqrt2", 1 / np.sqrt(2.0)), const("one", 1.0), const("half", 0.5),
            const("three", 3.0), const("k", 0.044715), const("c", c), const("bias", rng.uniform(-1, 1, (D,)))]


def with_bias(nodes):
    """The GELU of a bias add (MatMul's bias in the exports)."""
    renamed = [helper.make_node(n.op_type, ["h" if i == "x" else i for i in n.input], n.output) for n in nodes]
    return [helper.make_node("Add", ["bias", "x"], ["h"])] + renamed


@pytest.mark.parametrize("form", ["bert", "swapped", "tanh"])
@pytest.mark.parametrize("bias", [False, True])
def test_gelu(tmp_path, form, bias):
    nodes = gelu_tanh_nodes() if form == "tanh" else gelu_erf_nodes(form)
    if bias:
        nodes = with_bias(nodes)
    path = pass_model(tmp_path, nodes, gelu_inits())
    text = dump_ir(path)
    arg = "%h" if bias else "%x"
    want = f"Gelu({arg})" + (' {approximate="tanh"}' if form == "tanh" else "")
    assert want in text and "Erf" not in text and "Tanh" not in text, text
    assert "Gelu" not in dump_ir(path, "--disable", "gelu")
    on_off(tmp_path, path, "gelu", xs(scale=3.0))
    if bias:  # the bias add and the GELU: one fused call
        dvmb = str(tmp_path / "on.dvmb")
        text = dvm_ok("disasm", dvmb).stdout
        calls = [ln.split()[1] for ln in text.splitlines() if ln.strip().startswith("invoke")]
        assert len(calls) == 1 and calls[0].strip('",').startswith("fused@"), calls


@pytest.mark.parametrize("case", ["sqrt2_rounded", "c_rounded", "erf_escapes"])
def test_gelu_not_rewritten(tmp_path, case):
    inits, outputs = gelu_inits(), ("y",)
    nodes = gelu_tanh_nodes() if case == "c_rounded" else gelu_erf_nodes("bert")
    if case == "sqrt2_rounded":
        inits = gelu_inits(sqrt2=1.414)
    elif case == "c_rounded":
        inits = gelu_inits(c=0.7978)
    elif case == "erf_escapes":
        outputs = ("y", "e")
    path = pass_model(tmp_path, nodes, inits, outputs=outputs)
    assert "Gelu" not in dump_ir(path)
    on_off(tmp_path, path, "gelu", xs()[1:], nout=len(outputs))


# ---- epilogue ----------------------------------------------------------------

ACTIVATIONS = {"none": None, "Relu": "Relu", "Gelu": "Gelu", "GeluTanh": "Gelu", "Sigmoid": "Sigmoid",
               "Tanh": "Tanh"}


def epilogue_model(tmp, n_out, act="none", bias_first=False, bias_shape=None, outputs=("y",), erf_gelu=False):
    """y = act(x W + b), W [D, n_out]: a Linear layer as PyTorch exports it."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]),
             helper.make_node("Add", ["b", "p"] if bias_first else ["p", "b"], ["h" if act != "none" or erf_gelu else "y"])]
    inits = [const("w", rng.standard_normal((D, n_out)) / np.sqrt(D)),
             const("b", rng.uniform(-1, 1, bias_shape or (n_out,)))]
    opset = 14
    if erf_gelu:  # BERT's GELU, which pass gelu makes a Gelu first
        nodes += [helper.make_node(n.op_type, ["h" if i == "x" else i for i in n.input], n.output)
                  for n in gelu_erf_nodes("bert")]
        inits += gelu_inits()[:4]
    elif act != "none":
        attrs = {"approximate": "tanh"} if act == "GeluTanh" else {}
        nodes.append(helper.make_node(ACTIVATIONS[act], ["h"], ["y"], **attrs))
        opset = 20 if act.startswith("Gelu") else 14
    return pass_model(tmp, nodes, inits, opset=opset, outputs=outputs)


def on_off_exact(tmp, path, pass_name, feeds_list, nout=1, threads=(1, 2), with_ort=True):
    """The pass on and off give the same bits (the epilogue computes what the
    separate kernels do), at 1 and 2 threads, and ONNX Runtime's within
    rounding."""
    on, off = str(tmp / "on.dvmb"), str(tmp / "off.dvmb")
    compile_onnx(path, out=on)
    compile_onnx(path, "--disable", pass_name, out=off)
    sess = ort_session(path)
    for feeds in feeds_list:
        want = sess.run(None, feeds)
        for t in threads:
            a, b = run_module(on, feeds, nout, threads=t), run_module(off, feeds, nout, threads=t)
            for x, y, w in zip(a, b, want, strict=True):
                assert x.shape == y.shape == w.shape
                np.testing.assert_array_equal(x, y, err_msg=f"threads {t}, x {feeds['x'].shape}")
                if with_ort:
                    np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-4)


# rows (batch * seq): 1 (sgemm), 7 and 39 (the packed path), 134 and 300
# (sgemm, split by rows or columns at 2 threads); columns: 1, a prime
# (a partial last panel), 64 (one split), 3 panels plus 3
EPI_SHAPES = [(1, 1, D), (1, 7, D), (3, 13, D), (2, 67, D), (1, 300, D)]


def epi_xs():
    return [{"x": rng.standard_normal(s).astype(np.float32) * 2} for s in EPI_SHAPES]


@pytest.mark.parametrize("act", list(ACTIVATIONS))
@pytest.mark.parametrize("n_out", [1, 37, 64, 99])
def test_epilogue(tmp_path, act, n_out):
    path = epilogue_model(tmp_path, n_out, act, bias_first=n_out == 37)
    text = dump_ir(path)
    want = f'dvm::MatMulBias(%x, %w, %b) {{activation="{act}"}}'
    assert want in text and "= MatMul(" not in text and "= Add(" not in text, text
    assert "MatMulBias" not in dump_ir(path, "--disable", "epilogue")
    # builds placed for CUDA keep MatMul and Add (the placement has no epilogue)
    assert "MatMulBias" not in dump_ir(path, "--target", "cpu,cuda")
    on_off_exact(tmp_path, path, "epilogue", epi_xs())


def test_epilogue_after_gelu_pass(tmp_path):
    """BERT's erf GELU: pass gelu makes the Gelu, this pass takes it in."""
    path = epilogue_model(tmp_path, 40, erf_gelu=True)
    assert 'dvm::MatMulBias(%x, %w, %b) {activation="Gelu"}' in dump_ir(path)
    on_off_exact(tmp_path, path, "epilogue", epi_xs()[:3])


def gemm_model(tmp, n_out, act, trans_b, c_shape, alpha=1.0, beta=1.0):
    """y = act(Gemm(x, W, C)), x [rows, D]: PyTorch's Linear on a matrix."""
    w = rng.standard_normal((n_out, D) if trans_b else (D, n_out)) / np.sqrt(D)
    inputs = ["x", "w"] + (["c"] if c_shape else [])
    inits = [const("w", w)] + ([const("c", rng.uniform(-1, 1, c_shape))] if c_shape else [])
    attrs = {"approximate": "tanh"} if act == "GeluTanh" else {}
    nodes = [helper.make_node("Gemm", inputs, ["h"], transB=trans_b, alpha=alpha, beta=beta),
             helper.make_node(ACTIVATIONS[act], ["h"], ["y"], **attrs)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["rows", D])],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    path = str(tmp / "gemm.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=8).SerializeToString())
    return path


@pytest.mark.parametrize("act", [a for a in ACTIVATIONS if a != "none"])
@pytest.mark.parametrize("trans_b,c_shape,n_out", [(1, (37,), 37), (0, (1, 16), 16), (1, None, 64), (0, "mn", 5)])
def test_epilogue_gemm(tmp_path, act, trans_b, c_shape, n_out):
    rows = [1, 7, 39, 134, 300]
    if c_shape == "mn":  # C [rows, N]: one row count
        rows, c_shape = [39], (39, n_out)
    path = gemm_model(tmp_path, n_out, act, trans_b, c_shape, alpha=0.5 if trans_b else 1.0)
    text = dump_ir(path)
    assert "= dvm::GemmAct(%x, %w" in text and f'activation="{act}"' in text and "= Gemm(" not in text, text
    assert "GemmAct" not in dump_ir(path, "--disable", "epilogue")
    assert "GemmAct" not in dump_ir(path, "--target", "cpu,cuda")
    on_off_exact(tmp_path, path, "epilogue", [{"x": rng.standard_normal((r, D)).astype(np.float32)} for r in rows])


@pytest.mark.parametrize("case", ["bias_2d", "product_escapes", "sum_escapes"])
def test_epilogue_not_rewritten(tmp_path, case):
    """A condition not proven: the graph keeps its MatMul (and runs)."""
    if case == "bias_2d":  # [1, N] broadcasts the same, but is not the kernel's [N]
        path, want = epilogue_model(tmp_path, 16, bias_shape=(1, 16)), "= MatMul("
    elif case == "product_escapes":
        path, want = epilogue_model(tmp_path, 16, outputs=("y", "p")), "= MatMul("
    else:  # the Add before the Relu is read outside: bias only, the Relu stays
        path, want = epilogue_model(tmp_path, 16, "Relu", outputs=("y", "h")), '{activation="none"}'
    text = dump_ir(path)
    assert want in text, text
    nout = 2 if case != "bias_2d" else 1
    on_off_exact(tmp_path, path, "epilogue", epi_xs()[1:3], nout=nout, threads=(1,))


# ---- skiplayernorm -----------------------------------------------------------

def skip_model(tmp, beta=True, sum_out=False, sum_read=False, swap=False, skip_shape=None, axis=-1, ln_opset=17):
    """y = LayerNorm(x + r), r = x W (a residual branch), [and the sum read
    again: as a graph output, or by another node]."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["r"]),
             helper.make_node("Add", ["r", "x"] if swap else ["x", "r" if not skip_shape else "rs"], ["s"]),
             helper.make_node("LayerNormalization", ["s", "g", "b"] if beta else ["s", "g"], ["y"], axis=axis,
                              epsilon=1e-6)]
    inits = [const("w", rng.standard_normal((D, D)) / np.sqrt(D)), const("g", rng.uniform(0.5, 1.5, (D,))),
             const("b", rng.uniform(-1, 1, (D,)))]
    if skip_shape:  # a skip that broadcasts: not the kernel's
        nodes.insert(1, helper.make_node("ReduceMean", ["r"], ["rs"], axes=[1], keepdims=1))
    outputs = ["y"]
    if sum_out:
        outputs.append("s")
    if sum_read:  # the next residual add of a pre-LN block
        nodes.append(helper.make_node("Mul", ["s", "y"], ["t"]))
        outputs.append("t")
    return pass_model(tmp, nodes, inits, opset=ln_opset, outputs=outputs), len(outputs)


@pytest.mark.parametrize("variant", [dict(), dict(beta=False), dict(swap=True), dict(sum_out=True),
                                     dict(sum_read=True), dict(axis=2)])
def test_skiplayernorm(tmp_path, variant):
    path, nout = skip_model(tmp_path, **variant)
    text = dump_ir(path)
    assert "com.microsoft::SkipLayerNormalization(" in text and "= LayerNormalization(" not in text, text
    assert ("%s: f32" in text) == (variant.get("sum_out", False) or variant.get("sum_read", False)), text
    assert "SkipLayerNormalization" not in dump_ir(path, "--disable", "skiplayernorm")
    assert "SkipLayerNormalization" not in dump_ir(path, "--target", "cpu,cuda")
    on_off_exact(tmp_path, path, "skiplayernorm", epi_xs(), nout=nout)


@pytest.mark.parametrize("case", ["broadcast_skip", "axis1"])
def test_skiplayernorm_not_rewritten(tmp_path, case):
    path, nout = skip_model(tmp_path, skip_shape=case == "broadcast_skip", axis=1 if case == "axis1" else -1)
    assert "SkipLayerNormalization" not in dump_ir(path)
    # ONNX Runtime reads a [D] scale of a LayerNorm over [seq, D] otherwise
    # than numpy broadcasting (dvm's reading); the pass is what is tested here
    on_off_exact(tmp_path, path, "skiplayernorm", epi_xs()[1:3], nout=nout, threads=(1,), with_ort=case != "axis1")


# ---- rmsnorm -----------------------------------------------------------------

def rmsnorm_nodes(square="pow", form="reciprocal", swap=False, axis=-1):
    nodes = [helper.make_node("Pow", ["x", "two"], ["p"]) if square == "pow" else
             helper.make_node("Mul", ["x", "x"], ["p"]),
             helper.make_node("ReduceMean", ["p"], ["m"], axes=[axis]),
             helper.make_node("Add", ["eps", "m"] if swap else ["m", "eps"], ["me"]),
             helper.make_node("Sqrt", ["me"], ["s"])]
    if form == "reciprocal":  # LLaMA's x * torch.rsqrt(...)
        nodes += [helper.make_node("Reciprocal", ["s"], ["r"]),
                  helper.make_node("Mul", ["r", "x"] if swap else ["x", "r"], ["n"])]
    else:
        nodes.append(helper.make_node("Div", ["x", "s"], ["n"]))
    nodes.append(helper.make_node("Mul", ["g", "n"] if swap else ["n", "g"], ["y"]))
    return nodes


def rmsnorm_inits(two=2.0, g_shape=(D,)):
    return [const("two", two), const("eps", 1e-6), const("g", rng.uniform(0.5, 1.5, g_shape))]


@pytest.mark.parametrize("variant", [dict(), dict(square="mul"), dict(form="div"), dict(swap=True),
                                     dict(axis=2)])
def test_rmsnorm(tmp_path, variant):
    path = pass_model(tmp_path, rmsnorm_nodes(**variant), rmsnorm_inits())
    text = dump_ir(path)
    assert "= RMSNormalization(%x, %g) {axis=-1, epsilon=" in text and "ReduceMean" not in text, text
    assert "RMSNormalization" not in dump_ir(path, "--disable", "rmsnorm")
    assert "RMSNormalization" not in dump_ir(path, "--target", "cpu,cuda")
    on_off(tmp_path, path, "rmsnorm", xs() + xs(scale=0.5, shift=4.0) + epi_xs())


@pytest.mark.parametrize("case", ["exponent3", "axis1", "scale_broadcast", "sum_escapes"])
def test_rmsnorm_not_rewritten(tmp_path, case):
    nodes, inits, outputs = rmsnorm_nodes(), rmsnorm_inits(), ("y",)
    if case == "exponent3":
        inits = rmsnorm_inits(two=3.0)
    elif case == "axis1":
        nodes = rmsnorm_nodes(axis=1)
    elif case == "scale_broadcast":
        inits = rmsnorm_inits(g_shape=(1,))
    else:
        outputs = ("y", "m")
    path = pass_model(tmp_path, nodes, inits, outputs=outputs)
    assert "RMSNormalization" not in dump_ir(path)
    on_off(tmp_path, path, "rmsnorm", xs()[1:], nout=len(outputs), with_ort=case != "exponent3")


# ---- conv_act ------------------------------------------------------------------

C_IN, C_OUT = 3, 5
CONV_SHAPES = [(1, C_IN, 7, 9), (2, C_IN, 13, 5), (1, C_IN, 1, 1), (0, C_IN, 5, 5)]


def conv_model(tmp, nodes, inits, opset=14, outputs=("y",), group=1, strides=(1, 1), dilations=(1, 1),
               pads=(1, 1, 1, 1), bias=True, w_input=False, c_out=C_OUT):
    """x [N, 3, H, W] -> Conv (to "c") -> nodes -> y."""
    w = rng.standard_normal((c_out, C_IN // group, 3, 3)).astype(np.float32) * 0.5
    conv_in = ["x", "w"] + (["b"] if bias else [])
    inits = inits + ([] if w_input else [const("w", w)]) + ([const("b", rng.uniform(-1, 1, c_out))] if bias else [])
    conv = helper.make_node("Conv", conv_in, ["c"], kernel_shape=[3, 3], pads=list(pads), strides=list(strides),
                            dilations=list(dilations), group=group)
    ins = [helper.make_tensor_value_info("x", F, ["n", C_IN, "h", "w"])]
    if w_input:
        ins.append(helper.make_tensor_value_info("w", F, list(w.shape)))
    g = helper.make_graph([conv] + nodes, "g", ins, [helper.make_tensor_value_info(o, F, None) for o in outputs],
                          inits)
    path = str(tmp / "conv.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
                .SerializeToString())
    return path, (w if w_input else None)


def node(op, ins, out, **attrs):
    return helper.make_node(op, ins, [out], **attrs)


def hard_swish_clip(src, out, div=True):  # PaddlePaddle's export of hardswish
    return [node("Add", [src, "three"], "h3"), node("Clip", ["h3", "zero", "six"], "hc"),
            node("Mul", [src, "hc"], "hm"),
            node("Div", ["hm", "six"], out) if div else node("Mul", ["hm", "sixth"], out)]


def act_consts():
    return [const("three", 3.0), const("zero", 0.0), const("six", 6.0), const("sixth", np.float32(1 / 6)),
            const("lo", -0.5), const("hi", 0.75)]


CONV_ACTS = {
    "relu": ([node("Relu", ["c"], "y")], "Relu"),
    "leaky": ([node("LeakyRelu", ["c"], "y", alpha=0.3)], "LeakyRelu"),
    "tanh": ([node("Tanh", ["c"], "y")], "Tanh"),
    "sigmoid": ([node("Sigmoid", ["c"], "y")], "Sigmoid"),
    "clip": ([node("Clip", ["c", "lo", "hi"], "y")], "Clip"),
    "relu6": ([node("Clip", ["c", "zero", "six"], "y")], "Clip"),
    "clip_min_only": ([helper.make_node("Clip", ["c", "lo"], ["y"])], "Clip"),
    "clip_unbounded": ([helper.make_node("Clip", ["c"], ["y"])], "Clip"),
    "hardsigmoid": ([node("HardSigmoid", ["c"], "y", alpha=0.3, beta=0.4)], "HardSigmoid"),
    "hardswish": ([node("HardSwish", ["c"], "y")], "HardSwish"),
    "swish": ([node("Sigmoid", ["c"], "s"), node("Mul", ["s", "c"], "y")], "Swish"),
    "x_hardsigmoid": ([node("HardSigmoid", ["c"], "s", alpha=1 / 6), node("Mul", ["c", "s"], "y")], "HardSwish"),
    "hardswish_clip": (hard_swish_clip("c", "y"), "HardSwish"),
    "hardswish_clip_mul": (hard_swish_clip("c", "y", div=False), "HardSwish"),
    # PP-LCNetV3's learnable affine blocks around a hardswish (PP-OCRv4)
    "affine_hardswish_affine": ([node("Mul", ["s1", "c"], "a1"), node("Add", ["a1", "b1"], "a2")]
                                + hard_swish_clip("a2", "hs") + [node("Mul", ["s2", "hs"], "a3"),
                                                                 node("Add", ["a3", "b2"], "y")], "HardSwish"),
    "hardsigmoid_affine": ([node("HardSigmoid", ["c"], "a1", alpha=0.3, beta=0.4), node("Mul", ["a1", "s2"], "a2"),
                            node("Add", ["a2", "b2"], "y")], "HardSigmoid"),
    "affine_only": ([node("Mul", ["c", "s1"], "a1"), node("Add", ["b1", "a1"], "y")], None),
    "add_relu": ([node("Add", ["c", "b1"], "a1"), node("Relu", ["a1"], "y")], "Relu"),
}


def affine_consts():
    return [const("s1", [1.7]), const("b1", [-0.4]), const("s2", [0.6]), const("b2", [0.9])]


# the conv passes after conv_act, which make FusedConvs of Convs too
NO_WINO = ("--disable", "conv_winograd")
NO_CONV_PASSES = ("--disable", "conv_add") + NO_WINO


def conv_on_off(tmp, path, shapes=CONV_SHAPES):
    feeds = [{"x": rng.standard_normal(s).astype(np.float32) * 2} for s in shapes]
    on_off(tmp, path, "conv_act", feeds, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("case", sorted(CONV_ACTS))
@pytest.mark.parametrize("conv", ["plain", "grouped_strided", "no_bias"])
def test_conv_act(tmp_path, case, conv):
    nodes, act = CONV_ACTS[case]
    kw = dict(grouped_strided=dict(group=C_IN, strides=(2, 1), dilations=(1, 2), pads=(0, 2, 1, 1), c_out=6),
              no_bias=dict(bias=False)).get(conv, {})
    path, _ = conv_model(tmp_path, nodes, act_consts() + affine_consts(), opset=14, **kw)
    text = dump_ir(path, *NO_WINO)
    if act:
        assert "= com.microsoft::FusedConv(" in text, text
        assert f'activation="{act}"' in text, text
    else:
        assert "FusedConv" not in text and text.count("= Conv(") == 1, text
    assert text.count("= Mul(") + text.count("= Add(") + text.count("= Clip(") == 0, text
    assert "FusedConv" not in dump_ir(path, "--disable", "conv_act", *NO_WINO)
    conv_on_off(tmp_path, path, CONV_SHAPES[:2] + [(0, C_IN, 5, 5), (1, C_IN, 2, 3)] if kw.get("group") else CONV_SHAPES)


@pytest.mark.parametrize("case", ["conv_escapes", "clip_bound_input", "x_hardsigmoid_alpha", "add_2",
                                  "per_channel_scale", "w_not_constant"])
def test_conv_act_not_rewritten(tmp_path, case):
    """A condition not proven: the graph is left as it is (and runs)."""
    nodes, outputs, inits, extra = CONV_ACTS["relu"][0], ("y",), act_consts() + affine_consts(), {}
    w_input = False
    if case == "conv_escapes":
        outputs = ("y", "c")
    elif case == "clip_bound_input":
        nodes = [node("ReduceMin", ["x"], "m", keepdims=0), node("Clip", ["c", "m", "six"], "y")]
    elif case == "x_hardsigmoid_alpha":
        nodes = [node("HardSigmoid", ["c"], "s", alpha=0.2), node("Mul", ["c", "s"], "y")]
    elif case == "add_2":
        nodes = [node("Add", ["c", "two"], "h3"), node("Clip", ["h3", "zero", "six"], "hc"),
                 node("Mul", ["c", "hc"], "hm"), node("Div", ["hm", "six"], "y")]
        inits.append(const("two", 2.0))
    elif case == "per_channel_scale":
        nodes = [node("Mul", ["c", "pc"], "m"), node("Relu", ["m"], "y")]
        inits.append(const("pc", rng.uniform(0.5, 2, (C_OUT, 1, 1))))
    elif case == "w_not_constant":
        nodes = [node("Mul", ["c", "s1"], "m"), node("Relu", ["m"], "y")]
        w_input = True
    path, w = conv_model(tmp_path, nodes, inits, outputs=outputs, w_input=w_input)
    assert "FusedConv" not in dump_ir(path, *NO_WINO)
    if w is not None:
        extra["w"] = w
    feeds = [{"x": rng.standard_normal(s).astype(np.float32), **extra} for s in CONV_SHAPES[:2]]
    on_off(tmp_path, path, "conv_act", feeds, nout=len(outputs))


@pytest.mark.parametrize("model_name", ["ppocr_det", "ppocr_rec", "resnet_fixture"])
def test_conv_act_models(tmp_path, model_name):
    """On the PP-OCRv4 models and the ResNet fixture: the pass fires, the
    kernel calls drop, results match with it off (conv_nhwc, conv_add and
    conv_winograd off in both where Convs are counted: they make FusedConvs
    of Convs)."""
    onnx_path, spec, envs = MODELS[model_name]
    on = dump_ir(onnx_path, "--disable", "conv_nhwc", *NO_CONV_PASSES)
    off = dump_ir(onnx_path, "--disable", "conv_act", "--disable", "conv_nhwc", *NO_CONV_PASSES)
    fused = on.count("FusedConv(")
    assert fused >= 3 and fused == off.count("= Conv(") - on.count("= Conv("), (fused, off.count("= Conv("))
    a, b = str(tmp_path / "on.dvmb"), str(tmp_path / "off.dvmb")
    compile_onnx(onnx_path, out=a)
    compile_onnx(onnx_path, "--disable", "conv_act", out=b)
    assert invokes(a) < invokes(b)
    for env in envs:
        feeds = feeds_for(spec, env, np.random.default_rng(4))
        x, y = run_module(a, feeds, 1), run_module(b, feeds, 1)
        np.testing.assert_allclose(x[0], y[0], rtol=1e-4, atol=1e-4, err_msg=str(env))


# ---- conv_nhwc -----------------------------------------------------------------

NHWC_SHAPES = [(1, C_IN, 7, 9), (2, C_IN, 13, 5), (1, C_IN, 1, 1), (1, C_IN, 29, 1), (3, C_IN, 17, 31),
               (1, C_IN, 40, 37), (0, C_IN, 5, 5)]


def nhwc_model(tmp, case):
    """x -> Conv 3x3 (5 channels) -> Relu -> c1; c1 -> Conv 1x1 (21) -> c2;
    c2 -> depthwise 3x3 -> c3 and c2 -> Conv 3x3 stride 2 (19) -> c4;
    y = c3's 1x1 conv + nothing else, z = Sigmoid(c4): c1 and c2 only feed
    convolutions (kept NHWC), c3 too, c4 does not; cases break one link."""
    def w(*shape):
        return const("w" + "_".join(map(str, shape)), rng.standard_normal(shape) * 0.4)
    inits = [w(5, C_IN, 3, 3), w(21, 5, 1, 1), w(21, 1, 3, 3), w(19, 21, 3, 3), w(7, 21, 1, 1),
             const("b5", rng.uniform(-1, 1, 5)), const("b21", rng.uniform(-1, 1, 21))]
    nodes = [helper.make_node("Conv", ["x", "w5_3_3_3", "b5"], ["c0"], pads=[1, 1, 1, 1]),
             node("Relu", ["c0"], "c1"),
             helper.make_node("Conv", ["c1", "w21_5_1_1", "b21"], ["c2"]),
             helper.make_node("Conv", ["c2", "w21_1_3_3"], ["c3"], pads=[1, 1, 1, 1], group=21),
             helper.make_node("Conv", ["c2", "w19_21_3_3"], ["c4"], pads=[1, 1, 2, 1], strides=[2, 2],
                              auto_pad="NOTSET"),
             helper.make_node("Conv", ["c3", "w7_21_1_1"], ["y"]),
             node("Sigmoid", ["c4"], "z")]
    outputs = ["y", "z"]
    if case == "output":  # c2 is also a graph output
        outputs.append("c2")
    elif case == "add":  # c2 also read by an Add
        nodes.append(node("Add", ["c2", "c2"], "a"))
        outputs.append("a")
    elif case == "weights":  # c1 read as W (1x1 conv of 5 x 5 channels, a 5x5 input)
        nodes.append(helper.make_node("Conv", ["c1", "c1"], ["cw"]))
        outputs.append("cw")
    ins = [helper.make_tensor_value_info("x", F, ["n", C_IN, "h", "w"])]
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info(o, F, None) for o in outputs], inits)
    path = str(tmp / "nhwc.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8).SerializeToString())
    return path, len(outputs)


@pytest.mark.parametrize("case", ["plain", "output", "add", "weights"])
def test_conv_nhwc(tmp_path, case):
    path, nout = nhwc_model(tmp_path, case)
    text = dump_ir(path)
    layouts = sorted(ln.split("dvm_layout=")[1][0] for ln in text.splitlines() if "dvm_layout=" in ln)
    # dvm_layout per conv (2: writes NHWC, 1: reads it, 3: both): c1's conv (Relu fused) 2, c2's 3,
    # c3's 3, y's 1, z's (Sigmoid fused) 1; where c2 escapes, c2's conv 1 and c3's 2; where c1 is read
    # as W, c1's conv none and c2's 2
    want = {"plain": ["1", "1", "2", "3", "3"], "output": ["1", "1", "2", "2"], "add": ["1", "1", "2", "2"],
            "weights": ["1", "1", "2", "3"]}[case]
    assert layouts == sorted(want), text
    assert "dvm_layout" not in dump_ir(path, "--disable", "conv_nhwc")
    shapes = NHWC_SHAPES if case != "weights" else [(1, C_IN, 5, 5)]
    feeds = [{"x": rng.standard_normal(s).astype(np.float32)} for s in shapes]
    for threads in (1, 2):
        on, off = str(tmp_path / "on.dvmb"), str(tmp_path / "off.dvmb")
        compile_onnx(path, out=on)
        compile_onnx(path, "--disable", "conv_nhwc", out=off)
        sess = ort_session(path)
        for f in feeds:
            a, b = run_module(on, f, nout, threads=threads), run_module(off, f, nout, threads=threads)
            want_ = sess.run(None, f)
            for x, y, w in zip(a, b, want_, strict=True):
                assert x.shape == y.shape == w.shape
                np.testing.assert_allclose(x, y, rtol=1e-5, atol=2e-5)
                np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-4)


def pools_model(tmp, case):
    """x -> Conv 3x3 (16, Relu) -> c1 -> MaxPool 3x3 stride 2 -> m -> Conv 3x3
    (16) -> c2 and Add(c2, m) (conv_add: m is c2's Z) -> s -> Conv 1x1 (24)
    -> c3 -> GlobalAveragePool -> y. conv_nhwc keeps c1, m, s and c3 channels
    last, the pools as dvm.MaxPoolNhwc and dvm.GlobalAveragePoolNhwc. Cases
    break a link: m also a graph output ("escape": the MaxPool stays, c1
    NCHW), m read by a Sigmoid ("other"), MaxPool with its Indices
    ("indices"), c3 also read by a Relu ("gap": the GlobalAveragePool
    stays), dilated and asymmetric ("dilated"), ceil_mode ("ceil": the
    pool's output dims are new symbols, so conv_add cannot prove m and c2
    of one shape and the Add stays, run channels last on their views)."""
    def w(name, *shape):
        return const(name, rng.standard_normal(shape) * (0.6 / np.sqrt(np.prod(shape[1:]))))
    inits = [w("w1", 16, C_IN, 3, 3), w("w2", 16, 16, 3, 3), w("w3", 24, 16, 1, 1), const("b16", rng.uniform(-1, 1, 16)),
             const("b24", rng.uniform(-1, 1, 24))]
    pool_attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    if case in ("dilated", "ceil"):
        pool_attrs = dict(kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 1], dilations=[2, 1],
                          ceil_mode=int(case == "ceil"))
    nodes = [helper.make_node("Conv", ["x", "w1", "b16"], ["c0"], pads=[1, 1, 1, 1]), node("Relu", ["c0"], "c1"),
             helper.make_node("MaxPool", ["c1"], ["m", "mi"] if case == "indices" else ["m"], **pool_attrs),
             helper.make_node("Conv", ["m", "w2", "b16"], ["c2"], pads=[1, 1, 1, 1]), node("Add", ["c2", "m"], "s"),
             helper.make_node("Conv", ["s", "w3", "b24"], ["c3"]), node("GlobalAveragePool", ["c3"], "y")]
    outputs = ["y"]
    if case == "escape":
        outputs.append("m")
    elif case == "other":
        nodes.append(node("Sigmoid", ["m"], "z"))
        outputs.append("z")
    elif case == "indices":
        outputs.append("mi")
    elif case == "gap":
        nodes.append(node("Relu", ["c3"], "z"))
        outputs.append("z")
    ins = [helper.make_tensor_value_info("x", F, ["n", C_IN, "h", "w"])]
    outs = [helper.make_tensor_value_info(o, TensorProto.INT64 if o == "mi" else F, None) for o in outputs]
    g = helper.make_graph(nodes, "g", ins, outs, inits)
    path = str(tmp / "pools.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8).SerializeToString())
    return path, len(outputs)


@pytest.mark.parametrize("case", ["plain", "escape", "other", "indices", "gap", "dilated", "ceil"])
def test_conv_nhwc_pools(tmp_path, case):
    path, nout = pools_model(tmp_path, case)
    text = dump_ir(path)
    maxpool = case in ("plain", "gap", "dilated", "ceil")
    assert ("dvm::MaxPoolNhwc(" in text) == maxpool and ("= MaxPool(" in text) == (not maxpool), text
    assert ("dvm::GlobalAveragePoolNhwc(" in text) == (case != "gap"), text
    assert "Nhwc" not in dump_ir(path, "--disable", "conv_nhwc")
    shapes = [s for s in NHWC_SHAPES if s[2] > 1 or case not in ("dilated", "ceil")]
    on_off_ort(tmp_path, path, nout, ["conv_nhwc"], shapes)


def fpn_model(tmp, case):
    """An FPN level as PP-OCR's det spells it: x -> Conv 3x3 (16) -> c1;
    an SE block on c1 (GlobalAveragePool, Conv 1x1, Relu, Conv 1x1,
    HardSigmoid; Mul(c1, s) -> Add(c1, .)) -> e; Conv 3x3 stride (2, 1) (16) on
    e -> c2 -> Resize nearest x2 on H -> u; Add(e, u) -> a; Concat(a, Clip(a))
    on channels -> k; Conv 1x1 (8) on k -> y. conv_nhwc carries the SE's
    Mul and Add, the Resize, the Add, the Clip and the Concat on the
    [N, H, W, C] views. Cases break a link, and as every value here is
    tied to c1 through the carried nodes, nothing is carried then (a value
    is channels last only where its maker and all its readers can be):
    the Resize by sizes from Shape(e) ("sizes"),
    the Concat on axis 2 ("axis"), a Mul by a [1, 1, H, W] tensor
    ("spatial"), a graph output in the region ("escape")."""
    def w(name, *shape):
        return const(name, rng.standard_normal(shape) * (0.8 / np.sqrt(np.prod(shape[1:]))))
    inits = [w("w1", 16, C_IN, 3, 3), w("w2", 16, 16, 3, 3), w("w3", 8, 32, 1, 1), w("se1", 4, 16, 1, 1),
             w("se2", 16, 4, 1, 1), const("b16", rng.uniform(-1, 1, 16)), const("b4", rng.uniform(-1, 1, 4)),
             const("scales", np.array([1, 1, 2, 1], np.float32)), const("lo", np.array(-0.5, np.float32)),
             const("hi", np.array(0.7, np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b16"], ["c1"], pads=[1, 1, 1, 1]),
             node("GlobalAveragePool", ["c1"], "g"), helper.make_node("Conv", ["g", "se1", "b4"], ["g1"]),
             node("Relu", ["g1"], "g2"), helper.make_node("Conv", ["g2", "se2", "b16"], ["g3"]),
             helper.make_node("HardSigmoid", ["g3"], ["s"], alpha=0.2, beta=0.5),
             node("Mul", ["c1", "s"], "m"), node("Add", ["c1", "m"], "e"),
             helper.make_node("Conv", ["e", "w2", "b16"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 1])]
    if case == "sizes":
        nodes += [node("Shape", ["e"], "es"),
                  helper.make_node("Resize", ["c2", "", "", "es"], ["u0"], mode="nearest"),
                  node("Identity", ["u0"], "u")]
    else:
        nodes.append(helper.make_node("Resize", ["c2", "", "scales"], ["u"], mode="nearest",
                                      coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    nodes += [node("Add", ["e", "u"], "a"), node("Clip", ["a", "lo", "hi"], "ac"),
              helper.make_node("Concat", ["a", "ac"], ["k"], axis=2 if case == "axis" else 1),
              helper.make_node("Conv", ["k", "w3"], ["y"])]
    outputs = ["y"]
    if case == "axis":  # k is [N, 16, 2H, W]: a 1x1 conv of 16 channels
        inits[2] = w("w3", 8, 16, 1, 1)
    if case == "spatial":  # m = c1 * ReduceMean(c1, channels): [N, 1, H, W]
        at = nodes.index(next(n for n in nodes if n.output[0] == "m"))
        nodes[at:at + 1] = [node("ReduceMean", ["c1"], "cm", axes=[1]), node("Mul", ["c1", "cm"], "m")]
    if case == "escape":
        outputs.append("a")
    return pass_model(tmp, nodes, inits, outputs=outputs, name="fpn.onnx", x_shape=("n", C_IN, "h", "w")), len(outputs)


def carried_ops(path):
    """The ops conv_nhwc carries onto [N, H, W, C] views in path."""
    text = dump_ir(path)
    return {ln.split(" = ")[1].split("(")[0] for ln in text.splitlines() if ":nhwc" in ln.split(" = ")[0]
            and "LayoutView" not in ln}, text


@pytest.mark.parametrize("case", ["plain", "sizes", "axis", "spatial", "escape"])
def test_conv_nhwc_carried(tmp_path, case):
    path, nout = fpn_model(tmp_path, case)
    carried, text = carried_ops(path)
    assert carried == ({"Mul", "Add", "Resize", "Clip", "Concat"} if case == "plain" else set()), text
    assert "LayoutView" not in dump_ir(path, "--disable", "conv_nhwc")
    shapes = [(1, C_IN, 8, 8), (2, C_IN, 6, 10), (1, C_IN, 2, 2), (1, C_IN, 14, 6)]
    on_off_ort(tmp_path, path, nout, ["conv_nhwc"], shapes)


# operand of Add/Mul/Concat on c1 -> (its nodes, constants, whether carried, shapes of x):
# per channel it is carried; a dim other than C equal to C's count (16), a
# column [N, C, H, 1], a row [N, C, 1, W] or a Concat on the last axis is not
# (and such an Add constant is not folded into the conv's bias either)
NHWC_OPERANDS = {
    "channel": (lambda: [node("Mul", ["c1", "k"], "m")], [(1, 16, 1, 1)], True, [(1, C_IN, 7, 11), (2, C_IN, 1, 5)]),
    "width": (lambda: [node("Add", ["c1", "k"], "m")], [(1, 1, 1, 16)], False, [(1, C_IN, 7, 16), (2, C_IN, 16, 16)]),
    "height": (lambda: [node("Add", ["c1", "k"], "m")], [(16, 1)], False, [(1, C_IN, 16, 7), (2, C_IN, 16, 16)]),
    "column": (lambda: [node("Mul", ["c1", "k"], "m")], [(1, 16, 7, 1)], False, [(1, C_IN, 7, 11), (2, C_IN, 7, 16)]),
    "row": (lambda: [node("Mul", ["c1", "k"], "m")], [(1, 16, 1, 11)], False, [(1, C_IN, 7, 11), (2, C_IN, 16, 11)]),
    "concat_last": (lambda: [helper.make_node("Concat", ["c1", "c1"], ["m"], axis=-1)], [], False,
                    [(1, C_IN, 7, 11), (2, C_IN, 16, 16)]),
}


@pytest.mark.parametrize("case", sorted(NHWC_OPERANDS))
def test_conv_nhwc_operands(tmp_path, case):
    """x -> Conv 3x3 (16) -> c1 -> op(c1, operand) -> m -> Conv 1x1 (8) -> y:
    an operand is read per channel only when it is one."""
    make, consts, is_carried, shapes = NHWC_OPERANDS[case]
    inits = [const("w1", rng.standard_normal((16, C_IN, 3, 3)) * 0.3), const("b16", rng.uniform(-1, 1, 16)),
             const("w2", rng.standard_normal((8, 16, 1, 1)) * 0.3)]
    inits += [const("k", rng.uniform(-1, 1, s)) for s in consts]
    nodes = [helper.make_node("Conv", ["x", "w1", "b16"], ["c1"], pads=[1, 1, 1, 1]), *make(),
             helper.make_node("Conv", ["m", "w2"], ["y"])]
    path = pass_model(tmp_path, nodes, inits, name="operand.onnx", x_shape=("n", C_IN, "h", "w"))
    carried, text = carried_ops(path)
    assert bool(carried) == is_carried, text
    on_off_ort(tmp_path, path, 1, ["conv_nhwc"], shapes)


@pytest.mark.parametrize("attr,value", [("dvm_layout", -1), ("dvm_layout", 8), ("dvm_algo", 2)])
def test_fused_conv_dvm_attr_refused(tmp_path, attr, value):
    """A FusedConv's dvm_layout outside 0 to 7, or dvm_algo other than 0 or 1, is refused by node at compile time."""
    n = helper.make_node("FusedConv", ["x", "w"], ["y"], domain="com.microsoft", kernel_shape=[3, 3], **{attr: value})
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", F, [1, 3, 5, 5])],
                          [helper.make_tensor_value_info("y", F, None)], [const("w", np.ones((4, 3, 3, 3)))])
    path = str(tmp_path / "bad.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)],
                                  ir_version=8).SerializeToString())
    r = dvm("compile", path, "-o", tmp_path / "bad.dvmb")
    assert r.returncode == 2 and 'node "FusedConv_0"' in r.stderr and attr in r.stderr, r.stderr


CLS = os.path.join(REAL_MODELS, "ch_ppocr_mobile_v2.0_cls_infer.onnx")


@pytest.mark.parametrize("model_name", ["ppocr_det", "ppocr_rec", "ppocr_cls", "resnet_fixture", "yolo_tiny"])
def test_conv_nhwc_models(tmp_path, model_name):
    """On the PP-OCR models, the ResNet fixture and the YOLO export: the
    pass fires, results match with it off at 1 and 2 threads (a 1x1 conv
    reading or writing NHWC runs blocked, not as a GEMM: another order of
    sums)."""
    if model_name == "ppocr_cls":
        onnx_path, spec = CLS, {"x": ("f32", ["n", 3, 48, 192], 0)}
        envs = [dict(n=1), dict(n=3)]
    else:
        onnx_path, spec, envs = MODELS[model_name]
    if not os.path.exists(onnx_path):
        pytest.fail(f"{onnx_path} is missing (setup.sh)")
    kept = dump_ir(onnx_path).count("dvm_layout=")
    assert kept >= (2 if model_name in ("resnet_fixture", "yolo_tiny") else 10), kept
    a, b = str(tmp_path / "on.dvmb"), str(tmp_path / "off.dvmb")
    compile_onnx(onnx_path, out=a)
    compile_onnx(onnx_path, "--disable", "conv_nhwc", out=b)
    for env in envs:
        feeds = feeds_for(spec, env, np.random.default_rng(4))
        for threads in (1, 2):
            x, y = run_module(a, feeds, 1, threads=threads), run_module(b, feeds, 1, threads=threads)
            np.testing.assert_allclose(x[0], y[0], rtol=1e-4, atol=1e-4, err_msg=str(env))


# ---- extra readers of a pattern's intermediates ------------------------------
# PyTorch exports sometimes read an intermediate of a rewritten pattern again
# (the Shape of the scores or of the transposed keys, a debug output). Each
# pass either keeps that value computed or leaves the pattern alone: with a
# reader (the value as a graph output, a ReduceSum of it, its Shape) on each
# intermediate in turn, results are ONNX Runtime's with the pass on and off.

H, DH = 2, 4  # heads and head size of the attention models (hidden 8)


# ---- quant_float ---------------------------------------------------------------

def quant_model(tmp, n_out, case="bias"):
    """ONNX Runtime's quantize_dynamic of a Linear layer: x quantized
    (DynamicQuantizeLinear), MatMulInteger with the u8 weights, Cast, Mul by
    x_scale * w_scale[, Add bias]."""
    u8 = lambda name, v: numpy_helper.from_array(np.asarray(v, np.uint8), name)  # noqa: E731
    per_col = case == "per_column"
    w = rng.integers(0, 256, (D, n_out))
    inits = [u8("wq", w), u8("wzp", rng.integers(100, 156, (n_out,)) if per_col else 128),
             const("ws", rng.uniform(0.001, 0.01, (n_out,)) if per_col else 0.004),
             const("b", rng.uniform(-1, 1, (1, n_out) if case == "bias_2d" else (n_out,)))]
    mm_in = ["xq", "wq"] if case == "no_zero_points" else ["xq", "wq", "xzp", "wzp"]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xzp"]),
             helper.make_node("Mul", ["xs", "ws"] if case != "scales_swapped" else ["ws", "xs"], ["s"]),
             helper.make_node("MatMulInteger", mm_in, ["p"]),
             helper.make_node("Cast", ["p"], ["f"], to=TensorProto.FLOAT16 if case == "cast_f16" else F)]
    outputs = ["y"]
    if case == "cast_f16":
        nodes += [helper.make_node("Cast", ["f"], ["f32"], to=F), helper.make_node("Mul", ["f32", "s"], ["h"])]
    else:
        nodes.append(helper.make_node("Mul", ["s", "f"] if case == "bias_first" else ["f", "s"], ["h"]))
    if case == "no_bias":
        nodes[-1].output[0] = "y"
    else:
        nodes.append(helper.make_node("Add", ["b", "h"] if case == "bias_first" else ["h", "b"], ["y"]))
    if case == "scale_read":
        outputs.append("s")
    if case == "product_read":
        nodes.append(helper.make_node("Cast", ["p"], ["pf"], to=F))
        outputs.append("pf")
    return pass_model(tmp, nodes, inits, opset=14, outputs=outputs, name="quant.onnx"), len(outputs)


QUANT_FIRES = ["bias", "bias_first", "no_bias", "per_column", "scales_swapped", "scale_read", "bias_2d"]
QUANT_STAYS = ["no_zero_points", "cast_f16", "product_read"]


@pytest.mark.parametrize("case", QUANT_FIRES + QUANT_STAYS)
@pytest.mark.parametrize("n_out", [1, 17, 64])
def test_quant_float(tmp_path, case, n_out):
    path, nout = quant_model(tmp_path, n_out, case)
    text = dump_ir(path)
    fired = "com.microsoft::MatMulIntegerToFloat(" in text
    assert fired == (case in QUANT_FIRES), text
    if fired:  # the bias taken where it is [N], the Mul alone where not
        assert ("= Add(" in text) == (case == "bias_2d"), text
        assert ("= Mul(" in text) == (case == "scale_read"), text
    assert "MatMulIntegerToFloat" not in dump_ir(path, "--disable", "quant_float")
    assert "MatMulIntegerToFloat" not in dump_ir(path, "--target", "cpu,cuda")
    feeds = [{"x": rng.standard_normal(s).astype(np.float32) * 2} for s in [(1, 1, D), (1, 7, D), (3, 13, D)]]
    # the same bits on and off (the kernel rounds as the Mul, Cast, Mul and
    # Add kernels do); ONNX Runtime's within rounding
    on_off_exact(tmp_path, path, "quant_float", feeds, nout=nout, with_ort=False)
    on_off(tmp_path, path, "quant_float", feeds, nout=nout, rtol=0, atol=0, with_ort=True)


def attention_graph(tmp, form, target, reader):
    """Hugging Face's self-attention on q, k, v [B, S, H * DH]: scores scaled
    after the product with a mask added ("mask"), or Q and K^T scaled before
    it with GPT-2's causal Where ("causal"); `reader` reads `target`."""
    i64 = lambda name, v: numpy_helper.from_array(np.asarray(v, np.int64), name)  # noqa: E731
    inits = [i64("hs", [0, 0, H, DH]), i64("os", [0, 0, H * DH]), const("c", DH ** -0.5), const("c4", DH ** -0.25)]
    nodes = []
    for t, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [helper.make_node("Reshape", [t, "hs"], [t + "r"]),
                  helper.make_node("Transpose", [t + "r"], [t + "t"], perm=perm)]
    if form == "mask":
        nodes += [helper.make_node("MatMul", ["qt", "kt"], ["s"]), helper.make_node("Div", ["s", "c"], ["ss"]),
                  helper.make_node("Add", ["ss", "mask"], ["sm"])]
    else:
        tri = np.tril(np.ones((16, 16), bool))[None, None]
        inits += [numpy_helper.from_array(tri, "tri"), i64("zeros", [0, 0]), i64("axes23", [2, 3]), i64("i1", [1]),
                  i64("i2", [2]), const("lowest", np.finfo(np.float32).min)]
        nodes += [helper.make_node("Mul", ["qt", "c4"], ["qs"]), helper.make_node("Mul", ["kt", "c4"], ["ks"]),
                  helper.make_node("MatMul", ["qs", "ks"], ["ss"]),
                  helper.make_node("Shape", ["q"], ["qshape"]),
                  helper.make_node("Slice", ["qshape", "i1", "i2"], ["len"]),
                  helper.make_node("Concat", ["len", "len"], ["ends"], axis=0),
                  helper.make_node("Slice", ["tri", "zeros", "ends", "axes23"], ["causal"]),
                  helper.make_node("Where", ["causal", "ss", "lowest"], ["sm"])]
    nodes += [helper.make_node("Softmax", ["sm"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "vt"], ["pv"]),
              helper.make_node("Transpose", ["pv"], ["pvt"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["pvt", "os"], ["y"])]
    nodes, extra = with_reader(nodes, target, reader)
    ins = [helper.make_tensor_value_info(n, F, ["B", "S", H * DH]) for n in "qkv"]
    if form == "mask":
        ins.append(helper.make_tensor_value_info("mask", F, ["B", 1, 1, "S"]))
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info(o, F, None) for o in ("y", extra)], inits)
    path = str(tmp / "attention.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8).SerializeToString())
    return path


def with_reader(nodes, target, reader):
    """nodes and one more reader of target; the name of what it gives (f32)."""
    if reader == "output":
        return nodes, target
    if reader == "sum":
        return nodes + [helper.make_node("ReduceSum", [target], ["extra"], keepdims=0)], "extra"
    return nodes + [helper.make_node("Shape", [target], ["shape"]),
                    helper.make_node("Cast", ["shape"], ["extra"], to=F)], "extra"


ATTENTION_VALUES = {"mask": ["qt", "kt", "vt", "s", "ss", "sm", "p", "pv", "pvt"],
                    "causal": ["kr", "qs", "ks", "ss", "sm", "p", "pvt"]}


@pytest.mark.parametrize("reader", ["output", "sum", "shape"])
@pytest.mark.parametrize("form,target", [(f, t) for f, ts in ATTENTION_VALUES.items() for t in ts])
def test_attention_extra_reader(tmp_path, form, target, reader):
    """The head Transposes (and Reshapes) stay computed for another reader;
    a Shape of any value of the chain is known without it; any other reader
    of the chain's values leaves the pattern alone."""
    path = attention_graph(tmp_path, form, target, reader)
    fired = "= Attention(" in dump_ir(path)
    assert fired == (reader == "shape" or target in ("qt", "kt", "vt", "kr")), dump_ir(path)
    feeds = []
    for b, s in ((1, 1), (2, 7), (1, 13)):
        f = {n: rng.standard_normal((b, s, H * DH)).astype(np.float32) for n in "qkv"}
        if form == "mask":
            f["mask"] = np.where(rng.random((b, 1, 1, s)) < 0.3, -10000.0, 0.0).astype(np.float32)
        feeds.append(f)
    on_off(tmp_path, path, "attention", feeds, nout=2)


def conv_swish_nodes():
    """Conv, an affine step folded into it, swish, an affine step after."""
    return [node("Mul", ["c", "s"], "c1"), node("Add", ["c1", "t"], "c2"), node("Sigmoid", ["c2"], "c3"),
            node("Mul", ["c2", "c3"], "c4"), node("Mul", ["c4", "s"], "c5"), node("Add", ["c5", "t"], "y")]


READER_PATTERNS = {  # pass: the pattern's nodes (x [batch, seq, D] -> y), constants, opset
    "layernorm": lambda: (layernorm_nodes(), layernorm_inits(), 14),
    "gelu": lambda: (gelu_erf_nodes("bert"), gelu_inits(), 14),
    "gelu_tanh": lambda: (gelu_tanh_nodes(), gelu_inits(), 14),
    "rmsnorm": lambda: (rmsnorm_nodes(), rmsnorm_inits(), 14),
    "rmsnorm_div": lambda: (rmsnorm_nodes(form="div"), rmsnorm_inits(), 14),
    "epilogue": lambda: ([helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "b"], ["h"]),
                          helper.make_node("Tanh", ["h"], ["y"])],
                         [const("w", rng.standard_normal((D, 13))), const("b", rng.standard_normal(13))], 14),
    "skiplayernorm": lambda: ([helper.make_node("MatMul", ["x", "w"], ["r"]), helper.make_node("Add", ["x", "r"], ["s"]),
                               helper.make_node("LayerNormalization", ["s", "g", "b"], ["y"], epsilon=1e-6)],
                              [const("w", rng.standard_normal((D, D)) / np.sqrt(D)),
                               const("g", rng.uniform(0.5, 1.5, D)), const("b", rng.uniform(-1, 1, D))], 17),
    "conv_act": lambda: (conv_swish_nodes(), [const("s", 1.5), const("t", 0.25)], 14),
}


@pytest.mark.parametrize("reader", ["output", "sum", "shape"])
@pytest.mark.parametrize("pattern", sorted(READER_PATTERNS))
def test_extra_reader(tmp_path, pattern, reader):
    """Each intermediate of each pattern read once more: ONNX Runtime's
    results with the pass on and off."""
    nodes, inits, opset = READER_PATTERNS[pattern]()
    values = [o for n in nodes for o in n.output if o != "y"] + (["c"] if pattern == "conv_act" else [])
    pass_name = pattern.split("_")[0] if pattern != "conv_act" else pattern
    for target in values:
        with_extra, extra = with_reader(nodes, target, reader)
        if pattern == "conv_act":
            path, _ = conv_model(tmp_path, with_extra, inits, outputs=("y", extra))
            feeds = [{"x": rng.standard_normal(s).astype(np.float32)} for s in CONV_SHAPES[:2]]
        else:
            path = pass_model(tmp_path, with_extra, inits, opset=opset, outputs=("y", extra))
            feeds = xs()[:2]
        on_off(tmp_path, path, pass_name, feeds, nout=2)

# ---- conv_add and conv_winograd ----------------------------------------------

def residual_model(tmp, case):
    """A ResNet block on x [n, 16, h, w]: c1 = Relu(Conv 3x3 (16)), c2 = Conv
    3x3 (16) of c1, y = Relu(c2 + x) (case "relu"; "plain": no Relu, y =
    c2 + x; "down": the other operand a 1x1 conv of x, both with biases;
    "nobias": c2's conv without B; "broadcast": x's channel means, [n, 16,
    1, 1], added; "escape": c2 also a graph output). conv_add fuses the Add
    (and the Relu) into c2's conv (into the 1x1's, the later of two convs,
    in "down") in the first three cases only."""
    def w(name, *shape):
        return const(name, rng.standard_normal(shape) * (0.6 / np.sqrt(np.prod(shape[1:]))))
    inits = [w("w1", 16, 16, 3, 3), w("w2", 16, 16, 3, 3), w("wd", 16, 16, 1, 1),
             const("b1", rng.uniform(-1, 1, 16)), const("b2", rng.uniform(-1, 1, 16)), const("bd", rng.uniform(-1, 1, 16))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c0"], pads=[1, 1, 1, 1]), node("Relu", ["c0"], "c1"),
             helper.make_node("Conv", ["c1", "w2"] + ([] if case == "nobias" else ["b2"]), ["c2"], pads=[1, 1, 1, 1])]
    other, outputs = "x", ["y"]
    if case == "down":
        nodes.append(helper.make_node("Conv", ["x", "wd", "bd"], ["d"]))
        other = "d"
    elif case == "broadcast":
        nodes.append(helper.make_node("ReduceMean", ["x"], ["d"], axes=[2, 3]))
        other = "d"
    elif case == "escape":
        outputs.append("c2")
    if case == "plain":
        nodes.append(node("Add", [other, "c2"], "y"))
    else:
        nodes += [node("Add", ["c2", other], "s"), node("Relu", ["s"], "y")]
    ins = [helper.make_tensor_value_info("x", F, ["n", 16, "h", "w"])]
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info(o, F, None) for o in outputs], inits)
    path = str(tmp / "residual.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8).SerializeToString())
    return path, len(outputs)


RESIDUAL_SHAPES = [(1, 16, 7, 9), (2, 16, 13, 5), (1, 16, 1, 1), (1, 16, 29, 1), (3, 16, 17, 31), (1, 16, 40, 37),
                   (0, 16, 5, 5)]


def on_off_ort(tmp, path, nout, passes, shapes, threads=(1, 2), rtol=1e-5, atol=2e-5):
    """The model with `passes` on and off agree (rtol, atol) and match ONNX
    Runtime, at each shape of x and thread count."""
    on, off = str(tmp / "on.dvmb"), str(tmp / "off.dvmb")
    compile_onnx(path, out=on)
    compile_onnx(path, *[a for p in passes for a in ("--disable", p)], out=off)
    sess = ort_session(path)
    for shape in shapes:
        f = {"x": rng.standard_normal(shape).astype(np.float32)}
        want = sess.run(None, f)
        for t in threads:
            a, b = run_module(on, f, nout, threads=t), run_module(off, f, nout, threads=t)
            for x, y, w in zip(a, b, want, strict=True):
                assert x.shape == y.shape == w.shape
                np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=f"{shape} {t} threads")
                np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-4, err_msg=f"{shape} {t} threads")


@pytest.mark.parametrize("case", ["relu", "plain", "down", "nobias", "broadcast", "escape"])
def test_conv_add(tmp_path, case):
    path, nout = residual_model(tmp_path, case)
    text = dump_ir(path, *NO_WINO)
    z = [ln for ln in text.splitlines() if "FusedConv(%c1, %w2, %b2, %x)" in ln or "FusedConv(%x, %wd, %bd, %c2)" in ln]
    if case in ("relu", "plain", "down"):
        assert len(z) == 1 and ("%wd" in z[0]) == (case == "down") and ('activation="Relu"' in z[0]) == (case != "plain"), text
        assert "= Add(" not in text and (case == "plain" or "= Relu(" not in text), text
        # with conv_nhwc: c1 and the sum's operands channels last where only convolutions read them
        assert "dvm_layout=" in z[0], text
    else:
        assert not z and "= Add(" in text, text
    assert "= Add(" in dump_ir(path, "--disable", "conv_add")
    on_off_ort(tmp_path, path, nout, ["conv_add"], RESIDUAL_SHAPES)
    on_off_ort(tmp_path, path, nout, ["conv_add", "conv_nhwc", "conv_winograd"], RESIDUAL_SHAPES[:4])


def test_conv_winograd(tmp_path):
    """A 3x3 stride-1 conv of 16 to 16 channels gets dvm_algo 1; one to 5
    channels (fewer than a 16-channel block), a stride-2, a 1x1 and a
    grouped conv do not. Results within rounding of the direct
    kernels' and ONNX Runtime's, at awkward sizes and 1 to 3 threads."""
    def w(name, *shape):
        return const(name, rng.standard_normal(shape) * (0.6 / np.sqrt(np.prod(shape[1:]))))
    inits = [w("w1", 16, 16, 3, 3), w("w2", 5, 16, 3, 3), w("w3", 16, 5, 3, 3), w("w4", 16, 16, 1, 1),
             w("w5", 16, 4, 3, 3), const("b", rng.uniform(-1, 1, 16))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1]),
             helper.make_node("Conv", ["c2", "w3", "b"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Conv", ["c3", "w4"], ["c4"]),
             helper.make_node("Conv", ["c4", "w5", "b"], ["y"], pads=[0, 1, 2, 1], group=4)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["n", 16, "h", "w"])],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    path = str(tmp_path / "wino.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8).SerializeToString())
    text = dump_ir(path)
    algo = [ln.split("= ")[0].strip() for ln in text.splitlines() if "dvm_algo=1" in ln]
    assert len(algo) == 1 and algo[0].startswith("%c1"), text
    assert "dvm_algo" not in dump_ir(path, *NO_WINO)
    on_off_ort(tmp_path, path, 1, ["conv_winograd"], RESIDUAL_SHAPES, threads=(1, 2, 3), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pass_name,least", [("conv_add", 2), ("conv_winograd", 1)])
@pytest.mark.parametrize("model_name", ["ppocr_det", "ppocr_rec", "resnet_fixture"])
def test_conv_add_winograd_models(tmp_path, model_name, pass_name, least):
    """On the PP-OCRv4 models and the ResNet fixture: results match with
    the pass off at 1 and 2 threads; conv_add fires on the ResNet (its two
    residual Adds), conv_winograd on it and det (3x3 convs of 16 channels
    or more; rec has none)."""
    onnx_path, spec, envs = MODELS[model_name]
    if not os.path.exists(onnx_path):
        pytest.fail(f"{onnx_path} is missing (setup.sh)")
    text = dump_ir(onnx_path)
    fired = sum(1 for ln in text.splitlines() if "FusedConv(" in ln and
                ("dvm_algo=1" in ln if pass_name == "conv_winograd" else ln.split("FusedConv(")[1].split(")")[0].count(",") == 3))
    assert fired >= (least if model_name == "resnet_fixture" or (pass_name, model_name) == ("conv_winograd", "ppocr_det")
                     else 0), fired
    a, b = str(tmp_path / "on.dvmb"), str(tmp_path / "off.dvmb")
    compile_onnx(onnx_path, out=a)
    compile_onnx(onnx_path, "--disable", pass_name, out=b)
    for env in envs:
        feeds = feeds_for(spec, env, np.random.default_rng(4))
        for threads in (1, 2):
            x, y = run_module(a, feeds, 1, threads=threads), run_module(b, feeds, 1, threads=threads)
            np.testing.assert_allclose(x[0], y[0], rtol=1e-4, atol=1e-4, err_msg=f"{env} {threads} threads")


# ---- on the exports ----------------------------------------------------------

def node_count(text):
    return sum(1 for ln in text.splitlines() if " = " in ln and "; node " in ln)


def invokes(dvmb):
    text = dvm_ok("disasm", dvmb).stdout
    return sum(1 for ln in text.splitlines() if ln.strip().startswith("invoke"))


@pytest.mark.parametrize("model_name", ["bert_tiny", "gpt2_tiny"])
def test_exports(tmp_path, model_name):
    onnx_path, spec, _ = MODELS[model_name]
    if not os.path.exists(onnx_path):
        pytest.fail(f"{onnx_path} is missing: setup.sh exports it (tests/exported/export_models.py)")
    # (with layernorm off, rmsnorm would take the LayerNorm's centred half)
    all_off = sum((["--disable", p] for p in ("layernorm", "gelu", "epilogue", "skiplayernorm", "rmsnorm")), [])
    on, off = dump_ir(onnx_path), dump_ir(onnx_path, *all_off)
    # a LayerNorm either stands alone or takes the residual add before it
    skips = on.count("com.microsoft::SkipLayerNormalization(")
    lns = on.count("= LayerNormalization(") + skips
    assert skips >= 2 * 2, skips  # two per layer
    # a Gelu either stands alone or is a product's epilogue
    gelus = on.count("= Gelu(") + on.count('{activation="Gelu"}') + on.count('{activation="GeluTanh"}')
    products = on.count("= dvm::MatMulBias(")
    decomposed = off.count("= ReduceMean(") // 2
    assert lns == decomposed and lns >= 3, (lns, decomposed)
    assert gelus == off.count("= Erf(") + off.count("= Tanh(") - (1 if model_name == "bert_tiny" else 0)
    assert gelus >= 2
    assert products >= 8 and off.count("= MatMul(") - on.count("= MatMul(") == products, products
    # per LayerNorm 8 or 9 nodes become 1, per GELU 5 (erf) or 8 (tanh) become 1, per biased product 2 or 3,
    # per residual add 2
    assert node_count(off) - node_count(on) >= 8 * lns + 4 * gelus + products + skips
    a, b = str(tmp_path / "on.dvmb"), str(tmp_path / "off.dvmb")
    compile_onnx(onnx_path, out=a)
    compile_onnx(onnx_path, *all_off, out=b)
    assert invokes(a) < invokes(b)
    for env in [{"batch": 1, "seq": 1}, {"batch": 1, "seq": 7}, {"batch": 2, "seq": 13}]:
        feeds = feeds_for(spec, env, np.random.default_rng(4))
        x, y = run_module(a, feeds, 1), run_module(b, feeds, 1)
        np.testing.assert_allclose(x[0], y[0], rtol=1e-4, atol=1e-5, err_msg=str(env))


@pytest.mark.parametrize("model_name", ["bert_tiny", "gpt2_tiny"])
def test_attention_exports(tmp_path, model_name):
    """Each layer's attention (BERT's mask add, GPT-2's causal Where)
    becomes one Attention node, the head Transposes and shape arithmetic
    go with it, and the results stay the same at seq 1, primes and batch 2."""
    onnx_path, spec, _ = MODELS[model_name]
    on, off = dump_ir(onnx_path), dump_ir(onnx_path, "--disable", "attention")
    assert on.count("= Attention(") == off.count("= Softmax(") >= 2 and "= Softmax(" not in on
    assert "= Transpose(" not in on and ("is_causal=1" in on) == (model_name == "gpt2_tiny")
    a, b = str(tmp_path / "on.dvmb"), str(tmp_path / "off.dvmb")
    compile_onnx(onnx_path, out=a)
    compile_onnx(onnx_path, "--disable", "attention", out=b)
    assert invokes(a) < invokes(b)
    for env in [{"batch": 1, "seq": 1}, {"batch": 1, "seq": 7}, {"batch": 2, "seq": 13}, {"batch": 1, "seq": 67}]:
        feeds = feeds_for(spec, env, np.random.default_rng(5))
        x, y = run_module(a, feeds, 1), run_module(b, feeds, 1)
        np.testing.assert_allclose(x[0], y[0], rtol=1e-4, atol=1e-4, err_msg=str(env))


def test_cli():
    r = dvm("compile", "--list-passes")
    assert r.returncode == 0 and [ln.split()[0] for ln in r.stdout.splitlines()] == ["quant_const", "quant_float", "layernorm", "gelu", "epilogue",
                                                                                   "skiplayernorm", "rmsnorm", "pad_conv",
                                                                                   "conv_act", "conv_add", "conv_nhwc", "qdq_pair",
                                                                                   "conv_winograd", "attention"], r.stdout
    r = dvm("compile", "x.onnx", "-o", "x.dvmb", "--disable", "nosuch")
    assert r.returncode == 2 and "--disable nosuch: no such pass" in r.stderr, r.stderr
