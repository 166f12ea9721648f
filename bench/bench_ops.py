#!/usr/bin/env python3
"""Single ops, dvm next to ONNX Runtime: the kernels of MatMul, Softmax and
LayerNorm, and every node of given ONNX models (or built-in one-node cases)
run alone.

Kernels (no MODEL and no --cases): for each case and thread count, the
single-op dvm program (written by tests/ops/dvmop.program, assembled with
`dvm asm`) timed by `dvm bench`, and a single-node ONNX model timed
in-process with time.perf_counter around InferenceSession.run_with_iobinding
(inputs bound once), ORT's intra_op_num_threads set to the same count, the
same number of timed runs after the same warm-up; both report the median,
and the table shows the lowest median of --rounds rounds that alternate the
two sides (on a shared machine a round in which another process took a core
is discarded rather than averaged in). MatMul is timed twice on each side:
with B a graph input (a dvm parameter), and with B an initializer (a dvm
module constant), which both prepack at load (what a model's weights get).

    python3 bench/bench_ops.py [--dvm build/tools/dvm] [--threads 1,2] [--rounds 3]
                               [--only matmul|softmax|layernorm] [--budget 0.5]
                               [--rows 1,8,32,128,512] [--kn 768x768,768x3072]
                               [--const-only]

Prints one table row per case: ms for each side and the ratio dvm/ORT
(below 1: dvm is faster), then for MatMul the same with B constant and
both sides' GFLOP/s (2 M K N over the median) with it. --const-only times
only the B-constant form. Each measurement runs for about --budget seconds
(at least 10, at most 1000 iterations).

Nodes (MODEL... or --cases): each model runs once in ONNX Runtime with
every intermediate value exposed as an output, on random inputs of the
shapes given (--shape NAME=DxD, or --dim SYMBOL=N for the symbols of the
inputs' dims; integer inputs in --range NAME=LO..HI, default 0..9), which
gives every node's input shapes and values. Each distinct (op, attributes,
input shapes and dtypes) becomes a one-node model: its inputs that were
initializers or Constant outputs in the model, and small integer tensors
(shapes, axes: at most 16 elements, what dvm folds), are initializers with
their values; the rest are graph inputs fed the values the model gave them.
--cases adds built-in one-node models (the shapes docs/performance.md
tracks: ConvInteger and MatMulInteger as quantize_dynamic writes them, convolutions with a
[k, 1] or [1, k] kernel, InstanceNormalization). Each is compiled with the
dvm Python package (PYTHONPATH=build/python) and timed with Module.run,
next to an InferenceSession.run of the same model and feeds, both in this
process by time.perf_counter, at each thread count, rounds as above. Nodes
with subgraphs (If, Loop, Scan) are not timed; a node dvm does not compile
is listed with the error.

    PYTHONPATH=build/python python3 bench/bench_ops.py MODEL.onnx... [--shape x=1x3x224x224]
        [--dim seq=128] [--range ids=0..999] [--cases conv_integer,conv_1d,instance_norm,matmul_integer]
        [--threads 1,2] [--rounds 3] [--budget 0.3] [--top N] [--ops MaxPool,Resize]

Prints one row per case, worst dvm/ORT ratio (first thread count) first:
the op, its input shapes (c: an initializer), how many nodes of the models
it stands for, ms of each side and their ratio per thread count, and the
largest difference of dvm's outputs from ORT's (relative to max |ORT|;
integers: the count of unequal elements).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", "tests", d) for d in ("ops", "lib")]
import dvmop  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
MATMUL_KN = ((768, 768), (768, 3072), (3072, 768), (3072, 3072))
SOFTMAX = [(1, 128, 768), (8, 128, 768), (1, 12, 128, 128)]
LAYERNORM = [(1, 128, 768), (8, 128, 768)]


def cases(only, rows, kn=MATMUL_KN):
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    if only in (None, "matmul"):
        for m, k, n in ((m, k, n) for m in rows for k, n in kn):
            yield (f"matmul {m}x{k} * {k}x{n}", "matmul", [f(m, k), f(k, n)], [], "MatMul", {}, 1)
    if only in (None, "softmax"):
        for s in SOFTMAX:
            yield (f"softmax {'x'.join(map(str, s))} axis -1", "softmax", [f(*s)], [-1], "Softmax",
                   {"axis": -1}, 0)
    if only in (None, "layernorm"):
        for s in LAYERNORM:
            yield (f"layernorm {'x'.join(map(str, s))} axis -1", "layernorm",
                   [f(*s), f(s[-1]), f(s[-1])], [-1, 1e-5], "LayerNormalization",
                   {"axis": -1, "epsilon": 1e-5}, 0)


def dvm_time(dvm, tmp, kernel, inputs, attrs, threads, iters, warmup, const_from=None):
    src, mod = os.path.join(tmp, f"{kernel}.dvms"), os.path.join(tmp, f"{kernel}.dvmb")
    with open(src, "w") as f:
        f.write(dvmop.program(kernel, inputs, attrs, shapefn="same" if kernel == "softmax" else None,
                              const_from=const_from))
    subprocess.run([dvm, "asm", src, "-o", mod], check=True, capture_output=True)
    r = subprocess.run([dvm, "bench", mod, "--threads", str(threads), "--iters", str(iters),
                        "--warmup", str(warmup)], check=True, capture_output=True, text=True)
    line = [l for l in r.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)["median_ms"]


def ort_session(op, inputs, attrs, threads, const_from):
    """A one-node model; inputs from index const_from on are initializers."""
    names = [f"x{i}" for i in range(len(inputs))]
    graph_in = [helper.make_tensor_value_info(n, TensorProto.FLOAT, x.shape)
                for n, x in zip(names[:const_from], inputs[:const_from])]
    inits = [onnx.numpy_helper.from_array(x, n) for n, x in zip(names[const_from:], inputs[const_from:])]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], "bench", graph_in,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    for n, x in zip(names[:const_from], inputs[:const_from]):
        binding.bind_cpu_input(n, x)
    binding.bind_output("y")
    return sess, binding


def ort_time(sess, binding, iters, warmup):
    for _ in range(warmup):
        sess.run_with_iobinding(binding)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run_with_iobinding(binding)
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3


def iterations(sess, binding, budget):
    """(timed runs, warm-up runs) for about `budget` seconds of sess, from
    three runs: at least 10, at most 1000."""
    t0 = time.perf_counter()
    for _ in range(3):
        sess.run_with_iobinding(binding)
    est = (time.perf_counter() - t0) / 3
    iters = int(min(1000, max(10, budget / max(est, 1e-6))))
    return iters, max(2, iters // 10)



# ---- nodes of ONNX models, one at a time ----------------------------------

SMALL_CONST = 16  # integer inputs up to this many elements are initializers (shapes, axes)


def named_values(specs, what):
    """NAME=VALUE arguments as a dict (NAME: everything before the last '=')."""
    out = {}
    for spec in specs or []:
        name, eq, value = spec.rpartition("=")
        if not eq or not name:
            sys.exit(f"bench_ops: {what} {spec!r}: want NAME=VALUE")
        out[name] = value
    return out


def model_feeds(model, shapes, dims, ranges, rng):
    """Random inputs for the model's graph inputs (not initializers)."""
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if vi.name in shapes:
            shape = [int(d) for d in shapes[vi.name].split("x") if d]
        else:
            shape = []
            for i, d in enumerate(tt.shape.dim):
                if d.HasField("dim_value"):
                    shape.append(d.dim_value)
                elif d.dim_param in dims:
                    shape.append(int(dims[d.dim_param]))
                else:
                    sys.exit(f"bench_ops: input {vi.name!r} dim {i} ({d.dim_param or 'unnamed'}) has no size: "
                             f"give --shape {vi.name}=DxD or --dim {d.dim_param or 'SYMBOL'}=N")
        dt = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dt.kind == "f":
            feeds[vi.name] = rng.standard_normal(shape).astype(dt)
        elif dt == np.bool_:
            feeds[vi.name] = rng.integers(0, 2, shape).astype(dt)
        else:
            lo, hi = (int(v) for v in ranges.get(vi.name, "0..9").split(".."))
            feeds[vi.name] = rng.integers(lo, hi + 1, shape).astype(dt)
    return feeds


