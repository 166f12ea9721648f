"""One Module called from many Python threads at once, and no leak over
many calls."""
import gc
import os
import threading
import tracemalloc

import numpy as np
import pytest
from conftest import bert_inputs



def test_eight_threads_one_module_different_shapes(bert, add_module):
    rng = np.random.default_rng(3)
    # references computed one at a time first
    cases = []
    for t in range(8):
        feeds = bert_inputs(rng, 1 + t % 3, 3 + 5 * t)
        cases.append((feeds, bert.run(feeds, threads=1)["hidden"]))
    errors = []
    start = threading.Barrier(8)

    def worker(t):
        try:
            start.wait()
            feeds, want = cases[t]
            x = rng_t = np.random.default_rng(t).standard_normal(7 + t).astype(np.float32)
            for i in range(20):
                got = bert.run(feeds, threads=1)["hidden"]
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
                s = add_module.run({"x": x, "y": rng_t}, threads=1)["z"]
                np.testing.assert_array_equal(s, x + x)
        except Exception as e:  # reported by the main thread
            errors.append((t, e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_gil_is_released_while_running(bert):
    """Another Python thread runs during a call: it stamps the time at each
    step, and some stamps fall inside a call. With a switch interval far
    longer than the test, the calling thread gives the GIL up only where it
    releases it, so a call that held the GIL would contain no stamp."""
    import sys
    import time
    if os.environ.get("DVM_SANITIZED"):
        pytest.skip("under the preloaded ASan runtime the stamping thread seldom runs during calls "
                    "(1 stamp in 10 calls, seen on 2026-11-25); checked in the normal build")
    feeds = bert_inputs(np.random.default_rng(4), 8, 64)
    stamps, calls = [], []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0)  # lets the caller have the GIL back

    interval = sys.getswitchinterval()
    sys.setswitchinterval(100)
    th = threading.Thread(target=ticker)
    th.start()
    try:
        for _ in range(10):
            t0 = time.perf_counter()
            bert.run(feeds, threads=1)
            calls.append((t0, time.perf_counter()))
    finally:
        done.set()
        th.join()
        sys.setswitchinterval(interval)
    inside = sum(1 for t in stamps for a, b in calls if a < t < b)
    assert inside > 0


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_no_leak_over_10000_calls(add_module):
    x, y = np.ones(16, np.float32), np.arange(16, dtype=np.float32)
    m = add_module

    def calls(n):
        for _ in range(n):
            out = m.run({"x": x, "y": y})["z"]
            assert out[3] == 4.0
            m.run([x, y], threads=1)
            m(x, y)

    calls(2000)  # warm: pools, caches, interned names
    gc.collect()
    rss0 = rss_kib()
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    calls(10000)
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    rss1 = rss_kib()
    assert grown < 64 * 1024, f"Python allocations grew by {grown} bytes over 30000 calls"
    print(f"tracemalloc: {grown} bytes, RSS: {rss1 - rss0} KiB")
    if os.environ.get("DVM_SANITIZED"):
        return  # ASan keeps freed memory in quarantine: RSS grows by design
    assert rss1 - rss0 < 1024, f"RSS grew by {rss1 - rss0} KiB over 30000 calls"
