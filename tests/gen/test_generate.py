"""The generator (dvm/generate.h) and `dvm generate` against ONNX Runtime GenAI
on tiny decoders in the builder's form (llm.py)."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import llm
from dvmtest.cli import dvm, dvm_ok

og = pytest.importorskip("onnxruntime_genai")

DRIVER = os.environ.get("GEN_DRIVER", "gen_driver")


def decoder_folder(tmp_path_factory, name, **kw):
    d = tmp_path_factory.mktemp(name)
    llm.make(str(d), **kw)
    dvm_ok("compile", d / "model.onnx", "-o", d / "model.dvmb")
    return d


# min_length past max_length holds EOS back, so runs go on to max_length
@pytest.fixture(scope="module")
def scatter_decoder(tmp_path_factory):
    return decoder_folder(tmp_path_factory, "scatter", attention="scatter", max_length=64, search={"min_length": 256})


@pytest.fixture(scope="module", params=["scatter", "gqa"])
def decoder(request, tmp_path_factory):
    """The builder's form (GroupQueryAttention), compiled as `dvm generate
    MODEL_DIR` compiles it (logits of the last position only), and the
    standard-op one, compiled whole."""
    if request.param == "scatter":
        return request.getfixturevalue("scatter_decoder")
    d = tmp_path_factory.mktemp("gqa")
    llm.make(str(d), attention="gqa", max_length=64, search={"min_length": 256})
    p = dvm("compile", d / "model.onnx", "-o", d / "model.dvmb", "--last-position", "logits")
    assert p.returncode == 0, p.stderr
    return d


@pytest.fixture(scope="module")
def scatter_tied(tmp_path_factory):
    return decoder_folder(tmp_path_factory, "tied", attention="scatter", max_length=64, tied=True, seed=3,
                          layers=3, vocab=131, search={"min_length": 256})


def genai(d, prompt, max_length, **search):
    """GenAI's tokens and the logits it chose each from."""
    m = og.Model(str(d))
    p = og.GeneratorParams(m)
    p.set_search_options(max_length=max_length, **search)
    g = og.Generator(m, p)
    g.append_tokens(np.array([prompt], dtype=np.int32))
    logits = []
    while not g.is_done():
        g.generate_next_token()
        logits.append(np.array(g.get_output("logits"))[0, -1])
    return list(g.get_sequence(0)), np.array(logits)


def assert_logits_close(ours, ref, eos):
    """Within 1e-4 of the largest magnitude at every step, EOS aside (GenAI
    reports it as -FLT_MAX below min_length)."""
    keep = np.arange(ref.shape[-1]) != eos
    for step, (a, b) in enumerate(zip(ours[:, keep], ref[:, keep], strict=True)):
        err = float(np.abs(a - b).max() / np.abs(b).max())
        assert err <= 1e-4, f"step {step}: relative error {err}"


def driver(d, prompts, max_length, sample=0, seed=0):
    out = d / "logits.f32"
    args = [d / "genai_config.json", d / "model.dvmb", out, max_length, sample, seed, *(",".join(map(str, q)) for q in prompts)]
    p = subprocess.run([DRIVER, *map(str, args)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    cfg = json.load(open(d / "genai_config.json"))
    r["logits"] = np.fromfile(out, np.float32).reshape(r["steps"], len(prompts), cfg["model"]["vocab_size"])
    return r


@pytest.mark.parametrize("prompt", [[5], [5, 6, 7, 8, 9, 10, 11], list(range(1, 14))])
def test_greedy_matches_genai(decoder, prompt):
    tokens, logits = genai(decoder, prompt, 48)
    r = driver(decoder, [prompt], 48)
    assert len(tokens) - len(prompt) >= 32
    assert r["tokens"][0] == tokens
    assert r["steps"] == len(logits)
    assert_logits_close(r["logits"][:, 0], logits, 96)


def test_greedy_tied_head_matches_genai(scatter_tied):
    prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
    tokens, logits = genai(scatter_tied, prompt, 64)
    r = driver(scatter_tied, [prompt], 64)
    assert r["tokens"][0] == tokens
    assert_logits_close(r["logits"][:, 0], logits, 130)


def test_eos_ends_without_joining(tmp_path_factory):
    d = decoder_folder(tmp_path_factory, "eos", attention="scatter", max_length=64)  # eos = 96, which it picks early
    prompt = [5, 6, 7, 8, 9]
    tokens, _ = genai(d, prompt, 64)
    assert len(tokens) < 64  # GenAI stopped at the EOS, which it does not append
    assert driver(d, [prompt], 64)["tokens"][0] == tokens
    assert dvm_ok("generate", d, "--prompt-ids", "5,6,7,8,9").stdout.split() == list(map(str, tokens[5:]))


def test_repetition_penalty_matches_genai(tmp_path_factory):
    d = decoder_folder(tmp_path_factory, "penalty", attention="scatter", max_length=40,
                       search={"repetition_penalty": 1.7, "min_length": 256})
    prompt = [7, 7, 7, 2, 2]
    tokens, _ = genai(d, prompt, 40, repetition_penalty=1.7)
    assert driver(d, [prompt], 40)["tokens"][0] == tokens


def test_batch_equals_each_alone(decoder):
    prompts = [[5, 6, 7, 8, 9, 10, 11], [4], list(range(20, 33)), [8, 1]]
    together = driver(decoder, prompts, 40)
    steps = 0
    for b, p in enumerate(prompts):
        alone = driver(decoder, [p], 40)
        assert together["tokens"][b] == alone["tokens"][0]
        n = alone["steps"]
        # bit for bit: a row idle in a step (a prompt that just ran) must not
        # have its last key and value rewritten by the decode step's arithmetic
        np.testing.assert_array_equal(together["logits"][:n, b], alone["logits"][:, 0])
        steps = max(steps, n)
    assert together["steps"] == steps


def bound_peak(d, batch, seq, total, max_length):
    out = dvm_ok("inspect", "--memory", d / "model.dvmb", "--dim", f"batch_size={batch}", "--dim",
                 f"sequence_length={seq}", "--dim", f"past_sequence_length={max_length}", "--dim",
                 f"total_sequence_length={total}").stdout
    assert "a lower bound" not in out, out  # every tensor the step allocates is in the formula
    return int(out.split("with its results bound, at ")[1].split(": ")[1].split()[0])


def test_decode_does_not_copy_the_cache(decoder):
    """Each present is the bound past buffer: nothing copied in after a run, and
    the VM never holds the presents (2 layers x key and value) as tensors of
    its own: its pool's peak is what `dvm inspect --memory` says for bound
    results, below two of one layer's cache tensors."""
    r = driver(decoder, [[1, 2, 3]], 64)
    dec = json.load(open(decoder / "genai_config.json"))["model"]["decoder"]
    cache = 1 * dec["num_key_value_heads"] * 64 * dec["head_size"] * 4  # [batch, kv_heads, max_length, head_size] f32
    assert r["result_copies"] == 0
    assert r["invocations"] == r["steps"]  # one prefill, then one step per token
    assert r["peak_requested"] == max(bound_peak(decoder, 1, 3, 3, 64), bound_peak(decoder, 1, 1, 63, 64))
    assert r["peak_requested"] < 2 * cache


GENAI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build-data", "genai")
BUILDER = sorted(d for d in os.listdir(GENAI) if os.path.isfile(os.path.join(GENAI, d, "genai_config.json"))) \
    if os.path.isdir(GENAI) else []


SHARED = [d for d in BUILDER if not d.endswith("-fp16")]  # the f16 folders concatenate: no shared buffer


@pytest.mark.parametrize("name", SHARED or [pytest.param("", marks=pytest.mark.skip(
    reason="no builder models: build-data/genai is made by setup.sh"))])
def test_builder_model_step_peak_is_the_plan(tmp_path, name):
    """The builder's folders (GroupQueryAttention, presents max(past, total)
    long): `dvm inspect --memory` states a step's peak with the results
    bound; the generator binds the presents, not the logits, so its pool's
    peak is that value, or more by at most the logits: the prompt's, or,
    compiled as `dvm generate MODEL_DIR` does, one row's."""
    d = tmp_path / name
    shutil.copytree(os.path.join(GENAI, name), d, ignore=shutil.ignore_patterns("*.dvmb"))
    for rows, last in [(5, []), (1, ["--last-position", "logits"])]:
        dvm_ok("compile", d / "model.onnx", "-o", d / "model.dvmb", *last)
        r = driver(d, [[5, 6, 7, 8, 9]], 64)
        assert r["result_copies"] == 0
        bound = max(bound_peak(d, 1, 5, 5, 64), bound_peak(d, 1, 1, 63, 64))
        logits = rows * r["logits"].shape[-1] * 4
        assert bound <= r["peak_requested"] <= bound + logits, (r["peak_requested"], bound, logits)


@pytest.mark.skipif("llama-fp32" not in BUILDER, reason="no builder models: build-data/genai is made by setup.sh")
def test_unshared_buffer_gives_the_shared_tokens(tmp_path):
    """past_present_share_buffer false on a GroupQueryAttention folder
    (which takes either): each step gets a copy of what its rows hold and
    keeps present's new rows. The same tokens and logits as with the shared
    buffer, for a batch whose rows hold different lengths (they step alone)
    and for rows of one length (together)."""
    runs = {}
    for share in (True, False):
        d = tmp_path / str(share)
        shutil.copytree(os.path.join(GENAI, "llama-fp32"), d, ignore=shutil.ignore_patterns("*.dvmb"))
        cfg = json.load(open(d / "genai_config.json"))
        cfg["search"]["past_present_share_buffer"] = share
        json.dump(cfg, open(d / "genai_config.json", "w"))
        dvm_ok("compile", d / "model.onnx", "-o", d / "model.dvmb")
        runs[share] = [driver(d, prompts, 40) for prompts in ([[5, 6, 7, 8, 9], [4], [8, 1, 2]], [[3, 4], [9, 9]])]
    for a, b in zip(runs[True], runs[False]):
        assert a["tokens"] == b["tokens"]
        np.testing.assert_allclose(a["logits"], b["logits"], rtol=1e-5, atol=1e-5)


def test_sampling_is_reproducible(scatter_decoder):
    a = driver(scatter_decoder, [[5, 6, 7]], 40, sample=1, seed=7)
    b = driver(scatter_decoder, [[5, 6, 7]], 40, sample=1, seed=7)
    c = driver(scatter_decoder, [[5, 6, 7]], 40, sample=1, seed=8)
    assert a["tokens"] == b["tokens"]
    assert a["tokens"] != c["tokens"]


@pytest.mark.parametrize("opts", [["--top-k", "1"], ["--top-p", "1e-9"], ["--temperature", "1e-6"]])
def test_sampling_that_leaves_one_choice_is_greedy(scatter_decoder, opts):
    greedy = dvm_ok("generate", scatter_decoder / "model.dvmb", "--prompt-ids", "5,6,7", "--max-length", 30).stdout
    sampled = dvm_ok("generate", scatter_decoder / "model.dvmb", "--prompt-ids", "5,6,7", "--max-length", 30,
                     "--do-sample", "--seed", 11, *opts).stdout
    assert sampled == greedy and len(greedy.split()) == 27


def test_cli_compiles_once_and_streams(tmp_path):
    llm.make(str(tmp_path), attention="scatter", max_length=24, search={"min_length": 256})
    first = dvm_ok("generate", tmp_path, "--prompt-ids", "1,2,3", "--stats")
    assert "compiling" in first.stderr and (tmp_path / "model.dvmb").exists()
    assert "prefill: 3 tokens" in first.stderr and "time to first token" in first.stderr
    assert "decode: 20 tokens" in first.stderr
    second = dvm_ok("generate", tmp_path, "--prompt-ids", "1,2,3")
    assert "compiling" not in second.stderr and second.stdout == first.stdout
    assert len(first.stdout.split()) == 21
    batch = dvm_ok("generate", tmp_path, "--prompt-ids", "1,2,3", "--prompt-ids", "9").stdout.splitlines()
    assert sorted(line.split(":")[0] for line in batch) == ["0", "1"]
    assert "0: " + first.stdout.strip() in batch


def edit_config(d, path, value):
    cfg = json.load(open(d / "genai_config.json"))
    node = cfg
    for k in path[:-1]:
        node = node[k]
    if value is None:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    json.dump(cfg, open(d / "genai_config.json", "w"))


@pytest.mark.parametrize("args,edit,message", [
    (["--prompt-ids", ",".join(["1"] * 65)], None, "exceed max_length 64"),
    (["--prompt-ids", "1,2", "--max-length", "300"], None, "max_length 300 out of range: 1 to the model's context_length 256"),
    (["--prompt-ids", "1,97"], None, "token 1 (97) is outside the vocabulary (0 to 96)"),
    (["--prompt-ids", "1,-2"], None, "token 1 (-2) is outside the vocabulary"),
    (["--prompt-ids", "1", "--top-p", "1.5"], None, "--top-p 1.5: expected a number in [0, 1]"),
    (["--prompt-ids", "1", "--temperature", "0"], None, "--temperature 0"),
    (["--prompt-ids", "1"], (("model", "decoder", "head_size"), None), "model.decoder.head_size: missing"),
    (["--prompt-ids", "1"], (("model", "vocab_size"), None), "model.vocab_size: missing"),
    (["--prompt-ids", "1"], (("model", "decoder", "rope"), 1), "model.decoder.rope: unknown field"),
    (["--prompt-ids", "1"], (("search", "top_p"), 1.5), "search.top_p: 1.5 is out of range [0, 1]"),
    (["--prompt-ids", "1"], (("search", "repetition_penalty"), 0), "search.repetition_penalty: 0 is out of range"),
    (["--prompt-ids", "1"], (("search", "num_beams"), 4), "search.num_beams: 4 is out of range [1, 1]: beam search"),
    (["--prompt-ids", "1"], (("search", "past_present_share_buffer"), False),
     "past_present_share_buffer is false: each past is as long as what its sequence holds"),
    (["--prompt-ids", "1"], (("model", "decoder", "inputs", "past_key_names"), "past.key"), "exactly one %d"),
    (["--prompt-ids", "1"], (("model", "decoder", "num_hidden_layers"), 3), "no \"past_key_values.2.key\""),
    (["--prompt-ids", "1"], (("model", "decoder", "num_key_value_heads"), 3), "must divide num_attention_heads"),
    (["--prompt", "hello"], None, "tokenizer.json: No such file"),
])
def test_bad_input(scatter_decoder, tmp_path, args, edit, message):
    d = tmp_path / "m"
    shutil.copytree(scatter_decoder, d)
    if edit:
        edit_config(d, *edit)
    p = dvm("generate", d / "model.dvmb", *args)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr, p.stderr


def test_sliding_window_config(scatter_decoder, tmp_path):
    """Mistral's builder config names a window that no layer uses: accepted;
    one that layers use is refused."""
    d = tmp_path / "m"
    shutil.copytree(scatter_decoder, d)
    window = {"window_size": 128, "slide_key_value_cache": False, "slide_inputs": False, "layers": [], "cache_slack": 0}
    edit_config(d, ("model", "decoder", "sliding_window"), window)
    assert dvm_ok("generate", d / "model.dvmb", "--prompt-ids", "1", "--max-length", 4).stdout.split()
    edit_config(d, ("model", "decoder", "sliding_window", "layers"), [0, 1])
    p = dvm("generate", d / "model.dvmb", "--prompt-ids", "1")
    assert p.returncode == 2 and "sliding_window.layers: must be an empty list: sliding-window attention" in p.stderr


def test_missing_external_data(tmp_path):
    llm.make(str(tmp_path), attention="scatter")
    os.remove(tmp_path / "model.onnx.data")
    p = dvm("generate", tmp_path, "--prompt-ids", "1")
    assert p.returncode == 2 and "model.onnx.data" in p.stderr, p.stderr
    assert not (tmp_path / "model.dvmb").exists()
