"""Issue 18's CLI findings, each from models and files made here: bounded input
reads (/dev/zero, a FIFO nobody writes to, a file longer than its header says),
--max-steps / --timeout / --memory-limit and SIGINT on a Loop of 2^62 trips and on
a bytecode loop that never ends, out-of-memory messages naming node and bytes,
write errors on stdout, a quiet CPU path."""
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from dvmtest.cli import dvm  # noqa: E402
from dvmtest.onnxmodel import vi  # noqa: E402
from dvmtest.paths import ASM, DVM  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
# a huge allocation is an error, not an abort, under AddressSanitizer too
ENV = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":allocator_may_return_null=1")


def dvm_env(*args, timeout=60):
    """dvm() with AddressSanitizer allowed to refuse a huge allocation."""
    return dvm(*args, timeout=timeout, env=ENV)


def compile_graph(tmp, g, name):
    """The graph as tmp/name.onnx, compiled to tmp/name.dvmb (returned)."""
    path = tmp / f"{name}.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    mod = tmp / f"{name}.dvmb"
    p = dvm_env("compile", path, "-o", mod)
    assert p.returncode == 0, p.stderr
    return mod


@pytest.fixture
def matmul(tmp_path):
    mod = tmp_path / "mm.dvmb"
    assert dvm_env("asm", os.path.join(ASM, "matmul.dvms"), "-o", mod).returncode == 0
    np.save(tmp_path / "x.npy", np.ones((3, 2), np.float32))
    return mod


@pytest.fixture
def forever(tmp_path):
    """A Loop whose trip count is an input (2^62 in the tests), node "forever"."""
    body = helper.make_graph([helper.make_node("Add", ["acc", "one"], ["acc2"], name="step"),
                              helper.make_node("Identity", ["cin"], ["cout"])], "body",
                             [vi("it", I64, []), vi("cin", B, []), vi("acc", F)], [vi("cout", B, []), vi("acc2", F)],
                             [numpy_helper.from_array(np.float32(1), "one")])
    g = helper.make_graph([helper.make_node("Loop", ["n", "c", "x"], ["y"], body=body, name="forever")], "g",
                          [vi("x", F, [2]), vi("n", I64, [])], [vi("y", F)], [numpy_helper.from_array(np.array(True), "c")])
    mod = compile_graph(tmp_path, g, "forever")
    np.save(tmp_path / "x2.npy", np.zeros(2, np.float32))
    np.save(tmp_path / "n.npy", np.array(2 ** 62, np.int64))
    return [mod, "--input", f"x={tmp_path / 'x2.npy'}", "--input", f"n={tmp_path / 'n.npy'}"]


WHERE = r'function "main", instruction \d+ \(\w+\), node "forever"'


# ---- input files -------------------------------------------------------------

def test_dev_zero_is_not_read_to_the_end(matmul):
    t = time.monotonic()
    p = dvm_env("run", matmul, "--input", "x=/dev/zero", timeout=20)
    assert p.returncode == 2 and "/dev/zero: not a .npy file (bad magic)" in p.stderr, p.stderr
    assert time.monotonic() - t < 10


def test_a_file_longer_than_its_header_says_is_refused_unread(tmp_path, matmul):
    big = tmp_path / "big.npy"
    big.write_bytes((tmp_path / "x.npy").read_bytes() + b"\0" * (64 << 20))
    p = dvm_env("run", matmul, "--input", f"x={big}")
    assert p.returncode == 2 and "data is 67108888 bytes, shape f32[3,2] needs 24" in p.stderr, p.stderr


def test_a_fifo_nobody_writes_to_does_not_block_forever(tmp_path, matmul):
    fifo = tmp_path / "fifo.npy"
    os.mkfifo(fifo)
    p = dvm_env("run", matmul, "--input", f"x={fifo}", timeout=30)
    assert p.returncode == 2 and "fifo.npy: no data came for 10 s" in p.stderr, p.stderr
    for cmd in (["run", fifo], ["asm", fifo, "-o", tmp_path / "o.dvmb"], ["compile", fifo, "-o", tmp_path / "o.dvmb"]):
        p = dvm_env(*cmd, timeout=30)
        assert p.returncode == 2 and "not a regular file" in p.stderr, p.stderr


