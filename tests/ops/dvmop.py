"""Runs one kernel call through the dvm command, for tests against NumPy.

A test describes a call (kernel, inputs, attributes, how output shapes are
found); this module writes it as a .dvms program, assembles it with
`dvm asm`, runs it with `dvm run` on .npy inputs, and returns the outputs as
NumPy arrays. Pool blocks are poisoned (DVM_POISON=1: 0xff bytes, NaN for
floats), so an output element a kernel forgets to write shows up.

Attributes: an int, a float, or a Shape (a tuple of ints passed as a shape
value: axes, perms, pads, strides).
"""
import os
import subprocess
import tempfile

import numpy as np

DVM = os.environ.get("DVM", os.path.join(os.path.dirname(__file__), "../../build/tools/dvm"))

DTYPES = {
    np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.float16): "f16",
    np.dtype(np.int8): "i8", np.dtype(np.int16): "i16", np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64", np.dtype(np.uint8): "u8", np.dtype(np.bool_): "bool",
    np.dtype(np.uint16): "u16", np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64",
}


class Shape(tuple):
    """An attribute passed as a shape value (up to 8 ints)."""


class DvmError(Exception):
    def __init__(self, rc, message):
        super().__init__(f"dvm exited {rc}: {message}")
        self.rc = rc
        self.message = message


def _new_tensor(out, dt, shape, storage=None):
    """The instruction making tensor register `out` of dtype dt (a .dvms name)
    and shape register `shape`: from the pool, or at offset 0 of a storage
    given as (its register, a register holding 0)."""
    if storage:
        return f"  alloc_tensor {out}, {storage[0]}, {storage[1]}, {dt}, {shape}"
    return f"  alloc {out}, {dt}, {shape}, cpu"


def _alloc_code(reg, dt, shape, storage=None):
    """Instructions that make a CPU tensor of dtype dt and a static shape
    (as _new_tensor), in registers from reg on: (code, its register,
    registers used)."""
    n = len(shape)
    code = [f"  imm r{reg + i}, {int(d)}" for i, d in enumerate(shape)]
    code.append(f"  make_shape r{reg + n}, ({', '.join(f'r{reg + i}' for i in range(n))})")
    code.append(_new_tensor(f"r{reg + n + 1}", dt, f"r{reg + n}", storage))
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
            const_from=None, inplace=None):
    """The .dvms text of one call. outputs: [(dtype, shape)] to allocate, or
    None to ask shape function `shapefn` (inputs then attributes). Inputs
    from index const_from on are module constants (loaded by `const`, so
    kernels with a prepack hook get them packed at load), the others
    parameters. inplace=k: input k is copied into a storage and output 0
    made in that same memory, as the compiler's memory plan does for
    kernels that allow it."""
    nparam = len(inputs) if const_from is None else const_from
    lines = [f".kernel {kernel} cpu 1"] + ([".kernel identity cpu 1"] if inplace is not None else [])
    for i, x in enumerate(inputs[nparam:], nparam):
        dims = ", ".join(str(d) for d in x.shape)
        lines.append(f'.const c{i} {DTYPES[x.dtype]} [{dims}] x"{x.tobytes().hex()}"')
    if outputs is None:
        lines.append(f".shapefn {shapefn or kernel}")
    n = len(inputs)
    body, reg = [f"  const r{i}, $c{i}" for i in range(nparam, n)], n
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
        body += [f"  imm {rb}, {max(x.nbytes, 1)}", f"  alloc_storage {rs}, {rb}, cpu, 64", f"  imm {rz}, 0",
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
            body.append(_new_tensor(f"r{reg}", DTYPES[np.dtype(dt)], shape_regs[i], storage if i == 0 else None))
            out_regs.append(f"r{reg}")
            reg += 1
    else:
        for i, (dt, shape) in enumerate(outputs):
            code, out, used = _alloc_code(reg, DTYPES[np.dtype(dt)], shape, storage if i == 0 else None)
            body += code
            out_regs.append(out)
            reg += used
    body.append(f"  invoke {kernel}, -, ({', '.join(out_regs)}), "
                f"({', '.join(in_regs)}), ({', '.join(attr_regs)})")
    body.append(f"  ret ({', '.join(out_regs)})")
    lines.append(f".func main regs={reg}")
    for i, x in enumerate(inputs[:nparam]):
        dims = ", ".join(str(d) for d in x.shape)
        lines.append(f"  .param x{i} tensor {DTYPES[x.dtype]} [{dims}]")
    for i in range(len(out_regs)):
        lines.append(f"  .result y{i} any")
    lines += body
    lines.append(".end")
    return "\n".join(lines) + "\n"


def run_module(mod, tmp, inputs, nout, threads=None):
    """`dvm run` of the module file mod (pool poisoned) on inputs, a list of
    (name or None, array) saved under tmp; returns its first nout outputs.
    Raises DvmError on failure."""
    cmd = [DVM, "run", mod] + (["--threads", str(threads)] if threads else [])
    for i, (name, x) in enumerate(inputs):
        p = os.path.join(tmp, f"x{i}.npy")
        np.save(p, x)
        cmd += ["--input", f"{name}={p}" if name else p]
    outs = [os.path.join(tmp, f"y{i}.npy") for i in range(nout)]
    for p in outs:
        cmd += ["--output", p]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "DVM_POISON": "1"})
    if r.returncode:
        raise DvmError(r.returncode, r.stderr.strip())
    return [np.load(p) for p in outs]


def run(kernel, inputs, attrs=(), outputs=None, shapefn=None, out_dtypes=None, nout=1,
        const_from=None, inplace=None, threads=None):
    """Runs the call (on `threads` kernel threads, or dvm's default); returns
    the list of outputs. Raises DvmError on failure."""
    inputs = [np.require(x, requirements="C") for x in inputs]  # keeps 0-d arrays 0-d
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "op.dvms")
        mod = os.path.join(tmp, "op.dvmb")
        with open(src, "w") as f:
            f.write(program(kernel, inputs, attrs, outputs, shapefn, out_dtypes, nout, const_from, inplace))
        r = subprocess.run([DVM, "asm", src, "-o", mod], capture_output=True, text=True)
        if r.returncode:
            raise DvmError(r.returncode, r.stderr.strip())
        return run_module(mod, tmp, [(None, x) for x in inputs[:const_from]],
                          nout if outputs is None else len(outputs), threads)


def run1(kernel, inputs, attrs=(), **kw):
    """run() for a single output."""
    return run(kernel, inputs, attrs, **kw)[0]


def run_model(model, feeds, nout=1):
    """Compiles an ONNX model (a ModelProto) with `dvm compile` and runs the
    module once on feeds (name -> array, in the graph's input order): the
    first nout outputs. For ops whose compiler lowering matters (attributes
    resolved at compile or run time). Raises DvmError on failure."""
    with tempfile.TemporaryDirectory() as tmp:
        path, mod = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "m.dvmb")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        r = subprocess.run([DVM, "compile", path, "-o", mod], capture_output=True, text=True)
        if r.returncode:
            raise DvmError(r.returncode, r.stderr.strip())
        return run_module(mod, tmp, [(name, np.require(x, requirements="C")) for name, x in feeds.items()], nout)
