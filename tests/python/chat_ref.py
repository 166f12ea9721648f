"""The references for dvm.genai's chat templates, run by the interpreter
that has onnxruntime_genai and transformers (build-data/genai-venv):
`python chat_ref.py JOB.json OUT.json`. JOB: {"folder", "cases": [{"template"
(or null: the folder's), "messages", "tools" (or null),
"add_generation_prompt"}]}. OUT: {"genai": [...], "transformers": [...]},
each case's prompt, or "error: MESSAGE"."""
import json
import os
import sys

import onnxruntime_genai as og
from transformers import PreTrainedTokenizerFast


def answer(fn):
    try:
        return fn()
    except Exception as e:  # each library raises its own kind
        return f"error: {e}"


def main(job_path: str, out: str) -> None:
    job = json.load(open(job_path))
    folder = job["folder"]
    tok = og.Tokenizer(og.Model(folder))
    cfg = json.load(open(os.path.join(folder, "tokenizer_config.json")))
    cfg.pop("tokenizer_class", None)
    hf = PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json"), **cfg)
    genai, transformers = [], []
    for c in job["cases"]:
        tools = json.dumps(c["tools"]) if c["tools"] else None
        genai.append(answer(lambda: tok.apply_chat_template(json.dumps(c["messages"]), template_str=c["template"],
                                                            tools=tools, add_generation_prompt=c["add_generation_prompt"])))
        transformers.append(answer(lambda: hf.apply_chat_template(
            c["messages"], chat_template=c["template"], tools=c["tools"], tokenize=False,
            add_generation_prompt=c["add_generation_prompt"])))
    json.dump({"genai": genai, "transformers": transformers}, open(out, "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
