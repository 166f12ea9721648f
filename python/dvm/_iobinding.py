"""onnxruntime's OrtValue and IOBinding over dvm: inputs bound once and
reused, outputs left on the device the session runs on (a dvm.Tensor
there), and values passed back in without a copy. What dvm cannot do the
way onnxruntime does it raises dvm.Error saying so."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _dvm

if TYPE_CHECKING:
    from ._session import InferenceSession

# ONNX Runtime's spelling of element types, by NumPy / dvm dtype name.
ORT_TYPES = {
    "float32": "tensor(float)", "float16": "tensor(float16)", "bfloat16": "tensor(bfloat16)",
    "float64": "tensor(double)", "int8": "tensor(int8)", "int16": "tensor(int16)",
    "int32": "tensor(int32)", "int64": "tensor(int64)", "uint8": "tensor(uint8)", "bool": "tensor(bool)",
    "uint16": "tensor(uint16)", "uint32": "tensor(uint32)", "uint64": "tensor(uint64)",
    "str": "tensor(string)", "object": "tensor(string)",
}


def _unsupported(what: str, instead: str) -> _dvm.Error:
    return _dvm.Error(f"dvm: {what} is not supported; {instead}")


class OrtValue:
    """onnxruntime.OrtValue's common surface over a dvm value: a NumPy array
    on the host, or a dvm.Tensor left on the CUDA device by a run. It speaks
    DLPack (torch.from_dlpack(v)), and binding it as an input reads it in place."""

    def __init__(self, value: Any):
        """Wraps a NumPy array or a dvm.Tensor (use ortvalue_from_numpy)."""
        if not isinstance(value, (np.ndarray, _dvm.Tensor, _Foreign)):
            raise TypeError(f"OrtValue wraps a numpy.ndarray or a dvm.Tensor, not {type(value).__name__}")
        self._value = value

    @staticmethod
    def ortvalue_from_numpy(array: Any, device_type: str = "cpu", device_id: int = 0) -> "OrtValue":
        """A host value over `array` (no copy). Uploading to "cuda" is not
        supported: a CUDA OrtValue is an output of run_with_iobinding with
        bind_output(name, "cuda"), or any CUDA DLPack tensor bound as an input."""
        if device_type.lower() != "cpu":
            raise _unsupported(f"OrtValue.ortvalue_from_numpy(..., {device_type!r})",
                               "bind outputs to \"cuda\" to keep them there, or bind a CUDA DLPack tensor "
                               "(torch, CuPy) with bind_ortvalue_input(name, dvm.OrtValue.from_dlpack(t))")
        return OrtValue(np.ascontiguousarray(array))

    @staticmethod
    def from_dlpack(obj: Any) -> "OrtValue":
        """A value over any DLPack producer's memory (CPU or CUDA), no copy."""
        if isinstance(obj, (np.ndarray, _dvm.Tensor)):
            return OrtValue(obj)
        if obj.__dlpack_device__()[0] == 1:
            return OrtValue(np.from_dlpack(obj))
        return OrtValue(_Foreign(obj))  # type: ignore[arg-type]

    def numpy(self) -> np.ndarray:
        """The value as a NumPy array (CPU values only, as in onnxruntime)."""
        if isinstance(self._value, np.ndarray):
            return self._value
        return self._value.numpy()  # raises for a device tensor, naming the device

    def device_name(self) -> str:
        """"cpu" or "cuda"."""
        return "cpu" if isinstance(self._value, np.ndarray) else self._value.device

    def shape(self) -> List[int]:
        return list(self._value.shape)

    def data_type(self) -> str:
        """The element type as onnxruntime spells it ("tensor(float)")."""
        return ORT_TYPES.get(str(self._value.dtype), f"tensor({self._value.dtype})")

    def element_type(self) -> Any:
        """The NumPy dtype of the elements (a name for device values)."""
        return self._value.dtype

    def data_ptr(self) -> int:
        """The address of the first element (a device address on CUDA)."""
        v = self._value
        return v.ctypes.data if isinstance(v, np.ndarray) else v.data_ptr

    def is_tensor(self) -> bool:
        return True

    def has_value(self) -> bool:
        return True

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._value.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self._value.__dlpack_device__()

    def __repr__(self) -> str:
        return f"<dvm.OrtValue {self.data_type()} {self.shape()} on {self.device_name()}>"


