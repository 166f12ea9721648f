"""dvm.InferenceSession: ONNX Runtime's common session surface over a dvm
Module, so that code written for onnxruntime runs on dvm unchanged for the
common cases. An .onnx model is compiled on first use and the .dvmb cached
under a hash of the model's bytes (DVM_CACHE_DIR, default ~/.cache/dvm),
the least recently used entries removed past DVM_CACHE_MAX_BYTES."""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _dvm
from ._iobinding import ORT_TYPES as _ORT_TYPES, IOBinding, OrtValue
from ._module import Module, _compile_bytes

_PROVIDERS = ("CPUExecutionProvider", "CUDAExecutionProvider")
_DVMB_MAGIC = b"\x89DVMB\r\n\x1a"


@dataclass(frozen=True)
class NodeArg:
    """An input or output as onnxruntime.NodeArg describes it: name, shape
    (ints and symbol names; None where unknown) and type ("tensor(float)")."""
    name: str
    shape: Optional[List[Any]]
    type: str


@dataclass
class ModelMetadata:
    """onnxruntime.ModelMetadata: the ONNX model's producer, graph name,
    domain, descriptions, version and custom metadata (empty for a .dvmb)."""
    producer_name: str = ""
    graph_name: str = ""
    domain: str = ""
    description: str = ""
    graph_description: str = ""
    version: int = 0
    custom_metadata_map: Dict[str, str] = field(default_factory=dict)


class SessionOptions:
    """The part of onnxruntime.SessionOptions that dvm reads:
    intra_op_num_threads (kernel threads; 0 = all cores). The other
    attributes are accepted and ignored (dvm compiles once, ahead of time)."""

    def __init__(self) -> None:
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = None
        self.log_severity_level = 2
        self.enable_profiling = False


class RunOptions:
    """Accepted by InferenceSession.run for onnxruntime compatibility; dvm reads none of it."""

    def __init__(self) -> None:
        self.log_severity_level = 2
        self.terminate = False


def _cache_dir() -> str:
    d = os.environ.get("DVM_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dvm")


_CACHE_MAX_BYTES = 8 << 30  # default bound on the cache: a few large models
_CACHE_ENTRY = re.compile(r"[0-9a-f]{64}\.dvmb")
_CACHE_TMP = re.compile(r"tmp\w+\.tmp")


def _cache_limit() -> int:
    v = os.environ.get("DVM_CACHE_MAX_BYTES")
    if v is None:
        return _CACHE_MAX_BYTES
    try:
        n = int(v)
    except ValueError:
        n = -1
    if n < 0:
        raise _dvm.Error(f"DVM_CACHE_MAX_BYTES: want a number of bytes (0 or more), got {v!r}")
    return n


def _prune_cache(d: str, keep: str, limit: int) -> None:
    """Removes the least recently used entries of cache directory d (by
    modification time, which a hit renews) until the rest, keep included,
    hold at most limit bytes; never keep, the entry just written. Each
    rebuilt extension compiles every model anew, so without this the old
    entries would pile up. A writer's .tmp left over an hour is removed too.
    Only files named as this cache names them (a SHA-256 in hex and .dvmb;
    tmp*.tmp) are touched, so other files in the folder are safe. A file
    another process has mapped stays readable there after removal."""
    now, total, entries = time.time(), 0, []
    try:
        with os.scandir(d) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if _CACHE_TMP.fullmatch(e.name) and now - st.st_mtime > 3600:
                    _unlink(e.path)
                elif _CACHE_ENTRY.fullmatch(e.name):
                    total += st.st_size
                    if e.path != keep:
                        entries.append((st.st_mtime, st.st_size, e.path))
    except OSError:
        return
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        if _unlink(path):
            total -= size


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def _compiler_id() -> bytes:
    """Ties cached files to the compiler that made them (a rebuilt dvm
    recompiles)."""
    return b"%d" % _dvm.compiler_id()


