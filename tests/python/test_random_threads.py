"""The random ops from many Python threads at once (each run on a VM of its
own): a seeded module draws the same numbers in every call, an unseeded one
new numbers in every call; the kernels keep no state between calls."""
import threading

import numpy as np
from dvmtest.onnxmodel import make_model
from onnx import TensorProto as T
from onnx import helper as h

import dvm


def random_module(seed):
    s = {} if seed is None else {"seed": seed}
    return dvm.compile(make_model([h.make_node("RandomNormalLike", ["x"], ["a"], **s),
                                   h.make_node("Multinomial", ["l"], ["b"], sample_size=50, **s)],
                                  [("x", T.FLOAT, ["n"]), ("l", T.FLOAT, [2, 6])],
                                  [("a", T.FLOAT, None), ("b", T.INT32, None)]))


def run_in_threads(mod, feeds, nthreads=8, calls=10):
    results, errors = [[] for _ in range(nthreads)], []
    start = threading.Barrier(nthreads)

    def worker(t):
        try:
            start.wait()
            for _ in range(calls):
                r = mod.run(feeds, threads=1 + t % 2)
                results[t].append((r["a"], r["b"]))
        except Exception as e:  # reported by the main thread
            errors.append((t, e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(nthreads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    return [r for rs in results for r in rs]


def test_random_ops_from_threads():
    feeds = {"x": np.zeros(40000, np.float32), "l": np.zeros((2, 6), np.float32)}
    seeded = random_module(5.0)
    want = seeded.run(feeds, threads=1)
    for a, b in run_in_threads(seeded, feeds):
        np.testing.assert_array_equal(a, want["a"])
        np.testing.assert_array_equal(b, want["b"])
    got = run_in_threads(random_module(None), feeds)
    firsts = {a[:4].tobytes() for a, _ in got}
    assert len(firsts) == len(got)  # every call its own draw