def node_values(model, feeds):
    """Every value of the model's top graph on feeds: ONNX Runtime's run with
    each node output made a graph output."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for o in node.output:
            if o and o not in have:
                m.graph.output.append(onnx.ValueInfoProto(name=o))
                have.add(o)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    values = dict(zip((o.name for o in sess.get_outputs()), sess.run(None, feeds)))
    values.update(feeds)
    return values


def one_node(node, ins, outs, opsets, functions=(), ir_version=None):
    """A model of the one node: ins [(name, value, constant)] or None for an
    absent optional input; outs [(name, value)]."""
    graph_in, inits, seen = [], [], set()
    for i in ins:
        if i is None or i[0] in seen:
            continue
        name, v, const = i
        seen.add(name)
        if const:
            inits.append(numpy_helper.from_array(v, name))
        else:
            graph_in.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape))
    graph_out = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                 for o, v in outs if o]
    n = onnx.NodeProto()
    n.CopyFrom(node)
    model = helper.make_model(helper.make_graph([n], "node", graph_in, graph_out, inits), opset_imports=opsets)
    if ir_version:
        model.ir_version = ir_version
    model.functions.extend(functions)
    return model


def shapes_text(ins):
    """Each input's dims (a scalar: []; absent: -), c after an initializer's."""
    return " ".join("-" if i is None else ("x".join(map(str, i[1].shape)) or "[]") + ("c" if i[2] else "")
                    for i in ins)


def model_cases(path, args, rng, cases, skipped):
    """Adds the distinct nodes of the model at path to cases (key -> case)."""
    model = onnx.load(path)
    feeds = model_feeds(model, named_values(args.shape, "--shape"), named_values(args.dim, "--dim"),
                        named_values(args.range, "--range"), rng)
    values = node_values(model, feeds)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    consts = {n.output[0] for n in model.graph.node if n.op_type == "Constant"}
    for node in model.graph.node:
        if node.op_type == "Constant":
            continue
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            skipped[f"{node.op_type} (has a subgraph)"] = skipped.get(f"{node.op_type} (has a subgraph)", 0) + 1
            continue
        ins = []
        for name in node.input:
            v = inits.get(name, values.get(name)) if name else None
            if name and not isinstance(v, np.ndarray):
                ins = None
                break
            small = v is not None and v.dtype.kind in "iub" and v.size <= SMALL_CONST
            ins.append(None if not name else (name, v, name in inits or name in consts or small))
        outs = [(o, values.get(o)) for o in node.output]
        if ins is None or any(o and not isinstance(v, np.ndarray) for o, v in outs):
            skipped[f"{node.op_type} (a sequence value)"] = skipped.get(f"{node.op_type} (a sequence value)", 0) + 1
            continue
        key = (node.domain, node.op_type, tuple(sorted(a.SerializeToString() for a in node.attribute)),
               tuple(None if i is None else (i[1].dtype.str, i[1].shape, i[2], i[1].tobytes() if i[2] and
                                              i[1].size <= SMALL_CONST else None) for i in ins))
        if key in cases:
            cases[key]["count"] += 1
            continue
        cases[key] = {"op": node.op_type, "shapes": shapes_text(ins), "count": 1,
                      "model": one_node(node, ins, outs, model.opset_import, model.functions, model.ir_version),
                      "feeds": {i[0]: i[1] for i in ins if i is not None and not i[2]}}


def conv_integer_case(xs, ws, wtype=np.int8, **attrs):
    """ConvInteger as quantize_dynamic writes it: x and its zero point from
    DynamicQuantizeLinear (inputs), w and its zero point initializers."""
    rng = np.random.default_rng(1)
    lo, hi = np.iinfo(wtype).min, np.iinfo(wtype).max
    ins = [("x", rng.integers(0, 256, xs).astype(np.uint8), False),
           ("w", rng.integers(lo, hi + 1, ws).astype(wtype), True), ("xz", np.array(131, np.uint8), False),
           ("wz", np.array(0 if wtype == np.int8 else 119, wtype), True)]
    node = helper.make_node("ConvInteger", [i[0] for i in ins], ["y"], **attrs)
    return node, ins, np.int32


def matmul_integer_case(a_shape, b_shape, btype=np.int8):
    """MatMulInteger as quantize_dynamic writes it: a and its zero point
    from DynamicQuantizeLinear (inputs), b and its zero point initializers."""
    rng = np.random.default_rng(1)
    lo, hi = np.iinfo(btype).min, np.iinfo(btype).max
    ins = [("a", rng.integers(0, 256, a_shape).astype(np.uint8), False),
           ("b", rng.integers(lo, hi + 1, b_shape).astype(btype), True), ("az", np.array(131, np.uint8), False),
           ("bz", np.array(0 if btype == np.int8 else 119, btype), True)]
    return helper.make_node("MatMulInteger", [i[0] for i in ins], ["y"]), ins, np.int32


def conv_case(xs, ws, **attrs):
    rng = np.random.default_rng(1)
    ins = [("x", rng.standard_normal(xs).astype(np.float32), False),
           ("w", rng.standard_normal(ws).astype(np.float32), True),
           ("b", rng.standard_normal(ws[0]).astype(np.float32), True)]
    return helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs), ins, np.float32


def instance_norm_case(xs):
    rng = np.random.default_rng(1)
    ins = [("x", rng.standard_normal(xs).astype(np.float32), False),
           ("s", rng.standard_normal(xs[1]).astype(np.float32), True),
           ("b", rng.standard_normal(xs[1]).astype(np.float32), True)]
    return helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5), ins, np.float32


# --cases: the shapes that real models were slowest at (docs/performance.md)
BUILTIN = {
    "conv_integer": [
        lambda: conv_integer_case((1, 3, 224, 224), (768, 3, 16, 16), strides=[16, 16]),  # ViT patches
        lambda: conv_integer_case((1, 64, 56, 56), (64, 64, 3, 3), pads=[1] * 4),
        lambda: conv_integer_case((1, 3, 224, 224), (64, 3, 7, 7), strides=[2, 2], pads=[3] * 4),
        lambda: conv_integer_case((1, 128, 28, 28), (256, 128, 3, 3), strides=[2, 2], pads=[1] * 4),
        lambda: conv_integer_case((1, 256, 14, 14), (1024, 256, 1, 1)),
        lambda: conv_integer_case((1, 96, 56, 56), (96, 1, 3, 3), pads=[1] * 4, group=96),
        lambda: conv_integer_case((1, 64, 56, 56), (64, 64, 3, 3), np.uint8, pads=[1] * 4),
    ],
    "conv_1d": [
        lambda: conv_case((1, 256, 512, 1), (256, 256, 5, 1), pads=[2, 0, 2, 0]),
        lambda: conv_case((1, 256, 1, 512), (256, 256, 1, 5), pads=[0, 2, 0, 2]),
        lambda: conv_case((1, 128, 512, 1), (128, 128, 3, 1), strides=[2, 1], pads=[1, 0, 1, 0]),
        lambda: conv_case((1, 32, 1000, 5), (128, 32, 5, 1), strides=[3, 1], pads=[2, 0, 2, 0]),
        lambda: conv_case((1, 80, 1, 3000), (256, 80, 1, 3), pads=[0, 1, 0, 1]),
    ],
    "matmul_integer": [  # ddddocr_common_old's (u8 b) at M 1, 8, 128; gpt2.qdyn's at 4x128 tokens;
        # bert.qdyn's (BERT-base sizes) at 1x16, 1x61 and 4x128 tokens
        *[(lambda m=m: matmul_integer_case((m, 1024), (1024, 8210), np.uint8)) for m in (1, 8, 128)],
        lambda: matmul_integer_case((512, 64), (64, 192)),
        lambda: matmul_integer_case((512, 256), (256, 64)),
        lambda: matmul_integer_case((512, 64), (64, 1000)),
        lambda: matmul_integer_case((16, 768), (768, 768)),
        lambda: matmul_integer_case((61, 768), (768, 3072)),
        lambda: matmul_integer_case((512, 3072), (3072, 768)),
    ],
    "instance_norm": [
        lambda: instance_norm_case((1, 256, 512)),
        lambda: instance_norm_case((1, 512, 1500)),
        lambda: instance_norm_case((1, 64, 128, 128)),
        lambda: instance_norm_case((1, 256, 32, 32)),
    ],
}


def builtin_cases(names, cases):
    for name in names:
        if name not in BUILTIN:
            sys.exit(f"bench_ops: --cases {name!r}: not one of {', '.join(BUILTIN)}")
        for make in BUILTIN[name]:
            node, ins, out_type = make()
            model = one_node(node, ins, [], [helper.make_opsetid("", 17)])
            model.graph.output.append(helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(
                np.dtype(out_type)), None))
            cases[(name, len(cases))] = {"op": node.op_type, "shapes": shapes_text(ins), "count": 1, "model": model,
                                         "feeds": {i[0]: i[1] for i in ins if not i[2]}}


def call_ms(fn, iters, warmup):
    """The median ms of iters calls of fn after warmup calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3