def _provider_names(providers: Optional[Sequence[Any]]) -> List[str]:
    names = []
    for p in providers or ["CPUExecutionProvider"]:
        name = p[0] if isinstance(p, (tuple, list)) else p
        if name not in _PROVIDERS:
            raise _dvm.Error(f"dvm.InferenceSession: provider {name!r} is not supported "
                             f"(supported: {', '.join(_PROVIDERS)})")
        names.append(name)
    return names


_ONNX_ELEM = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
              9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16"}


def _varint(buf: memoryview, i: int) -> Tuple[int, int]:
    v = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("a truncated varint")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def _fields(buf: memoryview, wanted: Tuple[int, ...]) -> Dict[int, List[Any]]:
    """The fields numbered in `wanted` of one protobuf message, by number:
    ints for varints, memoryviews (no copies) for length-delimited ones.
    The rest (a model's initializers and nodes) are skipped unread."""
    out: Dict[int, List[Any]] = {n: [] for n in wanted}
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise ValueError("a field runs past its message")
            v, i = buf[i:i + n], i + n
        elif wire in (1, 5):
            v, i = None, i + (8 if wire == 1 else 4)
        else:
            raise ValueError(f"wire type {wire}")
        if num in out:
            out[num].append(v)
    return out


def _onnx_facts(data: Optional[bytes]) -> Tuple[ModelMetadata, Dict[str, NodeArg]]:
    """The metadata and the declared graph inputs and outputs of an ONNX
    model, which onnxruntime reports as they are declared; nothing without
    the onnx package (the module's own signatures are used then). Only the
    model's header fields and the graph's inputs and outputs are parsed:
    parsing the whole model would hold a second copy of its weights."""
    if data is None:
        return ModelMetadata(), {}
    try:
        import onnx
    except ImportError:
        return ModelMetadata(), {}
    try:  # ModelProto: producer_name 2, domain 4, model_version 5, doc_string 6, graph 7, metadata_props 14
        m = _fields(memoryview(data), (2, 4, 5, 6, 7, 14))
        g = _fields(m[7][-1], (2, 10, 11, 12)) if m[7] else {2: [], 10: [], 11: [], 12: []}
    except ValueError:
        return ModelMetadata(), {}  # the compiler has said what is wrong with it, if anything

    def text(vals: List[Any]) -> str:
        return bytes(vals[-1]).decode("utf-8", "replace") if vals else ""

    props = [onnx.StringStringEntryProto.FromString(bytes(p)) for p in m[14]]
    meta = ModelMetadata(text(m[2]), text(g[2]), text(m[4]), text(m[6]), text(g[10]),
                         m[5][-1] if m[5] else 2**63 - 1, {p.key: p.value for p in props})
    declared = {}
    for raw in g[11] + g[12]:
        v = onnx.ValueInfoProto.FromString(bytes(raw))
        kind = _ort_type(v.type)
        if kind is None:
            continue
        tp = v.type.optional_type.elem_type if v.type.HasField("optional_type") else v.type
        t, shape = tp.tensor_type, None if tp.HasField("tensor_type") else []  # a sequence's or map's: []
        if tp.HasField("tensor_type") and t.HasField("shape"):
            shape = [d.dim_param if d.HasField("dim_param") else d.dim_value if d.HasField("dim_value") else None
                     for d in t.shape.dim]
        declared[v.name] = NodeArg(v.name, shape, kind)
    return meta, declared


def _ort_type(tp: Any) -> Optional[str]:
    """A TypeProto as onnxruntime's NodeArg.type writes it: tensor(float),
    seq(tensor(int64)), map(int64,tensor(float)), seq(map(...)),
    optional(...); None for what it leaves undeclared."""
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        t = tp.tensor_type.elem_type
        return f"tensor({_ONNX_ELEM.get(t, t)})" if t else None
    if which == "sequence_type":
        inner = _ort_type(tp.sequence_type.elem_type)
        return inner and f"seq({inner})"
    if which == "optional_type":
        inner = _ort_type(tp.optional_type.elem_type)
        return inner and f"optional({inner})"
    if which == "map_type":
        key, inner = tp.map_type.key_type, _ort_type(tp.map_type.value_type)
        return inner and f"map({_ONNX_ELEM.get(key, key)},{inner})"
    return None


