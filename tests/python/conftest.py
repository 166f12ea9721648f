"""Fixtures for the Python package's tests: small ONNX models made here
with onnx.helper, and the fixture models of tests/models."""
import os

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import dvm
from dvmtest.onnxmodel import make_model

MODELS = os.environ.get("DVM_MODELS", os.path.join(os.path.dirname(__file__), "..", "models"))

ONNX_TYPES = {"float32": T.FLOAT, "float16": T.FLOAT16, "bfloat16": T.BFLOAT16, "float64": T.DOUBLE,
              "int8": T.INT8, "int16": T.INT16, "int32": T.INT32, "int64": T.INT64, "uint8": T.UINT8,
              "bool": T.BOOL, "uint16": T.UINT16, "uint32": T.UINT32, "uint64": T.UINT64}


def add_model(shape=("n",)):
    """z = x + y over float32 tensors of `shape`."""
    return make_model([h.make_node("Add", ["x", "y"], ["z"])],
                      [("x", T.FLOAT, list(shape)), ("y", T.FLOAT, list(shape))], [("z", T.FLOAT, None)])


@pytest.fixture(scope="session")
def add_module():
    return dvm.compile(add_model())


@pytest.fixture(scope="session")
def bert():
    return dvm.compile(os.path.join(MODELS, "bert.onnx"), dims={"batch": (1, 64), "seq": (1, 64)})


def bert_inputs(rng, batch, seq):
    ids = rng.integers(0, 100, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    mask[:, seq // 2 + 1:] = 0
    return {"ids": ids, "mask": mask}
