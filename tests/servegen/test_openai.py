"""dvm serve's generation models through the real `openai` client: completions
and chat, streamed and not, many streams at once each equal to the same
request run alone by `dvm generate`, a request joining mid-flight, a client
leaving mid-stream freeing its slot for a queued request, and a 4xx for each
bad input (docs/serving.md#generation). Tiny GenAI builder folders
(setup.sh writes them into build-data/genai)."""
import http.client
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest
from tokenizers import Tokenizer
from dvmtest.paths import DVM, ROOT

GENAI = os.path.join(ROOT, "build-data", "genai")
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
          "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
INST = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
        "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}"
        "{% endif %}{% endfor %}")
# the forms of Llama 3's, Phi-3's and Gemma's templates, written here
HEADER = ("{% for message in messages %}{% set content = '<|start_header_id|>' + message['role'] + "
          "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
TAGGED = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\n' + "
          "message['content'] + '<|end|>\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\n' + "
          "message['content'] + '<|end|>\n' }}{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\n' + "
          "message['content'] + '<|end|>\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|assistant|>\n' }}{% endif %}")
TURN = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
        "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('roles must alternate') }}{% endif %}{% set role = 'model' if message['role'] == "
        "'assistant' else message['role'] %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + "
        "'<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}")
# name: (folder, chat_template or None, config)
MODELS = {
    "qwen": ("qwen2-fp32", CHATML, "max_running = 4\n"),
    "llama": ("llama-fp32", INST, "max_running = 8\nmax_tokens = 300\n"),
    "one": ("llama-fp32", None, "max_running = 1\nmax_queue = 1\n"),
    "serial": ("llama-fp32", None, "max_running = 4\ncontinuous_batching = 0\n"),
    "header": ("llama-fp32", HEADER, "max_running = 2\n"),
    "tagged": ("llama-fp32", TAGGED, "max_running = 2\n"),
    "turn": ("llama-fp32", TURN, "max_running = 2\n"),
}


def servegen_folder(name):
    path = os.path.join(GENAI, name)
    if not os.path.exists(os.path.join(path, "genai_config.json")):
        pytest.skip(f"{path}: setup.sh writes the GenAI builder's tiny folders there")
    return path


class GenServer:
    def __init__(self, repo, log):
        self.log = open(log, "w+")
        self.proc = subprocess.Popen([DVM, "serve", repo, "--http-port", "0", "--threads", "2"],
                                     stderr=self.log, stdout=subprocess.DEVNULL)
        self.port = None
        deadline = time.time() + 120
        while time.time() < deadline and self.proc.poll() is None:
            text = open(log).read()
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", text)
            if m and "models loaded" in text:
                self.port = int(m.group(1))
                break
            time.sleep(0.05)
        assert self.port, "dvm serve did not start:\n" + open(log).read()
        self.base = f"http://127.0.0.1:{self.port}"

    def batch_steps(self, model, rows):
        """Steps of more than `rows` sequences so far, from dvm_batch_size."""
        text = urllib.request.urlopen(self.base + "/metrics").read().decode()
        count = float(re.search(r'dvm_batch_size_count\{model="' + model + r'"\} (\S+)', text).group(1))
        le = re.search(r'dvm_batch_size_bucket\{model="' + model + r'",le="' + str(rows) + r'"\} (\S+)', text)
        return count - float(le.group(1))

    def metric_value(self, name, model):
        text = urllib.request.urlopen(self.base + "/metrics").read().decode()
        m = re.search(re.escape(name) + r'\{model_name="' + model + r'"\} (\S+)', text)
        return float(m.group(1))