def test_a_fifo_with_a_writer_is_read(tmp_path, matmul):
    fifo = tmp_path / "fifo.npy"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat '{tmp_path / 'x.npy'}' > '{fifo}'"])
    p = dvm_env("run", matmul, "--input", f"x={fifo}", timeout=30)
    writer.wait(timeout=30)
    assert p.returncode == 0 and "y: f32[3,3]" in p.stdout, p.stderr


# ---- run limits and SIGINT -----------------------------------------------------

def test_loop_of_2_62_trips_stops_at_max_steps(forever):
    p = dvm_env("run", *forever, "--max-steps", "100000", timeout=30)
    assert p.returncode == 1, p.stderr
    assert re.search(WHERE + ": step limit of 100000 instructions reached", p.stderr), p.stderr


def test_a_bytecode_loop_that_never_ends_stops_at_max_steps(tmp_path):
    """sum.dvms with its exit jump turned back to the loop head: a mutated program
    the verifier accepts (every target is an instruction) but that never ends."""
    text = open(os.path.join(ASM, "sum.dvms")).read()
    assert "jz             r5, L2" in text
    (tmp_path / "spin.dvms").write_text(text.replace("jz             r5, L2", "jz             r5, L1"))
    mod = tmp_path / "spin.dvmb"
    assert dvm_env("asm", tmp_path / "spin.dvms", "-o", mod).returncode == 0
    np.save(tmp_path / "v.npy", np.ones(5, np.float32))
    p = dvm_env("run", mod, "--input", tmp_path / "v.npy", "--max-steps", "50000", timeout=30)
    assert p.returncode == 1, p.stderr
    assert re.search(r'function "main", instruction \d+ \((jz|jmp)\): step limit of 50000', p.stderr), p.stderr
    p = dvm_env("bench", mod, "--shape", "x=5", "--max-steps", "50000", "--iters", "1", timeout=30)
    assert p.returncode == 1 and "step limit of 50000" in p.stderr, p.stderr


def test_timeout_stops_the_loop_and_says_where(forever):
    t = time.monotonic()
    p = dvm_env("run", *forever, "--timeout", "0.3", timeout=30)
    assert time.monotonic() - t < 20
    assert p.returncode == 1, p.stderr
    assert re.search("timed out after 0.3 s at " + WHERE + "$", p.stderr.strip()), p.stderr


@pytest.mark.parametrize("cmd", ["run", "bench"])
def test_sigint_interrupts_through_the_vm(forever, cmd):
    args = forever if cmd == "run" else [forever[0], "--shape", "x=2", "--range", "n=4611686018427387904..4611686018427387904"]
    proc = subprocess.Popen([DVM, cmd, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert re.search(f"dvm {cmd}: interrupted \\(SIGINT\\) at " + WHERE, err), err


def test_memory_limit_names_node_and_bytes(tmp_path):
    g = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["z"], name="huge",
                                            value=numpy_helper.from_array(np.array([1.0], np.float32))),
                           helper.make_node("ReduceSum", ["z"], ["y"], keepdims=0, name="sum")],
                          "g", [vi("s", I64, [2])], [vi("y", F)])
    mod = compile_graph(tmp_path, g, "alloc")
    np.save(tmp_path / "small.npy", np.array([4, 1024], np.int64))
    np.save(tmp_path / "huge.npy", np.array([2 ** 20, 2 ** 28], np.int64))
    p = dvm_env("run", mod, "--input", tmp_path / "small.npy", "--memory-limit", "4K")
    assert p.returncode == 1, p.stderr
    assert ('node "huge": cpu pool limit of 4096 bytes reached: 0 in use, 16384 more asked' in p.stderr), p.stderr
    assert dvm_env("run", mod, "--input", tmp_path / "small.npy", "--memory-limit", "1M").returncode == 0
    # out of memory (2^50 bytes): the node and the size, not a bare "out of memory"
    p = dvm_env("run", mod, "--input", tmp_path / "huge.npy")
    assert p.returncode == 1, p.stderr
    assert 'node "huge": out of memory allocating 1125899906842624 bytes on cpu' in p.stderr, p.stderr


@pytest.mark.parametrize("flag,value", [("--max-steps", "0"), ("--max-steps", "-3"), ("--max-steps", "x"),
                                        ("--timeout", "0"), ("--timeout", "soon"), ("--memory-limit", "12Q")])
def test_bad_limit_values_are_usage_errors(matmul, flag, value):
    p = dvm_env("run", matmul, "--input", matmul.parent / "x.npy", flag, value)
    assert p.returncode == 2 and flag in p.stderr, p.stderr


# ---- output and noise ----------------------------------------------------------

