#!/usr/bin/env python3
"""Writes the seeds of fuzz_tree (tests/fuzz/corpus/tree): tree ensembles
in the words of ops/cpu/ml_tree.h, as compiler/lower_ml.c writes them.

    python3 tests/fuzz/tree_seeds.py
"""
import os
import struct

LEQ, LT, GTE, GT, EQ, NEQ, LEAF = range(7)
MISSING_TRUE = 1 << 8


def f(v):
    return struct.unpack("<i", struct.pack("<f", v))[0]


def words(trees, weights, targets, features, agg, post, flags, bases=(), labels=()):
    """trees: lists of nodes (mode, feature, threshold, true, false; indices
    within the tree), the
    leaves' (mode, 0, 0, first weight, count); weights: (target, value)."""
    roots, nodes = [], []
    for t in trees:  # children numbered within their tree
        base = len(nodes)
        roots.append(base)
        nodes += [(m, ft, th, a + base, b + base) if m & 0xFF != LEAF else (m, ft, th, a, b) for m, ft, th, a, b in t]
    w = [len(trees), len(nodes), len(weights), targets, features, agg, post, flags, len(bases)] + roots
    for m, feat, thr, a, b in nodes:
        w += [m, feat, f(thr) if m != LEAF else 0, a, b]
    for tgt, v in weights:
        w += [tgt, f(v)]
    w += [f(b) for b in bases]
    for lab in labels:
        w += [lab & 0xFFFFFFFF, (lab >> 32) & 0xFFFFFFFF]
    return struct.pack(f"<{len(w)}I", *[x & 0xFFFFFFFF for x in w])


SEEDS = {
    # one stump, a regressor (SUM, no post transform)
    "seed_stump": words([[(LEQ, 0, 0.5, 1, 2), (LEAF, 0, 0, 0, 1), (LEAF, 0, 0, 1, 1)]],
                        [(0, 1.0), (0, -1.0)], 1, 1, 0, 0, 0),
    # two trees of mixed modes with a missing track, 3 classes, SOFTMAX
    "seed_classes": words([[(LT | MISSING_TRUE, 1, 0.0, 1, 4), (GTE, 0, -0.25, 2, 3), (LEAF, 0, 0, 0, 2),
                            (LEAF, 0, 0, 2, 1), (LEAF, 0, 0, 3, 1)],
                           [(NEQ, 2, 0.5, 1, 2), (LEAF, 0, 0, 4, 1), (LEAF, 0, 0, 5, 1)]],
                          [(0, 0.5), (2, 0.25), (1, 1.0), (2, -0.5), (0, 0.75), (1, 0.1)], 3, 3, 0, 2, 1,
                          bases=(0.1, 0.2, 0.3), labels=(7, -3, 1 << 40)),
    # two classes, weights of class 1 only (ONNX Runtime's binary case), LOGISTIC
    "seed_binary": words([[(GT, 0, 0.0, 1, 2), (LEAF, 0, 0, 0, 1), (LEAF, 0, 0, 1, 1)]],
                         [(1, 0.8), (1, -0.4)], 2, 1, 0, 1, 1 | 2, bases=(0.2,), labels=(0, 1)),
    # an average of two trees, two targets, with EQ
    "seed_average": words([[(EQ, 0, 0.25, 1, 2), (LEAF, 0, 0, 0, 2), (LEAF, 0, 0, 2, 1)],
                           [(LEAF, 0, 0, 3, 1)]],
                          [(0, 1.0), (1, 2.0), (1, 3.0), (0, 4.0)], 2, 1, 1, 0, 4, bases=(1.0, -1.0)),
}

if __name__ == "__main__":
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "tree")
    os.makedirs(d, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)
