#!/usr/bin/env python3
"""Writes the seeds of the fuzz_tokenizer corpus (tests/fuzz/corpus/tokenizer/):
small tokenizer.json files the tokenizers library trains, one of each kind
dvm reads (byte-level BPE with a Split pattern, SentencePiece-style BPE with
byte fallback and a Metaspace pre-tokenizer), each followed by a NUL and a
text, as fuzz_tokenizer.c reads its input.

    python3 tests/fuzz/tokenizer_seeds.py [OUT_DIR]
"""
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = ["the cat sat on the mat, 42 times", "Привет мир", "日本語 😀 e\u0301"] * 4


def seed_tokenizer(kind):
    tok = Tokenizer(models.BPE(unk_token=None if kind == "bytelevel" else "<unk>", byte_fallback=kind != "bytelevel"))
    if kind == "bytelevel":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        alphabet = [chr(c) for c in range(0x21, 0x7F)]
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
        alphabet = []
    trainer = trainers.BpeTrainer(vocab_size=len(alphabet) + 40, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    j = json.loads(tok.to_str())
    if kind != "bytelevel":
        for b in range(0xC0, 0x100):  # a few byte tokens for the fallback
            j["model"]["vocab"][f"<0x{b:02X}>"] = len(j["model"]["vocab"])
    return json.dumps(j, ensure_ascii=False, separators=(",", ":")).encode()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "tokenizer")
    os.makedirs(out, exist_ok=True)
    for kind in ("bytelevel", "metaspace"):
        with open(os.path.join(out, f"seed_{kind}.bin"), "wb") as f:
            f.write(seed_tokenizer(kind) + b"\0" + "The cat, 日本 😀 <s> x\u0301 \U00010348".encode())


if __name__ == "__main__":
    main()
