"""Triton's generate extension on dvm serve's generation models
(docs/serving.md#generation): /v2/models/NAME/generate answers what
/v1/completions answers for the same prompt and settings, generate_stream
sends it as server-sent events of text_output pieces, Triton's client sees
the extension and the model's health, and each bad request gets a 4xx with
KServe's {"error": "..."} naming the fault."""
import json
import shutil
import signal

import pytest
import requests
import tritonclient.http as httpclient
from tokenizers import Tokenizer

from test_openai import GenServer, alone_text, gen_client, run_completion, servegen_folder


@pytest.fixture(scope="module")
def triton_gen(tmp_path_factory):
    root = tmp_path_factory.mktemp("generate")
    dst = root / "repo" / "llama" / "1"
    shutil.copytree(servegen_folder("llama-fp32"), dst, ignore=shutil.ignore_patterns("*.dvmb"))
    (root / "repo" / "llama" / "config").write_text("max_running = 4\nmax_tokens = 300\n")
    s = GenServer(str(root / "repo"), str(root / "serve.log"))
    s.root = root
    yield s
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(60) == 0


def generate_events(server, path, body):
    """The data of each server-sent event of a generate_stream answer."""
    r = requests.post(server.base + path, json=body, stream=True, timeout=60)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream"), r.text
    events = [json.loads(line[len(b"data: "):]) for line in r.iter_lines() if line]
    return events


@pytest.mark.parametrize("prompt,max_tokens", [("Hello world, and more", 60), ("Once", 1), ("a b c d e f g", 17),
                                               ("Hello world, and more", 240)])
def test_generate_equals_completion(triton_gen, prompt, max_tokens):
    params = {"max_tokens": max_tokens, "temperature": 0}
    want, _, _ = run_completion(gen_client(triton_gen), "llama", prompt, max_tokens, False)
    tok = Tokenizer.from_file(str(triton_gen.root / "repo" / "llama" / "1" / "tokenizer.json"))
    assert want == alone_text(triton_gen, "llama", tok.encode(prompt).ids, max_tokens)
    for path in ("/v2/models/llama/generate", "/v2/models/llama/versions/1/generate"):
        r = requests.post(triton_gen.base + path, json={"text_input": prompt, "parameters": params}, timeout=60)
        assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
        assert r.json() == {"model_name": "llama", "model_version": "1", "text_output": want}
    events = generate_events(triton_gen, "/v2/models/llama/generate_stream", {"text_input": prompt, "parameters": params})
    assert all(e["model_name"] == "llama" and e["model_version"] == "1" for e in events)
    assert "".join(e["text_output"] for e in events) == want
    if max_tokens > 200:  # so long a stream comes in pieces: each holds only what is new
        assert sum(1 for e in events if e["text_output"]) > 1
    # the spec passes other members on as parameters
    r = requests.post(triton_gen.base + "/v2/models/llama/generate", json={"text_input": prompt, **params}, timeout=60)
    assert r.json()["text_output"] == want


def test_generate_stop_and_seed(triton_gen):
    client = gen_client(triton_gen)
    prompt = "Hello world, and more"
    text, _, _ = run_completion(client, "llama", prompt, 60, False)
    stop = text[10:13]
    for path in ("generate", "generate_stream"):
        body = {"text_input": prompt, "parameters": {"max_tokens": 60, "temperature": 0, "stop": [stop, "qqzzqq"]}}
        if path == "generate":
            got = requests.post(triton_gen.base + "/v2/models/llama/generate", json=body, timeout=60).json()["text_output"]
        else:
            got = "".join(e["text_output"] for e in generate_events(triton_gen, "/v2/models/llama/generate_stream", body))
        assert got == text[:text.index(stop)]
    sampled = client.completions.create(model="llama", prompt=prompt, max_tokens=30, temperature=0.9, extra_body={"top_k": 50},
                                        seed=5).choices[0].text
    body = {"text_input": prompt, "parameters": {"max_tokens": 30, "temperature": 0.9, "top_k": 50, "seed": 5}}
    r = requests.post(triton_gen.base + "/v2/models/llama/generate", json=body, timeout=60)
    assert r.json()["text_output"] == sampled


def test_triton_client_sees_generate(triton_gen):
    c = httpclient.InferenceServerClient(f"127.0.0.1:{triton_gen.port}")
    assert c.is_server_live() and c.is_server_ready()
    assert "generate" in c.get_server_metadata()["extensions"]
    assert c.is_model_ready("llama") and not c.is_model_ready("nope")


@pytest.mark.parametrize("path,body,status,says", [
    ("llama/generate", b"{", 400, "not a JSON object"),
    ("llama/generate", b"[1]", 400, "not a JSON object"),
    ("llama/generate", {"parameters": {}}, 400, "text_input"),
    ("llama/generate", {"text_input": 7}, 400, "text_input"),
    ("llama/generate", {"text_input": "a", "parameters": [1]}, 400, "parameters"),
    ("llama/generate", {"text_input": "a", "parameters": {"best_of": 2}}, 400, "best_of"),
    ("llama/generate", {"text_input": "a", "parameters": {"n": 2}}, 400, "n: not a parameter"),
    ("llama/generate", {"text_input": "a", "parameters": {"temperature": 5}}, 400, "temperature"),
    ("llama/generate", {"text_input": "a", "parameters": {"max_tokens": 0}}, 400, "max_tokens"),
    ("llama/generate", {"text_input": "a", "parameters": {"max_tokens": 301}}, 400, "max_tokens"),
    ("llama/generate", {"text_input": "a", "parameters": {"top_k": "x"}}, 400, "top_k"),
    ("llama/generate", {"text_input": "a", "parameters": {"stop": [""]}}, 400, "stop"),
    ("llama/generate", {"text_input": "a", "parameters": {"stream": True}}, 400, "stream"),
    ("llama/generate_stream", {"text_input": "a", "parameters": {"stream": False}}, 400, "stream"),
    ("llama/generate", {"text_input": "a", "max_tokens": 3, "parameters": {"max_tokens": 3}}, 400, "both"),
    ("llama/generate", {"text_input": "a", "parameters": {"seed": -1}}, 400, "seed"),
    ("llama/generate", {"text_input": "a", "foo": 1}, 400, "foo: not a parameter"),
    ("nope/generate", {"text_input": "a"}, 404, "nope"),
    ("llama/versions/7/generate", {"text_input": "a"}, 404, "version 7"),
    ("llama/generate/more", {"text_input": "a"}, 404, "no such route"),
])
def test_bad_generate(triton_gen, path, body, status, says):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = requests.post(f"{triton_gen.base}/v2/models/{path}", data=data, timeout=30)
    assert r.status_code == status and says in r.json()["error"], (r.status_code, r.text)
    assert requests.get(triton_gen.base + "/v2/models/llama/generate", timeout=30).status_code == 405
