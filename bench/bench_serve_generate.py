"""Serving generation under concurrent streams, side by side in one run:
dvm serve with continuous batching and its paged KV cache, the same with the
contiguous cache (kv_block_size = 0), the paged cache in f16 (kv_dtype = f16:
its text is compared with the f32 cache's alone, and may differ on a
near-tie), dvm serve one sequence at a time, and
llama.cpp's llama-server (--parallel slots, continuous batching) on the same
checkpoint in GGUF. At each concurrency C, C clients stream /v1/completions
(greedy, a prompt of random token ids) at once; every request's prompt and
output lengths are drawn at random from --prompt-range and --tokens-range,
the same requests for every engine. Printed per engine and concurrency:
aggregate output tokens/s, time to first token and time per output token
(p50, p99), requests lost (an error or a truncated stream), and for dvm with
batching on, requests whose text differs from the same request run alone
(dvm one sequence at a time, which runs every request alone); at the end,
the paged cache's peak KV bytes (its /metrics) beside the contiguous cache's.

    python3 bench/bench_serve_generate.py /work/genai/bench/llama-int4 \
        --gguf /work/genai/bench/ckpt/llama/model-q4_0.gguf \
        --llama-server LLAMA_BUILD/bin/llama-server --concurrency 1 4 16 64

LLAMA_BUILD is what bench/setup_llamacpp.sh prints; the GGUF files are the
ones bench/bench_generate.py makes beside the checkpoint. Without
--llama-server only dvm's two columns run. --json keeps the rows, --plot
draws them (matplotlib); docs/performance.md keeps the figures."""
import argparse
import http.client
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
ENGINES = {"dvm": "dvm serve, continuous batching, paged KV", "dvm-f16": "dvm serve, continuous batching, paged "
           "f16 KV", "dvm-contig": "dvm serve, continuous batching, contiguous KV", "dvm-off": "dvm serve, one at a time",
           "llamacpp": "llama.cpp llama-server"}
BATCHED = ("dvm", "dvm-f16", "dvm-contig")  # compared with dvm-off's answers


def wait_for(proc, log, ready, what):
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None:
        m = ready(open(log).read())
        if m:
            return m
        time.sleep(0.2)
    sys.exit(f"{what} did not start:\n" + open(log).read()[-3000:])


def start_dvm(tmp, folder, a, max_running, max_length):
    repo = os.path.join(tmp, "repo")
    extra = "".join(f"{kv.replace('=', ' = ', 1)}\n" for kv in a.config)
    for name, cfg in (("dvm", f"max_running = {max_running}\n"),
                      ("dvm-f16", f"max_running = {max_running}\nkv_dtype = f16\n"),
                      ("dvm-contig", f"max_running = {max_running}\nkv_block_size = 0\n"),
                      ("dvm-off", "max_running = 1\ncontinuous_batching = 0\n")):
        os.makedirs(os.path.join(repo, name))
        os.symlink(folder, os.path.join(repo, name, "1"))  # the folder itself: its data file stays inside
        with open(os.path.join(repo, name, "config"), "w") as f:
            f.write(cfg + extra + f"max_length = {max_length}\nmax_queue = 4096\n")
    log = os.path.join(tmp, "dvm.log")
    proc = subprocess.Popen([a.dvm, "serve", repo, "--http-port", "0", "--threads", str(a.threads),
                             "--no-access-log", "--cache-dir", os.path.join(tmp, "cache")],
                            stderr=open(log, "w"), stdout=subprocess.DEVNULL)

    def ready(text):
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", text)
        if m and "models loaded" in text:
            if "0 failed" not in text:
                sys.exit("dvm serve failed to load a model:\n" + text)
            return int(m.group(1))
    return proc, wait_for(proc, log, ready, "dvm serve")


def start_llama(tmp, a, slots, max_length):
    log = os.path.join(tmp, "llama.log")
    port = 18000 + os.getpid() % 1000
    # llama-server divides -c among its slots: each gets max_length
    proc = subprocess.Popen([a.llama_server, "-m", a.gguf, "--host", "127.0.0.1", "--port", str(port),
                             "--parallel", str(slots), "-c", str(slots * max_length), "-t", str(a.threads),
                             "-tb", str(a.threads), "--cont-batching", "--no-webui"],
                            stderr=open(log, "w"), stdout=subprocess.DEVNULL)

    def ready(_):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            ok = c.getresponse().status == 200
            c.close()
            return port if ok else None
        except OSError:
            return None
    return proc, wait_for(proc, log, ready, "llama-server")


