"""GroupQueryAttention on a half-precision (f16) paged KV cache against
NumPy: the attention of keys and values rounded to f16, computed in
float64, at awkward shapes (a first prompt with and without padding, one
new token after pasts of 0, a block and one past a block, a prompt after
a past, head sizes under, at and past a 16-lane vector, prime ones, blocks
of 1, 5, 16 and a whole sequence's rows); the new rows must be stored rounded to nearest
even, the others left as they were; the same bits under each DVM_CPU_ISA
(each one's f16 conversions).
The kernel runs through gqa_half_driver.c, which lays the cache out in
reversed blocks."""
import os
import subprocess

import numpy as np
import pytest

DRIVER = os.environ.get("GQA_HALF_DRIVER")
if not DRIVER:
    pytest.skip("GQA_HALF_DRIVER is set by meson (tests/ops/meson.build)", allow_module_level=True)


def f16_round(x):
    return x.astype(np.float16).astype(np.float64)


def gqa_half_reference(q, k, v, pk, pv, pasts, rows, hq, hkv):
    """y [B, S, HQ D] of keys and values rounded to f16; query row s of
    entry b at position pasts[b] + s sees keys 0 to that position."""
    B, S, _ = q.shape
    D = pk.shape[3]
    y = np.zeros((B, S, hq * D))
    for b in range(B):
        P = pasts[b]
        for h in range(hq):
            kh = h // (hq // hkv)
            keys = np.concatenate([f16_round(pk[b, kh, :P]), f16_round(k[b, :, kh * D:(kh + 1) * D])])
            vals = np.concatenate([f16_round(pv[b, kh, :P]), f16_round(v[b, :, kh * D:(kh + 1) * D])])
            for s in range(rows[b]):
                sc = keys[:P + s + 1] @ q[b, s, h * D:(h + 1) * D].astype(np.float64) / np.sqrt(D)
                p = np.exp(sc - sc.max())
                y[b, s, h * D:(h + 1) * D] = (p / p.sum()) @ vals[:P + s + 1]
    return y


CASES = [  # B, S, pasts (None: a first prompt of these lengths), HQ, HKV, D, L, BS
    (1, 7, None, [7], 4, 2, 16, 37, 16),
    (2, 7, None, [7, 4], 6, 3, 13, 37, 5),
    (3, 1, [0, 16, 36], None, 4, 2, 16, 37, 16),
    (3, 1, [0, 16, 36], None, 4, 2, 37, 37, 16),
    (2, 1, [17, 30], None, 8, 2, 64, 41, 1),
    (1, 5, [17], None, 4, 1, 20, 37, 16),
    (1, 1, [0], None, 2, 2, 1, 3, 1),
    (2, 1, [20, 40], None, 4, 2, 16, 41, 41),  # one block per sequence (kv_block_size 0), read 16 rows a time
]


def gqa_half_run(tmp, case, isa=None):
    """The driver on case's random inputs under DVM_CPU_ISA isa: y, the
    cache read back, and the inputs."""
    B, S, pasts, lens, hq, hkv, D, L, BS = case
    rng = np.random.default_rng(B * 1000 + S * 100 + D)
    q = rng.uniform(-1, 1, (B, S, hq * D)).astype(np.float32)
    k, v = (rng.uniform(-1, 1, (B, S, hkv * D)).astype(np.float32) for _ in range(2))
    pk, pv = (rng.uniform(-1, 1, (B, hkv, L, D)).astype(np.float32) for _ in range(2))
    if pasts is None:  # a first prompt
        pasts, rows, total = [0] * B, lens, S
        seqlens = np.array([n - 1 for n in lens], np.int32)
    else:
        rows, total = [S] * B, max(pasts) + S
        seqlens = np.array([p + S - 1 for p in pasts], np.int32)
    for name, a in (("q.f32", q), ("k.f32", k), ("v.f32", v), ("pk.f32", pk), ("pv.f32", pv),
                    ("seqlens.i32", seqlens)):
        a.tofile(tmp / name)
    env = dict(os.environ, **({"DVM_CPU_ISA": isa} if isa else {}))
    p = subprocess.run([DRIVER, str(tmp), *map(str, (B, S, hq, hkv, D, L, BS, total))], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    y = np.fromfile(tmp / "y.f32", np.float32).reshape(B, S, hq * D)
    out = [np.fromfile(tmp / n, np.float32).reshape(B, hkv, L, D) for n in ("pk_out.f32", "pv_out.f32")]
    return y, out, (q, k, v, pk, pv, pasts, rows)


@pytest.mark.parametrize("case", CASES)
def test_gqa_half_same_bits_on_each_isa(tmp_path, case):
    """AVX-512's, F16C's and the scalar conversions give the same bits."""
    ys = [gqa_half_run(tmp_path, case, isa)[0] for isa in ("avx512f", "avx2", "generic")]
    for y in ys[1:]:
        np.testing.assert_array_equal(ys[0].view(np.uint32), y.view(np.uint32))


@pytest.mark.parametrize("B,S,pasts,lens,hq,hkv,D,L,BS", CASES)
def test_gqa_half_cache_against_numpy(tmp_path, B, S, pasts, lens, hq, hkv, D, L, BS):
    y, outs, (q, k, v, pk, pv, pasts, rows) = gqa_half_run(tmp_path, (B, S, pasts, lens, hq, hkv, D, L, BS))
    ref = gqa_half_reference(q, k, v, pk, pv, pasts, rows, hq, hkv)
    np.testing.assert_allclose(y, ref, rtol=0, atol=2e-6 * max(1, D ** 0.5))
    for got, past, new in zip(outs, (pk, pv), (k, v)):
        want = f16_round(past)
        for b in range(B):  # every new row (a first prompt's padding rows too), rounded to nearest even
            want[b, :, pasts[b]:pasts[b] + S] = f16_round(new[b].reshape(S, hkv, D).transpose(1, 0, 2))
        np.testing.assert_array_equal(got, want)
