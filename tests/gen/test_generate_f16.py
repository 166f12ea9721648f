"""The half-precision KV cache (kv_dtype f16, docs/generation.md#a-half-precision-cache)
on the tiny builder-form decoder (llm.py) and, where setup made them, the
builder's own folders: sequences batched give each one's tokens and logits
alone bit for bit, paged or not; a block takes half the bytes, so a budget
holds twice the blocks; greedy tokens and logits stay near the f32
cache's; a decoder whose cache other ops read is refused with the option
named; a model whose cache is f16 already is unaffected; `dvm generate
--kv-dtype`."""
import json
import os
import subprocess

import numpy as np
import pytest

import llm
from dvmtest.cli import dvm, dvm_ok
from dvmtest.paths import ROOT

GEN_DRIVER = os.environ.get("GEN_DRIVER", "gen_driver")
PAGED_DRIVER = os.environ.get("PAGED_DRIVER", "paged_driver")
GENAI = os.path.join(ROOT, "build-data", "genai")
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [4], list(range(20, 33)), [8, 1]]


def kvh_run(d, prompts, max_length, f16_block=None, config=None):
    """gen_driver's result (tokens, logits [steps, batch, vocab], the cache's
    dtype and blocks); f16_block: kv_dtype f16 with that kv_block_size."""
    out = d / "logits.f32" if config is None else d / "logits-builder.f32"
    kv = [] if f16_block is None else [f"--kv-f16={f16_block}"]
    args = [*kv, config or d / "genai_config.json", d / "model.dvmb", out, max_length, 0, 0,
            *(",".join(map(str, q)) for q in prompts)]
    p = subprocess.run([GEN_DRIVER, *map(str, args)], capture_output=True, text=True, timeout=600)
    if p.returncode:
        return p.stderr
    r = json.loads(p.stdout)
    vocab = json.load(open(config or d / "genai_config.json"))["model"]["vocab_size"]
    r["logits"] = np.fromfile(out, np.float32).reshape(r["steps"], len(prompts), vocab)
    return r


@pytest.fixture(scope="module")
def kvh_decoders(tmp_path_factory):
    out = {}
    for attention in ("gqa", "scatter"):
        d = tmp_path_factory.mktemp("kvh-" + attention)
        llm.make(str(d), attention=attention, max_length=64, search={"min_length": 256})
        dvm_ok("compile", d / "model.onnx", "-o", d / "model.dvmb", "--last-position", "logits")
        out[attention] = d
    return out