def serve_gen_repo(tmp_path_factory, tag, models):
    """For a module's fixture (yield from it): dvm serve over a repository of
    models, {name: (builder folder, chat_template or None, config)}, stopped
    by SIGTERM after, which it must survive."""
    root = tmp_path_factory.mktemp(tag)
    for name, (folder, template, config) in models.items():
        dst = root / "repo" / name / "1"
        shutil.copytree(servegen_folder(folder), dst, ignore=shutil.ignore_patterns("*.dvmb"))
        cfg = json.load(open(dst / "tokenizer_config.json"))
        cfg.pop("chat_template", None)
        if template:
            cfg["chat_template"] = template
        json.dump(cfg, open(dst / "tokenizer_config.json", "w"))
        (root / "repo" / name / "config").write_text(config)
    s = GenServer(str(root / "repo"), str(root / "serve.log"))
    s.root = root
    yield s
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(60) == 0


@pytest.fixture(scope="module")
def gen_server(tmp_path_factory):
    yield from serve_gen_repo(tmp_path_factory, "servegen", MODELS)


def gen_client(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0, timeout=120)


def alone_ids(server, name, prompt, max_tokens, kv_dtype="f32"):
    """The same request run alone: dvm generate on a copy of the folder."""
    folder = server.root / "alone" / name
    if not folder.exists():
        shutil.copytree(server.root / "repo" / name / "1", folder)
    out = subprocess.run([DVM, "generate", str(folder), "--prompt-ids", ",".join(map(str, prompt)),
                          "--max-length", str(len(prompt) + max_tokens), "--threads", "1", "--kv-dtype", kv_dtype],
                         capture_output=True, text=True, check=True).stdout.split()
    return [int(t) for t in out]


def alone_text(server, name, prompt, max_tokens):
    tok = Tokenizer.from_file(str(server.root / "repo" / name / "1" / "tokenizer.json"))
    return tok.decode(alone_ids(server, name, prompt, max_tokens), skip_special_tokens=True)


def run_completion(client, model, prompt, max_tokens, stream, **kw):
    r = client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0,
                                  stream=stream, **kw)
    if not stream:
        return r.choices[0].text, r.choices[0].finish_reason, r.usage
    text, finish = "", None
    for ch in r:
        text += ch.choices[0].text
        finish = ch.choices[0].finish_reason or finish
    return text, finish, None


@pytest.mark.parametrize("model", ["llama", "serial"])
def test_concurrent_streams_equal_alone(gen_server, model):
    rng = random.Random(7)
    client = gen_client(gen_server)
    cases = [([rng.randrange(3, 500) for _ in range(n)], m, i % 3 != 2)
             for i, (n, m) in enumerate([(1, 40), (2, 3), (13, 120), (31, 7), (5, 200), (64, 1), (17, 60),
                                         (3, 150), (47, 29), (1, 90), (11, 250)])]
    got = [None] * len(cases)

    together = threading.Barrier(len(cases) - 1)

    def one(i):
        prompt, m, stream = cases[i]
        if i < len(cases) - 1:
            together.wait()  # so that they overlap however fast the tiny model is
        got[i] = run_completion(client, model, prompt, m, stream)

    rows = 1 if model == "serial" else 4
    wide_before = gen_server.batch_steps(model, rows)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(cases))]
    for t in threads[:-1]:
        t.start()
    time.sleep(0.05)  # the last joins while the others run
    threads[-1].start()
    for t in threads:
        t.join(300)
    # steps of more than 4 sequences at once; with continuous_batching = 0, none of more than 1
    wide = gen_server.batch_steps(model, rows) - wide_before
    assert wide == 0 if model == "serial" else wide > 0, wide
    lost = [i for i, g in enumerate(got) if g is None]
    wrong = []
    for i, (prompt, m, stream) in enumerate(cases):
        ids = alone_ids(gen_server, model, prompt, m)
        tok = Tokenizer.from_file(str(gen_server.root / "repo" / model / "1" / "tokenizer.json"))
        want = tok.decode(ids, skip_special_tokens=True)
        if got[i] is None:
            continue
        text, finish, usage = got[i]
        if text != want or finish != ("length" if len(ids) == m else "stop"):
            wrong.append((i, text, want, finish))
        if usage is not None:
            assert (usage.prompt_tokens, usage.completion_tokens) == (len(prompt), len(ids))
    assert not lost and not wrong, (lost, wrong)


