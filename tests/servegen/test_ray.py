"""Ray Serve scale-out (deploy/ray/dvm_ray.py) on a local Ray cluster: a
head and two worker nodes, each its own `ray start` process on this
machine, a replica of the model on each worker, the ingress and Ray
Serve's HTTP proxy on the head. First `stop`, `n` and chat completions
are checked, then greedy completions are sent through the
proxy, half of them streamed (server-sent events); while one worker's
replica is computing, the worker's node is killed (SIGKILL to its
processes). Every request must be answered 200 with the text `dvm
generate` makes for it alone, streams ending with [DONE] and their pieces
making that text once: those the dead replica held are retried on the
other (their answers say so), none is lost. Skipped with the reason
when ray is not installed or cannot start here."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import requests
from tokenizers import Tokenizer

from dvmtest.paths import DVM, ROOT
from test_logprobs import check_against_reference, reference_logprobs
from test_openai import INST, servegen_folder

ray = pytest.importorskip("ray", reason="ray[serve] is not installed (requirements.txt)")
from ray import serve  # noqa: E402

RAY_APP = os.path.join(ROOT, "deploy", "ray")
sys.path.insert(0, RAY_APP)
import dvm_ray  # noqa: E402

PROMPTS = ["Hello world, and more", "Once upon a time", "a b c d"]
MAX_TOKENS = 400


def ray_free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_node(args, env, log):
    """`ray start ... --block` in a session of its own, so that killing its
    process group takes the node's processes with it."""
    return subprocess.Popen(["ray", "start", "--block", "--disable-usage-stats", "--num-cpus=1",
                             "--object-store-memory=100000000", *args],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def ray_reference_ids(folder, prompt, max_tokens):
    """The prompt's ids and the completion's alone, by `dvm generate`."""
    ids = Tokenizer.from_file(os.path.join(folder, "tokenizer.json")).encode(prompt).ids
    out = subprocess.run([DVM, "generate", folder, "--prompt-ids", ",".join(map(str, ids)),
                          "--max-length", str(len(ids) + max_tokens), "--threads", "1"],
                         capture_output=True, text=True, check=True).stdout.split()
    return ids, [int(t) for t in out]


def ray_reference(folder, prompt, max_tokens):
    """The completion alone: `dvm generate` on the prompt's ids, decoded."""
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    return tok.decode(ray_reference_ids(folder, prompt, max_tokens)[1], skip_special_tokens=True)


@pytest.fixture
def ray_cluster(tmp_path):
    folder = str(tmp_path / "llama")
    shutil.copytree(servegen_folder("llama-fp32"), folder, ignore=shutil.ignore_patterns("*.dvmb"))
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    cfg = json.load(open(cfg_path))
    cfg["chat_template"] = INST
    json.dump(cfg, open(cfg_path, "w"))
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", DVM_CACHE_DIR=str(tmp_path / "cache"),
               # a dead node noticed within a few seconds
               RAY_health_check_period_ms="1000", RAY_health_check_failure_threshold="3",
               RAY_health_check_timeout_ms="2000",
               # a proxy slow to start on a loaded machine (under the sanitizers: 15 s and more) is not
               # replaced before it is up, which failed serve.start
               RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S="30", RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S="30")
    env["PYTHONPATH"] = os.pathsep.join([RAY_APP, env.get("PYTHONPATH", "")])
    port = ray_free_port()
    log = open(tmp_path / "ray.log", "w")
    nodes = [ray_node(["--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--include-dashboard=false",
                       '--resources={"dvm_head": 1}'], env, log)]
    try:
        deadline = time.time() + 40
        while subprocess.run(["ray", "status", f"--address=127.0.0.1:{port}"], env=env,
                             capture_output=True).returncode != 0:
            if time.time() > deadline or nodes[0].poll() is not None:
                pytest.skip("ray cannot start a head node here: " + open(tmp_path / "ray.log").read()[-2000:])
            time.sleep(0.5)
        # `ray status` answers once the GCS is up; the driver also needs the
        # head's raylet registered, which under the sanitizers on a loaded
        # machine can take longer than ray.init waits (60 s): try again
        deadline = time.time() + 180
        while True:
            try:
                ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
                break
            except ConnectionError:
                if time.time() > deadline or nodes[0].poll() is not None:
                    raise AssertionError("ray.init failed; the nodes' log ends:\n" +
                                         open(tmp_path / "ray.log").read()[-4000:])
                ray.shutdown()
                time.sleep(1)
        for k in (1, 2):  # one at a time: two nodes starting at once on one machine collide
            nodes.append(ray_node([f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1",
                                   f'--resources={{"dvm_slot": 1, "dvm_w{k}": 1}}'], env, log))
            deadline = time.time() + 40
            while len([n for n in ray.nodes() if n["Alive"]]) < k + 1:
                if time.time() > deadline or nodes[k].poll() is not None:
                    pytest.skip(f"ray cannot start worker node {k} here: " + open(tmp_path / "ray.log").read()[-2000:])
                time.sleep(0.2)
        yield folder, nodes, tmp_path
    finally:  # the cluster goes as a worker went: its nodes' processes killed
        ray.shutdown()
        for p in nodes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        log.close()


