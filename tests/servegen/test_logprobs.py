"""dvm serve's logprobs (docs/serving.md#generation) through the real
`openai` client: greedy tokens' log-probabilities equal NumPy's log_softmax
of the logits ONNX Runtime gives for the same sequence, within 1e-4; the
alternatives sorted and NumPy's top-k; the chosen token the most likely;
streamed equal to whole, with `n` and with a stop string; bad values 400s
naming the field. And a seeded sampled request forced through a
preemption (a paged cache too small for the streams beside it) makes what
it makes alone."""
import json
import os
import random
import threading
import urllib.error
import urllib.request

import numpy as np
import onnxruntime as ort
import pytest

from test_openai import CHATML, alone_ids, gen_client, render_chatml, serve_gen_repo
from test_openai_paged import BUDGET, kv_state, settled_kv_state

LOGPROB_MODELS = {
    "lp": ("llama-fp32", None, "max_running = 4\n"),
    "qw": ("qwen2-fp32", CHATML, "max_running = 2\n"),
    "lptight": ("llama-fp32", None, "max_running = 4\nkv_block_size = 4\nkv_budget = %d\n" % BUDGET),
}
TOL = 1e-4


@pytest.fixture(scope="module")
def lp_server(tmp_path_factory):
    yield from serve_gen_repo(tmp_path_factory, "servelogprobs", LOGPROB_MODELS)


_sessions = {}


def reference_logprobs(folder, prompt, ids):
    """float64 log_softmax of ONNX Runtime's logits for each of ids, the
    model of the builder folder run once over prompt + ids with an empty
    past: [len(ids), vocab]."""
    folder = str(folder)
    if folder not in _sessions:
        _sessions[folder] = ort.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])
    s = _sessions[folder]
    cfg = json.load(open(os.path.join(folder, "genai_config.json")))["model"]["decoder"]
    seq = list(prompt) + list(ids)
    feeds = {"input_ids": np.array([seq], np.int64), "attention_mask": np.ones((1, len(seq)), np.int64)}
    for i in s.get_inputs():
        if i.name == "position_ids":
            feeds[i.name] = np.arange(len(seq))[None].astype(np.int64)
        elif i.name.startswith("past_key_values"):
            feeds[i.name] = np.zeros((1, cfg["num_key_value_heads"], 0, cfg["head_size"]), np.float32)
    logits = s.run(["logits"], feeds)[0][0, len(prompt) - 1:len(seq) - 1].astype(np.float64)
    m = logits.max(axis=1, keepdims=True)
    return logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))


def check_against_reference(ref, ids, chosen, tops):
    """chosen[i] (the answer's log-probability of token i) and tops[i] (its
    alternatives' log-probabilities, as answered) against ref."""
    assert len(chosen) == len(ids) == len(ref)
    for i, t in enumerate(ids):
        assert abs(chosen[i] - ref[i, t]) < TOL, (i, chosen[i], ref[i, t])
        assert ref[i, t] >= ref[i].max() - TOL, f"step {i}: greedy token {t} is not the most likely"
        want = np.sort(ref[i])[::-1][:len(tops[i])]
        assert list(tops[i]) == sorted(tops[i], reverse=True)
        assert np.abs(np.array(tops[i]) - want).max(initial=0) < TOL, (i, tops[i], want)


@pytest.mark.parametrize("prompt_len,k", [(1, 5), (7, 0), (13, 3)])
def test_completion_logprobs_equal_numpy(lp_server, prompt_len, k):
    rng = random.Random(prompt_len)
    prompt = [rng.randrange(3, 500) for _ in range(prompt_len)]
    ids = alone_ids(lp_server, "lp", prompt, 17)
    r = gen_client(lp_server).completions.create(model="lp", prompt=prompt, max_tokens=17, temperature=0, logprobs=k)
    c = r.choices[0]
    lp = c.logprobs
    assert "".join(lp.tokens) == c.text
    offsets = [0]
    for t in lp.tokens[:-1]:
        offsets.append(offsets[-1] + len(t))
    assert lp.text_offset == offsets
    # each dict: the k most likely and the token chosen (the most likely, under greedy); keys that decode
    # alike (bytes of a split character) merge, so the dict holds at most k entries, at least one
    assert all(1 <= len(d) <= max(k, 1) and d[tok] == v for d, tok, v in zip(lp.top_logprobs, lp.tokens,
                                                                           lp.token_logprobs))
    ref = reference_logprobs(lp_server.root / "repo" / "lp" / "1", prompt, ids)
    tops = [sorted(d.values(), reverse=True) if len(d) == k else [] for d in lp.top_logprobs]
    check_against_reference(ref, ids, lp.token_logprobs, tops)


