"""add and mul against NumPy, through the whole stack (asm, run, .npy)."""
import numpy as np
import pytest

from dvmop import DvmError, run1

rng = np.random.default_rng(0)

SHAPES = [((), ()), ((7,), (7,)), ((3, 1), (1, 5)), ((2, 3, 4), (4,)), ((65,), (1,)), ((0, 3), (3,))]


@pytest.mark.parametrize("op,ref", [("add", np.add), ("mul", np.multiply)])
@pytest.mark.parametrize("a,b", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_binary(op, ref, a, b, dtype):
    x = rng.standard_normal(a).astype(dtype) if a else np.array(rng.standard_normal(), dtype)
    y = rng.standard_normal(b).astype(dtype) if b else np.array(rng.standard_normal(), dtype)
    got = run1(op, [x, y], shapefn="broadcast")
    np.testing.assert_array_equal(got, ref(x, y))


def test_mismatch():
    with pytest.raises(DvmError, match=r"broadcast: \[2,3\] vs \[4\]: dim -1 3 != 4"):
        run1("add", [np.zeros((2, 3), np.float32), np.zeros(4, np.float32)], shapefn="broadcast")
