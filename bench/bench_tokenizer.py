#!/usr/bin/env python3
"""Encoding speed of dvm's tokenizer (dvm/tokenizer.h, through
tests/gen/tok_driver) against the `tokenizers` library, on ~100 KB of text
(the docs), with two 8000-token BPE tokenizers trained on the same text:
byte-level with Qwen2's Split pattern and NFC, and SentencePiece-style
(Prepend + Replace normalizer, no pre-tokenizer, byte fallback).

    python3 bench/bench_tokenizer.py [--driver build/tests/gen/tok_driver] [--runs 5]

dvm's time per encode is (time of 6 encodes - time of 1) / 5 in one
driver process each, so loading and process start cancel out; the library's
is one `Tokenizer.encode` call (one thread: it parallelizes batches only).
Runs alternate between the two; prints the medians.
"""
import argparse
import glob
import os
import subprocess
import tempfile
import time

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def bench_tokenizer(kind, corpus):
    if kind == "byte-level":
        t = Tokenizer(models.BPE())
        t.normalizer = normalizers.NFC()
        t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2), behavior="isolated"),
                                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        t.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
        t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never")  # words to train on
        alphabet = []
    trainer = trainers.BpeTrainer(vocab_size=8000, initial_alphabet=alphabet, special_tokens=["<unk>", "<s>"],
                                  show_progress=False)
    t.train_from_iterator(corpus.splitlines(), trainer)
    if kind != "byte-level":
        t.pre_tokenizer = None  # as Llama-2's: the text between added tokens is one word
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", default=os.path.join(ROOT, "build", "tests", "gen", "tok_driver"))
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    corpus = "".join(open(f).read() for f in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))))
    text = corpus[:100_000]
    line = ("E 0 " + text.encode().hex() + "\n").encode()
    with tempfile.TemporaryDirectory() as d:
        for kind in ("byte-level", "sentencepiece"):
            tok = bench_tokenizer(kind, corpus)
            path = os.path.join(d, "tokenizer.json")
            tok.save(path)
            ids = tok.encode(text, add_special_tokens=False).ids
            out = subprocess.run([a.driver, path], input=line, capture_output=True, check=True).stdout.decode()
            assert out.split() == [str(i) for i in ids], f"{kind}: dvm's ids differ"
            ours, ref = [], []
            for _ in range(a.runs):
                t0 = time.perf_counter()
                subprocess.run([a.driver, path], input=line, capture_output=True, check=True)
                one = time.perf_counter() - t0
                t0 = time.perf_counter()
                subprocess.run([a.driver, path], input=line * 6, capture_output=True, check=True)
                ours.append((time.perf_counter() - t0 - one) / 5)
                t0 = time.perf_counter()
                tok.encode(text, add_special_tokens=False)
                ref.append(time.perf_counter() - t0)
            med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
            print(f"{kind}: {len(text.encode())} bytes, {len(ids)} ids: dvm {med(ours) * 1e3:.1f} ms, "
                  f"tokenizers {med(ref) * 1e3:.1f} ms ({med(ref) / med(ours):.2f}x)")


if __name__ == "__main__":
    main()
