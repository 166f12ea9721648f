"""dvm.engine: continuous batching over libdvm's generator, on the GenAI
builder's tiny Llama folder (build-data/genai; skipped without it). Every
request run among others, joining and leaving while others run, makes the
tokens it makes alone (dvm.genai's Generator, batch 1)."""
import asyncio
import json
import os
import threading
import time

import numpy as np
import pytest

import dvm
import dvm.genai as og
from dvm.engine import Engine

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build-data", "genai", "llama-fp32")

if not os.path.isfile(os.path.join(FOLDER, "genai_config.json")):
    pytest.skip(f"{FOLDER}: setup.sh writes the GenAI builder's tiny folders there", allow_module_level=True)


@pytest.fixture(scope="module")
def engine_model():
    config = og.Config(FOLDER)
    config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": 1}}}}))
    return og.Model(config)


def engine_alone(model, prompt, max_tokens, **search):
    """The request's tokens alone: a Generator of one sequence."""
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + max_tokens, **search)
    g = og.Generator(model, params)
    g.append_tokens(np.array(prompt, dtype=np.int32))
    while not g.is_done():
        g.generate_next_token()
    return g.get_sequence(0)[len(prompt):].tolist()


def engine_requests(n, seed=7):
    rng = np.random.default_rng(seed)
    return [(rng.integers(3, 500, size=int(rng.integers(1, 40))).tolist(), int(rng.integers(1, 30)))
            for _ in range(n)]


def test_engine_batched_equals_alone(engine_model):
    """12 greedy requests through 4 slots, submitted from threads at
    staggered times (some join while others run, others wait for a slot)."""
    reqs = engine_requests(12)
    eng = Engine(engine_model, slots=4)
    got = [None] * len(reqs)

    def client(i):
        time.sleep(0.002 * i)
        r = eng.submit(reqs[i][0], max_tokens=reqs[i][1])
        got[i] = (r.result(), r.finish_reason)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    eng.close()
    for (prompt, max_tokens), (tokens, why) in zip(reqs, got):
        assert tokens == engine_alone(engine_model, prompt, max_tokens)
        assert why == ("length" if len(tokens) == max_tokens else "stop")


def test_engine_async_and_seeded_sampling(engine_model):
    """asyncio clients; a seeded sampled request makes the same tokens
    among others as alone."""
    eng = Engine(engine_model, slots=3)
    prompt = [5, 17, 99, 240]

    async def one(p, m, **kw):
        out = []
        async for new in eng.submit(p, max_tokens=m, **kw):
            assert new
            out += new
        return out

    async def main():
        return await asyncio.gather(one(prompt, 20, temperature=0.8, top_p=0.9, seed=11),
                                    *(one(p, m) for p, m in engine_requests(4, seed=3)),
                                    one(prompt, 20, temperature=0.8, top_p=0.9, seed=11))

    res = asyncio.run(main())
    eng.close()
    assert res[0] == res[-1] and len(res[0]) == 20
    assert res[0] == engine_alone(engine_model, prompt, 20, do_sample=True, temperature=0.8, top_p=0.9,
                                  top_k=0, random_seed=11)
    for (p, m), tokens in zip(engine_requests(4, seed=3), res[1:-1]):
        assert tokens == engine_alone(engine_model, p, m)


@pytest.mark.parametrize("slots", [1, 2])
def test_engine_cancel_frees_the_slot(engine_model, slots):
    eng = Engine(engine_model, slots=slots)
    long = eng.submit([1, 2, 3], max_tokens=400)
    it = iter(long)
    next(it)  # running: the only slot is taken
    short = eng.submit([4, 5, 6], max_tokens=5)
    if slots == 1:
        assert eng.stats()["waiting"] == 1
    long.cancel()
    assert short.result() == engine_alone(engine_model, [4, 5, 6], 5)
    assert long.finish_reason == "cancelled" and len(long.tokens) < 400
    eng.close()
    # every row idle: an ended request's row no longer runs in the steps
    assert eng._g.done()


def test_engine_refuses_bad_requests(engine_model):
    eng = Engine(engine_model, slots=1, max_queue=1)
    for kw, what in [({"prompt": []}, "prompt"), ({"prompt": [1.5]}, "prompt"), ({"prompt": [600]}, "vocabulary"),
                     ({"prompt": [-1]}, "vocabulary"), ({"max_tokens": 0}, "max_tokens"),
                     ({"max_tokens": True}, "max_tokens"), ({"max_tokens": 510}, "max_length"),
                     ({"temperature": -1}, "temperature"), ({"top_p": 0}, "top_p"), ({"seed": -2}, "seed")]:
        args = {"prompt": [1, 2, 3], "max_tokens": 4, **kw}
        with pytest.raises(ValueError, match=what):
            eng.submit(args.pop("prompt"), **args)
    first = eng.submit([1, 2], max_tokens=300)
    next(iter(first))
    eng.submit([1, 2], max_tokens=3)  # waits: the queue holds one
    with pytest.raises(RuntimeError, match="queue is full"):
        eng.submit([1, 2], max_tokens=3)
    eng.close()
    assert first.finish_reason == "cancelled"
    with pytest.raises(RuntimeError, match="closed"):
        eng.submit([1, 2], max_tokens=3)
    with pytest.raises(ValueError, match="slots"):
        Engine(engine_model, slots=0)


