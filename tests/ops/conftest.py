"""Every case here runs on each device present (dvmtest.devices: the CPU,
and CUDA where there is a GPU, a skip saying why elsewhere).

The ONNX node test cases that several test files here check kernels
against: the tests named in tests/onnx_node/ops_subset.txt, which setup
writes (gen_node_data.py) and links into tests/onnx_node/data/ops_subset.
Without them those cases would vanish silently, so the session stops with
an error when the folder or any case of the list is missing."""
import os

import pytest
from dvmtest.devices import device  # noqa: F401 (the fixture, for on_each_device)
from dvmtest.paths import NODE_SUBSET as NODE_DATA, TESTS


@pytest.fixture(autouse=True)
def on_each_device(device):  # noqa: F811
    """Each case once per device: dvmop and dvmtest.cli read the active one."""


def pytest_sessionstart(session):
    with open(os.path.join(TESTS, "onnx_node", "ops_subset.txt")) as f:
        names = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    lacking = [n for n in names if not os.path.isfile(os.path.join(NODE_DATA, n, "model.onnx"))]
    if lacking:
        raise pytest.UsageError(f"ONNX node test data missing at {os.path.abspath(NODE_DATA)} "
                                f"({len(lacking)} of {len(names)} cases, e.g. {lacking[0]}): write it with "
                                "python3 tests/onnx_node/gen_node_data.py (./setup.sh does)")
