"""dvm serve's paged KV cache (docs/serving.md#generation) through the real
`openai` client: with a budget too small for the running streams, the
newest is preempted and recomputed, and every stream still equals the same
request run alone by `dvm generate`, with the cache's bytes within the
budget; a prompt sharing a 40-token prefix with an earlier one takes its
blocks from the prefix cache; a request that can never fit is a 400 naming
the numbers; a client leaving frees its blocks; prompts fed 8 tokens a step,
one prompt's chunk a step, between the others' decode steps (prefill_chunk,
prefill_budget) still equal alone; with kv_dtype f16 a block takes half
the bytes, the budget twice the blocks, and streams equal alone on the f16
cache; bad kv_ and prefill_ values fail the model's load, naming them."""
import http.client
import json
import random
import re
import socket
import threading
import time
import urllib.request

import openai
import pytest
from tokenizers import Tokenizer

from test_openai import alone_ids, gen_client, run_completion, serve_gen_repo

BLOCK = 4 * 2 * 2 * 2 * 32 * 4  # "tight"'s block: 4 rows of 2 layers' key and value, 2 kv heads of 32 f32
BUDGET = 24 * BLOCK
PAGED_MODELS = {
    "tight": "max_running = 4\nkv_block_size = 4\nkv_budget = %d\n" % BUDGET,
    "tight16": "max_running = 4\nkv_block_size = 4\nkv_budget = %d\nkv_dtype = f16\n" % BUDGET,
    "badkv": "kv_dtype = f8\n",
    "prefix": "max_running = 4\n",  # blocks of 16 rows, the default
    "chunked": "max_running = 4\nprefill_chunk = 8\nprefill_budget = 8\n",
    "negchunk": "prefill_chunk = -1\n",
    "negbudget": "prefill_budget = -1\n",
    "negative": "kv_block_size = -1\n",
    "small": "kv_budget = 20000\n",
    "wide": "kv_block_size = 1000\n",
}


@pytest.fixture(scope="module")
def paged_server(tmp_path_factory):
    yield from serve_gen_repo(tmp_path_factory, "servepaged",
                              {name: ("llama-fp32", None, config) for name, config in PAGED_MODELS.items()})


def kv_state(server, model):
    """dvm_kv_blocks' total, used and peak, and vLLM's KV series."""
    text = urllib.request.urlopen(server.base + "/metrics").read().decode()
    out = {k: float(v) for k, v in re.findall(r'dvm_kv_blocks\{model="' + model + r'",state="(\w+)"\} (\S+)', text)}
    for name in ("cpu_cache_usage_perc", "num_preemptions_total", "prefix_cache_queries_total",
                 "prefix_cache_hits_total"):
        out[name] = float(re.search(r"vllm:" + name + r'\{model_name="' + model + r'"\} (\S+)', text).group(1))
    out["block_bytes"] = float(re.search(r'dvm_kv_block_bytes\{model="' + model + r'"\} (\S+)', text).group(1))
    return out


def settled_kv_state(server, model):
    """kv_state once no sequence runs (a cancelled one ends at the next step)."""
    deadline = time.time() + 30
    while server.metric_value("vllm:num_requests_running", model) and time.time() < deadline:
        time.sleep(0.02)
    return kv_state(server, model)


def paged_streams(server, model, cases, stream=lambda i: i % 2 == 0):
    """Each (prompt, max_tokens) of cases sent at once, from threads: their
    run_completion results."""
    client = gen_client(server)
    got = [None] * len(cases)
    together = threading.Barrier(len(cases))

    def one(i):
        together.wait()
        got[i] = run_completion(client, model, cases[i][0], cases[i][1], stream(i))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return got


def test_preempted_streams_equal_alone(paged_server):
    rng = random.Random(11)
    cases = [([rng.randrange(3, 500) for _ in range(n)], m) for n, m in
             [(31, 59), (5, 60), (17, 45), (2, 60), (23, 40), (11, 55), (29, 33), (7, 60)]]
    before = kv_state(paged_server, "tight")
    got = paged_streams(paged_server, "tight", cases)
    after = settled_kv_state(paged_server, "tight")
    assert after["num_preemptions_total"] > before["num_preemptions_total"], after
    assert after["block_bytes"] == BLOCK and after["total"] == BUDGET // BLOCK - 1  # one is the idle rows'
    assert 0 < after["peak"] <= after["total"] and (after["total"] + 1) * BLOCK <= BUDGET
    assert after["used"] == 0 and after["cpu_cache_usage_perc"] == 0
    wrong = []
    for i, (prompt, m) in enumerate(cases):
        ids = alone_ids(paged_server, "tight", prompt, m)
        text, finish, _ = got[i]
        want = paged_server_text(paged_server, ids)
        if text != want or finish != ("length" if len(ids) == m else "stop"):
            wrong.append((i, text, want, finish))
    assert not wrong, wrong


