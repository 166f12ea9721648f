#!/usr/bin/env python3
"""dvm on a CUDA GPU, side by side with PyTorch eager (not a test).

    python3 bench/bench_cuda.py [--dvm build/tools/dvm] [--layers 12] [--iters 50]

Three parts, each printing a table and one JSON line per row:

1. A BERT-base-style encoder (tests/models/make_models.bert_model at hidden 768,
   12 heads, FFN 3072, --layers layers, random weights) compiled once with
   `dvm compile --target cpu,cuda` and timed by `dvm bench --device cuda`
   at batch 1 with seq 8, 32, 128, 384, 512 and batch 8 with seq 128, next
   to torch.nn.TransformerEncoder of the same sizes (eager, no_grad, TF32
   off, as dvm's default exact f32), timed with CUDA events after warm-up.
2. Duplicated tails against the bounds-checked baseline: a fused
   elementwise chain (gelu(x * a + b)) at odd extents, the same .dvmb run
   twice, once with DVM_CUDA_BASELINE=1 (ops/cuda/gen.c).
3. Fused elementwise throughput: the bytes the chain reads and writes per
   second, next to the device's copy bandwidth (torch clone) and the
   host<->device transfer time of the same bytes (both "-" without PyTorch): `dvm bench` times whole invocations,
   whose @cuda functions take their inputs from and return results to the
   host (docs/cuda-runtime.md), so at large extents the transfers dominate.

On a machine without a CUDA device it says so and exits 0 having done
nothing. Without PyTorch it runs the dvm side and says what is missing.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def cuda_device():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "libcuda.so.1 not found (no NVIDIA driver)"
    n = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value < 1:
        return "no CUDA device"
    return None


def dvm_bench(dvm, dvmb, shapes, ranges, iters, env=None):
    args = [dvm, "bench", dvmb, "--device", "cuda", "--iters", str(iters), "--warmup", "10"]
    for k, v in shapes.items():
        args += ["--shape", f"{k}={'x'.join(map(str, v))}"]
    for k, v in ranges.items():
        args += ["--range", f"{k}={v[0]}..{v[1]}"]
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    return json.loads(r.stdout.strip().splitlines()[-1])


def compile_model(dvm, onnx_path, out):
    r = subprocess.run([dvm, "compile", onnx_path, "--target", "cpu,cuda", "-o", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"dvm compile --target cpu,cuda: {r.stderr.strip()}")


def torch_time(fn, iters):
    import torch
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


def encoder(d, args, torch):
    sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
    import make_models
    hidden, heads, ffn, vocab, max_pos = 768, 12, 3072, 30522, 512
    # written into d, not over the test fixture
    make_models.bert_model(layers=args.layers, hidden=hidden, heads=heads, vocab=vocab, max_pos=max_pos, ffn=ffn,
                           out_dir=d)
    dvmb = os.path.join(d, "bert.dvmb")
    compile_model(args.dvm, os.path.join(d, "bert.onnx"), dvmb)
    tmodel = None
    if torch:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        layer = torch.nn.TransformerEncoderLayer(hidden, heads, ffn, activation="gelu", batch_first=True)
        tmodel = torch.nn.TransformerEncoder(layer, args.layers, enable_nested_tensor=False).cuda().eval()
        emb = torch.nn.Embedding(vocab, hidden).cuda()
    print(f"encoder, {args.layers} layers, hidden {hidden}: median ms")
    print(f"{'batch x seq':>12} {'dvm':>9} {'torch':>9} {'ratio':>7} {'syncs':>6}")
    for batch, seq in ((1, 8), (1, 32), (1, 128), (1, 384), (1, 512), (8, 128)):
        shape = {"ids": (batch, seq), "mask": (batch, seq)}
        res = dvm_bench(args.dvm, dvmb, shape, {"ids": (0, vocab - 1), "mask": (1, 1)}, args.iters)
        t = None
        if tmodel is not None:
            ids = torch.randint(0, vocab, (batch, seq), device="cuda")
            mask = torch.zeros(batch, seq, dtype=torch.bool, device="cuda")
            with torch.no_grad():
                # host in, host out, as dvm's @cuda functions do
                def step():
                    x = emb(ids.cpu().cuda())
                    return tmodel(x, src_key_padding_mask=mask).cpu()
                t = torch_time(step, args.iters)
        ratio = f"{res['median_ms'] / t:7.2f}" if t else "      -"
        print(f"{batch:>5} x {seq:<4} {res['median_ms']:9.3f} {t if t else float('nan'):9.3f} {ratio} "
              f"{res['host_syncs']:6.1f}")
        print(json.dumps({"bench": "encoder", "batch": batch, "seq": seq, "dvm_ms": res["median_ms"],
                          "torch_ms": t, "host_syncs": res["host_syncs"]}))


def chain_model(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Mul", ["x", "a"], ["t0"]), helper.make_node("Add", ["t0", "b"], ["t1"]),
             helper.make_node("Mul", ["t1", "r2"], ["t2"]), helper.make_node("Erf", ["t2"], ["t3"]),
             helper.make_node("Add", ["t3", "one"], ["t4"]), helper.make_node("Mul", ["t1", "t4"], ["t5"]),
             helper.make_node("Mul", ["t5", "half"], ["y"])]
    consts = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
              (("a", 1.5), ("b", 0.25), ("r2", 0.7071067811865476), ("one", 1.0), ("half", 0.5))]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])], consts)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def elementwise(d, args, torch):
    dvmb = os.path.join(d, "chain.dvmb")
    chain_model(os.path.join(d, "chain.onnx"))
    compile_model(args.dvm, os.path.join(d, "chain.onnx"), dvmb)
    base_env = dict(os.environ, DVM_CUDA_BASELINE="1")
    print("fused gelu chain: duplicated tails vs the bounds-checked baseline, median ms")
    print(f"{'n':>10} {'tails':>9} {'baseline':>9} {'ratio':>7} {'GB/s':>7} {'copy GB/s':>9} {'h<->d ms':>9}")
    for n in (1, 61, 1021, 65537, 1000003, 16777259):
        tails = dvm_bench(args.dvm, dvmb, {"x": (n,)}, {}, args.iters)
        base = dvm_bench(args.dvm, dvmb, {"x": (n,)}, {}, args.iters, env=base_env)
        gbs = 8.0 * n / (tails["median_ms"] * 1e6)  # 4 bytes read + 4 written per element
        copy_gbs = transfer = None
        if torch:
            x = torch.empty(n, device="cuda")
            copy_gbs = 8.0 * n / (torch_time(lambda: x.clone(), args.iters) * 1e6)
            h = torch.empty(n).pin_memory()
            transfer = torch_time(lambda: x.copy_(h, non_blocking=True).cpu(), args.iters)
        cg = f"{copy_gbs:9.1f}" if copy_gbs else "        -"
        tr = f"{transfer:9.3f}" if transfer else "        -"
        print(f"{n:>10} {tails['median_ms']:9.4f} {base['median_ms']:9.4f} "
              f"{tails['median_ms'] / base['median_ms']:7.3f} {gbs:7.2f} {cg} {tr}")
        print(json.dumps({"bench": "elementwise", "n": n, "tails_ms": tails["median_ms"],
                          "baseline_ms": base["median_ms"], "gbs": gbs, "copy_gbs": copy_gbs,
                          "transfer_ms": transfer}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dvm", default=os.path.join(ROOT, "build", "tools", "dvm"))
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    why = cuda_device()
    if why:
        print(f"bench_cuda: no CUDA device here ({why}); nothing to measure")
        return 0
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("torch without CUDA")
    except ImportError as e:
        print(f"bench_cuda: PyTorch with CUDA not available ({e}): dvm side only")
        torch = None
    with tempfile.TemporaryDirectory() as d:
        encoder(d, args, torch)
        elementwise(d, args, torch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
