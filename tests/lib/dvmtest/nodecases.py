"""The ONNX node cases of the subset tests/onnx_node/ops_subset.txt names
(setup writes them to paths.NODE_SUBSET), as pytest parameters."""
import glob
import os

import pytest

from dvmtest.paths import NODE_SUBSET


def single_node_cases(op_types, expanded=True):
    """pytest params (the case's folder, named by it) of every case whose
    model is one node of op_types; expanded=False leaves out the
    *_expanded forms (a function op written out in other ops)."""
    if not os.path.isdir(NODE_SUBSET):
        return []
    import onnx

    cases = []
    for d in sorted(glob.glob(os.path.join(NODE_SUBSET, "test_*"))):
        if not expanded and d.endswith("_expanded"):
            continue
        nodes = onnx.load(os.path.join(d, "model.onnx")).graph.node
        if len(nodes) == 1 and nodes[0].op_type in op_types:
            cases.append(pytest.param(d, id=os.path.basename(d)))
    return cases
