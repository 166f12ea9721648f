"""Random-weight checkpoints of five decoder-LLM families, built from
configs with transformers (no hub), and ONNX Runtime GenAI's model builder's
output for each: the ONNX model folders LLMs are published in.

    python builder_models.py OUT [--size tiny|bench] [--families llama,...]
                                 [--precisions fp32,int4,fp16]

writes OUT/ckpt/<family> (the Hugging Face checkpoint with a small byte-level
BPE tokenizer) and OUT/<family>-<precision>/ (genai_config.json, model.onnx,
model.onnx.data, tokenizer files). Needs torch, transformers >= 5,
onnxruntime-genai, onnx_ir and tokenizers (bench/genai_env.sh makes such an
environment). A folder already built is kept."""
import argparse
import os
import subprocess
import sys

# tiny: 2 layers, small enough for tests; bench: about 250 M parameters.
SIZES = {
    "tiny": dict(hidden=128, layers=2, heads=4, kv_heads=2, inter=256, vocab=512, context=512),
    "bench": dict(hidden=1024, layers=16, heads=16, kv_heads=4, inter=2816, vocab=32000, context=2048),
}
FAMILIES = ["llama", "mistral", "phi3", "qwen2", "gemma"]


def config(family, s):
    import transformers as T
    common = dict(hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                  num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
                  intermediate_size=s["inter"], vocab_size=s["vocab"],
                  max_position_embeddings=s["context"], bos_token_id=1, eos_token_id=2,
                  tie_word_embeddings=False)
    if family == "llama":
        return T.LlamaConfig(**common)
    if family == "mistral":  # a sliding window shorter than the context: GQA's local window
        return T.MistralConfig(**common, sliding_window=s["context"] // 4)
    if family == "phi3":
        return T.Phi3Config(**common, pad_token_id=0,
                            original_max_position_embeddings=s["context"])
    if family == "qwen2":  # biases on Q, K, V; tied embeddings
        return T.Qwen2Config(**{**common, "tie_word_embeddings": True})
    if family == "gemma":  # GELU MLP, scaled embeddings, head_dim given
        return T.GemmaConfig(**{**common, "tie_word_embeddings": True},
                             head_dim=s["hidden"] // s["heads"])
    raise SystemExit(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")


def tokenizer(vocab):
    """A byte-level BPE tokenizer trained on this file's folder's text, with
    <unk>, <s>, </s> as ids 0, 1, 2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "..", "..")
    texts = []
    for d in ("docs", "compiler", "vm"):
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            texts += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith((".md", ".c"))]
    trainer = trainers.BpeTrainer(vocab_size=min(vocab, 4096), special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="</s>")


def checkpoint(family, size, out):
    if os.path.exists(os.path.join(out, "config.json")):
        return
    import torch
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    cfg = config(family, SIZES[size])
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():  # weights large enough that logits differ between tokens
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.08 if size == "tiny" else 0.02)
    model.save_pretrained(out)
    tokenizer(cfg.vocab_size).save_pretrained(out)


def build(ckpt, out, precision):
    if os.path.exists(os.path.join(out, "genai_config.json")):
        return
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", ckpt, "-o", out,
           "-p", precision, "-e", "cpu", "-c", out + ".cache"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(os.path.join(out, "genai_config.json")):
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
        raise SystemExit(f"builder failed for {ckpt} at {precision}")
    subprocess.run(["rm", "-rf", out + ".cache"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--precisions", default="fp32,int4,fp16")
    a = ap.parse_args()
    for fam in a.families.split(","):
        ckpt = os.path.join(a.out, "ckpt", fam)
        checkpoint(fam, a.size, ckpt)
        for prec in a.precisions.split(","):
            build(ckpt, os.path.join(a.out, f"{fam}-{prec}"), prec)
            print(f"builder_models: {fam}-{prec}", flush=True)


if __name__ == "__main__":
    main()
