#!/usr/bin/env python3
"""Classical machine learning models (ai.onnx.ml), dvm next to ONNX Runtime.

Models trained here on random rows of 20 features (3 classes), converted
with skl2onnx / onnxmltools (no ZipMap):
  rf        scikit-learn RandomForestClassifier, 100 trees, max_depth 8
  lightgbm  LGBMClassifier, 100 rounds (300 trees: one per class), 31 leaves
  xgboost   XGBClassifier, 100 rounds (300 trees), max_depth 6
  logreg    StandardScaler then LogisticRegression (multinomial)
  svc       SVC, RBF kernel, with probabilities (1,000 training rows)
  svr       SVR, RBF kernel (1,000 training rows)
(--models picks some). Each is timed at batch 1 and 1,000 and at 1 and 2 threads, both sides
called the same way from this process: onnxruntime.InferenceSession.run
and dvm.InferenceSession.run (intra_op_num_threads set on both). Each
measurement times batches of calls for about --budget seconds and keeps the
median per call; the table shows the lowest median of --rounds rounds that
alternate the two (on a shared machine a round in which another process
took a core is discarded rather than averaged in).

    PYTHONPATH=build/python python3 bench/bench_ml.py [--rounds 3] [--budget 0.3]

Prints microseconds per call and dvm/ORT (below 1: dvm is faster), then one
JSON line for scripts.
"""
import argparse
import json
import statistics
import time

import numpy as np
import onnxruntime as ort

import dvm

FEATURES = 20


def models(names):
    from lightgbm import LGBMClassifier
    from onnxmltools import convert_lightgbm, convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType
    from skl2onnx import to_onnx
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC, SVR
    from xgboost import XGBClassifier

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4000, FEATURES)).astype(np.float32)
    s = x[:, 0] + x[:, 1] * x[:, 2] - 0.5 * x[:, 3] + 0.3 * rng.standard_normal(4000)
    y = np.digitize(s, [-0.7, 0.7])
    opsets = {"": 17, "ai.onnx.ml": 3}
    if "rf" in names:
        rf = RandomForestClassifier(n_estimators=100, max_depth=8, random_state=0, n_jobs=1).fit(x, y)
        yield "rf", to_onnx(rf, x[:1], options={id(rf): {"zipmap": False}}, target_opset=opsets)
    types = [("X", FloatTensorType([None, FEATURES]))]
    if "lightgbm" in names:
        lgb = LGBMClassifier(n_estimators=100, num_leaves=31, verbose=-1, random_state=0, n_jobs=1).fit(x, y)
        yield "lightgbm", convert_lightgbm(lgb, initial_types=types, target_opset=15, zipmap=False)
    if "xgboost" in names:
        xgb = XGBClassifier(n_estimators=100, max_depth=6, random_state=0, n_jobs=1).fit(x, y)
        yield "xgboost", convert_xgboost(xgb, initial_types=types, target_opset=15)
    if "logreg" in names:
        lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(x, y)
        yield "logreg", to_onnx(lr, x[:1], options={id(lr.steps[-1][1]): {"zipmap": False}}, target_opset=opsets)
    if "svc" in names:
        svc = SVC(kernel="rbf", probability=True, random_state=0).fit(x[:1000], y[:1000])
        yield "svc", to_onnx(svc, x[:1], options={id(svc): {"zipmap": False}}, target_opset=opsets)
    if "svr" in names:
        svr = SVR(kernel="rbf").fit(x[:1000], s[:1000])
        yield "svr", to_onnx(svr, x[:1], target_opset=opsets)


def per_call_us(fn, budget):
    for _ in range(20):
        fn()
    samples, end = [], time.perf_counter() + budget
    while time.perf_counter() < end or len(samples) < 5:
        t0 = time.perf_counter()
        for _ in range(10):
            fn()
        samples.append((time.perf_counter() - t0) / 10 * 1e6)
    return statistics.median(samples)


def sessions(onnx_bytes, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    osess = ort.InferenceSession(onnx_bytes, so, providers=["CPUExecutionProvider"])
    dso = dvm.SessionOptions()
    dso.intra_op_num_threads = threads
    return osess, dvm.InferenceSession(onnx_bytes, dso)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.3, help="seconds per measurement")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 1000])
    ap.add_argument("--models", nargs="+", default=["rf", "lightgbm", "xgboost", "logreg", "svc", "svr"])
    a = ap.parse_args()
    results = []
    print(f"{'model':<10} {'batch':>6} {'thr':>4} {'ort us':>10} {'dvm us':>10} {'dvm/ort':>8}")
    for name, model in models(a.models):
        onnx_bytes = model.SerializeToString()
        for threads in a.threads:
            osess, dsess = sessions(onnx_bytes, threads)
            for n in a.batches:
                feeds = {"X": np.random.default_rng(n).standard_normal((n, FEATURES)).astype(np.float32)}
                want, got = osess.run(None, feeds), dsess.run(None, feeds)
                for g, w in zip(got, want, strict=True):  # the same results, or the timing means nothing
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
                best = {"ort": float("inf"), "dvm": float("inf")}
                for _ in range(a.rounds):
                    best["ort"] = min(best["ort"], per_call_us(lambda: osess.run(None, feeds), a.budget))
                    best["dvm"] = min(best["dvm"], per_call_us(lambda: dsess.run(None, feeds), a.budget))
                r = {"model": name, "batch": n, "threads": threads, "ort_us": best["ort"], "dvm_us": best["dvm"]}
                results.append(r)
                print(f"{name:<10} {n:>6} {threads:>4} {best['ort']:>10.1f} {best['dvm']:>10.1f} "
                      f"{best['dvm'] / best['ort']:>8.2f}", flush=True)
    print(json.dumps({"bench": "ml", "results": results}))


if __name__ == "__main__":
    main()
