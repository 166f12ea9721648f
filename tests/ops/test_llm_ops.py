"""The ops of the decoder LLMs that ONNX Runtime GenAI's model builder
writes: SimplifiedLayerNormalization (default domain),
SkipSimplifiedLayerNormalization, RotaryEmbedding and GroupQueryAttention
(com.microsoft), each a one-node model, dvm against ONNX Runtime's CPU
kernels at awkward shapes: max error <= 1e-5 * max |ORT| (f32 sums in
another order). GroupQueryAttention also with present_key/present_value
in past_key/past_value's own memory, as a generator binds them."""
import numpy as np
import pytest
from dvmtest.arrays import normal_f32
from dvmtest.cli import dvm
from dvmtest.compare import ort_outputs
from dvmtest.onnxmodel import save_model
from onnx import TensorProto, helper

from dvmop import DvmError, run_model, run_text

rng = np.random.default_rng(29)
f32 = normal_f32(rng)
MS = "com.microsoft"


def op_model(op, feeds, names, outs, domain="", **attrs):
    """A one-node model; names: the node's inputs in order ("" omitted),
    feeds: their arrays; outs: its outputs ("" omitted)."""
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(feeds[n].dtype), list(feeds[n].shape))
          for n in names if n]
    node = helper.make_node(op, list(names), list(outs), domain=domain, **attrs)
    vo = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs if o]
    return helper.make_model(helper.make_graph([node], "g", vi, vo),
                             opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])


def both(m, feeds):
    """(dvm's outputs, ONNX Runtime's) of model m."""
    want = ort_outputs(m, feeds)
    names = [i.name for i in m.graph.input]
    return run_model(m, {n: feeds[n] for n in names}, len(want)), want


def close_rows(got, want, rows=None):
    """rows: per batch entry, how many rows of output 0 to compare (the
    rest is padding ONNX Runtime leaves unspecified)."""
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, w.shape)
        if i == 0 and rows is not None:
            g = np.concatenate([g[b, :r] for b, r in enumerate(rows)])
            w = np.concatenate([w[b, :r] for b, r in enumerate(rows)])
        err = np.abs(g - w).max(initial=0)
        assert err <= 1e-5 * max(np.abs(w).max(initial=0), 1), (i, err)


def refused(m, feeds, words):
    with pytest.raises(DvmError) as e:
        run_model(m, feeds, 1)
    for w in words:
        assert w in e.value.message, e.value.message


# ---- SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization ----

@pytest.mark.parametrize("shape,axis", [((1, 1), -1), ((3, 7), -1), ((2, 5, 13), -1), ((2, 0, 3), -1),
                                        ((4, 17), 1), ((2, 3, 5), 1), ((2, 3, 5), -2), ((1, 3, 129), -1)])
@pytest.mark.parametrize("inv", [False, True])
def test_simplified_layer_normalization(shape, axis, inv):
    x = f32(*shape) * 3
    s = f32(*shape[axis:])
    attrs = {} if axis == -1 else {"axis": axis}
    if inv:
        attrs["epsilon"] = 1e-3
    m = op_model("SimplifiedLayerNormalization", {"x": x, "s": s}, ["x", "s"], ["y", "inv"] if inv else ["y"],
                 **attrs)
    close_rows(*both(m, {"x": x, "s": s}))


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 7), (3, 1, 64), (1, 0, 5), (5, 33), (1, 257)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("with_sum", [False, True])
def test_skip_simplified_layer_normalization(shape, bias, with_sum):
    h = shape[-1]
    feeds = {"x": f32(*shape), "skip": f32(*shape), "g": f32(h)}
    if bias:
        feeds["bias"] = f32(h)
    outs = ["y", "", "", "sum"] if with_sum else ["y"]
    m = op_model("SkipSimplifiedLayerNormalization", feeds, list(feeds), outs, domain=MS, epsilon=1e-6)
    close_rows(*both(m, feeds))


def test_skip_simplified_layer_normalization_statistics_are_refused():
    feeds = {"x": f32(2, 4), "skip": f32(2, 4), "g": f32(4)}
    m = op_model("SkipSimplifiedLayerNormalization", feeds, list(feeds), ["y", "", "inv"], domain=MS)
    refused(m, feeds, ["SkipSimplifiedLayerNormalization", "output 2"])


