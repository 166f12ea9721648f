"""Runs one kernel call through the dvm command, for tests against NumPy.

A test describes a call (kernel, inputs, attributes, how output shapes are
found); this module writes it as a .dvms program, assembles it with
`dvm asm`, runs it with `dvm run` on .npy inputs, and returns the outputs as
NumPy arrays. Pool blocks are poisoned (DVM_POISON=1: 0xff bytes, NaN for
floats), so an output element a kernel forgets to write shows up.

On the device of the running case (dvmtest.devices; tests here run on each
device present, conftest.py): on CUDA, a call is the function main@cuda
with the inputs copied to the device and the kernel's CUDA version, and a
kernel that has none is a skip that says so; ONNX models are compiled for
cpu,cuda and run there. Hand-written programs (run_text) are CPU programs.

Attributes: an int, a float, or a Shape (a tuple of ints passed as a shape
value: axes, perms, pads, strides).
"""
import os
import tempfile

import numpy as np
import pytest
from dvmtest import devices
from dvmtest.cli import DvmError, assemble, compile_onnx, run_module
from dvmtest.onnxmodel import save_model

DTYPES = {
    np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.float16): "f16",
    np.dtype(np.int8): "i8", np.dtype(np.int16): "i16", np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64", np.dtype(np.uint8): "u8", np.dtype(np.bool_): "bool",
    np.dtype(np.uint16): "u16", np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64",
}


class Shape(tuple):
    """An attribute passed as a shape value (up to 8 ints)."""


__all__ = ["DTYPES", "DvmError", "Shape", "poisoned", "program", "run", "run1", "run_model", "run_text"]


def _new_tensor(out, dt, shape, device="cpu", storage=None):
    """The instruction making tensor register `out` of dtype dt (a .dvms name)
    and shape register `shape` on device: from the pool, or at offset 0 of
    a storage given as (its register, a register holding 0)."""
    if storage:
        return f"  alloc_tensor {out}, {storage[0]}, {storage[1]}, {dt}, {shape}"
    return f"  alloc {out}, {dt}, {shape}, {device}"


def _alloc_code(reg, dt, shape, device="cpu", storage=None):
    """Instructions that make a tensor of dtype dt and a static shape (as
    _new_tensor), in registers from reg on: (code, its register, registers
    used)."""
    n = len(shape)
    code = [f"  imm r{reg + i}, {int(d)}" for i, d in enumerate(shape)]
    code.append(f"  make_shape r{reg + n}, ({', '.join(f'r{reg + i}' for i in range(n))})")
    code.append(_new_tensor(f"r{reg + n + 1}", dt, f"r{reg + n}", device, storage))
    return code, f"r{reg + n + 1}", n + 2


def _attr_code(reg, a):
    if isinstance(a, Shape):
        lines, regs = [], []
        for i, d in enumerate(a):
            lines.append(f"  imm r{reg + 1 + i}, {int(d)}")
            regs.append(f"r{reg + 1 + i}")
        lines.append(f"  make_shape r{reg}, ({', '.join(regs)})")
        return lines, 1 + len(a)
    if isinstance(a, (bool, int, np.integer)):
        return [f"  imm r{reg}, {int(a)}"], 1
    if isinstance(a, (float, np.floating)):
        return [f"  fimm r{reg}, {float(a)!r}"], 1
    raise TypeError(f"attribute {a!r}")


