"""The dvm command as tests run it: every run fails its test on a
sanitizer report, whatever the exit code; compile, assemble and run take
and give paths and NumPy arrays, and raise DvmError, with dvm's message,
when dvm fails."""
import os
import subprocess
import tempfile

import numpy as np

from dvmtest import devices
from dvmtest.paths import DVM

# Under -Db_sanitize a report can come with any exit code, 0 included.
SANITIZER_REPORTS = ("Sanitizer", "runtime error:")
# With allocator_may_return_null=1 AddressSanitizer warns of each
# allocation it refuses (a huge one the test asks for): not a report.
REFUSED_ALLOCATION = "AddressSanitizer failed to allocate"


class DvmError(Exception):
    """dvm exited with an error: rc, and message (its stderr)."""

    def __init__(self, rc, message):
        super().__init__(f"dvm exited {rc}: {message}")
        self.rc = rc
        self.message = message


def assert_no_sanitizer_report(stderr):
    report = "\n".join(line for line in stderr.splitlines() if REFUSED_ALLOCATION not in line)
    for bad in SANITIZER_REPORTS:
        assert bad not in report, stderr


def dvm(*args, timeout=600, env=None):
    """`dvm ARGS...` (each str()ed): the CompletedProcess, text output."""
    p = subprocess.run([DVM, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)
    assert_no_sanitizer_report(p.stderr)
    return p


def dvm_ok(*args, **kw):
    """dvm() that raises DvmError unless dvm exits 0."""
    p = dvm(*args, **kw)
    if p.returncode:
        raise DvmError(p.returncode, p.stderr.strip())
    return p


def compile_onnx(path, *flags, out=None, **kw):
    """`dvm compile PATH -o OUT FLAGS...` for the case's device
    (dvmtest.devices); OUT (default: PATH with .dvmb for .onnx) as a str."""
    path = str(path)
    out = str(out) if out else (path[:-5] if path.endswith(".onnx") else path) + ".dvmb"
    dvm_ok("compile", path, "-o", out, *flags, *devices.compile_flags(), **kw)
    return out


def assemble(text, out, **kw):
    """`dvm asm` of .dvms text into the module file out (a str)."""
    src = str(out) + ".dvms"
    with open(src, "w") as f:
        f.write(text)
    dvm_ok("asm", src, "-o", out, **kw)
    return str(out)


def _input_args(feeds, d):
    """--input arguments for feeds saved under folder d: a dict by name or a
    list in order; a list value is a sequence, a folder of 0.npy, 1.npy..."""
    named = feeds.items() if isinstance(feeds, dict) else [(None, v) for v in feeds]
    args = []
    for i, (name, v) in enumerate(named):
        p = os.path.join(d, f"in{i}")
        if isinstance(v, list):
            os.mkdir(p)
            for k, a in enumerate(v):
                np.save(os.path.join(p, f"{k}.npy"), a)
        else:
            p += ".npy"
            np.save(p, np.require(v, requirements="C"))  # keeps 0-d arrays 0-d
        args += ["--input", f"{name}={p}" if name else p]
    return args


def _read_pb(path, kind):
    import onnx
    from onnx import numpy_helper

    m = onnx.SequenceProto() if kind == "seq" else onnx.TensorProto()
    with open(path, "rb") as f:
        m.ParseFromString(f.read())
    return [numpy_helper.to_array(x) for x in m.tensor_values] if kind == "seq" else numpy_helper.to_array(m)


def try_run(mod, feeds, nout=1, *flags, threads=None, kinds=None, **kw):
    """`dvm run MOD FLAGS...` on feeds (see _input_args), on the case's
    device (dvmtest.devices), on `threads` kernel threads (or dvm's
    default): (the CompletedProcess, its first
    nout outputs as arrays, or None when dvm failed). Where kinds lists
    "tensor" or "seq" for each output, outputs are read from .pb files, a
    sequence as a list of arrays."""
    if kinds is not None:
        nout = len(kinds)
    if threads:
        flags += ("--threads", str(threads))
    with tempfile.TemporaryDirectory() as d:
        outs = [os.path.join(d, f"out{i}" + (".pb" if kinds else ".npy")) for i in range(nout)]
        args = ["run", mod, *flags, *devices.run_flags(), *_input_args(feeds, d)]
        for o in outs:
            args += ["--output", o]
        p = dvm(*args, **kw)
        if p.returncode:
            return p, None
        if kinds:
            return p, [_read_pb(o, k) for o, k in zip(outs, kinds, strict=True)]
        return p, [np.load(o) for o in outs]


def run_module(mod, feeds, nout=1, *flags, **kw):
    """try_run's outputs; raises DvmError when dvm fails."""
    p, outs = try_run(mod, feeds, nout, *flags, **kw)
    if p.returncode:
        raise DvmError(p.returncode, p.stderr.strip())
    return outs


def dump_ir(path, *flags, **kw):
    """`dvm compile PATH --dump-ir FLAGS...`: the IR text."""
    return dvm_ok("compile", path, "--dump-ir", *flags, **kw).stdout