# ---- f16 nodes whose kernels compute f32 only ----

F16_CASES = {  # op, domain, inputs (f32 arrays cast to f16 unless integer), outputs, attributes
    "skip_rmsnorm": ("SkipSimplifiedLayerNormalization", MS,
                     {"x": f32(2, 3, 7), "skip": f32(2, 3, 7), "g": f32(7)}, ["y", "", "", "sum"], {"epsilon": 1e-6}),
    "skip_rmsnorm_257": ("SkipSimplifiedLayerNormalization", MS,
                         {"x": f32(1, 257), "skip": f32(1, 257), "g": f32(257), "b": f32(257)}, ["y"], {}),
    "mha": ("MultiHeadAttention", MS, {"q": f32(2, 5, 12), "k": f32(2, 3, 12), "v": f32(2, 3, 8)}, ["y"],
            {"num_heads": 2}),
    "mha_past": ("MultiHeadAttention", MS,
                 {"q": f32(1, 1, 8), "k": f32(1, 1, 8), "v": f32(1, 1, 8), "bias": "", "mask": "", "ab": "",
                  "pk": f32(1, 2, 6, 4), "pv": f32(1, 2, 6, 4)}, ["y", "pk_out", "pv_out"],
                 {"num_heads": 2, "unidirectional": 1}),
}