def ray_cpu_seconds(pid):
    """CPU time a process has used (user + system)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ray_post(url, body):
    """(choices' texts (a chat's message contents), finish_reasons, the first
    chat chunk's delta or None) of a request, streamed or not."""
    r = requests.post(url, json=body, timeout=90, stream=body.get("stream", False))
    assert r.status_code == 200, r.text
    key = "content" if "messages" in body else "text"
    if not body.get("stream"):
        choices = r.json()["choices"]
        return [c["message"]["content"] if "message" in c else c["text"] for c in choices], \
            [c["finish_reason"] for c in choices], None
    events = [line[6:] for line in r.iter_lines(decode_unicode=True) if line.startswith("data: ")]
    assert events[-1] == "[DONE]", events[-3:]
    texts, finish, first = {}, {}, None
    for c in (json.loads(e)["choices"][0] for e in events[:-1]):
        part = c.get("delta", c)
        first = first or part
        texts[c["index"]] = texts.get(c["index"], "") + part.get(key, "")
        if c["finish_reason"]:
            finish[c["index"]] = c["finish_reason"]
    return [texts[i] for i in sorted(texts)], [finish[i] for i in sorted(finish)], first


def ray_openai_fields(url, folder, want):
    """stop, n and chat, each streamed and not, against `dvm generate` alone
    (want: PROMPTS[0]'s greedy completion)."""
    stop = want[len(want) // 3:len(want) // 3 + 4]
    for stream in (False, True):
        base = {"prompt": PROMPTS[0], "max_tokens": MAX_TOKENS, "temperature": 0, "stream": stream}
        assert ray_post(url, {**base, "stop": ["\u2603", stop]})[:2] == ([want[:want.index(stop)]], ["stop"])
        assert ray_post(url, {**base, "n": 2})[:2] == ([want, want], ["length", "length"])
        sampled = {**base, "max_tokens": 24, "temperature": 0.9, "seed": 11}
        two = ray_post(url, {**sampled, "n": 2})[0]
        assert two == [ray_post(url, sampled)[0][0], ray_post(url, {**sampled, "seed": 12})[0][0]]
        chat = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 40, "temperature": 0,
                "stream": stream}
        texts, finish, first = ray_post(url.replace("/completions", "/chat/completions"), chat)
        assert texts == [ray_reference(folder, "<s>[INST] Hello [/INST]", 40)] and finish == ["length"]
        assert not stream or first == {"role": "assistant", "content": first["content"]}


