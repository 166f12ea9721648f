"""python -m dvm compile|run|inspect: the same commands, options and exit
codes as the dvm command (docs/cli.md), through the Python package."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _dvm
from ._module import Module, ValueInfo, _eval_formula, compile as _compile, load

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2
# dvm status codes that are the user's input (as the C command maps them)
_USAGE_CODES = {"INVALID_ARGUMENT", "NOT_FOUND", "CORRUPT", "IO", "UNAVAILABLE", "UNIMPLEMENTED"}


def _fail(cmd: str, e: Exception) -> int:
    print(f"dvm {cmd}: error: {e}", file=sys.stderr)
    code = getattr(e, "code", None)
    return EXIT_USAGE if code in _USAGE_CODES or isinstance(e, (OSError, ValueError)) else EXIT_RUNTIME


def _bind(args: Sequence[Tuple[bool, str]], names: List[str], fname: str, what: str) -> List[Optional[str]]:
    """--input/--output arguments bound to the positions of names, as the
    dvm command binds them (tools/bind.c): (True, NAME) from --input-name
    before an --input FILE taken whole; NAME=FILE with NAME one of names;
    else FILE by position. Ambiguous arguments are errors."""
    slots: List[Optional[str]] = [None] * len(names)
    pos, i = 0, 0
    while i < len(args):
        is_name, arg = args[i]
        value = arg
        if is_name:
            if i + 1 == len(args) or args[i + 1][0]:
                raise ValueError(f"--{what}-name \"{arg}\" must be followed by an --{what} FILE")
            if arg not in names:
                raise ValueError(f"--{what}-name: function \"{fname}\" has no {what} named \"{arg}\"")
            k, value, i = names.index(arg), args[i + 1][1], i + 1
        else:
            hits = [k for k, n in enumerate(names) if arg.startswith(n + "=")]
            if len(hits) > 1:
                raise ValueError(f"--{what} \"{arg}\" is ambiguous: it starts with the {what} names \"{names[hits[0]]}\" "
                                 f"and \"{names[hits[1]]}\"; say which with --{what}-name NAME --{what} FILE")
            if hits and os.path.exists(arg):
                raise ValueError(f"--{what} \"{arg}\" is ambiguous: it starts with the {what} name \"{names[hits[0]]}\" "
                                 f"and is a file; say which with --{what}-name NAME --{what} FILE, or ./FILE")
            if hits:
                k = hits[0]
                value = arg[len(names[k]) + 1:]
            elif "=" in arg and not os.path.exists(arg):
                raise ValueError(f"\"{arg}\": function \"{fname}\" has no {what} named \"{arg.split('=')[0]}\" "
                                 "(nor is it a file)")
            else:
                while pos < len(slots) and slots[pos] is not None:
                    pos += 1
                if pos >= len(slots):
                    raise ValueError(f"function \"{fname}\" takes {len(slots)} {what}s; \"{arg}\" is one too many")
                k = pos
        if slots[k] is not None:
            raise ValueError(f"{what} {k} (\"{names[k]}\") is bound twice")
        slots[k] = value
        i += 1
    return slots


def _dims(args: Sequence[str], cmd: str, ranged: bool) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for a in args:
        name, _, val = a.rpartition("=")  # the value holds no '=': the name is all before the last
        try:
            if ranged:
                lo, _, hi = val.partition("..")
                out[name] = (int(lo), int(hi))
            else:
                out[name] = int(val)
        except ValueError:
            raise ValueError(f"--dim {a}: expected NAME={'LO..HI' if ranged else 'VALUE'}") from None
    return out


def cmd_compile(a: argparse.Namespace) -> int:
    if not a.output and not a.dump_ir:
        print("dvm compile: error: give -o MODEL.dvmb (or --dump-ir)", file=sys.stderr)
        return EXIT_USAGE
    if a.dump_ir:  # the compiler's own listing, as `dvm compile --dump-ir` prints it
        targets = [t.strip() for t in a.target.split(",")]
        data, ir = _dvm.compile(a.model, [(k, lo, hi) for k, (lo, hi) in _dims(a.dim, "compile", True).items()],
                                function=a.function, cuda="cuda" in targets, fusion=not a.no_fusion,
                                plan=not a.no_plan, dump_ir=True, lower=bool(a.output), disable=a.disable)
        print(ir, end="")
        if a.output:
            Module(data).save(a.output)
        return EXIT_OK
    opts = {"fusion": not a.no_fusion, "plan": not a.no_plan, "disable": a.disable}
    if a.function:
        opts["function"] = a.function
    m = _compile(a.model, dims=_dims(a.dim, "compile", True), target=a.target, **opts)
    m.save(a.output)
    return EXIT_OK


def _load_input(v: ValueInfo, text: str) -> object:
    if v.kind == "int":
        return int(text, 0)
    if v.kind == "float":
        return float(text)
    return np.load(text)


def cmd_run(a: argparse.Namespace) -> int:
    m = load(a.model)
    fname = a.function or ("main" if "main" in m.functions or len(m.functions) != 1 else next(iter(m.functions)))
    fn = m.functions.get(fname)
    if fn is None:
        print(f"dvm run: error: no function \"{fname}\" in {a.model}", file=sys.stderr)
        return EXIT_USAGE
    names = [v.name for v in fn.inputs]
    slots = _bind(a.inputs, names, fname, "input")
    for k, s in enumerate(slots):
        if s is None:
            raise ValueError(f"function \"{fname}\" takes {len(slots)} inputs; input {k} (\"{names[k]}\") is missing")
    order = [v.name for v in fn.outputs]
    outs = {n: f for n, f in zip(order, _bind(a.outputs, order, fname, "output")) if f is not None}
    inputs = {v.name: _load_input(v, str(s)) for v, s in zip(fn.inputs, slots)}
    if a.device == "auto" and any(name.endswith("@cuda") for name in m.functions):
        # as the dvm command: said only where a CUDA function could run
        print(f"dvm: running on {m.auto_device[1]}", file=sys.stderr)
    res, stats = m.run_with_stats(inputs, function=fname, device=a.device, threads=a.threads, tf32=a.tf32)
    for name, val in res.items():
        if name in outs:
            np.save(outs[name], np.asarray(val))
        else:
            print(f"{name}: {_summary(val, a.show)}")
    if a.stats:
        print(_stats_line(stats))
    return EXIT_OK


def _stats_line(s: Dict[str, Any]) -> str:
    """The line `dvm run --stats` prints (tools/cmd_run.c)."""
    text = f"stats: instructions={s['instructions']} kernel_calls={s['kernel_calls']} host_syncs={s['host_syncs']}"
    for dev in ("cpu", "cuda"):
        p = s.get(f"{dev}_pool")
        if p is not None:
            text += (f" {dev}_pool: in_use={p['in_use']} peak={p['peak']} cached={p['cached']}"
                     f" allocs={p['allocs']} reuses={p['reuses']}")
    return text


def _summary(val: Any, show: int) -> str:
    """A result in one line, as the C command prints it (tools/print.c)."""
    if isinstance(val, bool) or not isinstance(val, (np.ndarray, _dvm.Tensor, tuple, int, float)):
        return repr(val)
    if isinstance(val, int):
        return f"int {val}"
    if isinstance(val, float):
        return f"float {val:.17g}"
    if isinstance(val, tuple):
        return "tuple (" + "; ".join(_summary(v, show) for v in val) + ")"
    if isinstance(val, _dvm.Tensor):  # left on a device
        return f"{_DVM_DTYPES.get(val.dtype, val.dtype)}[{','.join(map(str, val.shape))}] on {val.device}"
    dtype = _DVM_DTYPES.get(val.dtype.name, "u16" if val.dtype == np.uint16 else val.dtype.name)
    is_float = dtype in ("f32", "f16", "bf16", "f64")
    x = val.reshape(-1).astype(np.float64)
    text = f"{dtype}[{','.join(map(str, val.shape))}]"
    fin = x[np.isfinite(x)].tolist()
    if fin:  # the C command's plain left-to-right double sum
        text += f" min={min(fin):.6g} max={max(fin):.6g} mean={sum(fin) / len(fin):.6g}"
    if is_float:
        text += f" nan={int(np.isnan(x).sum())} inf={int(np.isinf(x).sum())}"
    k = x.size if show < 0 or show > x.size else show
    items = ", ".join((f"{e:.6g}" if is_float else f"{e:.0f}") for e in x[:k].tolist())
    return f"{text} [{items}{', ...' if k < x.size else ''}]"


_DVM_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int8": "i8",
               "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "bool",
               "uint16": "u16", "uint32": "u32", "uint64": "u64"}


def _param(p: Tuple[str, str, Optional[str], Optional[List[Any]]]) -> str:
    """A signature entry as the C command prints it: "x: tensor f32[batch, 4]"."""
    name, kind, dtype, dims = p
    text = f"{name}: {kind}"
    if kind == "tensor":
        text += f" {_DVM_DTYPES.get(str(dtype), dtype)}"
    if kind not in ("tensor", "shape"):
        return text
    if dims is None:
        return text + "[*]"
    return text + "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def cmd_inspect(a: argparse.Namespace) -> int:
    if a.dim and not a.memory:
        print("dvm inspect: error: --dim needs --memory", file=sys.stderr)
        return EXIT_USAGE
    m = load(a.model)
    values = _dims(a.dim, "inspect", False)
    if a.memory:
        return _inspect_memory(m, values)
    sizes = m._sizes()
    print(f"module {a.model}")
    print(f"constants: {sizes['constants']} ({sizes['constant_bytes']} bytes)")
    print(f"kernels: {sizes['kernels']}")
    for k, (name, device, variants) in enumerate(m._kernels()):
        print(f"  kernel {k} {name} ({device}, {variants} variant{'' if variants == 1 else 's'})")
    sigs = m._signatures()
    print(f"functions: {len(sigs)}")
    for name, params, results, symbols, _ in sigs:
        print(f"\nfunction {name}")
        for s, lo, hi in symbols:
            print(f"  symbol {s} in {lo}..{hi}")
        for p in params:
            print(f"  input  {_param(p)}")
        for r in results:
            print(f"  output {_param(r)}")
    return EXIT_OK


def _inspect_memory(m: Module, values: Dict[str, Any]) -> int:
    for name, _, _, symbols, peak in m._signatures():
        print(f"function {name}")
        if peak is None:
            print("  peak: not recorded (compiled with --no-plan, or not by dvm compile)")
            continue
        print(f"  peak = {peak} bytes")
        for s, lo, hi in symbols:
            if s in values and not lo <= values[s] <= hi:
                raise ValueError(f"--dim {s}={values[s]}: outside the symbol's range {lo}..{hi}")
        if not values:
            continue
        if any(s not in values for s, _, _ in symbols):
            raise ValueError(f"function {name}: give every symbol a value with --dim")
        v = _eval_formula(peak, values)
        at = ", ".join(f"{k}={x}" for k, x in values.items())
        print(f"  at {at}: {v} bytes ({v / (1 << 20):.1f} MiB)")
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dvm", description="dvm from Python: compile, run, inspect")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="an ONNX model to a .dvmb")
    c.add_argument("model")
    c.add_argument("-o", "--output")
    c.add_argument("--dump-ir", action="store_true", help="print the imported graph (and stop unless -o is given)")
    c.add_argument("--target", default="cpu", help="cpu or cpu,cuda")
    c.add_argument("--dim", action="append", default=[], metavar="NAME=LO..HI", help="a symbolic dim's range")
    c.add_argument("--function", help="name of the entry function (default main)")
    c.add_argument("--no-fusion", action="store_true")
    c.add_argument("--no-plan", action="store_true")
    c.add_argument("--disable", action="append", default=[], metavar="PASS", help="skip a graph rewrite")
    c.set_defaults(run=cmd_compile)
    r = sub.add_parser("run", help="run a function of a .dvmb on .npy inputs")
    r.add_argument("model")
    # --input-name NAME before an --input FILE: kept in one list, in order
    r.add_argument("--input", dest="inputs", action="append", default=[], metavar="[NAME=]FILE", type=lambda t: (False, t))
    r.add_argument("--input-name", dest="inputs", action="append", metavar="NAME", type=lambda t: (True, t),
                   help="the next --input binds input NAME exactly, its FILE taken whole")
    r.add_argument("--output", dest="outputs", action="append", default=[], metavar="[NAME=]FILE",
                   type=lambda t: (False, t))
    r.add_argument("--output-name", dest="outputs", action="append", metavar="NAME", type=lambda t: (True, t),
                   help="the next --output saves output NAME exactly, to its FILE taken whole")
    r.add_argument("--function")
    r.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"])
    r.add_argument("--threads", type=int)
    r.add_argument("--tf32", action="store_true", help="CUDA f32 matrix products may use TF32 tensor cores")
    r.add_argument("--show", type=int, default=8)
    r.add_argument("--stats", action="store_true", help="print VM statistics after the run")
    r.set_defaults(run=cmd_run)
    i = sub.add_parser("inspect", help="functions, symbolic signatures, peak memory")
    i.add_argument("model")
    i.add_argument("--memory", action="store_true", help="print each function's peak memory formula")
    i.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE")
    i.set_defaults(run=cmd_inspect)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = parser().parse_args(argv)
    try:
        return a.run(a)
    except (_dvm.Error, OSError, ValueError) as e:
        return _fail(a.command, e)
