"""The tokenizer (dvm/tokenizer.h) against the Hugging Face `tokenizers`
library: BPE tokenizers of the kinds LLM folders carry, trained here on a
little text, compared on random strings (encode with and without special
tokens, decode with and without them, streaming decode); the builder's
folders when setup made them; and `dvm generate --prompt`."""
import json
import os
import random
import subprocess

import pytest

import llm
from dvmtest.cli import assert_no_sanitizer_report, dvm, dvm_ok

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402
from tokenizers.decoders import DecodeStream  # noqa: E402

DRIVER = os.environ.get("TOK_DRIVER", "tok_driver")
GENAI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build-data", "genai")
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
SPECIALS = ["<|endoftext|>", "<s>", "</s>", "<unk>"]

CORPUS = """The quick brown fox jumps over the lazy dog. It's 2026, and we're testing BPE tokenizers!
Numbers: 3.14159, 42, 1000000; code: def f(x): return x**2  # comment
Привет, мир! Как дела? Юникод и кириллица.
你好，世界。这是一个测试。日本語のテキストも少し。
مرحبا بالعالم. नमस्ते दुनिया। café naïve résumé
Emoji: 😀 👍🏽 👨‍👩‍👧 🇫🇷 and tabs\tand   runs of   spaces
""".splitlines() * 20

PIECES = ["a", "b", "the", "The", " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", "x", "fox", "dog", "'s", "'LL", "we're",
          "0", "7", "42", "3.14", "123456", "!", "?", ".", ",", "**", "#", "(", ")", "Привет", "мир", "ё",
          "你好", "世界", "語", "مرحبا", "नमस्ते", "e\u0301", "n\u0303", "\u0301", "café", "😀", "👍🏽",
          "👨\u200d👩\u200d👧", "🇫🇷", "\u00a0", "\u0085", "\u3000", "\u2028", "▁", "▁▁", "<0x41>", "ǅ", "ﬁ",
          "Ａ", "①", "<s>", "</s>", "<|endoftext|>", "<|end|>", " <|end|> ", "<|end", "<s", "<unk>", "[X]", "\x00", "\x7f", "\U0010ffff"]


def tok_random_texts(seed, count=250):
    rng = random.Random(seed)
    texts = ["", " ", "  ", "\n", "a", "<s>", " <s> ", "<s><s>", "hello</s>world", "▁hello", "<|endoftext|>x"]
    for _ in range(count):
        texts.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 24))))
    return texts


def tok_train(tok, vocab_size, alphabet=(), limit_alphabet=None, specials=SPECIALS):
    limit = {} if limit_alphabet is None else {"limit_alphabet": limit_alphabet}
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials), initial_alphabet=list(alphabet),
                                  show_progress=False, **limit)
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def tok_with_bytes(tok, **bpe):
    """tok's model again with the 256 <0xXX> tokens added to its vocabulary (SentencePiece's byte fallback)."""
    m = json.loads(tok.to_str())["model"]
    vocab = m["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    merges = [tuple(x) if isinstance(x, list) else tuple(x.split(" ", 1)) for x in m["merges"]]
    new = Tokenizer(models.BPE(vocab=vocab, merges=merges, **bpe))
    new.normalizer, new.pre_tokenizer, new.decoder = tok.normalizer, tok.pre_tokenizer, tok.decoder
    new.post_processor = tok.post_processor
    new.add_special_tokens(SPECIALS)
    return new


def qwen2():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok_train(tok, 700, alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.add_tokens(["[X]", tokenizers.AddedToken("fox", single_word=True, normalized=True)])
    return tok


def gpt2():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok_train(tok, 650, alphabet=pre_tokenizers.ByteLevel.alphabet(), specials=["<|endoftext|>", "<s>", "</s>"])
    tok.add_special_tokens([tokenizers.AddedToken("<|end|>", lstrip=True, rstrip=True)])
    return tok


def llama2():
    """Prepend + Replace normalizer, no pre-tokenizer, byte fallback (Llama-2 and Phi-3 as converted)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never", split=False)
    tok_train(tok, 500, limit_alphabet=90)
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok_with_bytes(tok, unk_token="<unk>", byte_fallback=True, fuse_unk=True)


def mistral():
    """Metaspace pre-tokenizer (prepend_scheme first, no split) and decoder, byte fallback."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
    tok_train(tok, 500, limit_alphabet=90)
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(prepend_scheme="first")])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    new = tok_with_bytes(tok, unk_token="<unk>", byte_fallback=True)
    new.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=True)
    return new


def gemma():
    """Replace normalizer only, no unk_token (unknown characters without byte tokens are dropped)."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok_train(tok, 520, limit_alphabet=100)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    new = tok_with_bytes(tok, byte_fallback=True, ignore_merges=True)
    new.add_tokens([tokenizers.AddedToken("<b>", normalized=False)])
    return new


def mixed():
    """The other split behaviours, Digits, NFKD and a Replace by pattern, unk_token without byte fallback."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.Replace(Regex(r"\s+"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Split(Regex("[,.!?]"), behavior="merged_with_previous"),
        pre_tokenizers.Split(" ", behavior="removed"),
        pre_tokenizers.Split(Regex(r"\p{Lu}"), behavior="contiguous", invert=True),
        pre_tokenizers.Digits(individual_digits=True)])
    tok.decoder = decoders.Sequence([decoders.Fuse(), decoders.Strip("a", 2, 0)])  # a stop > 0 panics tokenizers on an empty text
    tok_train(tok, 500, limit_alphabet=70)
    return tok