def cached_compile(source: Any, key: str, target: str, data_dir: Optional[str] = None, **options: Any) -> Module:
    """The module compiled from source (a path or bytes) for target, from
    the cache when it holds one under key (a SHA-256 in hex of what the
    module depends on: InferenceSession's and dvm.genai.Model's). With
    data_dir, the model's external data files there are referred to, not
    copied into the cached file, which is loaded with them."""
    cached, limit = os.path.join(_cache_dir(), key + ".dvmb"), _cache_limit()
    if os.path.exists(cached):
        try:
            m = Module(cached, data_dir=data_dir)
            try:
                os.utime(cached)  # recently used: the last to be pruned
            except OSError:
                pass
            return m
        except _dvm.OutOfMemory:
            raise  # the entry may be sound: compiling would need more memory still
        except _dvm.Error:
            pass  # stale or damaged: compile again
    # the bytes, not a Module made from them: that would copy them and
    # pack the weights beside them, only to be replaced by the file
    data = _compile_bytes(source, target=target, data_dir=data_dir, **options)
    try:  # written whole, then renamed, so readers never see half a file
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(cached), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, cached)
    except OSError:
        return Module(data, data_dir=data_dir)  # no cache: still usable
    _prune_cache(os.path.dirname(cached), cached, limit)
    # the cached file, memory-mapped, once the bytes are gone
    del data
    return Module(cached, data_dir=data_dir)


