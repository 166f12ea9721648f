"""Generation side by side: dvm (dvm.genai), ONNX Runtime GenAI (the same ONNX
folder), llama.cpp (GGUF f32 / q4_0 of the same checkpoint) and PyTorch eager,
in one run. For each precision, batch and thread count: prefill tokens per
second (a prompt of --prompt tokens), time to first token, decode tokens per
second (--decode new tokens), peak RSS; for decode also the bytes of weights
a step reads (all but the token embedding, of which it reads a row) times the
steps per second, against this machine's read bandwidth at that thread count
(sgemv over 512 MiB: the access pattern of a decode step).

    python bench/bench_generate.py --models DIR [--engines dvm,ortgenai,llamacpp,torch]
        [--precisions fp32,int4] [--batches 1,4] [--threads 1,2] [--json F]

DIR is what tests/genai/builder_models.py --size bench writes (DIR/ckpt/llama,
DIR/llama-fp32, DIR/llama-int4); llama.cpp's binaries come from --llamacpp
(the build folder bench/setup_llamacpp.sh prints), and its GGUF files are made
once beside the checkpoint, before any measurement, with llama.cpp's converter
and llama-quantize. bench/plot_generate.py plots --json. Each measurement runs
in its own process so that peak RSS is its own. dvm compiles each folder once,
in a process of its own before the measurements (its time and peak RSS
printed), so that theirs are generation's: the compile is a one-off, cached,
as the builder's run is for both. Runs with an interpreter that
has onnxruntime-genai, torch and transformers (build-data/genai-venv), and the
dvm package on PYTHONPATH (build/python)."""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILY = "llama"


def prompt_ids(batch, n, vocab):
    # fixed pseudo-random ids, the same for every engine; skip the first 3 (unk, bos, eos)
    return [[3 + (7919 * (b + 1) * (i + 13)) % (vocab - 3) for i in range(n)] for b in range(batch)]


def genai_run(og, folder, batch, threads, n_prompt, n_decode):
    cfg = og.Config(folder)
    cfg.overlay(json.dumps({"model": {"decoder": {"session_options": {
        "intra_op_num_threads": threads, "inter_op_num_threads": 1}}}}))
    model = og.Model(cfg)
    vocab = json.load(open(os.path.join(folder, "genai_config.json")))["model"]["vocab_size"]
    ids = prompt_ids(batch, n_prompt, vocab)

    def once():
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=n_prompt + n_decode, min_length=n_prompt + n_decode,
                                  do_sample=False, batch_size=batch)
        gen = og.Generator(model, params)
        t0 = time.perf_counter()
        gen.append_tokens([t for row in ids for t in row] if batch > 1 else ids[0])
        gen.generate_next_token()
        t1 = time.perf_counter()
        n = 1
        while not gen.is_done():
            gen.generate_next_token()
            n += 1
        t2 = time.perf_counter()
        return t1 - t0, (n - 1) / (t2 - t1), [int(x) for x in gen.get_sequence(0)[n_prompt:]]

    once()  # warm-up
    runs = [once() for _ in range(2)]
    ttft = min(r[0] for r in runs)
    return dict(ttft_ms=ttft * 1e3, prefill_tps=batch * n_prompt / ttft,
                decode_tps=batch * max(r[1] for r in runs), tokens=runs[0][2][:16])


