"""`dvm inspect --host` of the fixture models compiled with --target cpu,cuda:
each host kernel call of main@cuda with its reason, the calls by kernel,
and totals that must equal what crosses on the stand-in driver
(tests/cuda/fake_cuda.c, FAKE_CUDA_COPIES) per invocation: the bytes copied
to the host are the total to the host plus the results, those copied to
the device the total back plus the inputs (constants are uploaded once per
VM: one invocation is taken from two, so they cancel out), and for a model
with a device gather, the VM's read of the device error record (4 words)
at its wait for the result. A model of reductions over trailing axes
(GlobalAveragePool of rank 3, 4 and 5, ReduceMean/Sum/Max over trailing
axes given in any order, Softmax and LogSoftmax over the last axis named
by its positive index, Slices with constant bounds, negative steps among
them, Concats of 2 and 3 inputs, Splits by constant sizes (one empty) and
in equal parts) runs them all on the device, equal to ONNX
Runtime on the stand-in at awkward shapes; one over axis 1 stays on the
host, saying why. So does a model of MaxPool (stride 2 with pads,
ceil_mode), AveragePool (with and without count_include_pad, 1-D) and
Resize (nearest asymmetric floor of an AveragePool's result, linear
half_pixel), waiting for the device only for its results and the host
MaxPool's input (its shape functions read dims, not data); a MaxPool with
its indices stays on the host. A model of ConvTransposes (PP-OCR's 2x2 stride
2 with B, 3x3 stride 2 with output_padding, groups with stride 3,
dilation 2 and uneven pads, 1-D with stride 3) runs them all on the
device, equal to ONNX Runtime on the stand-in, waiting for the device
once per result. So does one of MatMulNBits (4 and 8 bits with u8 zero
points and a bias, 4 bits with float zero points) at 1, 3 and 17 rows.
usage: test_host_report.py FAKE_CUDA_LIB (DVM and DVM_MODELS from the environment)
Skips (77) without NVRTC or g++."""
import os
import re
import shutil
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper

from dvmtest.cli import dvm, dvm_ok, run_module, try_run
from dvmtest.compare import compare_outputs, ort_outputs
from dvmtest.onnxmodel import const, make_model, save_model
from dvmtest.paths import MODELS

fake = sys.argv[1]
tmp = tempfile.mkdtemp()
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "bool": 1}