def paged_server_text(server, ids):
    tok = Tokenizer.from_file(str(server.root / "repo" / "tight" / "1" / "tokenizer.json"))
    return tok.decode(ids, skip_special_tokens=True)


def test_prefix_blocks_found_again(paged_server):
    client = gen_client(paged_server)
    prefix = [(13 * i) % 400 + 5 for i in range(40)]
    first = run_completion(client, "prefix", prefix + [9], 4, False)
    before = kv_state(paged_server, "prefix")
    second = run_completion(client, "prefix", prefix + [17, 18, 19], 6, False)
    after = kv_state(paged_server, "prefix")
    assert after["prefix_cache_hits_total"] - before["prefix_cache_hits_total"] == 32  # two full blocks of 16
    assert after["prefix_cache_queries_total"] - before["prefix_cache_queries_total"] == 43
    for (text, _, _), prompt, m in ((first, prefix + [9], 4), (second, prefix + [17, 18, 19], 6)):
        assert text == paged_server_text(paged_server, alone_ids(paged_server, "prefix", prompt, m))


def test_request_that_never_fits_is_400(paged_server):
    with pytest.raises(openai.BadRequestError) as e:
        gen_client(paged_server).completions.create(model="tight", prompt=list(range(3, 53)), max_tokens=60)
    assert "50 prompt tokens and max_tokens 60 need 28 KV blocks of 4 rows; the model's kv_budget holds 23" in str(e.value)


def test_client_leaving_frees_its_blocks(paged_server):
    run_completion(gen_client(paged_server), "prefix", [4], 2, False)
    tokens_before = paged_server.metric_value("vllm:generation_tokens_total", "prefix")
    c = http.client.HTTPConnection("127.0.0.1", paged_server.port, timeout=60)
    c.request("POST", "/v1/completions", json.dumps({"model": "prefix", "prompt": [5, 6, 7], "max_tokens": 500,
                                                     "temperature": 0, "stream": True}))
    r = c.getresponse()
    r.readline()
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    state = settled_kv_state(paged_server, "prefix")
    made = paged_server.metric_value("vllm:generation_tokens_total", "prefix") - tokens_before
    assert made < 400, f"the stream's sequence ran on after its client left ({made} tokens)"
    assert state["used"] == 0, state


def test_chunked_prefill_streams_equal_alone(paged_server):
    rng = random.Random(5)
    cases = [([rng.randrange(3, 500) for _ in range(n)], m) for n, m in [(61, 20), (3, 50), (37, 30), (9, 40)]]
    got = paged_streams(paged_server, "chunked", cases, lambda i: True)
    for i, (prompt, m) in enumerate(cases):
        assert got[i][0] == paged_server_text(paged_server, alone_ids(paged_server, "chunked", prompt, m)), i


def test_f16_cache_twice_the_blocks_streams_equal_alone(paged_server):
    rng = random.Random(12)
    cases = [([rng.randrange(3, 500) for _ in range(n)], m) for n, m in [(31, 59), (5, 60), (17, 45), (2, 60)]]
    got = paged_streams(paged_server, "tight16", cases)
    state = settled_kv_state(paged_server, "tight16")
    assert state["block_bytes"] == BLOCK // 2 and state["total"] == 2 * BUDGET // BLOCK - 1, state
    assert 0 < state["peak"] <= state["total"] and state["used"] == 0
    for i, (prompt, m) in enumerate(cases):
        assert got[i][0] == paged_server_text(paged_server, alone_ids(paged_server, "tight16", prompt, m, "f16")), i
    with pytest.raises(openai.BadRequestError) as e:  # 28 blocks fit now; 100 tokens of 4 rows do not
        gen_client(paged_server).completions.create(model="tight16", prompt=list(range(3, 103)), max_tokens=100)
    assert "100 prompt tokens and max_tokens 100 need 50 KV blocks of 4 rows; the model's kv_budget holds 47" in str(
        e.value)


@pytest.mark.parametrize("model,says", [
    ("negative", "config:1: bad value for kv_block_size"),
    ("badkv", "config:1: bad value for kv_dtype"),
    ("negchunk", "config:1: bad value for prefill_chunk"),
    ("negbudget", "config:1: bad value for prefill_budget"),
    ("small", "kv_budget 20000 bytes holds 1 KV blocks of 16384 bytes (16 rows of every layer's key and value)"),
    ("wide", "kv_block_size 1000 must be 0 (not paged) to max_length 512"),
])
def test_bad_kv_config(paged_server, model, says):
    req = urllib.request.Request(paged_server.base + "/v2/repository/index", b"{}")
    index = {m["name"]: m for m in json.loads(urllib.request.urlopen(req).read())}
    assert index[model]["state"] == "UNAVAILABLE" and says in index[model]["reason"], index[model]