def ray_logprobs(url, folder):
    """logprobs through the `openai` client: a greedy completion's (whole,
    and streamed the same) and a chat completion's equal NumPy's
    log_softmax of ONNX Runtime's logits within 1e-4, the tokens' texts
    joined the answer's."""
    client = openai.OpenAI(base_url=url.rsplit("/", 1)[0], api_key="none", max_retries=0, timeout=90)
    prompt_ids, ids = ray_reference_ids(folder, PROMPTS[1], 12)
    kw = dict(model="llama", prompt=PROMPTS[1], max_tokens=12, temperature=0, logprobs=3)
    c = client.completions.create(**kw).choices[0]
    lp = c.logprobs
    assert "".join(lp.tokens) == c.text and lp.text_offset[0] == 0
    tops = [sorted(d.values(), reverse=True) if len(d) == 3 else [] for d in lp.top_logprobs]
    check_against_reference(reference_logprobs(folder, prompt_ids, ids), ids, lp.token_logprobs, tops)
    streamed = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for ch in client.completions.create(stream=True, **kw):
        for key in streamed:
            streamed[key] += getattr(ch.choices[0].logprobs, key)
    assert streamed == {key: getattr(lp, key) for key in streamed}
    chat_ids, ids = ray_reference_ids(folder, "<s>[INST] Hello [/INST]", 8)
    r = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": "Hello"}], max_tokens=8,
                                       temperature=0, logprobs=True, top_logprobs=5).choices[0]
    entries = r.logprobs.content
    assert "".join(e.token for e in entries) == r.message.content
    assert all(e.bytes == list(e.token.encode()) and len(e.top_logprobs) == 5 for e in entries)
    check_against_reference(reference_logprobs(folder, chat_ids, ids), ids, [e.logprob for e in entries],
                            [[a.logprob for a in e.top_logprobs] for e in entries])