def program(kernel, inputs, attrs=(), outputs=None, shapefn=None, out_dtypes=None, nout=1,
            const_from=None, inplace=None, device="cpu"):
    """The .dvms text of one call. outputs: [(dtype, shape)] to allocate, or
    None to ask shape function `shapefn` (inputs then attributes). Inputs
    from index const_from on are module constants (loaded by `const`, so
    kernels with a prepack hook get them packed at load), the others
    parameters. inplace=k: input k is copied into a storage and output 0
    made in that same memory, as the compiler's memory plan does for
    kernels that allow it. On device "cuda" the function is main@cuda: the
    inputs are copied to the device, the tensors made there."""
    nparam = len(inputs) if const_from is None else const_from
    lines = [f".kernel {kernel} {device} 1"] + ([f".kernel identity {device} 1"] if inplace is not None else [])
    for i, x in enumerate(inputs[nparam:], nparam):
        dims = ", ".join(str(d) for d in x.shape)
        lines.append(f'.const c{i} {DTYPES[x.dtype]} [{dims}] x"{x.tobytes().hex()}"')
    if outputs is None:
        lines.append(f".shapefn {shapefn or kernel}")
    n = len(inputs)
    body, reg = [f"  const r{i}, $c{i}" for i in range(nparam, n)], n
    if device != "cpu":
        body += [f"  copy r{i}, r{i}, {device}" for i in range(n)]
    attr_regs = []
    for a in attrs:
        code, used = _attr_code(reg, a)
        body += code
        attr_regs.append(f"r{reg}")
        reg += used
    in_regs, storage = [f"r{i}" for i in range(n)], None
    if inplace is not None:  # storage rS holds a copy of input k, rT; output 0 goes there
        x = inputs[inplace]
        rb, rs, rz, rsh, rt = (f"r{reg + i}" for i in range(5))
        storage = (rs, rz)
        reg += 5
        body += [f"  imm {rb}, {max(x.nbytes, 1)}", f"  alloc_storage {rs}, {rb}, {device}, 64", f"  imm {rz}, 0",
                 f"  shape_of {rsh}, r{inplace}", f"  alloc_tensor {rt}, {rs}, {rz}, {DTYPES[x.dtype]}, {rsh}",
                 f"  invoke identity, -, ({rt}), (r{inplace}), ()"]
        in_regs[inplace] = rt
    out_regs = []
    if outputs is None:
        dts = out_dtypes or [inputs[0].dtype] * nout
        shape_regs = [f"r{reg + i}" for i in range(nout)]
        reg += nout
        ins = ", ".join([f"r{i}" for i in range(n)] + attr_regs)
        body.append(f"  shapefn {shapefn or kernel}, ({', '.join(shape_regs)}), ({ins})")
        for i, dt in enumerate(dts):
            body.append(_new_tensor(f"r{reg}", DTYPES[np.dtype(dt)], shape_regs[i], device,
                                    storage if i == 0 else None))
            out_regs.append(f"r{reg}")
            reg += 1
    else:
        for i, (dt, shape) in enumerate(outputs):
            code, out, used = _alloc_code(reg, DTYPES[np.dtype(dt)], shape, device, storage if i == 0 else None)
            body += code
            out_regs.append(out)
            reg += used
    body.append(f"  invoke {kernel}, -, ({', '.join(out_regs)}), "
                f"({', '.join(in_regs)}), ({', '.join(attr_regs)})")
    body.append(f"  ret ({', '.join(out_regs)})")
    lines.append(f'.func "main@{device}" regs={reg}' if device != "cpu" else f".func main regs={reg}")
    for i, x in enumerate(inputs[:nparam]):
        dims = ", ".join(str(d) for d in x.shape)
        lines.append(f"  .param x{i} tensor {DTYPES[x.dtype]} [{dims}]")
    for i in range(len(out_regs)):
        lines.append(f"  .result y{i} any")
    lines += body
    lines.append(".end")
    return "\n".join(lines) + "\n"


def poisoned():
    """dvm run's environment: pool blocks filled with 0xff (NaN for floats)."""
    return {**os.environ, "DVM_POISON": "1"}


def _run_program(text, inputs, nout, threads):
    with tempfile.TemporaryDirectory() as tmp:
        mod = assemble(text, os.path.join(tmp, "op.dvmb"))
        return run_module(mod, list(inputs), nout, threads=threads, env=poisoned())


def run_text(text, inputs, nout=1, threads=None):
    """Assembles .dvms text, a CPU program, and runs it (pool poisoned) on
    inputs, its parameters in order, on `threads` kernel threads (or dvm's
    default); returns its first nout outputs. Raises DvmError on failure."""
    if devices.active() != "cpu":
        pytest.skip(f"a CPU program: no {devices.active()} version")
    return _run_program(text, inputs, nout, threads)


def run(kernel, inputs, attrs=(), outputs=None, shapefn=None, out_dtypes=None, nout=1,
        const_from=None, inplace=None, threads=None):
    """Runs the call on the case's device (on `threads` kernel threads, or
    dvm's default); returns the list of outputs. Raises DvmError on
    failure."""
    inputs = [np.require(x, requirements="C") for x in inputs]  # keeps 0-d arrays 0-d
    device = devices.active()
    text = program(kernel, inputs, attrs, outputs, shapefn, out_dtypes, nout, const_from, inplace, device)
    try:
        return _run_program(text, inputs[:const_from], nout if outputs is None else len(outputs), threads)
    except DvmError as e:
        if device != "cpu" and f"for {device} is not in this dvm's op table" in e.message:
            pytest.skip(f"no {device} version of kernel {kernel} (or identity, for a call in place)")
        raise


def run1(kernel, inputs, attrs=(), **kw):
    """run() for a single output."""
    return run(kernel, inputs, attrs, **kw)[0]


def run_model(model, feeds, nout=1):
    """Compiles an ONNX model (a ModelProto) with `dvm compile` and runs the
    module once on feeds (name -> array, in the graph's input order): the
    first nout outputs. For ops whose compiler lowering matters (attributes
    resolved at compile or run time). Raises DvmError on failure."""
    with tempfile.TemporaryDirectory() as tmp:
        mod = compile_onnx(save_model(model, os.path.join(tmp, "m.onnx")))
        return run_module(mod, feeds, nout, env=poisoned())