@pytest.mark.parametrize("case", sorted(F16_CASES))
def test_f16_node_of_an_f32_kernel_rounds_as_onnxruntime(case):
    """An f16 node whose CPU kernel is f32 only runs on f32 copies of its
    inputs, its outputs rounded to f16: what ONNX Runtime does (it inserts
    the casts), so the results are ONNX Runtime's, to an f16 step."""
    op, domain, inputs, outs, attrs = F16_CASES[case]
    feeds = {n: a.astype(np.float16) for n, a in inputs.items() if not isinstance(a, str)}
    names = [n if not isinstance(a, str) else "" for n, a in inputs.items()]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT16, list(feeds[n].shape)) for n in names if n]
    vo = [helper.make_tensor_value_info(o, TensorProto.FLOAT16, None) for o in outs if o]
    node = helper.make_node(op, names, outs, domain=domain, **attrs)
    m = helper.make_model(helper.make_graph([node], "g", vi, vo),
                          opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    got, want = both(m, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float16 and g.shape == w.shape
        g, w = g.astype(np.float32), w.astype(np.float32)
        assert np.all(np.abs(g - w) <= np.spacing(np.abs(w).astype(np.float16)).astype(np.float32)), case


# ---- com.microsoft RotaryEmbedding ----

ROTARY = [  # (x shape, num_heads, rotary_embedding_dim, head size)
    ((2, 3, 16), 0, 0, 8), ((1, 1, 64), 0, 0, 64), ((3, 7, 24), 3, 0, 8), ((2, 5, 40), 2, 12, 20),
    ((2, 2, 5, 8), 0, 0, 8), ((1, 3, 1, 16), 3, 8, 16), ((0, 4, 16), 0, 0, 8)]


@pytest.mark.parametrize("shape,heads,rd,d", ROTARY)
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("pos", ["each", "start", "scalar"])
def test_contrib_rotary_embedding(shape, heads, rd, d, interleaved, pos):
    b, s = shape[0], shape[2] if len(shape) == 4 else shape[1]
    half = (rd or d) // 2
    rows = 19
    feeds = {"x": f32(*shape), "cos": f32(rows, half), "sin": f32(rows, half)}
    feeds["pos"] = (rng.integers(0, rows, (b, s)) if pos == "each" else
                    np.array([rows - s] if pos == "start" else rows - s - 1)).astype(np.int64)
    attrs = {"interleaved": interleaved}
    if heads:
        attrs["num_heads"] = heads
    if rd:
        attrs["rotary_embedding_dim"] = rd
    m = op_model("RotaryEmbedding", feeds, ["x", "pos", "cos", "sin"], ["y"], domain=MS, scale=2.0, **attrs)
    close_rows(*both(m, feeds))


def test_contrib_rotary_embedding_bad_positions():
    feeds = {"x": f32(1, 3, 16), "pos": np.array([9], np.int64), "cos": f32(10, 4), "sin": f32(10, 4)}
    m = op_model("RotaryEmbedding", feeds, ["x", "pos", "cos", "sin"], ["y"], domain=MS)
    refused(m, feeds, ["contrib_rotary_embedding", "position 10", "10 rows"])
    feeds["cos"] = f32(10, 3)
    m = op_model("RotaryEmbedding", feeds, ["x", "pos", "cos", "sin"], ["y"], domain=MS)
    refused(m, feeds, ["contrib_rotary_embedding", "cos_cache"])


# ---- com.microsoft GroupQueryAttention ----

GQA_INPUTS = ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
              "sin_cache", "position_ids", "attention_bias", "head_sink"]


def gqa_case(b, s, past, lens, hq=4, hkv=2, d=16, packed=False, rotary=False, pos=False, bias=False, sink=False,
             **attrs):
    """Feeds, input names and attributes of a GroupQueryAttention call:
    past None (no past inputs) or the past buffers' length; lens each
    entry's total length (seqlens_k + 1). total_sequence_length is S for a
    first prompt (all lens <= S), else max(lens)."""
    first = all(t <= s for t in lens) and (past in (None, 0) or s > 1 or max(lens) == 1)
    total = s if first else max(lens)
    feeds = {"query": f32(b, s, (hq + 2 * hkv if packed else hq) * d)}
    if not packed:
        feeds["key"], feeds["value"] = f32(b, s, hkv * d), f32(b, s, hkv * d)
    if past is not None:
        feeds["past_key"], feeds["past_value"] = f32(b, hkv, past, d), f32(b, hkv, past, d)
    feeds["seqlens_k"] = np.array(lens, np.int32) - 1
    feeds["total_sequence_length"] = np.array(total, np.int32)
    if rotary:
        half = rotary // 2 if rotary > 1 else d // 2
        feeds["cos_cache"], feeds["sin_cache"] = f32(total + 9, half), f32(total + 9, half)
        attrs["do_rotary"] = 1
    if pos:
        feeds["position_ids"] = rng.integers(0, 9, (b, s)).astype(np.int64) + np.arange(s)
    if bias:
        feeds["attention_bias"] = f32(b if bias == 2 else 1, hq if bias == 2 else 1, s, total) * 2
    if sink:
        feeds["head_sink"] = f32(hq)
    names = [n if n in feeds else "" for n in GQA_INPUTS]
    while not names[-1]:
        names.pop()
    return feeds, names, dict(num_heads=hq, kv_num_heads=hkv, **attrs), (lens if first and s > 1 else None)


def run_gqa(case, outs=("output", "present_key", "present_value")):
    feeds, names, attrs, rows = case
    m = op_model("GroupQueryAttention", feeds, names, outs, domain=MS, **attrs)
    close_rows(*both(m, feeds), rows=rows)


# (B, S, past length or None, each entry's total length)
CALLS = [
    (1, 1, None, [1]), (1, 1, 0, [1]), (2, 5, 0, [5, 5]), (3, 17, 0, [17, 3, 9]),  # first prompts, padded ones
    (3, 1, 12, [13, 5, 10]), (2, 1, 1, [2, 2]), (1, 1, 31, [32]),  # one new token, copy mode
    (1, 4, 6, [10]),  # more tokens after a past (batch 1)
]


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("heads", [(4, 2, 16), (2, 2, 64), (6, 1, 40), (2, 1, 80)])
def test_gqa(call, heads):
    hq, hkv, d = heads
    run_gqa(gqa_case(*call, hq=hq, hkv=hkv, d=d))


OPTIONS = [dict(packed=True), dict(rotary=True), dict(rotary=True, rotary_interleaved=1), dict(rotary=16),
           dict(rotary=True, packed=True), dict(rotary=True, pos=True), dict(local_window_size=3),
           dict(local_window_size=1), dict(softcap=0.7), dict(scale=0.3), dict(smooth_softmax=1), dict(sink=True),
           dict(sink=True, smooth_softmax=1), dict(bias=1), dict(bias=2, softcap=2.0),
           dict(rotary=True, local_window_size=5, softcap=1.5, bias=2)]


@pytest.mark.parametrize("call", CALLS[2:])
@pytest.mark.parametrize("opts", OPTIONS)
def test_gqa_options(call, opts):
    run_gqa(gqa_case(*call, d=32, **opts))


def test_gqa_present_outputs_optional():
    """Without present outputs ONNX Runtime's CPU kernel leaves the past
    out (reading past the new keys): dvm attends over past ++ new either
    way, so output is compared with ONNX Runtime's run with the outputs."""
    for call, outs in (((2, 1, 5, [6, 3]), ("output",)), ((2, 3, 0, [3, 2]), ("output", "present_key")),
                       ((1, 4, 6, [10]), ("output", "", "present_value"))):
        feeds, names, attrs, rows = gqa_case(*call, rotary=True)
        full = op_model("GroupQueryAttention", feeds, names, ("output", "present_key", "present_value"), domain=MS,
                        **attrs)
        want = ort_outputs(full, feeds)
        m = op_model("GroupQueryAttention", feeds, names, outs, domain=MS, **attrs)
        got = run_model(m, feeds, len([o for o in outs if o]))
        close_rows(got, [want[i] for i, o in enumerate(outs) if o], rows=rows)


def shared_program(feeds, names, attrs):
    """The .dvms text of one group_query_attention call whose present_key
    and present_value are tensors over the storages holding past_key and
    past_value (the parameters copied there first), as a generator binds
    one buffer per layer; outputs output, present_key, present_value."""
    given = [n for n in names if n]
    present = sum(1 << i for i, n in enumerate(names) if n) | (7 << 16)
    dt = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}
    n = len(given)
    lines = [".kernel group_query_attention cpu 1", ".kernel identity cpu 1", ".shapefn group_query_attention"]
    body, reg, ins, stor = [], n, [f"r{i}" for i in range(n)], {}
    for name in ("past_key", "past_value"):
        i = given.index(name)
        rb, rs, rz, rsh, rt = (f"r{reg + k}" for k in range(5))
        reg += 5
        body += [f"  imm {rb}, {max(feeds[name].nbytes, 1)}", f"  alloc_storage {rs}, {rb}, cpu, 64", f"  imm {rz}, 0",
                 f"  shape_of {rsh}, r{i}", f"  alloc_tensor {rt}, {rs}, {rz}, f32, {rsh}",
                 f"  invoke identity, -, ({rt}), (r{i}), ()"]
        ins[i], stor[name] = rt, (rs, rz)
    vals = [present, attrs["num_heads"], attrs["kv_num_heads"], float(attrs.get("scale", 0)),
            float(attrs.get("softcap", 0)), attrs.get("do_rotary", 0), attrs.get("rotary_interleaved", 0),
            attrs.get("local_window_size", -1), attrs.get("smooth_softmax", 0)]
    ar = []
    for v in vals:
        body.append(f"  {'fimm' if isinstance(v, float) else 'imm'} r{reg}, {v!r}")
        ar.append(f"r{reg}")
        reg += 1
    sh = [f"r{reg + k}" for k in range(3)]
    outs = [f"r{reg + 3 + k}" for k in range(3)]
    reg += 6
    body.append(f"  shapefn group_query_attention, ({', '.join(sh)}), ({', '.join(ins + ar)})")
    body.append(f"  alloc {outs[0]}, f32, {sh[0]}, cpu")
    for o, name, s in zip(outs[1:], ("past_key", "past_value"), sh[1:]):
        body.append(f"  alloc_tensor {o}, {stor[name][0]}, {stor[name][1]}, f32, {s}")
    body.append(f"  invoke group_query_attention, -, ({', '.join(outs)}), ({', '.join(ins)}), ({', '.join(ar)})")
    body.append(f"  ret ({', '.join(outs)})")
    lines.append(f".func main regs={reg}")
    for i, name in enumerate(given):
        x = feeds[name]
        lines.append(f"  .param x{i} tensor {dt[x.dtype]} [{', '.join(str(d) for d in x.shape)}]")
    lines += [f"  .result y{k} any" for k in range(3)] + body + [".end"]
    return "\n".join(lines) + "\n"