def difference(got, want):
    """Integers: how many elements differ; floats: max |got - want| / max |want|."""
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return float("inf")
        if w.dtype.kind in "iub":
            worst = max(worst, float(np.count_nonzero(g != w)))
        elif w.size:
            scale = max(float(np.max(np.abs(w.astype(np.float64)))), 1e-30)
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) / scale)
    return worst


def time_case(case, threads, budget, rounds):
    """(per thread count: (dvm ms, ORT ms)), the outputs' difference; or an error line."""
    import dvm
    blob = case["model"].SerializeToString()
    try:
        mod = dvm.compile(case["model"])
    except Exception as e:  # noqa: BLE001 (any failure is a row of the table)
        return None, str(e).splitlines()[0]
    feeds = case["feeds"]
    names = [o.name for o in case["model"].graph.output]
    out = []
    diff = None
    for t in threads:
        so = ort.SessionOptions()
        so.intra_op_num_threads = t
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
        ort_run = lambda: sess.run(None, feeds)  # noqa: E731
        dvm_run = lambda: mod.run(feeds, threads=t)  # noqa: E731
        try:
            got = dvm_run()
        except Exception as e:  # noqa: BLE001
            return None, str(e).splitlines()[0]
        if diff is None:
            diff = difference([got[n] for n in names], ort_run())
        t0 = time.perf_counter()
        ort_run()
        est = time.perf_counter() - t0
        iters = int(min(1000, max(5, budget / max(est, 1e-6))))
        warmup = max(2, iters // 10)
        best_d = best_o = float("inf")
        for _ in range(rounds):
            best_o = min(best_o, call_ms(ort_run, iters, warmup))
            best_d = min(best_d, call_ms(dvm_run, iters, warmup))
        out.append((best_d, best_o))
    return out, diff


def nodes_main(args):
    threads = [int(t) for t in args.threads.split(",")]
    cases, skipped = OrderedDict(), {}
    rng = np.random.default_rng(0)
    for path in args.models:
        model_cases(path, args, rng, cases, skipped)
    if args.cases:
        builtin_cases(args.cases.split(","), cases)
    rows, failed = [], []
    ops = set(args.ops.split(",")) if args.ops else None
    for case in cases.values():
        if ops and case["op"] not in ops:
            continue
        times, diff = time_case(case, threads, args.budget, args.rounds)
        if times is None:
            failed.append((case, diff))
        else:
            rows.append((case, times, diff))
            print(f"  {case['op']} {case['shapes']}: " + ", ".join(f"{d:.4f} / {o:.4f} ms" for d, o in times),
                  file=sys.stderr, flush=True)
    rows.sort(key=lambda r: -r[1][0][0] / r[1][0][1])
    head = f"{'op':24} {'input shapes':52} {'nodes':>5}"
    for t in threads:
        head += f" {f'dvm ms ({t})':>12} {'ort ms':>9} {'dvm/ort':>7}"
    print(head + f" {'diff':>8}")
    for case, times, diff in rows[:args.top] if args.top else rows:
        line = f"{case['op'][:24]:24} {case['shapes'][:52]:52} {case['count']:5}"
        for d, o in times:
            line += f" {d:12.4f} {o:9.4f} {d / o:7.2f}"
        print(line + f" {diff:8.2g}")
    for case, err in failed:
        print(f"not compiled or run by dvm: {case['op']} {case['shapes']} ({case['count']} nodes): {err}")
    for what, n in skipped.items():
        print(f"not timed: {n} {what}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dvm", default=os.path.join(ROOT, "build", "tools", "dvm"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", choices=["matmul", "softmax", "layernorm"])
    ap.add_argument("--rows", default="1,8,32,128,512", help="MatMul's M values")
    ap.add_argument("--kn", help="MatMul's K x N values, e.g. 768x768,1024x1024 (default: "
                    + ",".join(f"{k}x{n}" for k, n in MATMUL_KN) + ")")
    ap.add_argument("--const-only", action="store_true", help="MatMul with B constant only")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="measurements per side; the best counts")
    ap.add_argument("models", nargs="*", metavar="MODEL", help="ONNX models whose nodes to time one by one")
    ap.add_argument("--cases", help="built-in one-node cases: " + ",".join(BUILTIN))
    ap.add_argument("--shape", action="append", help="NAME=DxD: a model input's shape")
    ap.add_argument("--dim", action="append", help="SYMBOL=N: a symbolic dim of the models' inputs")
    ap.add_argument("--range", action="append", help="NAME=LO..HI: an integer input's values (default 0..9)")
    ap.add_argument("--top", type=int, help="print only the N worst ratios")
    ap.add_argument("--ops", help="time only nodes of these op types, e.g. MaxPool,Resize")
    args = ap.parse_args()
    if args.models or args.cases:
        nodes_main(args)
        return
    print(f"{'case':34} {'thr':>3} {'dvm ms':>9} {'ort ms':>9} {'dvm/ort':>8} "
          f"{'B const: dvm ms':>15} {'ort ms':>9} {'dvm/ort':>8} {'GFLOP/s dvm':>11} {'ort':>6}")
    kn = MATMUL_KN if not args.kn else [tuple(int(v) for v in s.split("x")) for s in args.kn.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        for name, kernel, inputs, attrs, op, oattrs, has_b in cases(args.only, [int(m) for m in args.rows.split(",")], kn):
            for threads in (int(t) for t in args.threads.split(",")):
                sess, binding = ort_session(op, inputs, oattrs, threads, len(inputs))
                iters, warmup = iterations(sess, binding, args.budget)
                if has_b:  # weights as ORT sees them in a model: prepacked at load
                    sess_c, binding_c = ort_session(op, inputs, oattrs, threads, 1)
                t_ort = t_dvm = t_c = t_dc = float("inf")
                only_c = has_b and args.const_only
                for _ in range(args.rounds):
                    if not only_c:
                        t_ort = min(t_ort, ort_time(sess, binding, iters, warmup))
                        t_dvm = min(t_dvm, dvm_time(args.dvm, tmp, kernel, inputs, attrs, threads,
                                                    iters, warmup))
                    if has_b:
                        t_c = min(t_c, ort_time(sess_c, binding_c, iters, warmup))
                        t_dc = min(t_dc, dvm_time(args.dvm, tmp, kernel, inputs, attrs, threads,
                                                  iters, warmup, const_from=1))
                row = f"{name:34} {threads:>3} {t_dvm:9.4f} {t_ort:9.4f} {t_dvm / t_ort:8.2f}"
                if has_b:
                    flop = 2 * inputs[0].shape[0] * inputs[0].shape[1] * inputs[1].shape[1]
                    row += (f" {t_dc:15.4f} {t_c:9.4f} {t_dc / t_c:8.2f}"
                            f" {flop / t_dc * 1e-6:11.1f} {flop / t_c * 1e-6:6.1f}")
                print(row, flush=True)


if __name__ == "__main__":
    main()