def test_engine_f16_cache(engine_model):
    """kv_dtype "f16": the cache's elements are f16, and 6 greedy requests
    through 3 slots make the tokens each makes alone (one slot) on it."""
    reqs = engine_requests(6, seed=9)
    eng, alone = Engine(engine_model, slots=3, kv_dtype="f16"), Engine(engine_model, slots=1, kv_dtype="f16")
    stats = eng._g.stats()
    assert stats["kv_dtype"] == "f16" and stats["kv_block_size"] == eng.max_length, stats
    assert Engine(engine_model, slots=1)._g.stats()["kv_dtype"] == "f32"
    got = [eng.submit(p, max_tokens=m) for p, m in reqs]
    assert [r.result() for r in got] == [alone.submit(p, max_tokens=m).result() for p, m in reqs]
    with pytest.raises(ValueError, match='kv_dtype must be "f32" or "f16", got "f8"'):
        Engine(engine_model, slots=1, kv_dtype="f8")


def test_engine_paged_cache_preempts(engine_model):
    """kv_block_size 16 with a kv_budget of 6 blocks (5 for sequences, one
    the idle rows'): 6 greedy requests of up to 60 rows through 4 slots do
    not fit together, so the newest running ones are preempted and run
    again later; each still makes the tokens it makes alone, and the
    blocks are all free at the end."""
    reqs = [(p[:20] + [7] * (20 - len(p[:20])), 40) for p, _ in engine_requests(6, seed=5)]
    block_bytes = Engine(engine_model, slots=1, kv_block_size=16)._g.stats()["kv_block_bytes"]
    eng = Engine(engine_model, slots=4, kv_block_size=16, kv_budget=6 * block_bytes)
    got = [eng.submit(p, max_tokens=m) for p, m in reqs]
    assert [r.result() for r in got] == [engine_alone(engine_model, p, m) for p, m in reqs]
    stats = eng.stats()
    assert stats["preemptions"] > 0 and stats["kv_free"] == stats["kv_blocks"] == 5, stats
    with pytest.raises(ValueError, match="needs 8 KV blocks of 16 rows; the kv_budget holds 5"):
        eng.submit(list(range(3, 120)), max_tokens=10)
    eng.close()


def test_engine_sampled_preempted_equals_alone(engine_model):
    """Seeded sampled requests on the paged cache of 6 blocks, preempted
    and run again: each makes the tokens it makes alone (its random stream
    goes on where it stood, not from its seed again)."""
    reqs = [(p[:20] + [7] * (20 - len(p[:20])), 40) for p, _ in engine_requests(6, seed=5)]
    block_bytes = Engine(engine_model, slots=1, kv_block_size=16)._g.stats()["kv_block_bytes"]
    eng = Engine(engine_model, slots=4, kv_block_size=16, kv_budget=6 * block_bytes)
    alone = Engine(engine_model, slots=1)
    kw = [dict(temperature=1.0, top_p=0.95, seed=30 + i) for i in range(len(reqs))]
    got = [eng.submit(p, max_tokens=m, **k) for (p, m), k in zip(reqs, kw)]
    assert [r.result() for r in got] == [alone.submit(p, max_tokens=m, **k).result() for (p, m), k in zip(reqs, kw)]
    assert eng.stats()["preemptions"] > 0
    eng.close()
    alone.close()


def test_engine_logprobs_equal_numpy(engine_model):
    """logprobs=4 on greedy requests among others: each token's
    log-probability and the four most likely are NumPy's log_softmax of the
    logits dvm.genai's Generator gives alone, within 1e-4."""
    reqs = engine_requests(3, seed=13)
    eng = Engine(engine_model, slots=2)
    got = [eng.submit(p, max_tokens=m, logprobs=4) for p, m in reqs]
    for (p, m), r in zip(reqs, got):
        tokens = r.result()
        params = og.GeneratorParams(engine_model)
        params.set_search_options(max_length=len(p) + m)
        g = og.Generator(engine_model, params)
        g.append_tokens(np.array(p, dtype=np.int32))
        assert len(r.logprobs) == len(tokens)
        for t, (lp, top) in zip(tokens, r.logprobs):
            g.generate_next_token()
            logits = g.get_logits()[0, -1].astype(np.float64)
            ref = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
            assert abs(lp - ref[t]) < 1e-4 and [i for i, _ in top][0] == t == int(np.argmax(ref))
            order = np.argsort(-ref, kind="stable")[:4]
            assert [i for i, _ in top] == order.tolist()
            assert np.abs(np.array([v for _, v in top]) - ref[order]).max() < 1e-4
    with pytest.raises(ValueError, match="logprobs must be an integer in"):
        eng.submit([5, 6], logprobs=21)
    eng.close()


def test_engine_generator_rng_and_logprobs_checked(engine_model):
    """The extension's calls under the engine: a sequence without a seed has
    no stream of its own, a seed gives it one that set_rng puts back; an
    all-zero stream and logprobs above 20 are refused, naming them."""
    eng = Engine(engine_model, slots=2)
    g = eng._g  # no request runs: the engine's thread waits, leaving the generator to this one
    g.set_search(0, do_sample=True)
    assert g.rng(0) is None and g.token_logprobs(0) is None
    g.set_search(1, do_sample=True, seed=4, logprobs=2)
    state = g.rng(1)
    assert state is not None and len(state) == 4
    g.set_rng(0, state)
    assert g.rng(0) == state
    with pytest.raises(dvm.Error, match="all-zero random state"):
        g.set_rng(0, (0, 0, 0, 0))
    with pytest.raises(dvm.Error, match="logprobs 21 out of range: at most 20"):
        g.set_search(0, logprobs=21)
    eng.close()