def torch_run(ckpt, batch, threads, n_prompt, n_decode):
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    ids = torch.tensor(prompt_ids(batch, n_prompt, model.config.vocab_size))

    def once():
        with torch.no_grad():
            t0 = time.perf_counter()
            out = model(ids, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            t1 = time.perf_counter()
            toks = [int(nxt[0, 0])]
            for _ in range(n_decode - 1):
                out = model(nxt, past_key_values=past, use_cache=True)
                past = out.past_key_values
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                toks.append(int(nxt[0, 0]))
            t2 = time.perf_counter()
        return t1 - t0, (n_decode - 1) / (t2 - t1), toks

    once()
    runs = [once() for _ in range(2)]
    ttft = min(r[0] for r in runs)
    return dict(ttft_ms=ttft * 1e3, prefill_tps=batch * n_prompt / ttft,
                decode_tps=batch * max(r[1] for r in runs), tokens=runs[0][2][:16])


def gguf(llamacpp, ckpt, precision):
    """The checkpoint as GGUF f32 (llama.cpp's converter) or q4_0 (llama-quantize)."""
    f32 = os.path.join(ckpt, "model-f32.gguf")
    if not os.path.exists(f32):
        src = os.path.join(llamacpp, "..")
        # The checkpoint's tokenizer is a small BPE the converter does not know
        # by its hash; it tokenizes nothing in this benchmark, so it is read as GPT-2's.
        code = ("import sys; sys.path.insert(0, %r); sys.path.insert(0, %r); import convert_hf_to_gguf as c; "
                "import conversion.base as b; b.TextModel.get_vocab_base_pre = lambda self, tok: 'gpt-2'; "
                "sys.argv = ['convert', %r, '--outtype', 'f32', '--outfile', %r]; c.main()"
                % (src, os.path.join(src, "gguf-py"), ckpt, f32))
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if p.returncode:
            sys.exit(f"bench_generate: llama.cpp's converter failed on {ckpt}:\n{p.stderr[-3000:]}")
    if precision == "fp32":
        return f32
    q4 = os.path.join(ckpt, "model-q4_0.gguf")
    if not os.path.exists(q4):
        subprocess.run([os.path.join(llamacpp, "bin", "llama-quantize"), f32, q4, "q4_0"],
                       check=True, capture_output=True)
    return q4


def llamacpp_run(llamacpp, ckpt, precision, batch, threads, n_prompt, n_decode):
    model = gguf(llamacpp, ckpt, precision)
    exe = os.path.join(llamacpp, "bin", "llama-batched-bench")
    out = subprocess.run([exe, "-m", model, "-c", str(batch * (n_prompt + n_decode) + 64), "-b", "2048",
                          "-ub", "512", "-npp", str(n_prompt), "-ntg", str(n_decode), "-npl", str(batch),
                          "-t", str(threads), "-tb", str(threads), "--output-format", "jsonl"],
                         capture_output=True, text=True, check=True).stdout
    row = [json.loads(l) for l in out.splitlines() if l.startswith("{")][-1]
    return dict(ttft_ms=row["t_pp"] * 1e3, prefill_tps=row["speed_pp"], decode_tps=row["speed_tg"])


def step_bytes(src, llamacpp):
    """Bytes of weights a decode step reads: every weight but the tables read
    only by a gather (the token embedding: one row a token), from the ONNX
    graph's initializers or the GGUF's tensors."""
    if src.endswith(".gguf"):
        sys.path.insert(0, os.path.join(llamacpp, "..", "gguf-py"))
        from gguf import GGUFReader
        return sum(int(t.n_bytes) for t in GGUFReader(src).tensors if t.name != "token_embd.weight")
    import onnx
    m = onnx.load(os.path.join(src, "model.onnx"), load_external_data=False)
    sizes = {}
    for t in m.graph.initializer:
        ext = {e.key: e.value for e in t.external_data}
        sizes[t.name] = int(ext["length"]) if "length" in ext else len(t.raw_data)
    users = {}
    for n in m.graph.node:
        for i, x in enumerate(n.input):
            users.setdefault(x, set()).add((n.op_type, i))
    gathered = {x for x, u in users.items() if all(op.startswith("Gather") and i == 0 for op, i in u)}
    return sum(b for x, b in sizes.items() if x not in gathered)


def read_bandwidth(threads):
    """GB/s `threads` threads read from memory: the best of 5 matrix-vector
    products over a 512 MiB matrix (BLAS sgemv, the access pattern of a
    decode step), in a process of its own so that the thread count holds."""
    code = ("import numpy as np, time; m = np.ones((32768, 4096), np.float32); v = np.ones(4096, np.float32); "
            "b = 0\nfor _ in range(5):\n t = time.perf_counter(); m @ v; b = max(b, m.nbytes / (time.perf_counter() - t))\n"
            "print(b / 1e9)")
    env = dict(os.environ, **{k: str(threads) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    return float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True).stdout)


def one(a):
    """Runs one measurement in this process and prints it as JSON."""
    folder = os.path.join(a.models, f"{FAMILY}-{a.precision}")
    ckpt = os.path.join(a.models, "ckpt", FAMILY)
    if a.engine == "dvm-compile":
        import dvm.genai as og
        t = time.perf_counter()
        og.Model(folder)
        r = dict(compile_s=time.perf_counter() - t)
    elif a.engine == "ortgenai":
        import onnxruntime_genai as og
        r = genai_run(og, folder, a.batch, a.thread, a.prompt, a.decode)
    elif a.engine == "dvm":
        import dvm.genai as og
        r = genai_run(og, folder, a.batch, a.thread, a.prompt, a.decode)
    elif a.engine == "torch":
        r = torch_run(ckpt, a.batch, a.thread, a.prompt, a.decode)
    else:
        r = llamacpp_run(a.llamacpp, ckpt, a.precision, a.batch, a.thread, a.prompt, a.decode)
    if a.engine == "llamacpp":  # it runs in a child process: its peak is the children's
        r["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    else:  # VmHWM: getrusage's ru_maxrss survives exec, and would keep this benchmark's own size
        r["peak_rss_mb"] = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
    print(json.dumps(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", required=True)
    ap.add_argument("--engines", default="dvm,ortgenai,llamacpp,torch")
    ap.add_argument("--precisions", default="fp32,int4")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--llamacpp", help="llama.cpp's build folder (bin/llama-batched-bench, bin/llama-quantize)")
    ap.add_argument("--json")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    ap.add_argument("--precision", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--thread", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        return one(a)
    engines = a.engines.split(",")
    if "llamacpp" in engines:
        if not a.llamacpp:
            sys.exit("bench_generate: the llamacpp engine needs --llamacpp (bench/setup_llamacpp.sh prints it)")
        # made here, so that no measurement's time or peak RSS includes the conversion
        for prec in a.precisions.split(","):
            gguf(a.llamacpp, os.path.join(a.models, "ckpt", FAMILY), prec)
    bw = {t: read_bandwidth(t) for t in map(int, a.threads.split(","))}
    print("read bandwidth (sgemv over 512 MiB): " + ", ".join(f"{t} thread(s) {b:.1f} GB/s" for t, b in bw.items()))
    rows = []
    print(f"{'precision':9} {'batch':>5} {'thr':>3} {'engine':9} {'TTFT ms':>9} {'prefill t/s':>11} "
          f"{'decode t/s':>10} {'weights GB/s':>12} {'of bw':>5} {'RSS MB':>7}  dvm/engine decode")
    for prec in a.precisions.split(","):
        if "dvm" in engines:
            p = subprocess.run([sys.executable, __file__, "--one", "--models", a.models, "--engine", "dvm-compile",
                                "--precision", prec], capture_output=True, text=True)
            r = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None
            print(f"{prec:9} dvm compile (or cache hit): "
                  + (f"{r['compile_s']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB" if r else
                     f"failed: {p.stderr.strip().splitlines()[-1:]}"), flush=True)
        for batch in map(int, a.batches.split(",")):
            for thr in map(int, a.threads.split(",")):
                res = {}
                for eng in engines:
                    if eng == "torch" and prec != "fp32":
                        continue
                    cmd = [sys.executable, __file__, "--one", "--models", a.models, "--engine", eng,
                           "--precision", prec, "--batch", str(batch), "--thread", str(thr),
                           "--prompt", str(a.prompt), "--decode", str(a.decode)]
                    if a.llamacpp:
                        cmd += ["--llamacpp", a.llamacpp]
                    p = subprocess.run(cmd, capture_output=True, text=True)
                    if p.returncode != 0:
                        print(f"{prec:9} {batch:5} {thr:3} {eng:9} failed: {p.stderr.strip().splitlines()[-1:]}")
                        continue
                    r = json.loads(p.stdout.strip().splitlines()[-1])
                    src = (os.path.join(a.models, "ckpt", FAMILY, "model-%s.gguf" % ("f32" if prec == "fp32" else "q4_0"))
                           if eng == "llamacpp" else os.path.join(a.models, f"{FAMILY}-{prec}"))
                    r["weights_gbps"] = step_bytes(src, a.llamacpp) * r["decode_tps"] / batch / 1e9
                    res[eng] = r
                    rows.append(dict(precision=prec, batch=batch, threads=thr, engine=eng, **r))
                for eng, r in res.items():
                    ratio = (f"{res['dvm']['decode_tps'] / r['decode_tps']:.2f}" if "dvm" in res and eng != "dvm" else "")
                    print(f"{prec:9} {batch:5} {thr:3} {eng:9} {r['ttft_ms']:9.1f} {r['prefill_tps']:11.1f} "
                          f"{r['decode_tps']:10.2f} {r['weights_gbps']:12.2f} {r['weights_gbps'] / bw[thr]:5.0%} "
                          f"{r['peak_rss_mb']:7.0f}  {ratio}",
                          flush=True)
    if a.json:
        json.dump(dict(read_bandwidth_gbps={str(t): b for t, b in bw.items()}, rows=rows), open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
