"""String categories and labels from Python, dvm against ONNX Runtime (one
thread): a scikit-learn OneHotEncoder over three string columns and
LogisticRegression with string labels, converted with skl2onnx (its default
ZipMap output). Rounds alternate the two sides; prints the median
microseconds per call at each row count (docs/performance.md).

usage: PYTHONPATH=build/python python3 bench/bench_strings.py [--rounds N] [--calls N]"""
import argparse
import time

import numpy as np
import onnxruntime as ort
from skl2onnx import to_onnx
from skl2onnx.common.data_types import StringTensorType
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

import dvm

CATS = np.array(["red", "green", "blue", "", "mauve", "teal", "ochre"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    c = rng.choice(CATS, size=(2000, 3))
    y = np.array(["a", "b", "c"])[rng.integers(0, 3, 2000)]
    pipe = Pipeline([("enc", OneHotEncoder(handle_unknown="ignore")), ("clf", LogisticRegression(max_iter=300))])
    model = to_onnx(pipe.fit(c, y), initial_types=[("c", StringTensorType([None, 3]))],
                    target_opset={"": 17, "ai.onnx.ml": 3}).SerializeToString()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref, ours = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]), dvm.InferenceSession(model)
    print("rows  ort_us  dvm_us  dvm/ort")
    for rows in (1, 64, 1024):
        x = rng.choice(CATS, size=(rows, 3))
        times = {"ort": [], "dvm": []}
        for _ in range(args.rounds):
            for side, run, feed in (("ort", ref.run, x.astype(object)), ("dvm", ours.run, x)):
                t = time.perf_counter()
                for _ in range(args.calls):
                    run(None, {"c": feed})
                times[side].append((time.perf_counter() - t) / args.calls)
        a, b = np.median(times["ort"]), np.median(times["dvm"])
        print(f"{rows:4d}  {1e6 * a:6.1f}  {1e6 * b:6.1f}  {b / a:.2f}")


if __name__ == "__main__":
    main()