def test_seed_is_the_sequences_own(gen_server):
    """A sampled request with a seed makes the same text alone and among
    others sampling beside it (dvm_generator_set_search: its own stream)."""
    client = gen_client(gen_server)

    def sampled(prompt, seed):
        r = client.completions.create(model="llama", prompt=prompt, max_tokens=40, temperature=0.9, top_p=0.95,
                                      seed=seed)
        return r.choices[0].text

    alone = sampled([7, 8, 9], 11)
    got = {}
    threads = [threading.Thread(target=lambda k=k: got.update({k: sampled([7, 8, 9] if k == 0 else [k, 5], 11 if k == 0
                                                                           else k)})) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got[0] == alone
    assert sampled([7, 8, 9], 12) != alone  # another seed, other tokens


def test_n_choices(gen_server):
    """n choices are n sequences: greedy, each is the one answer; sampled
    with a seed, choice k is what n = 1 makes with seed + k; streamed, each
    choice's chunks (by index) add up to its text and end with its reason."""
    client = gen_client(gen_server)
    prompt = [7, 8, 9, 10]
    want, _, _ = run_completion(client, "llama", prompt, 25, False)
    r = client.completions.create(model="llama", prompt=prompt, max_tokens=25, temperature=0, n=3)
    assert [c.index for c in r.choices] == [0, 1, 2] and all(c.text == want for c in r.choices)
    assert r.usage.prompt_tokens == 4 and r.usage.completion_tokens == 3 * len(alone_ids(gen_server, "llama", prompt, 25))

    def one(seed):
        return client.completions.create(model="llama", prompt=prompt, max_tokens=30, temperature=0.9,
                                         seed=seed).choices[0].text

    singles = [one(20 + k) for k in range(4)]
    assert len(set(singles)) > 1
    r = client.completions.create(model="llama", prompt=prompt, max_tokens=30, temperature=0.9, seed=20, n=4)
    assert [c.text for c in r.choices] == singles
    texts, finishes = {}, {}
    for ch in client.completions.create(model="llama", prompt=prompt, max_tokens=30, temperature=0.9, seed=20, n=4,
                                        stream=True, stop=["qqzzqq"]):
        for c in ch.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            if c.finish_reason:
                assert c.index not in finishes
                finishes[c.index] = c.finish_reason
    assert [texts[k] for k in range(4)] == singles and sorted(finishes) == [0, 1, 2, 3]


def test_n_chat_stream(gen_server):
    client = gen_client(gen_server)
    messages = [{"role": "user", "content": "Hi there"}]
    want = client.chat.completions.create(model="qwen", messages=messages, max_tokens=20,
                                          temperature=0).choices[0].message.content
    roles, texts = {}, {}
    for ch in client.chat.completions.create(model="qwen", messages=messages, max_tokens=20, temperature=0, n=2,
                                             stream=True):
        for c in ch.choices:
            if c.index not in roles:
                roles[c.index] = c.delta.role
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
    assert roles == {0: "assistant", 1: "assistant"} and texts == {0: want, 1: want}


def test_text_prompt_and_stop(gen_server):
    client = gen_client(gen_server)
    text, finish, usage = run_completion(client, "llama", "Hello world, and more", 60, False)
    tok = Tokenizer.from_file(str(gen_server.root / "repo" / "llama" / "1" / "tokenizer.json"))
    ids = tok.encode("Hello world, and more").ids
    assert usage.prompt_tokens == len(ids)
    assert text == alone_text(gen_server, "llama", ids, 60)
    stop = text[10:13] if len(text) > 13 else None
    if stop:
        for stream in (False, True):
            cut, finish, _ = run_completion(client, "llama", "Hello world, and more", 60, stream, stop=[stop, "qqzzqq"])
            assert cut == text[:text.index(stop)] and finish == "stop"


def render_chatml(messages):
    out = "" if messages[0]["role"] == "system" else "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    for m in messages:
        out += f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


@pytest.mark.parametrize("stream", [False, True])
def test_chat_chatml(gen_server, stream):
    client = gen_client(gen_server)
    messages = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Tell me more"}]
    want, _, _ = run_completion(client, "qwen", render_chatml(messages), 40, False)
    r = client.chat.completions.create(model="qwen", messages=messages, max_tokens=40, temperature=0, stream=stream)
    if stream:
        chunks = list(r)
        assert chunks[0].choices[0].delta.role == "assistant"
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    else:
        text = r.choices[0].message.content
        assert r.choices[0].message.role == "assistant"
    assert text == want


def test_chat_inst(gen_server):
    client = gen_client(gen_server)
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
                {"role": "user", "content": "More"}]
    want, _, _ = run_completion(client, "llama", "<s>[INST] Hi [/INST]Yo</s><s>[INST] More [/INST]", 30, False)
    r = client.chat.completions.create(model="llama", messages=messages, max_tokens=30, temperature=0)
    assert r.choices[0].message.content == want