KINDS = {"qwen2": qwen2, "gpt2": gpt2, "llama2": llama2, "mistral": mistral, "gemma": gemma, "mixed": mixed}


@pytest.fixture(scope="module", params=sorted(KINDS))
def trained(request, tmp_path_factory):
    tok = KINDS[request.param]()
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    tok.save(str(path))
    return request.param, tok, path


def tok_run(path, lines):
    """tok_driver's answers to request lines."""
    p = subprocess.run([DRIVER, str(path)], input="".join(line + "\n" for line in lines), capture_output=True,
                       text=True, timeout=120)
    assert_no_sanitizer_report(p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout.splitlines()
    assert len(out) == len(lines), p.stdout
    return out


def tok_load_error(path):
    p = subprocess.run([DRIVER, str(path)], input="", capture_output=True, text=True, timeout=60)
    assert_no_sanitizer_report(p.stderr)
    assert p.returncode == 1 and p.stdout.startswith("ERR "), p.stdout + p.stderr
    return p.stdout[4:].strip()


def tok_ids(line):
    assert not line.startswith("ERR"), line
    return [int(x) for x in line.split()]


def tok_check(tok, path, texts, seed):
    """dvm's encode, decode and stream equal the library's on texts, and decode of random ids."""
    reqs, want = [], []
    encoded = []
    for text in texts:
        for special in (1, 0):
            ids = tok.encode(text, add_special_tokens=bool(special)).ids
            reqs.append(f"E {special} {text.encode().hex()}")
            want.append(("encode", text, special, " ".join(map(str, ids))))
            encoded.append(ids)
    rng = random.Random(seed)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    scattered = [[rng.randrange(vocab + 3) for _ in range(rng.randint(0, 12))] for _ in range(200)]
    for ids in encoded + scattered:
        for skip in (1, 0):
            reqs.append(f"D {skip} {','.join(map(str, ids))}")
            want.append(("decode", ids, skip, tok.decode(ids, skip_special_tokens=bool(skip)).encode().hex()))
    for ids in encoded[::2] + scattered[:80]:
        stream = DecodeStream(skip_special_tokens=True)
        try:
            steps = [stream.step(tok, i) or "" for i in ids]
        except Exception:  # it refuses ids whose text changes what came before
            continue
        reqs.append(f"S 1 {','.join(map(str, ids))}")
        full = tok.decode(ids)
        if "".join(steps) == full:  # then dvm's pieces and the rest the stream's finish gives join into the decode
            want.append(("stream", ids, 1, full.encode().hex()))
        else:  # each id's piece is the library's DecodeStream's (a decoder such as Strip reads each chunk alone)
            want.append(("steps", ids, 1, "/".join(x.encode().hex() for x in steps)))
    got = tok_run(path, reqs)
    bad = []
    for (kind, what, flag, expect), line in zip(want, got):
        if kind in ("stream", "steps"):
            pieces = [bytes.fromhex(x).decode() for x in line.split("/")]  # each piece is whole UTF-8
            line = "".join(pieces).encode().hex() if kind == "stream" else line[:line.rfind("/")]
        if line != expect:
            bad.append(f"{kind} {what!r} flag {flag}: dvm {line!r}, tokenizers {expect!r}")
    assert not bad, f"{len(bad)} of {len(want)} differ:\n" + "\n".join(bad[:10])


def test_matches_tokenizers(trained):
    name, tok, path = trained
    tok_check(tok, path, tok_random_texts(sorted(KINDS).index(name)), seed=1)


def test_merges_as_pairs(trained, tmp_path):
    """transformers 5 writes each merge as [a, b]: the same tokenizer."""
    name, tok, path = trained
    j = json.load(open(path))
    j["model"]["merges"] = [m.split(" ", 1) if isinstance(m, str) else m for m in j["model"]["merges"]]
    (tmp_path / "tokenizer.json").write_text(json.dumps(j))
    tok_check(tok, tmp_path / "tokenizer.json", tok_random_texts(7, 60), seed=2)


BUILDER = sorted(d for d in os.listdir(GENAI) if os.path.isfile(os.path.join(GENAI, d, "tokenizer.json"))) \
    if os.path.isdir(GENAI) else []


@pytest.mark.skipif(not BUILDER, reason="no builder model folders (setup.sh makes build-data/genai)")
@pytest.mark.parametrize("name", BUILDER)
def test_builder_folder(name):
    folder = os.path.join(GENAI, name)
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok_check(tok, folder, tok_random_texts(3, 150), seed=3)


def test_token_id(trained):
    _, tok, path = trained
    names = ["<s>", "</s>", "<|endoftext|>", "[X]", "e", "nothing-like-this", ""] + list(tok.get_vocab())[::37]
    got = tok_run(path, ["T 0 " + n.encode().hex() for n in names])
    want = [str(tok.token_to_id(n) if tok.token_to_id(n) is not None else -1) for n in names]
    assert got == want


def test_invalid_utf8_is_refused(trained):
    _, _, path = trained
    out = tok_run(path, ["E 1 " + b"ab\xffcd".hex(), "E 0 " + b"\xe4\xbd".hex(), "E 0 " + b"\xed\xa0\x80".hex()])
    assert out[0] == "ERR text: byte 2 (0xFF) is not valid UTF-8"
    assert out[1] == "ERR text: byte 0 (0xE4) is not valid UTF-8"
    assert out[2].startswith("ERR text: byte 0 (0xED)")  # a surrogate, which Python's str cannot encode either


def tok_edit(path, tmp_path, edit):
    j = json.load(open(path))
    edit(j)
    out = tmp_path / "tokenizer.json"
    out.write_text(json.dumps(j))
    return out


@pytest.mark.parametrize("edit,message", [
    (lambda j: j["model"].update(type="WordPiece"), 'model: type "WordPiece" is not supported'),
    (lambda j: j["model"].update(merges=j["model"]["merges"] + ["zzqq xxyy"]), 'is not in the vocabulary'),
    (lambda j: j["model"].pop("vocab"), "model.vocab: must be an object"),
    (lambda j: j["model"].update(dropout=0.1), "dropout is not supported"),
    (lambda j: j["model"]["merges"].__setitem__(0, "nospace"), 'model.merges: [0] "nospace" is not two tokens'),
    (lambda j: j.update(pre_tokenizer={"type": "Whitespace"}), 'pre_tokenizer: pre-tokenizer type "Whitespace" is not supported'),
    (lambda j: j.update(normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}),
     'normalizer.normalizers[1]: normalizer type "Lowercase" is not supported'),
    (lambda j: j.update(decoder={"type": "WordPiece", "prefix": "##"}), 'decoder: decoder type "WordPiece" is not supported'),
    (lambda j: j.update(post_processor={"type": "Nope"}), 'post-processor type "Nope" is not supported'),
    (lambda j: j.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated",
                                       "invert": False}), 'pattern "(unclosed" at'),
    (lambda j: j.update(truncation={"max_length": 8}), "truncation: is not supported"),
])
def test_bad_tokenizer_json(trained, tmp_path, edit, message):
    _, _, path = trained
    err = tok_load_error(tok_edit(path, tmp_path, edit))
    assert str(tmp_path / "tokenizer.json") in err and message in err, err


