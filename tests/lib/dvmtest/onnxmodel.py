"""The onnx.helper wrappers tests build their models with."""
import numpy as np
import onnx
from onnx import helper, numpy_helper


def vi(name, elem, shape=None):
    """A tensor's value info: element type (TensorProto.X) and dims (ints,
    symbols, None) or None for an unknown shape."""
    return helper.make_tensor_value_info(name, elem, shape)


def seq_vi(name, elem=onnx.TensorProto.FLOAT):
    """A sequence of tensors of one element type."""
    return helper.make_tensor_sequence_value_info(name, elem, None)


def const(name, value, dtype=np.float32):
    """An initializer holding value as dtype."""
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def make_model(nodes, inputs, outputs, inits=(), opset=17, ir_version=None, name="g", opsets=None):
    """A ModelProto of one graph: inputs and outputs as value infos (or
    (name, elem, dims) tuples), opset of the default domain (or opsets,
    a list of operator set ids), ir_version as onnx's default unless given."""
    as_vi = lambda v: v if isinstance(v, onnx.ValueInfoProto) else vi(*v)
    g = helper.make_graph(nodes, name, [as_vi(v) for v in inputs], [as_vi(v) for v in outputs], list(inits))
    kw = {} if ir_version is None else {"ir_version": ir_version}
    return helper.make_model(g, opset_imports=opsets or [helper.make_opsetid("", opset)], **kw)


def save_model(model, path):
    """model written to path; the path as a str."""
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return str(path)