@pytest.mark.skipif(not os.access("/dev/full", os.W_OK), reason="no /dev/full")
def test_write_errors_on_stdout_fail_every_command(tmp_path, matmul):
    with open("/dev/full", "w") as full:
        for args in (["disasm", matmul], ["inspect", matmul], ["run", matmul, "--input", tmp_path / "x.npy"],
                     ["bench", matmul, "--shape", "x=3x2", "--iters", "2"], ["--help"]):
            p = subprocess.run([DVM, *map(str, args)], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60,
                               env=ENV)
            assert p.returncode != 0 and "writing to standard output" in p.stderr, (args, p.stderr)


def test_cpu_only_module_runs_quietly(tmp_path, matmul):
    p = dvm_env("run", matmul, "--input", tmp_path / "x.npy")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    p = dvm_env("bench", matmul, "--shape", "x=3x2", "--iters", "2")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    p = dvm_env("run", matmul, "--input", tmp_path / "x.npy", "--verbose")
    assert p.stderr.startswith("dvm: running on cpu"), p.stderr


# ---- bad attribute values at compile time ---------------------------------------

@pytest.mark.parametrize("op,kw,w,fragment", [
    ("Conv", dict(pads=[-5, -5, -5, -5]), (4, 2, 3, 3), "attribute pads[0] = -5 must be >= 0"),
    ("Conv", dict(strides=[1, 0]), (4, 2, 3, 3), "attribute strides[1] = 0 must be >= 1"),
    ("Conv", dict(dilations=[-1, 1]), (4, 2, 3, 3), "attribute dilations[0] = -1 must be >= 1"),
    ("Conv", dict(group=0), (4, 2, 3, 3), "attribute group = 0 must be >= 1"),
    ("Conv", {}, (4, 2, 11, 11), 'output "y" dim 2 would be -2'),
    ("MaxPool", dict(kernel_shape=[2, -2]), None, "attribute kernel_shape[1] = -2 must be >= 1"),
    ("AveragePool", dict(kernel_shape=[2, 2], pads=[0, -1, 0, 0]), None, "attribute pads[1] = -1 must be >= 0"),
])
def test_bad_attribute_values_are_named_at_compile_time(tmp_path, op, kw, w, fragment):
    """Issue 18: negative Conv pads gave "internal error: the compiler emitted bytecode
    the verifier refuses"; now the node and the attribute, exit 2."""
    inits = [numpy_helper.from_array(np.ones(w, np.float32), "w")] if w else []
    node = helper.make_node(op, ["x", "w"] if w else ["x"], ["y"], name="n1", **kw)
    g = helper.make_graph([node], "g", [vi("x", F, [1, 2, 8, 8])], [vi("y", F)], inits)
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    p = dvm_env("compile", path, "-o", tmp_path / "bad.dvmb")
    assert p.returncode == 2, p.stderr
    assert f'node "n1" ({op}, opset 17): {fragment}' in p.stderr and "internal error" not in p.stderr, p.stderr


def test_dim_ranges_are_exact_and_given_once(tmp_path):
    """--dim takes NAME=N or NAME=LO..HI in 0..2^63-1 exactly: past it, or
    with anything after, it is an error naming the spec (it was clamped to
    2^63-1); a name given twice is an error (the last silently won)."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [vi("x", F, ["m", 3])], [vi("y", F, None)])
    model = compile_graph(tmp_path, g, "relu").with_suffix(".onnx")
    out = tmp_path / "m.dvmb"
    for spec in ("m=1..99999999999999999999", "m=99999999999999999999", "m=1..5x", "m=-1..4", "m=5..2",
                 "m=", "=3", "m=1..", "m=1...4"):
        p = dvm_env("compile", model, "-o", out, "--dim", spec)
        assert p.returncode != 0 and f"{spec}: expected NAME=N or NAME=LO..HI" in p.stderr, (spec, p.stderr)
    p = dvm_env("compile", model, "-o", out, "--dim", "m=1..4", "--dim", "m=1..8")
    assert p.returncode != 0 and "m is given twice (m=1..4, m=1..8)" in p.stderr, p.stderr
    for spec, lo, hi in (("m=3", 3, 3), ("m=0..9223372036854775807", 0, 9223372036854775807)):
        assert dvm_env("compile", model, "-o", out, "--dim", spec).returncode == 0, spec
        info = dvm_env("inspect", out).stdout
        assert f"{lo}..{hi}" in info, (spec, info)
