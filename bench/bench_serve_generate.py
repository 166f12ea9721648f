"""dvm serve's generation under concurrent streams: aggregate output tokens/s,
time to first token and time per output token (p50, p99) at each concurrency,
with continuous batching on and off (or, with --compare paging, the paged KV
cache against the contiguous one, both batching, with the peak KV bytes of
each), on one server in one run (the two models share the folder; at each
concurrency, rounds alternate between them, so both see the same machine). Each client streams /v1/completions (greedy, a prompt of random
token ids, a fixed number of new tokens) one request after another.

    python3 bench/bench_serve_generate.py /work/genai/bench/llama-int4 \
        --concurrency 1 4 16 --tokens 32 --prompt 32 --rounds 3

prints a markdown table (docs/performance.md keeps the figures)."""
import argparse
import http.client
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def start_server(repo, dvm, threads):
    log = open(os.path.join(repo, "..", "serve.log"), "w+")
    proc = subprocess.Popen([dvm, "serve", repo, "--http-port", "0", "--threads", str(threads), "--no-access-log",
                             "--cache-dir", os.path.join(repo, "..", "cache")], stderr=log,
                            stdout=subprocess.DEVNULL)
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None:
        text = open(log.name).read()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", text)
        if m and "models loaded" in text:
            if "0 failed" not in text:
                sys.exit("dvm serve failed to load a model:\n" + text)
            return proc, int(m.group(1))
        time.sleep(0.2)
    sys.exit("dvm serve did not start:\n" + open(log.name).read())


def stream_one(port, model, prompt, tokens):
    """(ttft, per-token time, tokens) of one streamed completion."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps(body))
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"{r.status}: {r.read()[:200]}")
    first = last = None
    made = 0
    for line in r:
        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            made = ev["usage"]["completion_tokens"]
        elif ev["choices"]:  # an event per step, its text possibly empty (an incomplete character)
            now = time.perf_counter()
            first = first or now
            last = now
    c.close()
    return first - t0, (last - first) / (made - 1) if made > 1 else 0.0, made


def level(port, model, conc, requests, prompt_len, tokens, vocab, seed):
    rng = random.Random(seed)
    prompts = [[rng.randrange(3, vocab) for _ in range(prompt_len)] for _ in range(conc * requests)]
    out, errors = [], []

    def client(k):
        for i in range(requests):
            try:
                out.append(stream_one(port, model, prompts[k * requests + i], tokens))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(str(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        sys.exit(f"{model} at {conc}: {errors[:3]}")
    return wall, out


def http_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path)
    text = c.getresponse().read().decode()
    c.close()
    return text


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="a GenAI builder folder (genai_config.json, model.onnx, tokenizer.json)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--requests", type=int, default=1, help="requests per client in a round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of on then off at each concurrency")
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    ap.add_argument("--tokens", type=int, default=32, help="new tokens per request")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--compare", choices=["batching", "paging"], default="batching",
                    help="continuous batching on/off, or the paged KV cache against the contiguous one")
    ap.add_argument("--dvm", default=os.environ.get("DVM", os.path.join(ROOT, "build", "tools", "dvm")))
    a = ap.parse_args()
    folder = os.path.abspath(a.folder)
    vocab = json.load(open(os.path.join(folder, "genai_config.json")))["model"]["vocab_size"]
    max_length = a.prompt + a.tokens + 8
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        slots = f"max_running = {max(a.concurrency)}\n"
        configs = ({"on": slots, "off": "max_running = 1\ncontinuous_batching = 0\n"} if a.compare == "batching"
                   else {"paged": slots, "contiguous": slots + "kv_block_size = 0\n"})
        for name, cfg in configs.items():
            os.makedirs(os.path.join(repo, name))
            os.symlink(folder, os.path.join(repo, name, "1"))  # the folder itself: its data file stays inside
            with open(os.path.join(repo, name, "config"), "w") as f:
                f.write(cfg + f"max_length = {max_length}\nmax_queue = 1024\n")
        proc, port = start_server(repo, a.dvm, a.threads)
        try:
            for name in configs:  # the first run of each sets up its kernels
                level(port, name, 1, 1, a.prompt, 4, vocab, 0)
            rows = []
            for conc in a.concurrency:
                got = {name: [0.0, []] for name in configs}
                for r in range(a.rounds):  # on and off in turn, so both see the machine alike
                    for name in configs:
                        wall, out = level(port, name, conc, a.requests, a.prompt, a.tokens, vocab, conc * 100 + r)
                        got[name][0] += wall
                        got[name][1] += out
                for name, (wall, out) in got.items():
                    made = sum(o[2] for o in out)
                    ttft = [o[0] for o in out]
                    tpot = [o[1] for o in out if o[2] > 1]
                    rows.append((conc, name, made / wall, pct(ttft, 50), pct(ttft, 99), pct(tpot, 50), pct(tpot, 99),
                                 len(out)))
                    print(f"# {name} c={conc}: {made} tokens in {wall:.2f} s", file=sys.stderr, flush=True)
            if a.compare == "paging":
                text = http_get(port, "/metrics")
                block = float(re.search(r'dvm_kv_block_bytes\{model="paged"\} (\S+)', text).group(1))
                peak = float(re.search(r'dvm_kv_blocks\{model="paged",state="peak"\} (\S+)', text).group(1))
                whole = block / 16 * max_length * max(a.concurrency)  # the default kv_block_size: 16 rows
                print(f"peak KV bytes: paged {peak * block / 1e6:.2f} MB, contiguous {whole / 1e6:.2f} MB "
                      f"(allocated whole)")
        finally:
            proc.terminate()
            proc.wait(120)
    print(f"| streams | {'continuous batching' if a.compare == 'batching' else 'KV cache'} | output tokens/s | TTFT p50 (s) | TTFT p99 (s) | TPOT p50 (ms) | "
          "TPOT p99 (ms) | requests |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for conc, name, tps, t50, t99, p50, p99, n in rows:
        print(f"| {conc} | {name} | {tps:.1f} | {t50:.3f} | {t99:.3f} | {p50 * 1e3:.1f} | {p99 * 1e3:.1f} | {n} |")


if __name__ == "__main__":
    main()
