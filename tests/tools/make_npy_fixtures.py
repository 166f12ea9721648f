#!/usr/bin/env python3
"""Writes the .npy fixtures of tests/tools/test_npy.c into tests/fixtures/npy/
and a few malformed seeds into tests/fuzz/corpus/npy/.

The outputs are committed; run this again only to change them. Values follow
formulas that test_npy.c repeats, so the C test needs no Python.

  element k (row-major) of a dtype's 2x3 array:
    f2/f4/f8: (k - 2) * 0.75        i1: (k - 2) * 3      i2: (k - 2) * 1000
    i4: (k - 2) * 100000007         i8: (k - 2) * 1000000000007
    u1: k * 50                      b1: k % 3 == 0
"""
import os

import numpy as np
from numpy.lib import format as npf

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "npy")
CORPUS = os.path.join(HERE, "..", "fuzz", "corpus", "npy")

SCALE = {"i1": 3, "i2": 1000, "i4": 100000007, "i8": 1000000000007}


def sample_values(code):
    k = np.arange(6)
    if code[0] == "f":
        v = (k - 2) * 0.75
    elif code[0] == "i":
        v = (k - 2) * SCALE[code]
    elif code == "u1":
        v = k * 50
    else:
        v = k % 3 == 0
    return v.astype(code).reshape(2, 3)


def save_npy(name, arr, version=None):
    with open(os.path.join(FIXTURES, name), "wb") as f:
        npf.write_array(f, arr, version=version)


def raw_npy(path, header, data, version=1):
    """A file with a hand-written header (padded as numpy pads it)."""
    h = header.encode("utf8" if version == 3 else "latin1")
    lenfmt = 2 if version == 1 else 4
    pad = 64 - (8 + lenfmt + len(h) + 1) % 64
    h += b" " * pad + b"\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY" + bytes([version, 0]))
        f.write(len(h).to_bytes(lenfmt, "little"))
        f.write(h + data)


def main():
    os.makedirs(FIXTURES, exist_ok=True)
    os.makedirs(CORPUS, exist_ok=True)
    for code in ["f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "b1"]:
        a = sample_values(code)
        save_npy(f"{code}_le.npy", a.astype(a.dtype.newbyteorder("<")))
        save_npy(f"{code}_be.npy", a.astype(a.dtype.newbyteorder(">")))
    f4 = sample_values("f4")
    save_npy("f4_v2.npy", f4, version=(2, 0))
    save_npy("f4_v3.npy", f4, version=(3, 0))
    # Column-major on disk; the reader transposes to row-major.
    save_npy("fortran_2x3_f4.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
    save_npy("fortran_2x3x4_i4.npy",
             np.asfortranarray(np.arange(24, dtype=">i4").reshape(2, 3, 4)))
    save_npy("scalar_f8.npy", np.array(3.5, dtype="<f8"))
    save_npy("empty_0x3_f4.npy", np.zeros((0, 3), dtype="<f4"))
    save_npy("empty_2x0x4_i8.npy", np.zeros((2, 0, 4), dtype="<i8"))
    save_npy("vec_i4.npy", np.arange(5, dtype="<i4"))
    save_npy("rank8_i2.npy", np.arange(16, dtype="<i2").reshape(1, 2, 1, 2, 1, 2, 1, 2))
    # text: read as string tensors (test_npy.c test_text builds its own; these seed the fuzzer)
    save_npy("text_2x2_U3.npy", np.array([["ab", "\u00e9\u20ac"], ["", "a\0b"]]))
    save_npy("text_3_S4.npy", np.array([b"ab", b"\xff\0x", b""]))
    # numpy leaves room for the first dim to grow by padding the header; here
    # that padding decides whether the data starts at 128 or 192. numpy.save
    # refuses these dims (their product overflows), so only the header is
    # numpy's; with a 0 dim there is no data.
    with open(os.path.join(FIXTURES, "zero_wide_u1.npy"), "wb") as f:
        npf.write_array_header_1_0(
            f, {"descr": "|u1", "fortran_order": False, "shape": (0, 10**18, 10**18)})
    data = f4.astype("<f4").tobytes()
    # Headers numpy would read but never writes: native order, another key
    # order with double quotes and odd spacing, Python 2 long ints.
    raw_npy(os.path.join(FIXTURES, "native_f4.npy"),
            "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }", data)
    raw_npy(os.path.join(FIXTURES, "reordered_f4.npy"),
            '{ "shape" :(2,3) ,"fortran_order":False,\t"descr":"<f4"}', data)
    raw_npy(os.path.join(FIXTURES, "py2_long_f4.npy"),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", data)

    # Malformed seeds for the fuzzer (the valid fixtures seed it too).
    raw_npy(os.path.join(CORPUS, "short_data.npy"),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", data)
    raw_npy(os.path.join(CORPUS, "negative_dim.npy"),
            "{'descr': '<i2', 'fortran_order': True, 'shape': (2, -3), }", data)
    raw_npy(os.path.join(CORPUS, "structured.npy"),
            "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,), }",
            data[:8])
    raw_npy(os.path.join(CORPUS, "v3_fortran_be.npy"),
            "{'descr': '>f8', 'fortran_order': True, 'shape': (1, 2, 1, 3), }",
            np.arange(6, dtype=">f8").tobytes(), version=3)
    raw_npy(os.path.join(CORPUS, "overflow_dims.npy"),
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", b"")
    raw_npy(os.path.join(CORPUS, "bool_two.npy"),
            "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b"\x01\x02\x00")
    with open(os.path.join(CORPUS, "truncated_preamble.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x02\x00\x40")


if __name__ == "__main__":
    main()