def stream_one(port, model, prompt, tokens):
    """(ttft, per-token time, tokens made, text, finished) of one streamed completion."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=1800)
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps(body))
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"{r.status}: {r.read()[:200]}")
    first = last = None
    events, usage, text, finished = 0, None, [], False
    for line in r:
        if line.startswith(b"data: [DONE]"):
            break
        if not line.startswith(b"data: "):
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]["completion_tokens"]
        for ch in ev.get("choices") or []:  # an event per token, its text possibly empty (part of a character)
            now = time.perf_counter()
            first = first or now
            last = now
            events += 1
            text.append(ch.get("text") or "")
            finished = finished or ch.get("finish_reason") is not None
    c.close()
    made = usage if usage is not None else events
    if first is None:
        raise RuntimeError("a stream without a token")
    return first - t0, (last - first) / (made - 1) if made > 1 else 0.0, made, "".join(text), finished


def requests_for(conc, a, vocab):
    """The requests of one concurrency level: per client, its list of (prompt ids, new tokens)."""
    rng = random.Random(conc)
    per = max(1, math.ceil(a.min_requests / conc))
    return [[([rng.randrange(3, vocab) for _ in range(rng.randint(*a.prompt_range))], rng.randint(*a.tokens_range))
             for _ in range(per)] for _ in range(conc)]


def level(port, model, work):
    out = [[None] * len(w) for w in work]
    errors = []

    def client(k):
        for i, (prompt, tokens) in enumerate(work[k]):
            try:
                out[k][i] = stream_one(port, model, prompt, tokens)
            except Exception as e:  # noqa: BLE001 - counted as lost, reported below
                errors.append(f"client {k} request {i}: {e}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(len(work))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, out, errors


def http_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path)
    text = c.getresponse().read().decode()
    c.close()
    return text


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def summarize(engine, conc, wall, out, errors, alone):
    done = [o for row in out for o in row if o is not None]
    lost = len(errors) + sum(1 for o in done if not o[4])
    wrong = None
    if alone is not None:
        wrong = sum(1 for row, ref in zip(out, alone) for o, r in zip(row, ref)
                    if o is not None and r is not None and o[3] != r[3])
    for e in errors[:3]:
        print(f"# {engine} c={conc}: {e}", file=sys.stderr)
    return dict(engine=engine, streams=conc, requests=sum(len(r) for r in out),
                tokens_per_s=sum(o[2] for o in done) / wall, ttft_p50=pct([o[0] for o in done], 50),
                ttft_p99=pct([o[0] for o in done], 99), tpot_p50=pct([o[1] for o in done if o[2] > 1], 50),
                tpot_p99=pct([o[1] for o in done if o[2] > 1], 99), lost=lost, wrong=wrong)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for i, eng in enumerate([e for e in ENGINES if any(r["engine"] == e for r in rows)]):
        rs = [r for r in rows if r["engine"] == eng]
        x, c = [r["streams"] for r in rs], f"C{i}"  # one color per engine in every panel
        axes[0].plot(x, [r["tokens_per_s"] for r in rs], "o-", color=c, label=ENGINES[eng])
        axes[1].plot(x, [r["ttft_p50"] for r in rs], "o-", color=c, label=ENGINES[eng] + " p50")
        axes[2].plot(x, [r["tpot_p50"] * 1e3 for r in rs], "o-", color=c, label=ENGINES[eng] + " p50")
        axes[2].plot(x, [r["tpot_p99"] * 1e3 for r in rs], "x--", color=c, label=ENGINES[eng] + " p99")
    for ax, title, unit in zip(axes, ["output tokens/s (higher is better)", "time to first token",
                                      "time per output token"], ["tokens/s", "s", "ms"]):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent streams")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[1].set_yscale("log")
    axes[2].set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="a GenAI builder folder (genai_config.json, model.onnx, tokenizer.json)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--prompt-range", type=int, nargs=2, default=[16, 512], metavar=("MIN", "MAX"))
    ap.add_argument("--tokens-range", type=int, nargs=2, default=[16, 256], metavar=("MIN", "MAX"))
    ap.add_argument("--min-requests", type=int, default=8, help="requests per level at least (split among clients)")
    ap.add_argument("--engines", default="dvm,dvm-contig,dvm-off,llamacpp")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--dvm", default=os.environ.get("DVM", os.path.join(ROOT, "build", "tools", "dvm")))
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="a config key for dvm serve's models (docs/serving.md), e.g. prefill_chunk=64; repeatable")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary")
    ap.add_argument("--gguf", help="the same checkpoint as GGUF, for llama-server")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    a = ap.parse_args()
    engines = a.engines.split(",")
    if "llamacpp" in engines and not (a.llama_server and a.gguf):
        engines.remove("llamacpp")
        print("# llama.cpp skipped: no --llama-server and --gguf", file=sys.stderr)
    folder = os.path.abspath(a.folder)
    vocab = json.load(open(os.path.join(folder, "genai_config.json")))["model"]["vocab_size"]
    max_length = a.prompt_range[1] + a.tokens_range[1] + 8
    work = {c: requests_for(c, a, vocab) for c in a.concurrency}
    rows, kv = [], None
    with tempfile.TemporaryDirectory() as tmp:
        servers = []
        try:
            ports = {}
            if any(e.startswith("dvm") for e in engines):
                proc, port = start_dvm(tmp, folder, a, max(a.concurrency), max_length)
                servers.append(proc)
                ports.update({e: port for e in ENGINES if e.startswith("dvm")})
            if "llamacpp" in engines:
                proc, port = start_llama(tmp, a, max(a.concurrency), max_length)
                servers.append(proc)
                ports["llamacpp"] = port
            for eng in engines:  # the first request of each sets up its kernels
                level(ports[eng], eng, [[([5, 6, 7], 4)]])
            for conc in a.concurrency:
                # one at a time first: its outputs are each request run alone
                order = [e for e in ("dvm-off", "dvm", "dvm-f16", "dvm-contig", "llamacpp") if e in engines]
                alone = None
                for eng in order:
                    wall, out, errors = level(ports[eng], eng, work[conc])
                    if eng == "dvm-off":
                        alone = out
                    rows.append(summarize(eng, conc, wall, out, errors,
                                          alone if eng in BATCHED else None))
                    r = rows[-1]
                    print(f"# {eng} c={conc}: {r['tokens_per_s']:.1f} tokens/s, {r['lost']} lost, "
                          f"{r['wrong']} wrong, {wall:.1f} s", file=sys.stderr, flush=True)
            if "dvm" in engines:
                text = http_get(ports["dvm"], "/metrics")
                block = float(re.search(r'dvm_kv_block_bytes\{model="dvm"\} (\S+)', text).group(1))
                peak = float(re.search(r'dvm_kv_blocks\{model="dvm",state="peak"\} (\S+)', text).group(1))
                whole = block / 16 * max_length * max(a.concurrency)  # the default kv_block_size: 16 rows
                kv = f"peak KV bytes: paged {peak * block / 1e6:.1f} MB, contiguous {whole / 1e6:.1f} MB (allocated whole)"
        finally:
            for p in servers:
                p.terminate()
                p.wait(120)
    print("| streams | engine | requests | output tokens/s | TTFT p50 (s) | TTFT p99 (s) | TPOT p50 (ms) | "
          "TPOT p99 (ms) | lost | differs from alone |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in sorted(rows, key=lambda r: (r["streams"], list(ENGINES).index(r["engine"]))):
        print(f"| {r['streams']} | {ENGINES[r['engine']]} | {r['requests']} | {r['tokens_per_s']:.1f} | "
              f"{r['ttft_p50']:.3f} | {r['ttft_p99']:.3f} | {r['tpot_p50'] * 1e3:.1f} | {r['tpot_p99'] * 1e3:.1f} | "
              f"{r['lost']} | {'' if r['wrong'] is None else r['wrong']} |")
    if kv:
        print(kv)
    if a.json:
        json.dump(dict(rows=rows, kv=kv), open(a.json, "w"), indent=1)
    if a.plot:
        plot(rows, a.plot)
    # the f16 cache's answers may differ from the f32 cache's on a near-tie: counted, not an error
    if any(r["lost"] or (r["wrong"] and r["engine"] != "dvm-f16") for r in rows if r["engine"] != "llamacpp"):
        sys.exit("bench_serve_generate: dvm lost requests or answered one differently from the same request alone")


if __name__ == "__main__":
    main()