def stream_completion_logprobs(client, **kw):
    """A streamed completion's choices put together by index: text and the
    four logprobs lists."""
    out = {}
    for ch in client.completions.create(stream=True, **kw):
        for c in ch.choices:
            o = out.setdefault(c.index, {"text": "", "tokens": [], "token_logprobs": [], "top_logprobs": [],
                                         "text_offset": [], "finish": None})
            o["text"] += c.text
            for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
                o[key] += getattr(c.logprobs, key)
            o["finish"] = c.finish_reason or o["finish"]
            if not c.finish_reason:  # a token's entry comes with the last of its text, never before
                assert o["text"].startswith("".join(o["tokens"]))
    return [out[i] for i in sorted(out)]


def whole_completion_logprobs(r):
    return [{"text": c.text, "tokens": c.logprobs.tokens, "token_logprobs": c.logprobs.token_logprobs,
             "top_logprobs": c.logprobs.top_logprobs, "text_offset": c.logprobs.text_offset,
             "finish": c.finish_reason} for c in r.choices]


@pytest.mark.parametrize("stop", [None, "stop"])
def test_streamed_equals_whole(lp_server, stop):
    """n = 2 greedy choices, each streamed the same as whole; with a stop
    string (one the text holds), the entries end with the token the cut
    falls in, the text held back for it released with its entries."""
    client = gen_client(lp_server)
    prompt = [5, 17, 99, 3, 250]
    kw = dict(model="lp", prompt=prompt, max_tokens=40, temperature=0, logprobs=2, n=2)
    plain = whole_completion_logprobs(client.completions.create(**kw))[0]
    if stop:  # a stop string from the middle of the plain answer, across tokens where it can be
        text, ends = plain["text"], np.cumsum([len(t) for t in plain["tokens"]])
        at = int(ends[len(ends) // 2]) - 2
        kw["stop"] = [text[at:at + 5]]
        kw["max_tokens"] = 40
    whole = whole_completion_logprobs(client.completions.create(**kw))
    streamed = stream_completion_logprobs(client, **kw)
    assert whole[0] == whole[1]
    for s in streamed:
        assert s.keys() == whole[0].keys()
        for key in s:
            assert s[key] == whole[0][key], key
    w = whole[0]
    if stop:
        cut = w["text"]
        assert w["finish"] == "stop" and plain["text"].startswith(cut) and len(cut) < len(plain["text"])
        joined = "".join(w["tokens"])
        assert joined.startswith(cut) and len("".join(w["tokens"][:-1])) < len(cut) <= len(joined)
        assert w["tokens"] == plain["tokens"][:len(w["tokens"])]
        assert w["token_logprobs"] == plain["token_logprobs"][:len(w["tokens"])]
    else:
        assert "".join(w["tokens"]) == w["text"]


@pytest.mark.parametrize("stream", [False, True])
def test_chat_logprobs_equal_numpy(lp_server, stream):
    from tokenizers import Tokenizer
    client = gen_client(lp_server)
    messages = [{"role": "user", "content": "Hi there"}]
    tok = Tokenizer.from_file(str(lp_server.root / "repo" / "qw" / "1" / "tokenizer.json"))
    prompt = tok.encode(render_chatml(messages), add_special_tokens=False).ids
    ids = alone_ids(lp_server, "qw", prompt, 12)
    r = client.chat.completions.create(model="qw", messages=messages, max_tokens=12, temperature=0, logprobs=True,
                                       top_logprobs=20, stream=stream)
    if stream:
        entries, text = [], ""
        for ch in r:
            c = ch.choices[0]
            text += c.delta.content or ""
            entries += c.logprobs.content
    else:
        entries, text = r.choices[0].logprobs.content, r.choices[0].message.content
    assert "".join(e.token for e in entries) == text
    for e in entries:
        assert e.bytes == list(e.token.encode()) and len(e.top_logprobs) == 20
        assert all(a.bytes == list(a.token.encode()) for a in e.top_logprobs)
    ref = reference_logprobs(lp_server.root / "repo" / "qw" / "1", prompt, ids)
    check_against_reference(ref, ids, [e.logprob for e in entries],
                            [[a.logprob for a in e.top_logprobs] for e in entries])
    # the most likely alternative is the greedy token itself
    assert all(e.top_logprobs[0].token == e.token and e.top_logprobs[0].logprob == e.logprob for e in entries)


def test_no_logprobs_asked_none_answered(lp_server):
    client = gen_client(lp_server)
    assert client.completions.create(model="lp", prompt=[5, 6], max_tokens=3).choices[0].logprobs is None
    r = client.chat.completions.create(model="qw", messages=[{"role": "user", "content": "a"}], max_tokens=3,
                                       logprobs=False)
    assert r.choices[0].logprobs is None


def logprobs_post(server, route, body):
    req = urllib.request.Request(server.base + route, json.dumps(body).encode())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    return e.value.code, json.loads(e.value.read())["error"]


@pytest.mark.parametrize("fields,param", [
    ({"logprobs": 6}, "logprobs"), ({"logprobs": -1}, "logprobs"), ({"logprobs": True}, "logprobs"),
    ({"logprobs": "2"}, "logprobs"), ({"logprobs": 1.5}, "logprobs"), ({"top_logprobs": 2}, "top_logprobs"),
])
def test_bad_completion_logprobs(lp_server, fields, param):
    code, err = logprobs_post(lp_server, "/v1/completions",
                              {"model": "lp", "prompt": [1, 2], "max_tokens": 2, **fields})
    assert code == 400 and err["param"] == param and param in err["message"]


@pytest.mark.parametrize("fields,param", [
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"), ({"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": "3"}, "top_logprobs"), ({"top_logprobs": 2}, "top_logprobs"),
    ({"logprobs": False, "top_logprobs": 0}, "top_logprobs"), ({"logprobs": 1}, "logprobs"),
    ({"logprobs": "true"}, "logprobs"),
])
def test_bad_chat_logprobs(lp_server, fields, param):
    code, err = logprobs_post(lp_server, "/v1/chat/completions", {"model": "qw", "max_tokens": 2,
                                                                  "messages": [{"role": "user", "content": "a"}],
                                                                  **fields})
    assert code == 400 and err["param"] == param and param in err["message"]


def test_triton_generate_refuses_logprobs(lp_server):
    code, err = logprobs_post(lp_server, "/v2/models/lp/generate", {"text_input": "a", "parameters": {"logprobs": 1}})
    assert code == 400 and "logprobs" in err


def test_sampled_preempted_equals_alone(lp_server):
    """Eight seeded sampled streams on a budget of 24 blocks of 4 rows: some
    are preempted and recomputed, and each makes the text (and the
    log-probabilities) it makes alone: its random stream goes on where it
    stood."""
    client = gen_client(lp_server)
    rng = random.Random(5)
    cases = [([rng.randrange(3, 500) for _ in range(n)], m, 100 + i) for i, (n, m) in
             enumerate([(31, 59), (5, 60), (17, 45), (2, 60), (23, 40), (11, 55), (29, 33), (7, 60)])]

    def sampled(prompt, m, seed):
        r = client.completions.create(model="lptight", prompt=prompt, max_tokens=m, temperature=1.0, seed=seed,
                                      logprobs=1)
        return r.choices[0].text, r.choices[0].logprobs.token_logprobs

    got = [None] * len(cases)
    together = threading.Barrier(len(cases))

    def one(i):
        together.wait()
        got[i] = sampled(*cases[i])

    before = kv_state(lp_server, "lptight")["num_preemptions_total"]
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert settled_kv_state(lp_server, "lptight")["num_preemptions_total"] > before
    alone = [sampled(*c) for c in cases]  # each fits the budget alone
    wrong = [i for i in range(len(cases)) if got[i][0] != alone[i][0]]
    assert not wrong, [(i, got[i][0], alone[i][0]) for i in wrong]
    for (_, a), (_, b) in zip(got, alone):
        assert len(a) == len(b) and np.abs(np.array(a) - np.array(b)).max(initial=0) < TOL