def test_corrupt_or_missing_file(trained, tmp_path):
    _, _, path = trained
    text = open(path).read()
    (tmp_path / "tokenizer.json").write_text(text[:len(text) // 2])
    assert "line" in tok_load_error(tmp_path / "tokenizer.json")
    assert "No such file" in tok_load_error(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    assert str(tmp_path / "empty" / "tokenizer.json") + ": No such file" in tok_load_error(tmp_path / "empty")


def test_generate_prompt_text(tmp_path):
    """dvm generate --prompt: the tokens --prompt-ids gives for the ids tokenizers makes, as text."""
    tok = gpt2()
    llm.make(str(tmp_path), attention="scatter", vocab=tok.get_vocab_size(), max_length=40, search={"min_length": 256})
    tok.save(str(tmp_path / "tokenizer.json"))
    prompts = ["The quick brown fox", "Привет, 😀 мир"]
    ids = [tok.encode(p).ids for p in prompts]
    by_ids = dvm_ok("generate", tmp_path, "--prompt-ids", ",".join(map(str, ids[0]))).stdout.split()
    text = dvm_ok("generate", tmp_path, "--prompt", prompts[0]).stdout
    assert text == tok.decode([int(x) for x in by_ids]) + "\n"
    batch = dvm_ok("generate", tmp_path, "--prompt", prompts[0], "--prompt", prompts[1]).stdout
    new1 = dvm_ok("generate", tmp_path, "--prompt-ids", ",".join(map(str, ids[1]))).stdout.split()
    assert sorted(batch.splitlines()) == sorted([f"0: {text.strip()}", f"1: {tok.decode([int(x) for x in new1])}"])


def test_generate_prompt_errors(tmp_path):
    """(A folder without tokenizer.json: test_generate.py's test_bad_input.)"""
    llm.make(str(tmp_path), attention="scatter", max_length=16)
    (tmp_path / "tokenizer.json").write_text('{"model": {"type": "Unigram", "vocab": []}}')
    p = dvm("generate", tmp_path, "--prompt", "hello")
    assert p.returncode == 2 and 'model: type "Unigram" is not supported' in p.stderr, p.stderr
    assert not (tmp_path / "model.dvmb").exists()  # refused before compiling
    p = dvm("generate", tmp_path, "--prompt", "hello", "--prompt-ids", "1")
    assert p.returncode == 2 and "not both" in p.stderr, p.stderr