def run_shared(feeds, names, attrs):
    return run_text(shared_program(feeds, names, attrs), [feeds[n] for n in names if n], 3)


# (B, S, max length, each entry's total length): the buffers hold the
# maximum length; a step writes rows [past_b, past_b + S) of entry b
SHARED = [(3, 1, 16, [13, 5, 10]), (1, 1, 8, [1]), (2, 1, 33, [33, 2]), (1, 5, 12, [9]), (2, 6, 9, [6, 4])]


@pytest.mark.parametrize("call", SHARED)
@pytest.mark.parametrize("opts", [{}, dict(rotary=True, local_window_size=4), dict(packed=True, sink=True)])
def test_gqa_shared_buffer(call, opts):
    b, s, mx, lens = call
    feeds, names, attrs, rows = gqa_case(b, s, mx, lens, d=32, **opts)
    m = op_model("GroupQueryAttention", feeds, names, ("output", "present_key", "present_value"), domain=MS, **attrs)
    want = ort_outputs(m, feeds)
    got = run_shared(feeds, names, attrs)
    assert got[1].shape == feeds["past_key"].shape
    close_rows(got[:1], want[:1], rows=rows)
    first = rows is not None or s == feeds["total_sequence_length"]
    for e in range(b):  # the new rows as ONNX Runtime writes them, the other rows untouched
        p = 0 if first else lens[e] - s
        for k, name in ((1, "past_key"), (2, "past_value")):
            close_rows([got[k][e, :, :p + s]], [want[k][e, :, :p + s]])
            np.testing.assert_array_equal(got[k][e, :, p + s:], feeds[name][e, :, p + s:])
            np.testing.assert_array_equal(got[k][e, :, :p], feeds[name][e, :, :p])