def host_report_eval(formula, dims):
    """A formula of `dvm inspect` (integers, symbols, + - *, floordiv, mod,
    min, max) at the symbols' values."""
    assert "unknown" not in formula, formula
    assert re.fullmatch(r"[\w\s+\-*(),]*", formula), formula
    names = dict(dims, floordiv=lambda a, b: a // b, mod=lambda a, b: a % b, min=min, max=max)
    return eval(formula, {"__builtins__": {}}, names)  # only the characters checked above


def host_report_io_bytes(model, dims):
    """The bytes of main's inputs and of its outputs, from `dvm inspect`."""
    io = {"input": 0, "output": 0}
    out = dvm_ok("inspect", model).stdout.split("\nfunction main\n")[1].split("\n\n")[0]
    for kind, dt, shape in re.findall(r"(input|output) +\w+: tensor (\w+)\[([^\]]*)\]", out):
        n = DTYPE_BYTES[dt]
        for d in shape.split(","):
            n *= host_report_eval(d.strip(), dims)
        io[kind] += n
    return io["input"], io["output"]


def host_report_copies(model, shapes, iters):
    """Bytes copied to the device and to the host by `dvm bench` of iters
    invocations on the stand-in."""
    log = os.path.join(tmp, "copies")
    if os.path.exists(log):
        os.remove(log)
    env = dict(os.environ, DVM_CUDA_DRIVER=fake, DVM_CUBLAS=fake, FAKE_CUDA_COPIES=log)
    env.setdefault("FAKE_CUDA_CACHE", os.path.join(tmp, "cache"))
    args = [a for name, s in shapes.items() for a in ("--shape", f"{name}={s}")]
    dvm_ok("bench", model, *args, "--iters", iters, "--warmup", 0, "--device", "cuda", env=env)
    sums = {"htod": 0, "dtoh": 0}
    for line in open(log):
        kind, n = line.split()
        sums[kind] += int(n)
    return sums["htod"], sums["dtoh"]


def host_report_bytes(name, model, report, shapes, record):
    """1 unless the report's totals at each of shapes (feeds, the symbols'
    values) are what the stand-in copies per invocation."""
    down = re.search(r"^  total to the host: (.*) bytes$", report, re.M).group(1)
    up = re.search(r"^  total back to the device: (.*) bytes$", report, re.M).group(1)
    bad = 0
    for feeds, dims in shapes:
        if shutil.which("g++") is None:
            print("SKIP: the stand-in runs kernels through g++, not found")
            sys.exit(77)
        h1, d1 = host_report_copies(model, feeds, 1)
        h2, d2 = host_report_copies(model, feeds, 2)
        ins, outs = host_report_io_bytes(model, dims)
        want = (host_report_eval(up, dims) + ins, host_report_eval(down, dims) + outs + record)
        print(f"{name} {dims}: per invocation {h2 - h1} bytes to the device, {d2 - d1} to the host; "
              f"the report says {want[0]} and {want[1]}")
        bad |= (h2 - h1, d2 - d1) != want
    return bad


# model: kernels by first call ("": none), a reason every call gives,
# shapes and the symbols' values, bytes of the device error record read
# per invocation
CASES = {
    "resnet": ("", "no device kernel for the op",
               [({"image": "1x3x17x19"}, {"batch": 1, "height": 17, "width": 19}),
                ({"image": "2x3x8x8"}, {"batch": 2, "height": 8, "width": 8})], 0),
    "bert": ("from_shape x1, range x1", "no device kernel for the op",
             [({"ids": "2x7", "mask": "2x7"}, {"batch": 2, "seq": 7})], 32),
}

def host_report_reductions_model(path):
    """Reductions a ROWS kernel runs once their trailing axes are merged,
    and one over axis 1 that stays on the host."""
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["gap4"]),
        helper.make_node("GlobalAveragePool", ["y"], ["gap3"]),
        helper.make_node("GlobalAveragePool", ["z"], ["gap5"]),
        helper.make_node("ReduceMean", ["x"], ["mean23"], axes=[3, 2], keepdims=1),
        helper.make_node("ReduceSum", ["x", "ax"], ["sum23"], keepdims=0),
        helper.make_node("ReduceMax", ["x"], ["max123"], axes=[1, -2, 3], keepdims=0),
        helper.make_node("ReduceMean", ["x"], ["mean1"], axes=[1], keepdims=1),
        helper.make_node("Softmax", ["x"], ["softmax3"], axis=3),
        helper.make_node("LogSoftmax", ["y"], ["logsoftmax2"], axis=2),
        helper.make_node("Slice", ["x", "s0", "e0", "a0", "st0"], ["slice_steps"]),
        helper.make_node("Slice", ["z", "s1", "e1"], ["slice_lead"]),
        helper.make_node("Concat", ["x", "softmax3", "x"], ["cat_channels"], axis=1),
        helper.make_node("Concat", ["gap4", "mean23"], ["cat_rows"], axis=-2),
        helper.make_node("Split", ["z", "sp"], ["part0", "part1", "part2"], axis=2),
        helper.make_node("Split", ["z"], ["third0", "third1", "third2"], axis=-3),
    ]
    outs = [("gap4", f, None), ("gap3", f, None), ("gap5", f, None), ("mean23", f, None),
            ("sum23", f, None), ("max123", f, None), ("mean1", f, None), ("softmax3", f, None),
            ("logsoftmax2", f, None), ("slice_steps", f, None), ("slice_lead", f, None),
            ("cat_channels", f, None), ("cat_rows", f, None)] + [
            (name, f, None) for name in ("part0", "part1", "part2", "third0", "third1", "third2")]
    m = make_model(nodes, [("x", f, ["n", "c", "h", "w"]), ("y", f, ["n", "c", "l"]),
                           ("z", f, ["n", "c", "d", "h", "w"])], outs,
                   [const("ax", [-1, 2], np.int64),
                    # every other row from 1, columns backwards by 3 from the last
                    const("s0", [1, -1], np.int64), const("e0", [1000, -1000], np.int64),
                    const("a0", [2, -1], np.int64), const("st0", [2, -3], np.int64),
                    # i32 bounds on the leading axes, the trailing ones whole
                    const("s1", [0, 1], np.int32), const("e1", [1, 3], np.int32),
                    # z's axis 2 (of 3) as 1, nothing and 2
                    const("sp", [1, 0, 2], np.int64)], opset=17)
    return save_model(m, path)


