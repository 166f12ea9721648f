"""Writes OUTDIR/extdata.onnx, y = x @ w + b, with w and b in the external
data file OUTDIR/extdata.onnx.data as onnx.save lays them out (for
test_api.c). Usage: make_extdata_model.py OUTDIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

rng = np.random.default_rng(3)
w = rng.standard_normal((16, 64)).astype(np.float32)
b = rng.standard_normal(64).astype(np.float32)
graph = h.make_graph([h.make_node("MatMul", ["x", "w"], ["xw"]), h.make_node("Add", ["xw", "b"], ["y"])], "extdata",
                     [h.make_tensor_value_info("x", T.FLOAT, ["n", 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
onnx.save(model, os.path.join(sys.argv[1], "extdata.onnx"), save_as_external_data=True,
          location="extdata.onnx.data", size_threshold=0)
