"""The generator's paged KV cache (docs/generation.md#the-paged-cache) on
tiny builder-form decoders (llm.py): sequences joining at different lengths
give the tokens each gives alone on the contiguous cache, at block sizes
that divide and do not divide their lengths; a prompt sharing a 40-token
prefix with a running one takes its full blocks instead of new ones; every
block is free after the resets; a decoder whose caches meet other ops than
GroupQueryAttention keeps the contiguous cache and says why; a budget
under two blocks is an error naming the numbers; prompts chunked within a
step's prompt budget (prefill_budget) give each sequence's tokens alone."""
import json
import math
import os
import subprocess

import pytest

import llm
from dvmtest.cli import dvm

PAGED_DRIVER = os.environ.get("PAGED_DRIVER", "paged_driver")
PREFIX = [(7 * i) % 90 + 3 for i in range(40)]
PROMPTS = [PREFIX, PREFIX + [11, 12, 13, 14, 15, 16, 17], [5, 6, 7, 8, 9], [(3 * i) % 80 + 4 for i in range(17)]]


def paged_run(d, prompts, block_size, budget=0, max_length=96, chunk=0):
    args = [d / "genai_config.json", d / "model.dvmb", max_length, block_size, budget, chunk,
            *(",".join(map(str, q)) for q in prompts)]
    p = subprocess.run([PAGED_DRIVER, *map(str, args)], capture_output=True, text=True, timeout=300)
    if p.returncode:
        return p.stderr
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def paged_decoders(tmp_path_factory):
    """The builder's form (GroupQueryAttention) and the standard-op one
    (TensorScatter reads the cache: paging does not apply)."""
    out = {}
    for attention in ("gqa", "scatter"):
        d = tmp_path_factory.mktemp(attention)
        llm.make(str(d), attention=attention, max_length=96, search={"min_length": 256})
        p = dvm("compile", d / "model.onnx", "-o", d / "model.dvmb", "--last-position", "logits")
        assert p.returncode == 0, p.stderr
        out[attention] = d
    return out


@pytest.mark.parametrize("block_size", [16, 5])
def test_paged_equals_alone(paged_decoders, block_size):
    d = paged_decoders["gqa"]
    alone = [paged_run(d, [p], 0)["tokens"][0] for p in PROMPTS]
    r = paged_run(d, PROMPTS, block_size)
    assert r["note"] == "" and r["tokens"] == alone
    blocks = lambda rows: math.ceil(rows / block_size)
    shared = 40 // block_size  # the second prompt's full blocks that the first holds
    assert r["prefix_hits"] == shared * block_size
    assert r["first"] == blocks(40)  # the first prompt's rows
    # its next row, then the others' prompts, the second without the shared blocks
    assert r["all"] == blocks(41) + blocks(47) - shared + blocks(5) + blocks(17), r
    assert r["peak"] <= r["blocks"] and r["free_after_reset"] == r["blocks"]


@pytest.mark.parametrize("block_size", [0, 5])
def test_chunked_prefill_equals_alone(paged_decoders, block_size):
    """Prompts fed 7 tokens a step (a 40-token prompt in 6 chunks) while
    the others decode: each sequence's tokens as alone and whole."""
    d = paged_decoders["gqa"]
    alone = [paged_run(d, [p], 0)["tokens"][0] for p in PROMPTS]
    r = paged_run(d, PROMPTS, block_size, chunk=7)
    assert r["tokens"] == alone
    assert r["most_invocations"] > 2  # three prompts' chunks and a decode step in one


@pytest.mark.parametrize("block_size", [0, 5])
def test_prefill_budget_one_chunk_per_step(paged_decoders, block_size):
    """prefill_budget 7 with chunks of 7: one prompt's chunk per step
    (the prompts take turns), and the decode step; each sequence's tokens
    still as alone (chunks end where they would without the budget)."""
    d = paged_decoders["gqa"]
    alone = [paged_run(d, [p], 0)["tokens"][0] for p in PROMPTS]
    r = paged_run(d, PROMPTS, block_size, chunk="7:7")
    assert r["tokens"] == alone
    assert r["most_invocations"] <= 2, r
    r = paged_run(d, PROMPTS, block_size, chunk="7:5")  # a chunk over the budget runs when it is the step's first
    assert r["tokens"] == alone and r["most_invocations"] <= 2, r
    assert "prefill_budget" in paged_run(d, PROMPTS, block_size, chunk="7:-1")


def test_paged_default_budget_holds_every_sequence(paged_decoders):
    r = paged_run(paged_decoders["gqa"], PROMPTS, 16)
    assert r["blocks"] == len(PROMPTS) * math.ceil(96 / 16)  # and the idle rows' block beside them
    assert r["block_bytes"] == 2 * 2 * 2 * 16 * 16 * 4  # layers, key and value, kv heads, rows, head size, f32


def test_unpageable_decoder_keeps_the_contiguous_cache(paged_decoders):
    d = paged_decoders["scatter"]
    alone = [paged_run(d, [p], 0)["tokens"][0] for p in PROMPTS[2:]]
    r = paged_run(d, PROMPTS[2:], 16)
    assert "paged KV cache" in r["note"] and r["blocks"] == 0
    assert r["tokens"] == alone


def test_paged_budget_too_small(paged_decoders):
    err = paged_run(paged_decoders["gqa"], PROMPTS[2:], 16, budget=12000)
    assert "kv_budget 12000 bytes holds 1 KV blocks of 8192 bytes" in err, err
    err = paged_run(paged_decoders["gqa"], PROMPTS[2:], 200)
    assert "kv_block_size 200 must be 0 (not paged) to max_length 96" in err, err