def host_report_windows_model(path):
    """Pools and resizes that WINDOW and RESIZE kernels run, and a MaxPool
    with its indices that stays on the host."""
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("MaxPool", ["x"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["x"], ["mpc"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1],
                         ceil_mode=1),
        helper.make_node("MaxPool", ["x"], ["mpv", "mpi"], kernel_shape=[2, 2], pads=[1, 1, 0, 0]),
        helper.make_node("AveragePool", ["x"], ["ap"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["x"], ["api"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         count_include_pad=1),
        helper.make_node("AveragePool", ["y"], ["ap1"], kernel_shape=[2], pads=[1, 0]),
        # its dims from resize_sizes of a device result, which reads dims only
        helper.make_node("Resize", ["ap", "", "up"], ["rn"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Resize", ["x", "", "up"], ["rl"], mode="linear",
                         coordinate_transformation_mode="half_pixel"),
    ]
    outs = [(name, f, None) for name in ("mp", "mpc", "mpv", "ap", "api", "ap1", "rn", "rl")]
    outs.append(("mpi", TensorProto.INT64, None))
    m = make_model(nodes, [("x", f, ["n", "c", "h", "w"]), ("y", f, ["n", "c", "l"])], outs,
                   [const("up", [1, 1, 2, 2], np.float32)], opset=17)
    return save_model(m, path)


def host_report_conv_transpose_model(path):
    """ConvTransposes that CONV_TRANSPOSE kernels run, of x [n, 3, h, w]
    and y [n, 3, l]."""
    f = TensorProto.FLOAT
    rng = np.random.default_rng(3)
    w = lambda *dims: const("w%d" % len(dims) + "x".join(map(str, dims)), rng.standard_normal(dims))
    ws = [w(3, 3, 2, 2), w(3, 5, 3, 3), w(3, 2, 3, 2), w(3, 2, 4)]
    nodes = [
        helper.make_node("ConvTranspose", ["x", ws[0].name, "b3"], ["up2"], strides=[2, 2]),
        helper.make_node("ConvTranspose", ["x", ws[1].name, "b5"], ["up3"], strides=[2, 2], pads=[1, 1, 1, 1],
                         output_padding=[1, 1]),
        helper.make_node("ConvTranspose", ["x", ws[2].name], ["grouped"], group=3, strides=[3, 2],
                         dilations=[2, 2], pads=[1, 0, 2, 1], output_padding=[2, 1]),
        helper.make_node("ConvTranspose", ["y", ws[3].name], ["line"], strides=[3], pads=[2, 1],
                         output_padding=[1]),
    ]
    outs = [(name, f, None) for name in ("up2", "up3", "grouped", "line")]
    m = make_model(nodes, [("x", f, ["n", 3, "h", "w"]), ("y", f, ["n", 3, "l"])], outs,
                   ws + [const("b3", rng.standard_normal(3)), const("b5", rng.standard_normal(5)),
                        ], opset=17)
    return save_model(m, path)


def host_report_nbits_model(path):
    """MatMulNBits in ONNX Runtime's layout over A [m, 37] (K not a multiple
    of the block): 4 bits in blocks of 16 with packed u8 zero points (3
    blocks: a spare nibble) and a bias, N 13; 8 bits in blocks of 32 with
    u8 zero points and a bias, N 5; 4 bits in blocks of 32 with f32 zero
    points (which ONNX Runtime takes at 4 bits only), N 7. Random codes,
    those past K too."""
    rng = np.random.default_rng(7)
    k, ms, f = 37, "com.microsoft", TensorProto.FLOAT
    inits, nodes = [], []
    for name, n, bits, block, zp in (("q4", 13, 4, 16, "u8"), ("q8", 5, 8, 32, "u8"), ("qf", 7, 4, 32, "f32")):
        kb = -(-k // block)
        z = (rng.integers(0, 256, (n, -(-kb * bits // 8)), dtype=np.uint8) if zp == "u8"
             else rng.uniform(0, 2**bits - 1, (n, kb)).astype(np.float32))
        inits += [const(name + "_b", rng.integers(0, 256, (n, kb, block * bits // 8)), np.uint8),
                  const(name + "_s", rng.uniform(0.01, 0.1, n * kb), np.float32), const(name + "_z", z, z.dtype)]
        ins = ["a", name + "_b", name + "_s", name + "_z"]
        if zp == "u8":  # and a bias
            inits.append(const(name + "_bias", rng.standard_normal(n), np.float32))
            ins += ["", name + "_bias"]
        nodes.append(helper.make_node("MatMulNBits", ins, [name], domain=ms, K=k, N=n, bits=bits, block_size=block))
    m = make_model(nodes, [("a", f, ["m", k])], [(o, f, None) for o in ("q4", "q8", "qf")], inits,
                   opsets=[helper.make_opsetid("", 21), helper.make_opsetid(ms, 1)])
    return save_model(m, path)


fail = 0
try:
    for name, (by_kernel, why, shapes, record) in CASES.items():
        model = os.path.join(tmp, name + ".dvmb")
        p = dvm("compile", os.path.join(MODELS, name + ".onnx"), "-o", model, "--target", "cpu,cuda")
        if p.returncode and "NVRTC is not available" in p.stderr:
            print("SKIP:", p.stderr.strip())
            sys.exit(77)
        assert p.returncode == 0, p.stderr
        report = dvm_ok("inspect", "--host", model).stdout
        print(report)
        calls = re.findall(r"^  (\w+) at .*; (.*)$", report, re.M)
        expected = f"  by kernel: {by_kernel}\n" in report if by_kernel else "main@cuda: 0 host kernel calls\n" in report
        if not expected or any(w != why for _, w in calls):
            print(f"{name}: expected calls {by_kernel or 'none'}, each for: {why}")
            fail = 1
        fail |= host_report_bytes(name, model, report, shapes, record)
    onnx_path = host_report_reductions_model(os.path.join(tmp, "reductions.onnx"))
    model = os.path.join(tmp, "reductions.dvmb")
    dvm_ok("compile", onnx_path, "-o", model, "--target", "cpu,cuda")
    report = dvm_ok("inspect", "--host", model).stdout
    print(report)
    if ("  by kernel: reduce_mean x1\n" not in report or
            "not over the trailing axes (axes known at compile time; with the rank, beyond the last)" not in report):
        print("reductions: expected reduce_mean over axis 1 alone on the host")
        fail = 1
    rng = np.random.default_rng(5)
    env = dict(os.environ, DVM_CUDA_DRIVER=fake, DVM_CUBLAS=fake)
    env.setdefault("FAKE_CUDA_CACHE", os.path.join(tmp, "cache"))

    def host_report_against_ort(name, model, onnx_path, nout, rank5, channels=None, syncs=None):
        """The model on the stand-in against ONNX Runtime at a plane of 1,
        primes, and 23 * 29 = 667 past a block's tile of 512 (channels, when
        given, fixed), waiting for the device `syncs` times when given; 1 if
        not so."""
        bad = 0
        for n, c, h, w in ((1, 1, 1, 1), (2, 3, 5, 7), (1, 2, 23, 29)):
            c = channels or c
            feeds = {"x": rng.standard_normal((n, c, h, w), dtype=np.float32),
                     "y": rng.standard_normal((n, c, h * w), dtype=np.float32)}
            if rank5:
                feeds["z"] = rng.standard_normal((n, c, 3, h, w), dtype=np.float32)
            p, got = try_run(model, feeds, nout, "--device", "cuda", "--stats", env=env)
            assert p.returncode == 0, p.stderr
            waits = re.search(r"host_syncs=(\d+)", p.stdout)
            if syncs is not None and (not waits or int(waits[1]) != syncs):
                print(f"{name} at {n}x{c}x{h}x{w}: {waits and waits[1]} host syncs, expected {syncs}")
                bad = 1
            try:
                compare_outputs(got, ort_outputs(onnx_path, feeds), rtol=1e-5, atol=1e-6,
                                what=f"x {n}x{c}x{h}x{w}")
                print(f"{name} at {n}x{c}x{h}x{w}: equal to ONNX Runtime")
            except AssertionError as e:
                print(e)
                bad = 1
        return bad

    fail |= host_report_against_ort("reductions", model, onnx_path, 19, True)
    onnx_path = host_report_windows_model(os.path.join(tmp, "windows.onnx"))
    model = os.path.join(tmp, "windows.dvmb")
    dvm_ok("compile", onnx_path, "-o", model, "--target", "cpu,cuda")
    report = dvm_ok("inspect", "--host", model).stdout
    print(report)
    if "  by kernel: max_pool x1\n" not in report or "max_pool's indices" not in report:
        print("windows: expected the max_pool with indices alone on the host")
        fail = 1
    # waits: one per device result (7), and the host MaxPool's input; none
    # for the shape functions (pool, resize_sizes of a device result): they
    # read dims only
    fail |= host_report_against_ort("windows", model, onnx_path, 9, False, syncs=8)
    onnx_path = host_report_conv_transpose_model(os.path.join(tmp, "conv_transpose.onnx"))
    model = os.path.join(tmp, "conv_transpose.dvmb")
    dvm_ok("compile", onnx_path, "-o", model, "--target", "cpu,cuda")
    report = dvm_ok("inspect", "--host", model).stdout
    print(report)
    if "main@cuda: 0 host kernel calls\n" not in report:
        print("conv_transpose: expected every ConvTranspose on the device")
        fail = 1
    fail |= host_report_against_ort("conv_transpose", model, onnx_path, 4, False, channels=3, syncs=4)
    onnx_path = host_report_nbits_model(os.path.join(tmp, "nbits.onnx"))
    model = os.path.join(tmp, "nbits.dvmb")
    dvm_ok("compile", onnx_path, "-o", model, "--target", "cpu,cuda")
    report = dvm_ok("inspect", "--host", model).stdout
    if "main@cuda: 0 host kernel calls\n" not in report:
        print("nbits: expected every MatMulNBits on the device:\n" + report)
        fail = 1
    for m in (1, 3, 17):  # a decoding step, then prompts
        feeds = {"a": rng.standard_normal((m, 37), dtype=np.float32)}
        got = run_module(model, feeds, 3, "--device", "cuda", env=env)
        try:
            compare_outputs(got, ort_outputs(onnx_path, feeds), rtol=1e-5, atol=1e-4, what=f"a {m}x37")
            print(f"nbits at {m}x37: equal to ONNX Runtime")
        except AssertionError as e:
            print(e)
            fail = 1
    # strings stay on the host: a device copy would copy their references' bits
    strings = save_model(make_model([helper.make_node("Gather", ["s", "i"], ["g"], axis=0)],
                                    [("s", TensorProto.STRING, ["n"]), ("i", TensorProto.INT64, ["m"])],
                                    [("g", TensorProto.STRING, None)]), os.path.join(tmp, "strings.onnx"))
    dvm_ok("compile", strings, "-o", os.path.join(tmp, "strings.dvmb"), "--target", "cpu,cuda")
    report = dvm_ok("inspect", "--host", os.path.join(tmp, "strings.dvmb")).stdout
    if "gather at Gather_0: " not in report or "data dtype not proven or strings" not in report:
        print("a gather of strings is not left on the host:\n" + report)
        fail = 1
    # a cpu-only file has no clones to report on
    p = dvm("compile", os.path.join(MODELS, "mlp.onnx"), "-o", os.path.join(tmp, "mlp.dvmb"))
    p = dvm("inspect", "--host", os.path.join(tmp, "mlp.dvmb"))
    if p.returncode == 0 or "has no NAME@cuda functions: compile it with --target cpu,cuda" not in p.stderr:
        print("inspect --host of a cpu-only file:", p.returncode, p.stderr)
        fail = 1
finally:
    shutil.rmtree(tmp)
sys.exit(fail)