class InferenceSession:
    """onnxruntime.InferenceSession's common surface over dvm.

    InferenceSession(path_or_bytes, sess_options=None, providers=None):
    path_or_bytes is an .onnx model (compiled on first use, the .dvmb cached
    by content hash under DVM_CACHE_DIR or ~/.cache/dvm) or a .dvmb.
    providers: CPUExecutionProvider, and CUDAExecutionProvider, which compiles
    for CUDA too and runs there when a device is present. sess_options:
    intra_op_num_threads is read. run, get_inputs, get_outputs,
    get_modelmeta, get_providers work as in onnxruntime; so do io_binding,
    run_with_iobinding and run_with_ort_values for what dvm.IOBinding
    supports; profiling is not supported (it raises dvm.Error)."""

    def __init__(self, path_or_bytes: Union[str, "os.PathLike[str]", bytes], sess_options: Any = None,
                 providers: Optional[Sequence[Any]] = None, provider_options: Any = None, **kwargs: Any):
        self._providers = _provider_names(providers)
        self._options = sess_options if sess_options is not None else SessionOptions()
        threads = int(getattr(self._options, "intra_op_num_threads", 0) or 0)
        self._threads = threads if threads > 0 else None
        cuda = "CUDAExecutionProvider" in self._providers and _dvm.probe("cuda")[0]
        self._device = "cuda" if cuda else "cpu"
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._model_path, data = None, bytes(path_or_bytes)
        else:
            self._model_path = os.fspath(path_or_bytes)
            with open(self._model_path, "rb") as f:
                data = f.read()
        if data[:8] == _DVMB_MAGIC:
            self._meta, declared = _onnx_facts(None)
            self._module = Module(data)
        else:
            self._meta, declared = _onnx_facts(data)
            target = "cpu,cuda" if cuda else "cpu"
            h = hashlib.sha256(data)
            h.update(b"\0" + target.encode() + b"\0" + _compiler_id())
            # a model read from a file is compiled from the file: its bytes
            # here are dropped first, not held beside the compiler's
            source: Any = self._model_path if self._model_path else data
            del data
            self._module = cached_compile(source, h.hexdigest(), target)
        fn = self._module.functions.get("main")
        if fn is None:
            raise _dvm.Error("dvm.InferenceSession: the module has no function \"main\"")
        self._inputs = [declared.get(v.name) or self._node_arg(v) for v in fn.inputs]
        self._outputs = [declared.get(v.name) or self._node_arg(v) for v in fn.outputs]
        self._output_names = [o.name for o in self._outputs]

    @staticmethod
    def _node_arg(v: Any) -> NodeArg:
        dtype = v.dtype if isinstance(v.dtype, str) or v.dtype is None else v.dtype.name
        kind = _ORT_TYPES.get(str(dtype), f"tensor({dtype})") if v.kind == "tensor" else v.kind
        return NodeArg(v.name, list(v.shape) if v.shape is not None else None, kind)

    def get_inputs(self) -> List[NodeArg]:
        """The model's inputs (NodeArg: name, shape, type)."""
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        """The model's outputs (NodeArg: name, shape, type)."""
        return list(self._outputs)

    def get_overridable_initializers(self) -> List[NodeArg]:
        """None: dvm compiles initializers into the module as constants."""
        return []

    def get_providers(self) -> List[str]:
        """The providers in use: CPUExecutionProvider, preceded by CUDAExecutionProvider when running there."""
        return (["CUDAExecutionProvider"] if self._device == "cuda" else []) + ["CPUExecutionProvider"]

    def get_provider_options(self) -> Dict[str, Dict[str, str]]:
        """An empty option map per provider in use."""
        return {p: {} for p in self.get_providers()}

    def get_session_options(self) -> Any:
        """The sess_options given (or the defaults)."""
        return self._options

    def get_modelmeta(self) -> ModelMetadata:
        """The ONNX model's metadata (read with the onnx package when it is
        installed); empty for a .dvmb."""
        return self._meta

    def run(self, output_names: Optional[Sequence[str]], input_feed: Mapping[str, Any],
            run_options: Any = None) -> List[Any]:
        """Runs the model: input_feed maps input names to arrays; returns the
        outputs named in output_names (all of them for None or []) as a list
        of NumPy arrays, in that order."""
        res = self._module.run(input_feed, device=self._device, threads=self._threads)
        names = output_names or self._output_names
        try:
            return [res[n] for n in names]
        except KeyError as e:
            raise _dvm.InvalidInput(f"no output named {e.args[0]!r} (outputs: {self._output_names})") from None

    def io_binding(self) -> IOBinding:
        """An IOBinding for run_with_iobinding (dvm.IOBinding says what it supports)."""
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: Any = None) -> None:
        """Runs on the bound inputs; the bound outputs are then in iobinding.get_outputs()."""
        iobinding._run()

    def run_with_ort_values(self, output_names: Optional[Sequence[str]], input_dict_ort_values: Mapping[str, Any],
                            run_options: Any = None) -> List[OrtValue]:
        """As run, with OrtValue inputs (read in place) and OrtValue outputs,
        left on the device the session runs on."""
        feeds = {k: v._value if isinstance(v, OrtValue) else v for k, v in input_dict_ort_values.items()}
        res = self._module.run(feeds, device=self._device, threads=self._threads,
                               results_on_device=self._device == "cuda")
        names = output_names or self._output_names
        try:
            return [OrtValue(res[n]) for n in names]
        except KeyError as e:
            raise _dvm.InvalidInput(f"no output named {e.args[0]!r} (outputs: {self._output_names})") from None

    @property
    def module(self) -> Module:
        """The dvm.Module the session runs."""
        return self._module

    _UNSUPPORTED = ("run_with_ortvaluevector", "end_profiling", "get_profiling_start_time_ns", "set_providers",
                    "run_async")

    def __getattr__(self, name: str) -> Any:
        if name in InferenceSession._UNSUPPORTED:
            raise _dvm.Error(f"dvm.InferenceSession.{name} is not supported (dvm supports run, get_inputs, "
                             "get_outputs, get_modelmeta, get_providers, io_binding, run_with_iobinding, "
                             "run_with_ort_values)")
        raise AttributeError(name)
