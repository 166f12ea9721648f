"""dvm.genai against ONNX Runtime GenAI (which runs in another interpreter,
build-data/genai-venv, through genai_ref.py) on model folders written by
GenAI's model builder (build-data/genai/<arch>-<fp32|int4|fp16>) and on a decoder
of standard ops in the same form (tests/gen/llm.py) with a builder folder's
tokenizer."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dvm
import dvm.genai as og

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GENAI = os.path.join(ROOT, "build-data", "genai")
VENV_PY = os.path.join(ROOT, "build-data", "genai-venv", "bin", "python")
HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 128  # generated tokens per fp32 comparison
INT4_PROMPTS, INT4_STEPS = 20, 32  # random prompts per int4 folder, and tokens generated from each

if not os.path.isdir(GENAI) or not os.access(VENV_PY, os.X_OK):
    pytest.skip("no ONNX Runtime GenAI test models: build-data/genai and build-data/genai-venv are made by setup.sh",
                allow_module_level=True)
pytest.importorskip("tokenizers", reason="dvm.genai.Tokenizer needs the tokenizers package")

BUILDER = sorted(d for d in os.listdir(GENAI) if os.path.isfile(os.path.join(GENAI, d, "genai_config.json")))
INT4 = [d for d in BUILDER if d.endswith("-int4")]
F16 = [d for d in BUILDER if d.endswith("-fp16")]
F16_STEPS = 48  # tokens generated per fp16 folder
# GenAI's own interpreter runs the references: without the sanitizer that
# dvm's suite preloads (its C++ exceptions fail ASan's __cxa_throw hook).
REF_ENV = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def ort(tmp_path, job):
    """GenAI's result for job (genai_ref.py)."""
    jf, out = tmp_path / "job.json", str(tmp_path / "ref")
    jf.write_text(json.dumps(job))
    p = subprocess.run([VENV_PY, os.path.join(HERE, "genai_ref.py"), str(jf), out], capture_output=True, text=True,
                       timeout=600, env=REF_ENV)
    assert p.returncode == 0, p.stderr
    r = json.load(open(out + ".json"))
    r["logits"] = np.load(out + ".npy")
    return r


def genai_run(model, prompt, **search):
    """dvm.genai's sequence and the logits each token was chosen from, as genai_ref.py does."""
    params = og.GeneratorParams(model)
    params.set_search_options(**search)
    g = og.Generator(model, params)
    g.append_tokens(np.array(prompt, dtype=np.int32))
    logits = []
    while not g.is_done():
        g.generate_next_token()
        logits.append(g.get_logits()[0, -1])
    return g.get_sequence(0).tolist(), np.array(logits), g


_models = {}


def load(folder):
    """The folder's dvm.genai.Model, or a skip naming what dvm does not run."""
    if folder not in _models:
        try:
            _models[folder] = og.Model(folder)
        except dvm.Error as e:
            _models[folder] = e
    m = _models[folder]
    if isinstance(m, dvm.Error):
        pytest.skip(f"{os.path.basename(folder)}: dvm does not run it: {m}")
    return m


