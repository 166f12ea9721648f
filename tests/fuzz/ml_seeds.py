#!/usr/bin/env python3
"""Writes the seeds of fuzz_ml (tests/fuzz/corpus/ml): linear models and
SVMs in the words of ops/cpu/ml_model.h, as compiler/lower_ml_linear.c
writes them, each after the byte that picks the kernel (bit 0: svm) and
the classifier form (bit 1).

    python3 tests/fuzz/ml_seeds.py
"""
import os
import struct

NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT = range(5)
LINEAR, POLY, RBF, SIGMOID = range(4)
PROBA, POSITIVE, ONE_CLASS = 1, 2, 4


def fbits(v):
    return struct.unpack("<i", struct.pack("<f", v))[0]


def pack(first, w):
    return bytes([first]) + struct.pack(f"<{len(w)}I", *[x & 0xFFFFFFFF for x in w])


def labels(ls):
    return [x for v in ls for x in (v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF)]


def linear(cls, rows, feats, post, lab=()):
    w = [rows, feats, post, len(lab)]
    w += [fbits(0.25 * (i % 5) - 0.5) for i in range(rows * feats)] + [fbits(0.1 * r) for r in range(rows)]
    return pack(2 if cls else 0, w + labels(lab))


def svm(cls, svc, kernel, classes, vectors, feats, post, flags, per_class=(), lab=()):
    pairs = classes * (classes - 1) // 2 if cls and svc else 1
    coefs = ((classes - 1) * vectors if cls else vectors) if svc else (classes if cls else 1) * feats
    w = [svc, kernel, classes, vectors, feats, post, flags, fbits(0.5), fbits(0.25), fbits(3.0)]
    w += list(per_class) if cls and svc else []
    w += [fbits(0.1 * (i % 7) - 0.3) for i in range(vectors * feats if svc else 0)]
    w += [fbits(0.2 * (i % 3) - 0.2) for i in range(coefs)]
    w += [fbits(0.05 * i) for i in range(pairs)]
    if flags & PROBA:
        w += [fbits(-1.5)] * pairs + [fbits(0.1)] * pairs
    return pack((3 if cls else 1), w + labels(lab))


SEEDS = {
    "seed_linreg": linear(False, 1, 3, NONE),
    "seed_linreg_targets": linear(False, 2, 2, SOFTMAX),
    "seed_logreg_binary": linear(True, 1, 3, LOGISTIC, (4, 9)),
    "seed_logreg_multi": linear(True, 3, 2, SOFTMAX, (0, 1 << 40, -2)),
    "seed_svc_proba": svm(True, 1, RBF, 3, 4, 2, NONE, PROBA, (1, 2, 1), (5, 6, 7)),
    "seed_svc_votes": svm(True, 1, POLY, 2, 3, 2, NONE, 0, (2, 1), (0, 1)),
    "seed_svm_linear_mode": svm(True, 0, LINEAR, 2, 0, 3, LOGISTIC, POSITIVE, (), (0, 1)),
    "seed_svr": svm(False, 1, SIGMOID, 1, 3, 2, NONE, ONE_CLASS),
    "seed_svr_linear_mode": svm(False, 0, LINEAR, 1, 0, 4, NONE, 0),
}

if __name__ == "__main__":
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "ml")
    os.makedirs(d, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)