def test_worker_killed_mid_load(ray_cluster):
    folder, nodes, tmp_path = ray_cluster
    http_port = ray_free_port()
    serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": http_port})
    app = dvm_ray.build_app(folder, name="llama", slots=4, min_replicas=2, max_replicas=2, max_ongoing_requests=4,
                            replica_resources={"dvm_slot": 1}, ingress_resources={"dvm_head": 0.01})
    serve.run(app, name="llama", route_prefix="/v1")
    url = f"http://127.0.0.1:{http_port}/v1/completions"
    want = {p: ray_reference(folder, p, MAX_TOKENS) for p in PROMPTS}
    for body, what in [({"prompt": "", "max_tokens": 3}, "prompt"), ({"prompt": "a", "top_p": 0}, "top_p"),
                       ({"prompt": "a", "stop": ["x", ""]}, "stop"), ({"prompt": "a", "stop": ["x"] * 5}, "stop"),
                       ({"prompt": "a", "n": 0}, "n"), ({"prompt": "a", "logprobs": 6}, "logprobs"),
                       ({"prompt": "a", "top_logprobs": 2}, "top_logprobs"),
                       ({"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2}, "top_logprobs"),
                       ({"messages": [{"role": "user", "content": "a"}], "logprobs": True, "top_logprobs": 21},
                        "top_logprobs"),
                       ({"prompt": "a", "stream": 1}, "stream"), ({"prompt": "a", "max_tokens": 1 << 20}, "max_length"),
                       ({"messages": [{"role": "user"}]}, "messages")]:
        bad = requests.post(url.replace("/completions", "/chat/completions") if "messages" in body else url,
                            json=body, timeout=30)
        assert bad.status_code == 400 and what in bad.json()["error"]["message"], (body, bad.text)
    assert requests.post(url.replace("/completions", "/embeddings"), json={}, timeout=30).status_code == 404
    ray_openai_fields(url, folder, want[PROMPTS[0]])
    ray_logprobs(url, folder)
    # which worker runs which node, and the replica process on worker 1
    node_of = {n["NodeID"]: k for n in ray.nodes() for k in (1, 2) if f"dvm_w{k}" in n["Resources"]}
    pid_of = {}
    for _ in range(5):
        with ThreadPoolExecutor(6) as pool:
            for r in pool.map(lambda _: requests.post(url, json={"prompt": "Hi", "max_tokens": 2}, timeout=60),
                              range(6)):
                end = r.json()["choices"][0]["dvm"]
                pid_of[node_of[end["node"]]] = end["pid"]
        if len(pid_of) == 2:
            break
    assert sorted(pid_of) == [1, 2], "the replicas are not one on each worker"

    n = 18

    def load():
        """Sends n requests (a sixth not streamed) on threads; returns the
        threads, their answers as they come, the requests still unanswered,
        and when a chunk or answer last came."""
        got, pending, last = [None] * n, set(range(n)), [time.monotonic()]

        def one(i):
            body = {"prompt": PROMPTS[i % 3], "max_tokens": MAX_TOKENS, "temperature": 0, "stream": i % 6 != 0}
            try:
                r = requests.post(url, json=body, timeout=150, stream=body["stream"])
                if not body["stream"]:
                    got[i] = (r.status_code, r.json())
                    return
                # the stream's pieces as one answer, the last chunk's dvm member with them
                events = []
                for line in r.iter_lines(decode_unicode=True):
                    if line.startswith("data: "):
                        events.append(line[6:])
                        last[0] = time.monotonic()
                assert events[-1] == "[DONE]", events[-3:]
                chunks = [json.loads(e) for e in events[:-1]]
                assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]), chunks[-3:]
                got[i] = (r.status_code, {"choices": [{"text": "".join(c["choices"][0]["text"] for c in chunks),
                                                       "dvm": chunks[-1]["choices"][0]["dvm"]}]})
            finally:
                last[0] = time.monotonic()
                pending.discard(i)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        return threads, got, pending, last

    def answered(threads, got):
        for t in threads:
            t.join(150)
        lost = [i for i in range(n) if got[i] is None or got[i][0] != 200]
        assert not lost, [got[i] for i in lost]
        wrong = [i for i in range(n) if got[i][1]["choices"][0]["text"] != want[PROMPTS[i % 3]]]
        assert not wrong, [(got[i][1], want[PROMPTS[i % 3]]) for i in wrong]

    # Freeze worker 1's replica (SIGSTOP) once it computes (0.2 s of CPU into the load): what it holds then
    # never finishes while worker 2 answers the rest, so requests still open when the answers stop (a stream
    # among them, 5 s without a chunk) are on worker 1. Kill its node then; had it held none, thaw it and
    # load again. (When to kill guessed from the replica's CPU use alone could fire while nothing was in
    # flight there, and leave nothing to retry.)
    for _ in range(3):
        threads, got, pending, last = load()
        cpu0, deadline = ray_cpu_seconds(pid_of[1]), time.monotonic() + 150
        while pending and ray_cpu_seconds(pid_of[1]) - cpu0 < 0.2:
            time.sleep(0.01)
        os.kill(pid_of[1], signal.SIGSTOP)
        while pending and not (any(i % 6 for i in list(pending)) and time.monotonic() - last[0] >= 5):
            time.sleep(0.05)
            assert time.monotonic() < deadline, f"requests {sorted(pending)} never answered"
        if pending:
            break
        os.kill(pid_of[1], signal.SIGCONT)
        answered(threads, got)
    else:
        assert False, "worker 1's replica held no request when frozen, three times"
    held, killed = set(pending), time.monotonic()
    os.killpg(nodes[1].pid, signal.SIGKILL)
    os.kill(pid_of[1], signal.SIGKILL)  # the replica, in a session of its own
    answered(threads, got)
    again = {i for i in range(n) if got[i][1]["choices"][0]["dvm"]["attempts"] > 1}
    assert again and again <= held, (again, held)  # requests open on the killed worker, and only those
    assert all(node_of.get(got[i][1]["choices"][0]["dvm"]["node"]) == 2 for i in again)
    assert time.monotonic() - killed < 60  # retried and answered within a minute of the kill