@pytest.fixture(scope="module")
def scatter_folder(tmp_path_factory):
    """A decoder of standard ops in the builder's form, llama-fp32's tokenizer."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "gen"))
    llm = pytest.importorskip("llm", reason="tests/gen/llm.py writes the standard-op decoder")
    d = tmp_path_factory.mktemp("scatter")
    llm.make(str(d), attention="scatter", vocab=512, eos=2, max_length=128, context=256)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(GENAI, "llama-fp32", f), d / f)
    return str(d)


def folders():
    return [pytest.param(os.path.join(GENAI, d), id=d) for d in BUILDER] + [pytest.param(None, id="scatter")]


@pytest.fixture(params=folders())
def folder(request, scatter_folder):
    return request.param or scatter_folder


@pytest.fixture(params=[p for p in folders() if not p.id.endswith(("-int4", "-fp16"))])
def fp32_folder(request, scatter_folder):
    return request.param or scatter_folder


PROMPT = "The first 4 digits of pi are"


def rel_err(a, b, eos):
    """Largest difference over the largest reference magnitude, EOS aside
    (GenAI shows it as -FLT_MAX below min_length)."""
    keep = np.ones(b.shape[-1], bool)
    keep[eos] = False
    return float(np.abs(a[..., keep] - b[..., keep]).max() / np.abs(b[..., keep]).max())


def test_greedy_matches_genai(tmp_path, fp32_folder):
    """fp32: the same tokens for STEPS steps and logits within 1e-4 at
    every step."""
    folder = fp32_folder
    model = load(folder)
    eos = model.config._json["model"]["eos_token_id"]
    n = len(og.Tokenizer(model).encode(PROMPT))
    search = {"max_length": n + STEPS, "min_length": n + STEPS}
    ref = ort(tmp_path, {"folder": folder, "texts": [PROMPT], "search": search})
    prompt = ref["encoded"][0]
    assert og.Tokenizer(model).encode(PROMPT).tolist() == prompt
    assert len(ref["tokens"]) == n + STEPS
    tokens, logits, _ = genai_run(model, prompt, **search)
    assert tokens == ref["tokens"]
    errs = [rel_err(a, b, eos) for a, b in zip(logits, ref["logits"])]
    assert len(errs) == STEPS and max(errs) <= 1e-4, errs


def test_whole_context_matches_genai(tmp_path, fp32_folder):
    """fp32, from a 3-token prompt to the model's context length: the same
    tokens and logits within 1e-4 at every step."""
    model = load(fp32_folder)
    cfg = model.config._json["model"]
    if "sliding_window" in cfg["decoder"]:  # the builder's Mistral, whose window no layer uses
        pytest.skip("ONNX Runtime GenAI 0.18 fails past a sliding window's length (present.0.key's shape "
                    "is not the one it computed): no reference")
    prompt, n = [5, 6, 7], cfg["context_length"]
    search = {"max_length": n, "min_length": n}
    ref = ort(tmp_path, {"folder": fp32_folder, "ids": prompt, "search": search})
    tokens, logits, _ = genai_run(model, prompt, **search)
    assert len(ref["tokens"]) == n and tokens == ref["tokens"]
    errs = [rel_err(a, b, cfg["eos_token_id"]) for a, b in zip(logits, ref["logits"])]
    assert len(errs) == n - len(prompt) and max(errs) <= 1e-4, max(errs)


@pytest.mark.parametrize("name", INT4 or [pytest.param("", marks=pytest.mark.skip(reason="no int4 builder folders"))])
def test_int4_greedy_choices_match_genai(tmp_path, name):
    """int4, over INT4_PROMPTS random prompts of 1 to 40 tokens: each
    step's greedy choice, given GenAI's sequence so far (dvm reads it token
    by token), is GenAI's on >= 95% of the steps; the logits' relative
    difference is printed."""
    folder = os.path.join(GENAI, name)
    model = load(folder)
    cfg = model.config._json["model"]
    rng = np.random.default_rng(28)
    prompts = [rng.integers(3, cfg["vocab_size"], rng.integers(1, 41)).tolist() for _ in range(INT4_PROMPTS)]
    ref = ort(tmp_path, {"folder": folder, "prompts": prompts, "steps": INT4_STEPS, "search": {}})
    same, errs = 0, []
    for prompt, seq, ref_logits in zip(prompts, ref["tokens"], ref["logits"]):
        assert len(seq) == len(prompt) + INT4_STEPS
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(seq))
        g = og.Generator(model, params)
        g.append_tokens(np.array(prompt, dtype=np.int32))
        for step, want in enumerate(seq[len(prompt):]):
            logits = g.get_logits()[0, -1]
            errs.append(rel_err(logits, ref_logits[step], cfg["eos_token_id"]))
            same += int(np.argmax(logits)) == want
            g.append_tokens(np.array([want], dtype=np.int32))
    total = INT4_PROMPTS * INT4_STEPS
    print(f"{name}: {same}/{total} greedy choices as GenAI's; logits' relative difference max {max(errs):.2e}, "
          f"median {np.median(errs):.2e}")
    assert same >= 0.95 * total


@pytest.mark.parametrize("name", F16 or [pytest.param("", marks=pytest.mark.skip(reason="no fp16 builder folders"))])
def test_f16_greedy_choices_match_onnxruntime(tmp_path, name):
    """fp16, whose graphs have no shared cache buffer (MultiHeadAttention
    concatenates past and new). ONNX Runtime GenAI cannot step these on the
    CPU (its planner trusts the builder's value_info, wrong after the first
    step), so the reference is onnxruntime on the same graph without its
    value_info, over dvm's whole sequence at once: the logits of every step
    within f16 rounding (both compute in f32 between f16 values, rounding
    at different places), and every greedy choice ONNX Runtime's most
    likely token or within one f16 step of it (a near-tie)."""
    import onnx
    import onnxruntime as ort
    folder = os.path.join(GENAI, name)
    model = load(folder)
    prompt = [5, 17, 99, 3, 250, 41, 7]
    seq, logits, _ = genai_run(model, prompt, max_length=len(prompt) + F16_STEPS, min_length=len(prompt) + F16_STEPS)
    assert len(seq) == len(prompt) + F16_STEPS
    g = onnx.load(os.path.join(folder, "model.onnx"))
    del g.graph.value_info[:]
    ref_path = str(tmp_path / "model.onnx")
    onnx.save(g, ref_path)
    s = ort.InferenceSession(ref_path, providers=["CPUExecutionProvider"])
    cfg = json.load(open(os.path.join(folder, "genai_config.json")))["model"]["decoder"]
    T = len(seq) - 1  # the last token was chosen, never fed
    feeds = {"input_ids": np.array([seq[:T]], np.int64), "attention_mask": np.ones((1, T), np.int64),
             "position_ids": np.arange(T)[None].astype(np.int64)}
    for i in s.get_inputs():
        if i.name.startswith("past_key_values"):
            feeds[i.name] = np.zeros((1, cfg["num_key_value_heads"], 0, cfg["head_size"]), np.float16)
    ref = s.run(["logits"], feeds)[0][0, len(prompt) - 1:].astype(np.float32)
    assert logits.shape == ref.shape
    scale = np.abs(ref).max()
    assert np.abs(logits - ref).max() / scale < 1e-2
    ulp = 2.0 ** (np.floor(np.log2(scale)) - 10)  # one f16 step at the logits' magnitude
    for k, t in enumerate(seq[len(prompt):]):
        assert ref[k].max() - ref[k, t] <= ulp, f"step {k}: token {t}, ONNX Runtime's {int(ref[k].argmax())}"


def test_batch_equals_each_alone(folder):
    model = load(folder)
    tok = og.Tokenizer(model)
    texts = ["The square root of 2 is", "a", "The first 6 numbers of the Fibonacci sequence are 1, 1, 2"]
    batch = tok.encode_batch(texts)
    assert batch.shape()[0] == 3 and len({len(tok.encode(t)) for t in texts}) == 3
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=48, batch_size=3)
    g = og.Generator(model, params)
    g.append_tokens(batch)
    logits = []
    while not g.is_done():
        g.generate_next_token()
        logits.append(g.get_logits()[:, 0])
    for b, t in enumerate(texts):
        tokens, alone, _ = genai_run(model, tok.encode(t), max_length=48)
        assert g.get_sequence(b).tolist() == tokens
        together = np.array([step[b] for step in logits[:len(alone)]])
        np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-5)


def test_sampling_with_a_seed_is_reproducible(scatter_folder):
    model = load(scatter_folder)
    opts = dict(max_length=60, min_length=60, do_sample=True, top_k=20, top_p=0.9, temperature=0.8)
    a = genai_run(model, [5, 6, 7], random_seed=7, **opts)[0]
    b = genai_run(model, [5, 6, 7], random_seed=7, **opts)[0]
    c = genai_run(model, [5, 6, 7], random_seed=8, **opts)[0]
    greedy = genai_run(model, [5, 6, 7], max_length=60, min_length=60)[0]
    assert a == b and a != c and a != greedy


def test_tokenizer_matches_genai(tmp_path, scatter_folder):
    folder = scatter_folder  # llama-fp32's tokenizer.json
    texts = [PROMPT, "", "a", "  two  spaces\nand a newline", "ünïcödé 你好 🙂", "</s> special <s>"]
    ref = ort(tmp_path, {"folder": folder, "texts": texts, "ids": [1], "search": {"max_length": 2},
                         "decode": [[1] + list(range(40, 60)) + [2]]})
    model = load(folder)
    tok = og.Tokenizer(model)
    for t, ids in zip(texts, ref["encoded"], strict=True):
        assert tok.encode(t).tolist() == ids, t
        text = tok.decode(ids)
        assert text == t if "<" not in t else "special" in text and "<" not in text  # special tokens left out
    assert tok.decode([1] + list(range(40, 60)) + [2]) == ref["decoded"][0]
    stream = tok.create_stream()
    ids = tok.encode(texts[4])
    pieces = [stream.decode(i) for i in ids]
    assert "".join(pieces) == texts[4] and "" in pieces  # multi-byte characters wait for their last byte
    batch = tok.encode_batch(texts[:3]).as_numpy()
    assert batch.dtype == np.int32 and batch.shape == (3, len(ref["encoded"][0]))
    assert (batch[1] == tok.pad_token_id).all() and batch[0].tolist() == ref["encoded"][0]
    assert tok.eos_token_ids == [2] and tok.to_token_id("</s>") == 2


def genai_example(tmp_path, script, args, python=None):
    """One of ONNX Runtime GenAI's example scripts (tests/python/genai_examples)
    run with its common.py: by `python` unchanged, or by this interpreter
    with `import dvm.genai as og` for `import onnxruntime_genai as og` and
    nothing else changed. The finished process."""
    d = tmp_path / ("genai" if python else "dvm")
    d.mkdir()
    for f in (script, "common.py"):
        src = open(os.path.join(HERE, "genai_examples", f)).read()
        assert "import onnxruntime_genai as og\n" in src
        (d / f).write_text(src if python else src.replace("import onnxruntime_genai as og\n", "import dvm.genai as og\n"))
    env = dict(REF_ENV if python else os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(dvm.__file__)))  # this dvm
    p = subprocess.run([python or sys.executable, str(d / script), *args], capture_output=True, text=True,
                       timeout=600, cwd=d, env=env)
    assert p.returncode == 0, p.stderr
    return p


def test_example_script_runs_with_the_import_changed(tmp_path, scatter_folder):
    """ONNX Runtime GenAI's examples/python/model-generate.py (and its
    common.py), with `import dvm.genai as og` for `import
    onnxruntime_genai as og` and nothing else changed."""
    p = genai_example(tmp_path, "model-generate.py", ["-m", scatter_folder, "-e", "cpu", "--non_interactive",
                                                      "-l", "30"])
    model = load(scatter_folder)
    tok = og.Tokenizer(model)
    prompts = ["The first 4 digits of pi are", "The square root of 2 is",
               "The first 6 numbers of the Fibonacci sequence are"]
    total = 0
    for i, text in enumerate(prompts):
        tokens = genai_run(model, tok.encode(text), max_length=30)[0]
        total += len(tokens)
        assert f"Prompt #{i}: {text}\n\n{tok.decode(tokens)}\n" in p.stdout
    assert f"Tokens: {total}," in p.stdout


def test_threads_from_the_config_overlay(scatter_folder):
    cfg = og.Config(scatter_folder)
    cfg.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": 1}}}}))
    one = og.Model(cfg)
    assert one._threads == 1 and load(scatter_folder)._threads == 0
    assert genai_run(one, [5, 6], max_length=20)[0] == genai_run(load(scatter_folder), [5, 6], max_length=20)[0]
    cfg.overlay('{"model": {"decoder": {"session_options": {"intra_op_num_threads": -2}}}}')
    with pytest.raises(dvm.Error, match="intra_op_num_threads: expected a count"):
        og.Model(cfg)
    cfg = og.Config(scatter_folder)
    cfg.overlay('{"search": {"max_length": 12}}')
    assert len(genai_run(og.Model(cfg), [5, 6])[0]) == 12


def test_eos_ends_a_sequence(scatter_folder):
    """An EOS ends the sequence without joining it; get_next_tokens shows it."""
    model = load(scatter_folder)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=100, repetition_penalty=0.01)  # favours what was seen: the EOS
    g = og.Generator(model, params)
    g.append_tokens(np.array([2, 2, 2, 5], dtype=np.int32))
    while not g.is_done():
        g.generate_next_token()
    seq = g.get_sequence(0).tolist()
    assert len(seq) < 100 and g.get_next_tokens().tolist() == [2] and seq[4:].count(2) == 0


def edit(folder, tmp_path, path, value=None, remove=None):
    """A copy of folder with one change."""
    d = tmp_path / "m"
    shutil.copytree(folder, d)
    if remove:
        os.remove(d / remove)
    if path:
        cfg = json.load(open(d / "genai_config.json"))
        node = cfg
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        json.dump(cfg, open(d / "genai_config.json", "w"))
    return str(d)


def test_bad_input(scatter_folder, tmp_path):
    model = load(scatter_folder)
    params = og.GeneratorParams(model)
    with pytest.raises(dvm.Error, match='Unknown value "max_lenght"'):
        params.set_search_options(max_lenght=10)
    with pytest.raises(dvm.Error, match="Unknown search option type, can be float/bool/int: top_k"):
        params.set_search_options(top_k="5")
    with pytest.raises(dvm.Error, match="search.num_beams: 4 is out of range .*beam search is not supported"):
        params.set_search_options(num_beams=4)
    with pytest.raises(dvm.Error, match="search.top_p: 1.5 is out of range"):
        params.set_search_options(top_p=1.5)
    with pytest.raises(dvm.Error, match="chunk_size 16 .* is not supported"):
        params.set_search_options(chunk_size=16)
    with pytest.raises(dvm.Error, match="search.max_length: exceeds model.context_length"):
        params.set_search_options(max_length=257)
    params.set_search_options(max_length=10)
    assert params.get_search_options()["max_length"] == 10  # the refused ones changed nothing
    g = og.Generator(model, params)
    with pytest.raises(dvm.InvalidInput, match="0 \\+ 11 tokens exceed max_length 10"):
        g.append_tokens(np.arange(1, 12, dtype=np.int32))
    with pytest.raises(dvm.InvalidInput, match="token 1 \\(512\\) is outside the vocabulary \\(0 to 511\\)"):
        g.append_tokens(np.array([5, 512], dtype=np.int32))
    with pytest.raises(dvm.InvalidInput, match="token -1 is outside the vocabulary \\(0 to 511\\)"):
        g.append_tokens([-1])
    with pytest.raises(dvm.InvalidInput, match="token 4294967301 is outside the vocabulary"):
        g.append_tokens(np.array([2**32 + 5], dtype=np.int64))  # not wrapped to 5
    with pytest.raises(TypeError, match="Cannot cast"):
        g._g.append([np.array([2**32 + 5])])
    with pytest.raises(dvm.InvalidInput, match="expected integer token ids, got float64"):
        g.append_tokens([1.5])
    with pytest.raises(dvm.InvalidInput, match="expected \\[1, n\\] tokens, got shape \\[2, 1\\]"):
        g.append_tokens([[1], [2]])
    with pytest.raises(dvm.Error, match="no tokens yet"):
        g.get_logits()
    with pytest.raises(IndexError, match="sequence 1 out of range: the batch has 1"):
        g.get_sequence(1)
    with pytest.raises(dvm.Error, match="get_output.* is not supported"):
        g.get_output("logits")
    with pytest.raises(dvm.Error, match="Error opening .*nowhere/genai_config.json"):
        og.Model(str(tmp_path / "nowhere"))
    with pytest.raises(dvm.Error, match="provider 'cuda' .* is not supported"):
        og.Config(scatter_folder).append_provider("cuda")


@pytest.mark.parametrize("path,value,remove,message", [
    (None, None, "model.onnx", "model.onnx: model.decoder.filename names no file"),
    (None, None, "tokenizer.json", "tokenizer.json: no such file"),
    (("model", "decoder", "head_size"), None, None, "model.decoder.head_size: must be an integer"),
    (("model", "decoder", "flux_capacitor"), 8, None, "model.decoder.flux_capacitor: unknown field"),
    (("model", "decoder", "num_hidden_layers"), 3, None, "no \"past_key_values.2.key\""),
])
def test_bad_folder(scatter_folder, tmp_path, path, value, remove, message):
    d = edit(scatter_folder, tmp_path, path, value, remove)
    with pytest.raises(dvm.Error, match=message):
        m = og.Model(d)
        og.Generator(m, og.GeneratorParams(m))
        og.Tokenizer(m)


def test_tokenizer_package_missing(scatter_folder, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(dvm.Error, match="needs the tokenizers package: pip install tokenizers"):
        og.Tokenizer(load(scatter_folder))


CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
          "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
# the forms the families' published templates take, written with explicit whitespace control
CHAT_FORMS = {
    "header": ("{{- bos_token }}{%- for m in messages %}{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n'"
               " + m['content'] | trim + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}"
               "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"),
    "tagged": ("{% for m in messages %}{% if m['role'] == 'system' and m['content'] %}{{ '<|system|>\\n' + m['content']"
               " + '<|end|>\\n' }}{% elif m['role'] == 'user' %}{{ '<|user|>\\n' + m['content'] + '<|end|>\\n' }}"
               "{% elif m['role'] == 'assistant' %}{{ '<|assistant|>\\n' + m['content'] + '<|end|>\\n' }}{% endif %}"
               "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"),
    "inst": ("{{ bos_token }}{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
             "{{ raise_exception('roles must alternate user/assistant') }}{% endif %}{% if m['role'] == 'user' %}"
             "{{ '[INST] ' + m['content'] + ' [/INST]' }}{% else %}{{ m['content'] + eos_token }}{% endif %}{% endfor %}"),
    "tools": ("{%- if tools %}{{- 'Tools: ' + tools | tojson + '\\n' }}{%- endif %}{%- for m in messages %}"
              "{%- if m.role == 'system' %}{% continue %}{% endif %}{{- m.role + ': ' + m.content + '\\n' }}{%- endfor %}"),
    # whitespace from the block tags' own lines: transformers' trim_blocks and lstrip_blocks decide it
    "lines": "{% for m in messages %}\n  {% if m.role == 'user' %}\n{{ m.content }}\n  {% endif %}\n{% endfor %}\n",
}
CHAT_TURNS = [{"role": "system", "content": "Réponds brièvement."}, {"role": "user", "content": " What is 2+2? "},
              {"role": "assistant", "content": "4 — four."}, {"role": "user", "content": "And 3+3? 日本"}]
CHAT_TOOLS = [{"type": "function", "function": {"name": "météo", "parameters": {"city": {"type": "string"}}}}]


def chat_cases():
    """(name, template or None (the folder's), messages, tools, add_generation_prompt)."""
    user = CHAT_TURNS[1:]
    return [("folder", None, CHAT_TURNS, None, True), ("folder-nogen", None, user[:1], None, False),
            ("header", CHAT_FORMS["header"], CHAT_TURNS, None, True), ("tagged", CHAT_FORMS["tagged"], CHAT_TURNS,
                                                                       None, False),
            ("inst", CHAT_FORMS["inst"], user, None, True), ("inst-bad", CHAT_FORMS["inst"], CHAT_TURNS, None, True),
            ("tools", CHAT_FORMS["tools"], CHAT_TURNS, CHAT_TOOLS, True), ("lines", CHAT_FORMS["lines"], user, None, True)]


@pytest.fixture(scope="module")
def chat_folder(scatter_folder, tmp_path_factory):
    """The scatter folder with CHATML as its tokenizer_config.json's chat_template."""
    d = tmp_path_factory.mktemp("chat") / "m"
    shutil.copytree(scatter_folder, d, ignore=shutil.ignore_patterns("*.dvmb"))
    cfg = json.load(open(d / "tokenizer_config.json"))
    cfg["chat_template"] = CHATML
    json.dump(cfg, open(d / "tokenizer_config.json", "w"))
    return str(d)


def test_chat_template_renders_as_transformers_and_genai(tmp_path, chat_folder):
    """Every case as transformers renders it (the definition of a chat
    template); ONNX Runtime GenAI agrees on all but "lines", whose
    whitespace comes from block tags on their own lines (GenAI keeps it)."""
    cases = chat_cases()
    job = {"folder": chat_folder, "cases": [{"template": t, "messages": m, "tools": tl, "add_generation_prompt": g}
                                            for _, t, m, tl, g in cases]}
    (tmp_path / "job.json").write_text(json.dumps(job))
    p = subprocess.run([VENV_PY, os.path.join(HERE, "chat_ref.py"), str(tmp_path / "job.json"),
                        str(tmp_path / "ref.json")], capture_output=True, text=True, timeout=300, env=REF_ENV)
    assert p.returncode == 0, p.stderr
    ref = json.load(open(tmp_path / "ref.json"))
    tok = og.Tokenizer(load(chat_folder))
    for i, (name, template, messages, tools, gen) in enumerate(cases):
        try:
            got = tok.apply_chat_template(json.dumps(messages), template_str=template,
                                          tools=json.dumps(tools) if tools else None, add_generation_prompt=gen)
        except dvm.Error as e:
            got = f"error: {e}"
        want = ref["transformers"][i]
        if want.startswith("error: "):
            assert got.startswith("error: ") and "roles must alternate" in got and "roles must alternate" in want, name
            continue
        assert got == want, (name, got, want)
        if name != "lines":
            assert got == ref["genai"][i], (name, got, ref["genai"][i])
    assert tok.apply_chat_template(CHAT_TURNS) == tok.apply_chat_template(json.dumps(CHAT_TURNS))  # the list itself


@pytest.mark.parametrize("kwargs, message", [
    ({"messages": "[{"}, "messages is not JSON"),
    ({"messages": '{"role": "user"}'}, "a JSON list of objects"),
    ({"messages": "[]", "tools": "not json"}, "tools is not JSON"),
    ({"messages": "[]", "template_str": "{% for %}"}, "chat template, line 1"),
    ({"messages": "[]", "template_str": "{{ ''.__class__.__mro__ }}"}, "unsafe"),
    ({"messages": "[]", "folder": "scatter"}, "no chat template"),
])
def test_chat_template_bad_input(chat_folder, scatter_folder, kwargs, message):
    tok = og.Tokenizer(load(scatter_folder if kwargs.pop("folder", None) else chat_folder))
    with pytest.raises(dvm.Error, match=message):
        tok.apply_chat_template(**kwargs)


def test_chat_example_prints_what_genai_prints(tmp_path, chat_folder):
    """ONNX Runtime GenAI's examples/python/model-qa.py, one turn through the
    folder's chat template, greedy: with the import changed it prints what
    it prints with GenAI up to the answer (the prompt, with -v), and the
    answer is the text of GenAI's tokens for that prompt. (GenAI's own
    stream leaves text out after bytes that end no character, which random
    weights make; dvm's pieces make the whole decoded text.)"""
    args = ["-m", chat_folder, "-e", "cpu", "--non_interactive", "-v", "-l", "120", "-sp", "Réponds brièvement.",
            "-up", "What color is the sky?"]
    ours, theirs = genai_example(tmp_path, "model-qa.py", args), genai_example(tmp_path, "model-qa.py", args, VENV_PY)
    head, answer = ours.stdout.split("\nOutput: ")
    assert head == theirs.stdout.split("\nOutput: ")[0]
    prompt = head.split("Prompt: ", 1)[1].split("\nRunning generation loop")[0]
    assert prompt.startswith("<|im_start|>system\nRéponds brièvement.<|im_end|>\n<|im_start|>user\nWhat color")
    ref = ort(tmp_path, {"folder": chat_folder, "texts": [prompt], "search": {"max_length": 120}})
    tok = og.Tokenizer(load(chat_folder))
    # (a last token that ends no character stays in the stream)
    assert answer.split("\n\n")[0] == tok.decode(ref["tokens"][len(ref["encoded"][0]):]).rstrip("\ufffd")
