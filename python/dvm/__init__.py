"""dvm: run ONNX models with dynamic shapes, compiled once for every shape.

    import dvm
    m = dvm.compile("model.onnx", dims={"seq": (1, 512)})   # or dvm.load("model.dvmb")
    out = m.run({"ids": ids, "mask": mask})                 # {output name: numpy array}

    sess = dvm.InferenceSession("model.onnx")                # onnxruntime's session API
    logits, = sess.run(None, {"ids": ids, "mask": mask})

compile, load and Module are the native API (signatures in Module.functions);
InferenceSession mirrors onnxruntime.InferenceSession. Errors are dvm.Error
and its subclasses. `python -m dvm compile|run|inspect` is the command line.
docs/python.md has the details."""
from ._dvm import (CompileError, DeviceError, Error, InvalidInput, OutOfMemory, Tensor,
                   UnsupportedOp)
from ._dvm import probe as _probe
from ._iobinding import IOBinding, OrtValue
from ._module import Function, Module, ValueInfo, compile, load
from ._session import InferenceSession, ModelMetadata, NodeArg, RunOptions, SessionOptions

__version__ = "0.1.0"


def device_info(device: str = "cuda") -> str:
    """What the device ("cpu", "cuda") is, or raises dvm.DeviceError saying why it is not there."""
    ok, what = _probe(device)
    if not ok:
        raise DeviceError(what)
    return what


def get_available_providers() -> list:
    """onnxruntime.get_available_providers(): CUDAExecutionProvider when a CUDA device is present, and CPUExecutionProvider."""
    return (["CUDAExecutionProvider"] if _probe("cuda")[0] else []) + ["CPUExecutionProvider"]


def get_device() -> str:
    """onnxruntime.get_device(): "GPU" when a CUDA device is present, else "CPU"."""
    return "GPU" if _probe("cuda")[0] else "CPU"


__all__ = ["compile", "load", "Module", "Function", "ValueInfo", "Tensor", "InferenceSession",
           "SessionOptions", "RunOptions", "NodeArg", "ModelMetadata", "IOBinding", "OrtValue", "Error", "InvalidInput",
           "CompileError", "UnsupportedOp", "OutOfMemory", "DeviceError", "device_info",
           "get_available_providers", "get_device", "__version__"]