def test_gqa_bad_input_is_refused():
    feeds, names, attrs, _ = gqa_case(2, 1, 4, [5, 3])
    m = op_model("GroupQueryAttention", feeds, names, ("output",), domain=MS, **attrs)
    bad = dict(feeds, seqlens_k=np.array([7, 2], np.int32))  # past of 7 in a past buffer of 4
    refused(m, bad, ["group_query_attention", "seqlens_k[0] = 7"])
    m = op_model("GroupQueryAttention", feeds, names, ("output",), domain=MS, num_heads=3, kv_num_heads=2)
    refused(m, feeds, ["num_heads 3", "kv_num_heads 2"])
    m = op_model("GroupQueryAttention", feeds, names, ("output",), domain=MS, local_window_size=0, **attrs)
    refused(m, feeds, ["local_window_size 0"])
    feeds, names, attrs, _ = gqa_case(1, 2, 0, [2], rotary=True)
    feeds.update(cos_cache=f32(1, 8), sin_cache=f32(1, 8))
    m = op_model("GroupQueryAttention", feeds, names, ("output",), domain=MS, **attrs)
    refused(m, feeds, ["position 1", "1 rows"])


@pytest.mark.parametrize("what,attrs,extra", [
    ("causal 0", dict(causal=0), {}), ("sliding_window_cache", dict(sliding_window_cache=1), {}),
    ("qk_output", dict(qk_output=1), {}), ("k_quant_type", dict(k_quant_type="PER_TENSOR"), {}),
    ("input 16 (query_seqlens)", {}, {"query_seqlens": np.array([1], np.int32)})])
def test_gqa_unsupported_is_refused_by_name(tmp_path, what, attrs, extra):
    feeds, names, a, _ = gqa_case(1, 1, 3, [4])
    names = names + [""] * (16 - len(names)) + list(extra) if extra else names
    feeds = dict(feeds, **extra)
    m = op_model("GroupQueryAttention", feeds, names, ("output",), domain=MS, **a, **attrs)
    r = dvm("compile", save_model(m, tmp_path / "m.onnx"), "-o", tmp_path / "m.dvmb")
    assert r.returncode != 0 and "GroupQueryAttention" in r.stderr and what in r.stderr, r.stderr