def render_jinja(template, messages):
    """A chat template rendered as transformers renders it (jinja2's
    sandbox, trim_blocks, lstrip_blocks), with llama-fp32's BOS and EOS."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def fail(message):
        raise ValueError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = fail
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token="<s>",
                                            eos_token="</s>")


@pytest.mark.parametrize("model,template", [("header", HEADER), ("tagged", TAGGED), ("turn", TURN)])
def test_chat_families(gen_server, model, template):
    """Llama 3's, Phi-3's and Gemma's forms: the chat answer is the
    completion of the prompt their template renders (contents with
    spaces at their ends, which two of them trim)."""
    client = gen_client(gen_server)
    messages = [{"role": "user", "content": " Hi there "}, {"role": "assistant", "content": "Hello\n"},
                {"role": "user", "content": "Tell me more"}]
    if model != "turn":
        messages.insert(0, {"role": "system", "content": "Be brief."})
    want, _, _ = run_completion(client, model, render_jinja(template, messages), 30, False)
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=30, temperature=0)
    assert r.choices[0].message.content == want


def test_models(gen_server):
    ids = sorted(m.id for m in gen_client(gen_server).models.list())
    assert ids == sorted(MODELS)


def test_disconnect_frees_slot(gen_server):
    """"one" has one slot and a queue of one: a stream holds the slot, a
    request waits, another is refused (503); the stream's client leaving
    ends its sequence (far fewer than its 500 tokens are made) and the
    waiting request runs. Connections are opened first: the tiny model
    makes the 500 tokens in about 0.15 s."""
    run_completion(gen_client(gen_server), "one", [4], 2, False)  # its first run sets up the kernels
    tokens_before = gen_server.metric_value("vllm:generation_tokens_total", "one")
    conns = [http.client.HTTPConnection("127.0.0.1", gen_server.port, timeout=60) for _ in range(3)]
    for c in conns:
        c.connect()
    bodies = [{"prompt": [5, 6, 7], "max_tokens": 500, "stream": True}, {"prompt": [9, 8], "max_tokens": 5},
              {"prompt": [9, 8], "max_tokens": 5}]
    for c, b in zip(conns, bodies):
        c.request("POST", "/v1/completions", json.dumps({"model": "one", "temperature": 0, **b}))
        if b.get("stream"):
            hold = c.getresponse()
            hold.readline()
    # B and C race to the queue: the one refused answers at once
    ready, _, _ = select.select([conns[1].sock, conns[2].sock], [], [], 30)
    first = conns[1] if conns[1].sock in ready else conns[2]
    refused = first.getresponse()
    assert refused.status == 503 and refused.getheader("Retry-After") == "1"
    conns[0].sock.shutdown(socket.SHUT_RDWR)  # the client leaves mid-stream
    conns[0].close()
    waited = (conns[2] if first is conns[1] else conns[1]).getresponse()
    assert waited.status == 200
    assert json.loads(waited.read())["choices"][0]["text"] == alone_text(gen_server, "one", [9, 8], 5)
    made = gen_server.metric_value("vllm:generation_tokens_total", "one") - tokens_before
    assert made - 5 < 400, f"the stream's sequence ran on after its client left ({made - 5} tokens)"
    assert gen_server.metric_value("vllm:num_requests_running", "one") == 0


@pytest.mark.parametrize("field,value,status", [
    ("n", 0, 400), ("n", 9, 400), ("n", 1.5, 400), ("temperature", 2.5, 400), ("temperature", "hot", 400), ("top_p", 0, 400), ("top_p", 1.5, 400),
    ("max_tokens", 0, 400), ("max_tokens", 301, 400), ("max_tokens", 600, 400), ("seed", -1, 400),
    ("stop", ["a", "b", "c", "d", "e"], 400), ("stop", [""], 400), ("logprobs", 6, 400), ("echo", True, 400),
    ("stream", "yes", 400), ("prompt", "x" * 3000, 400), ("prompt", [[1, 2], [3]], 400), ("prompt", [1, 99999], 400),
    ("prompt", {}, 400), ("prompt", [], 400), ("prompt", "", 400), ("model", "nope", 404), ("model", 7, 400),
])
def test_bad_completion(gen_server, field, value, status):
    body = {"model": "llama", "prompt": [1, 2, 3], "max_tokens": 5}
    body[field] = value
    req = urllib.request.Request(gen_server.base + "/v1/completions", json.dumps(body).encode())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == status
    err = json.loads(e.value.read())["error"]
    assert err["message"] and (status == 404 or err["param"] in (field, "max_tokens"))


@pytest.mark.parametrize("model,messages,says", [
    ("one", [{"role": "user", "content": "hi"}], "no chat_template"),
    ("llama", [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], "system message"),
    ("qwen", [{"role": "tool", "content": "hi"}], "role"),
    ("qwen", [], "non-empty"),
    ("qwen", [{"role": "user", "content": [{"type": "image_url"}]}], "text"),
    ("turn", [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], "system message"),
    ("turn", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "alternate"),
])
def test_bad_chat(gen_server, model, messages, says):
    with pytest.raises(openai.BadRequestError) as e:
        gen_client(gen_server).chat.completions.create(model=model, messages=messages, max_tokens=3)
    assert says in str(e.value)


def test_bad_json_and_routes(gen_server):
    for path, body, status in [("/v1/completions", b"{", 400), ("/v1/completions", b"[]", 400),
                               ("/v1/nothing", b"{}", 404), ("/v2/models/llama/infer", b"{}", 400)]:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(gen_server.base + path, body), timeout=30)
        assert e.value.code == status, path


def test_sigterm_lets_streams_finish(tmp_path):
    """SIGTERM while a stream runs: the stream runs to its end (its last
    event and [DONE]) and the server exits 0."""
    dst = tmp_path / "repo" / "m" / "1"
    shutil.copytree(servegen_folder("llama-fp32"), dst, ignore=shutil.ignore_patterns("*.dvmb"))
    s = GenServer(str(tmp_path / "repo"), str(tmp_path / "serve.log"))
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    c.request("POST", "/v1/completions", json.dumps({"model": "m", "prompt": [5, 6, 7], "max_tokens": 500,
                                                     "temperature": 0, "stream": True}))
    r = c.getresponse()
    r.readline()
    s.proc.send_signal(signal.SIGTERM)
    rest = r.read().decode()
    assert rest.rstrip().endswith("data: [DONE]") and '"finish_reason":"length"' in rest
    assert s.proc.wait(60) == 0


def test_metrics_count_tokens(gen_server):
    before = gen_server.metric_value("vllm:generation_tokens_total", "qwen")
    prompt_before = gen_server.metric_value("vllm:prompt_tokens_total", "qwen")
    _, _, usage = run_completion(gen_client(gen_server), "qwen", [3, 4, 5, 6], 7, False)
    assert gen_server.metric_value("vllm:generation_tokens_total", "qwen") - before == usage.completion_tokens
    assert gen_server.metric_value("vllm:prompt_tokens_total", "qwen") - prompt_before == 4