class _Foreign:
    """A foreign CUDA DLPack producer with the few attributes OrtValue reads."""

    def __init__(self, obj: Any):
        self._obj = obj
        self.shape = tuple(getattr(obj, "shape", ()))
        self.dtype = str(getattr(obj, "dtype", "?")).replace("torch.", "")
        self.device = "cuda"
        self.data_ptr = obj.data_ptr() if callable(getattr(obj, "data_ptr", None)) else 0

    def numpy(self) -> Any:
        raise _dvm.InvalidInput("the value is on the cuda device: read it with its own library")

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._obj.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self._obj.__dlpack_device__()


class IOBinding:
    """onnxruntime.IOBinding over a dvm.InferenceSession (session.io_binding()).

    Inputs: bind_cpu_input(name, array), bind_ortvalue_input(name, value)
    (host or CUDA, read in place). Outputs: bind_output(name, "cpu" or
    "cuda") keeps them on that device; get_outputs() gives OrtValues and
    copy_outputs_to_cpu() NumPy arrays. Not supported (dvm.Error): raw
    pointers (bind_input with buffer_ptr) and preallocated outputs
    (bind_ortvalue_output, bind_output with buffer_ptr): dvm's VM allocates
    each result from its own pool, at the shape the run computes."""

    def __init__(self, session: "InferenceSession"):
        self._session = session
        self._inputs: Dict[str, Any] = {}
        self._outputs: Dict[str, str] = {}  # name -> device, in binding order
        self._results: List[OrtValue] = []

    def bind_cpu_input(self, name: str, array: Any) -> None:
        self._inputs[name] = np.ascontiguousarray(array)

    def bind_ortvalue_input(self, name: str, value: OrtValue) -> None:
        self._inputs[name] = value._value

    def bind_input(self, name: str, device_type: str, device_id: int, element_type: Any, shape: Sequence[int],
                   buffer_ptr: int) -> None:
        raise _unsupported("IOBinding.bind_input with a raw buffer pointer",
                           "bind the array or tensor itself (bind_cpu_input, or bind_ortvalue_input with "
                           "dvm.OrtValue.from_dlpack(t)): dvm reads it in place")

    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, element_type: Any = None,
                    shape: Optional[Sequence[int]] = None, buffer_ptr: Optional[int] = None) -> None:
        if buffer_ptr is not None:
            raise _unsupported("IOBinding.bind_output into a preallocated buffer",
                               "bind the output to a device and take it from get_outputs()")
        device = device_type.lower()
        if device not in ("cpu", "cuda") or device_id != 0:
            raise _dvm.InvalidInput(f"bind_output({name!r}): device {device_type!r} {device_id} "
                                    "(dvm has \"cpu\" and \"cuda\" device 0)")
        self._outputs[name] = device

    def bind_ortvalue_output(self, name: str, value: OrtValue) -> None:
        raise _unsupported("IOBinding.bind_ortvalue_output (a preallocated output)",
                           "bind the output to a device with bind_output and take it from get_outputs()")

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = []

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: dvm waits for an imported CUDA input's device at the run."""

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: results are complete when the run returns."""

    def get_outputs(self) -> List[OrtValue]:
        """The bound outputs of the last run_with_iobinding, in binding order."""
        return list(self._results)

    def copy_outputs_to_cpu(self) -> List[np.ndarray]:
        """The bound outputs as NumPy arrays (CPU outputs without a copy)."""
        if any(v.device_name() != "cpu" for v in self._results):
            raise _unsupported("copying CUDA outputs to the host after the run",
                               "bind the outputs to \"cpu\" (the run copies them), or read them with "
                               "torch.from_dlpack")
        return [v.numpy() for v in self._results]

    def _run(self) -> None:
        s = self._session
        names = list(self._outputs) or [o.name for o in s.get_outputs()]
        devices = {self._outputs.get(n, "cpu") for n in names}
        if "cuda" in devices and s._device != "cuda":
            raise _dvm.InvalidInput("an output is bound to \"cuda\" but the session runs on the CPU "
                                    "(providers=[\"CUDAExecutionProvider\"] on a machine with a CUDA device)")
        if len(devices) > 1:
            raise _unsupported("binding outputs to different devices in one run",
                               "bind them all to \"cpu\" or all to \"cuda\"")
        res = s.module.run(self._inputs, device=s._device, threads=s._threads, results_on_device="cuda" in devices)
        missing = [n for n in names if n not in res]
        if missing:
            raise _dvm.InvalidInput(f"no output named {missing[0]!r} (outputs: {[o.name for o in s.get_outputs()]})")
        self._results = [OrtValue(res[n]) for n in names]