@pytest.mark.parametrize("block", [0, 5, 16])
def test_kv_f16_batch_equals_each_alone(kvh_decoders, block):
    d = kvh_decoders["gqa"]
    together = kvh_run(d, PROMPTS, 40, block)
    assert together["kv_dtype"] == "f16" and together["kv_block_size"] == (block or 40), together
    assert together["kv_blocks"] == len(PROMPTS) * -(-40 // (block or 40))  # the default budget: all at max_length
    steps = 0
    for b, p in enumerate(PROMPTS):
        alone = kvh_run(d, [p], 40, block)
        assert together["tokens"][b] == alone["tokens"][0]
        n = alone["steps"]
        np.testing.assert_array_equal(together["logits"][:n, b], alone["logits"][:, 0])
        steps = max(steps, n)
    assert together["steps"] == steps


def test_kv_f16_near_f32(kvh_decoders):
    """The f16 cache's logits within f16 rounding of the f32 cache's, every
    step of every sequence (the tokens chosen from them may differ on a
    near-tie; here they do not)."""
    d = kvh_decoders["gqa"]
    f32, f16 = kvh_run(d, PROMPTS, 64), kvh_run(d, PROMPTS, 64, 0)
    assert f32["kv_dtype"] == "f32" and f32["kv_block_size"] == 0
    assert f16["tokens"] == f32["tokens"]
    err = np.abs(f16["logits"] - f32["logits"]).max() / np.abs(f32["logits"]).max()
    assert 0 < err < 5e-3, err  # 0 would mean the cache was not rounded at all


def test_kv_f16_budget_holds_twice_the_blocks(kvh_decoders):
    d = kvh_decoders["gqa"]
    f32 = subprocess.run([PAGED_DRIVER, *map(str, [d / "genai_config.json", d / "model.dvmb", 16, 16, 3 * 8192, 0,
                                                    "5,6,7", "8,9"])], capture_output=True, text=True, timeout=300)
    f16 = subprocess.run([PAGED_DRIVER, "--kv-f16", *map(str, [d / "genai_config.json", d / "model.dvmb", 16, 16,
                                                                3 * 8192, 0, "5,6,7", "8,9"])],
                         capture_output=True, text=True, timeout=300)
    r32, r16 = json.loads(f32.stdout), json.loads(f16.stdout)
    # 2 layers x key and value x 2 kv heads x 16 rows x 16 head size x 4 or 2 bytes; one block for idle rows
    assert (r32["block_bytes"], r32["blocks"]) == (8192, 2)
    assert (r16["block_bytes"], r16["blocks"]) == (4096, 5)
    small = subprocess.run([PAGED_DRIVER, "--kv-f16", *map(str, [d / "genai_config.json", d / "model.dvmb", 16, 16,
                                                                  6000, 0, "5,6,7"])],
                           capture_output=True, text=True, timeout=300)
    assert "kv_budget 6000 bytes holds 1 KV blocks of 4096 bytes" in small.stderr, small.stderr


def test_kv_f16_refused_where_paging_does_not_apply(kvh_decoders):
    err = kvh_run(kvh_decoders["scatter"], [[5, 6]], 16, 0)
    assert "kv_dtype f16 needs a cache that only GroupQueryAttention reads and writes" in err, err


def test_generate_cli_kv_dtype(kvh_decoders):
    d = kvh_decoders["gqa"]
    want = kvh_run(d, [[5, 6, 7]], 24, 0)["tokens"][0][3:]
    out = dvm_ok("generate", d / "model.dvmb", "--prompt-ids", "5,6,7", "--max-length", "24", "--kv-dtype", "f16")
    assert out.stdout.split() == list(map(str, want))
    p = dvm("generate", d / "model.dvmb", "--prompt-ids", "5,6,7", "--kv-dtype", "f8")
    assert p.returncode == 2 and "--kv-dtype f8: expected f32 or f16" in p.stderr, p.stderr


def builder_folder(name):
    f = os.path.join(GENAI, name)
    if not os.path.isfile(os.path.join(f, "genai_config.json")):
        pytest.skip(f"no {name} builder folder (setup.sh makes build-data/genai)")
    return f


def compile_builder(tmp_path, name):
    f = builder_folder(name)
    dvm_ok("compile", os.path.join(f, "model.onnx"), "-o", tmp_path / "model.dvmb", "--last-position", "logits")
    return os.path.join(f, "genai_config.json")


def test_kv_f16_builder_greedy_32_steps(tmp_path):
    """The builder's llama at fp32: 32 greedy tokens from the f16 cache
    against the f32 cache's (docs/generation.md states the agreement)."""
    config = compile_builder(tmp_path, "llama-fp32")
    prompt = [1, 45, 499, 173, 170, 43, 172, 97, 278, 366]
    f32 = kvh_run(tmp_path, [prompt], len(prompt) + 32, config=config)
    f16 = kvh_run(tmp_path, [prompt], len(prompt) + 32, 16, config=config)
    a, b = np.array(f32["tokens"][0][len(prompt):]), np.array(f16["tokens"][0][len(prompt):])
    n = min(len(a), len(b))
    same = int(np.argmin(a[:n] == b[:n])) if (a[:n] != b[:n]).any() else n  # steps before the first difference
    ref = f32["logits"][:same + 1, 0]
    diff = np.abs(f16["logits"][:same + 1, 0] - ref).max() / np.abs(ref).max()
    print(f"llama-fp32 f16 cache: {int((a[:n] == b[:n]).sum())} of {n} greedy tokens as f32's, the first {same} "
          f"the same; logits until then within {diff:.2e} of the largest")
    assert 0 < diff < 5e-3


def test_kv_f16_model_already_f16_unaffected(tmp_path):
    config = compile_builder(tmp_path, "llama-fp16")
    prompt = [1, 45, 499, 173]
    plain, asked = kvh_run(tmp_path, [prompt], 16, config=config), kvh_run(tmp_path, [prompt], 16, 0, config=config)
    assert plain["kv_dtype"] == asked["kv_dtype"] == "f16" and asked["kv_block_size"] == 0, asked
    assert plain["tokens"] == asked["tokens"]
    np.testing.assert_array_equal(plain["logits"], asked["logits"])
