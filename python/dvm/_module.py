"""Modules: compiling ONNX models, loading .dvmb files, signatures, running."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _dvm

Dim = Union[int, str, None]
PathLike = Union[str, "os.PathLike[str]"]


def _numpy_dtype(name: Optional[str]) -> Any:
    """The NumPy dtype for a dvm dtype name (bfloat16 needs ml_dtypes)."""
    if name is None:
        return None
    if name == "bfloat16":
        try:
            import ml_dtypes
            return np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            return "bfloat16"
    return np.dtype(name)


@dataclass(frozen=True)
class ValueInfo:
    """One input or result of a function: its name, kind ("tensor", "int",
    "float", "shape", "tuple": an ONNX sequence or optional, "any"), NumPy
    dtype (tensors, and a tuple's tensors; None otherwise) and shape:
    a list with an int for a fixed dim, a str for a symbolic one ("batch",
    or an expression such as "seq+1") and None for one only the run knows;
    the shape is None when even the rank is unknown."""
    name: str
    kind: str
    dtype: Any
    shape: Optional[List[Dim]]


@dataclass(frozen=True)
class Function:
    """A function of a module: `inputs` and `outputs` (ValueInfo), the
    allowed range of each symbol (`symbols`: name -> (lo, hi)), and
    `peak_memory`, the peak memory in bytes as a formula of the symbols
    (docs/bytecode.md section 3.8), or None when not recorded."""
    name: str
    inputs: List[ValueInfo]
    outputs: List[ValueInfo]
    symbols: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    peak_memory: Optional[str] = None

    def peak_bytes(self, **dims: int) -> int:
        """The peak memory in bytes for the given symbol values
        (peak_bytes(batch=8, seq=128)); every symbol of the formula needs one."""
        if self.peak_memory is None:
            raise _dvm.Error(f"function {self.name}: the peak memory was not recorded "
                             "(compiled with plan=False, or not by dvm compile)")
        return _eval_formula(self.peak_memory, dims)


def _eval_formula(text: str, values: Mapping[str, int]) -> int:
    """Evaluates a peak formula: integers, symbols, + - * ^, floordiv, mod,
    min, max (the grammar of docs/bytecode.md section 3.8)."""
    import ast
    import operator
    src = text.replace("^", "**")
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Pow: operator.pow, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
    funcs: Dict[str, Any] = {"floordiv": operator.floordiv, "mod": operator.mod, "min": min, "max": max}

    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in values:
                raise _dvm.InvalidInput(f"peak formula {text!r}: give a value for {n.id!r}")
            return int(values[n.id])
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in funcs:
            return funcs[n.func.id](*[ev(a) for a in n.args])
        raise _dvm.Error(f"peak formula {text!r}: cannot read {ast.dump(n)}")
    return ev(ast.parse(src, mode="eval"))


class Module(_dvm.Module):
    """A compiled dvm module (a verified .dvmb): dvm.load(path) maps a file,
    Module(bytes) loads from memory, dvm.compile(model) compiles ONNX.

    Immutable and shared: call `run` from any number of threads at once (each
    call runs on a VM of its own, with the GIL released). `functions` describes
    each function; `save(path)` writes the .dvmb."""

    def __init__(self, source: Union[PathLike, bytes, bytearray, memoryview], *,
                 data_dir: Optional[PathLike] = None):
        """Loads and verifies a module from a .dvmb path (memory-mapped) or
        from its bytes (copied). data_dir: where the files of its external
        constants are (one compiled with data_dir, kept elsewhere); default
        the .dvmb's folder."""
        super().__init__(source, data_dir=data_dir)
        self._source = source if isinstance(source, (bytes, bytearray, memoryview)) else os.fspath(source)
        self._functions: Optional[Dict[str, Function]] = None

    @property
    def functions(self) -> Dict[str, Function]:
        """{name: Function} for every function; the CUDA versions that
        compile(target="cpu,cuda") adds (NAME@cuda) are not listed: run NAME
        with device="cuda"."""
        if self._functions is None:
            fns = {}
            for name, params, results, symbols, peak in self._signatures():
                if name.endswith("@cuda"):
                    continue
                info = lambda t: ValueInfo(t[0], t[1], _numpy_dtype(t[2]), t[3])
                fns[name] = Function(name, [info(p) for p in params], [info(r) for r in results],
                                     {s: (lo, hi) for s, lo, hi in symbols}, peak)
            self._functions = fns
        return self._functions

    def save(self, path: PathLike) -> None:
        """Writes the module's .dvmb to `path`."""
        if isinstance(self._source, str):
            if os.path.abspath(self._source) != os.path.abspath(os.fspath(path)):
                shutil.copyfile(self._source, path)
            return
        with open(path, "wb") as f:
            f.write(self._source)

    def __call__(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """m(x, y) or m(x=..., y=...): runs "main" (see run)."""
        if args and kwargs:
            raise TypeError("pass the inputs by position or by name, not both")
        return self.run(kwargs if kwargs else list(args))

    def __repr__(self) -> str:
        sigs = ", ".join(f"{f.name}({', '.join(i.name for i in f.inputs)})" for f in self.functions.values())
        return f"<dvm.Module {sigs}>"


def load(path: PathLike) -> Module:
    """Loads and verifies a .dvmb file; it is memory-mapped, and its
    constants are used in place."""
    return Module(path)


def _model_bytes(model: Any) -> Tuple[Union[str, bytes], Optional[str]]:
    """A model argument as a path or bytes, and the directory external data
    is read from."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model), None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), None
    if hasattr(model, "SerializeToString"):  # onnx.ModelProto
        return model.SerializeToString(), None
    raise TypeError(f"model must be a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


def _dim_list(dims: Optional[Mapping[str, Any]]) -> List[Tuple[str, int, int]]:
    out = []
    for name, r in (dims or {}).items():
        if isinstance(r, int):
            lo = hi = r
        elif isinstance(r, range):
            lo, hi = r.start, r.stop - 1
        else:
            lo, hi = r
        out.append((name, int(lo), int(hi)))
    return out


def compile(model: Any, *, dims: Optional[Mapping[str, Any]] = None, target: str = "cpu",
            **options: Any) -> Module:
    """Compiles an ONNX model (a path, bytes, or an onnx.ModelProto) to a
    Module, as `dvm compile` does.

    dims: the range of each symbolic dim, {"seq": (1, 512)} (an int fixes it,
    a range(lo, hi + 1) works too); target: "cpu" or "cpu,cuda" (adds a CUDA
    version of each function, compiled with NVRTC). options: function="main"
    (the entry's name), fusion=True, plan=True (False: --no-fusion,
    --no-plan), disable=() (graph rewrites to skip, as --disable), stitch=True
    (False: --no-stitch), last_position=None (an output name: computed for
    the last position of its axis 1 only, as --last-position), data_dir=None
    (the folder the module will be loaded with, Module(..., data_dir=): the
    model's external data files inside it are referred to, not copied). Raises dvm.UnsupportedOp naming the node for ops dvm does
    not take, dvm.CompileError for other failures."""
    return Module(_compile_bytes(model, dims=dims, target=target, **options), data_dir=options.get("data_dir"))


def _compile_bytes(model: Any, *, dims: Optional[Mapping[str, Any]] = None, target: str = "cpu",
                   **options: Any) -> bytes:
    """compile's .dvmb bytes, not yet loaded (InferenceSession writes them
    to its cache and maps the file: loading them would copy them)."""
    parts = [t.strip() for t in target.split(",") if t.strip()]
    bad = [t for t in parts if t not in ("cpu", "cuda")]
    if bad or not parts:
        raise ValueError(f"unknown target {target!r} (cpu, cpu,cuda)")
    known = {"function", "fusion", "plan", "disable", "stitch", "last_position", "data_dir"}
    extra = set(options) - known
    if extra:
        raise TypeError(f"dvm.compile: unknown options {sorted(extra)} (known: {sorted(known)})")
    disable = options.get("disable", ())
    src, model_dir = _model_bytes(model)
    data = _dvm.compile(src, _dim_list(dims), cuda="cuda" in parts, model_dir=model_dir,
                        function=options.get("function"), last_position=options.get("last_position"),
                        fusion=bool(options.get("fusion", True)),
                        plan=bool(options.get("plan", True)), stitch=bool(options.get("stitch", True)),
                        disable=(disable,) if isinstance(disable, str) else tuple(disable),
                        data_dir=options.get("data_dir"))
    return data
