"""ONNX Runtime GenAI's side of test_genai.py, run by the interpreter that has
onnxruntime_genai (build-data/genai-venv): `python genai_ref.py JOB.json OUT`.

JOB: {"folder", "texts" (encoded with GenAI's tokenizer) or "ids" (one
prompt) or "prompts" (several, each run alone), "search"
(set_search_options)}. Greedy or sampled from one prompt, it writes
OUT.json {"encoded": [[ids] per text], "tokens": the sequence, "decoded":
texts of "decode" ids} and OUT.npy, the logits [steps, vocab] each token
was chosen from: the last row of get_output("logits") after each
generate_next_token (calling get_logits there keeps GenAI's is_done false
at max_length). With "prompts" and "steps" (each prompt's max_length and
min_length its length + steps), "tokens" is a list of sequences and
OUT.npy [prompts, steps, vocab]."""
import json
import sys

import numpy as np
import onnxruntime_genai as og


def generate(model, prompt, search):
    params = og.GeneratorParams(model)
    params.set_search_options(**search)
    g = og.Generator(model, params)
    g.append_tokens(np.array(prompt, dtype=np.int32))
    logits = []
    while not g.is_done():
        g.generate_next_token()
        logits.append(np.array(g.get_output("logits"))[0, -1])
    return g.get_sequence(0).tolist(), np.array(logits, dtype=np.float32)


def main(job_path: str, out: str) -> None:
    job = json.load(open(job_path))
    model = og.Model(job["folder"])
    tok = og.Tokenizer(model)
    encoded = [tok.encode(t).tolist() for t in job.get("texts", [])]
    if "prompts" in job:
        n = job["steps"]
        runs = [generate(model, p, {**job["search"], "max_length": len(p) + n, "min_length": len(p) + n})
                for p in job["prompts"]]
        tokens, logits = [r[0] for r in runs], np.stack([r[1] for r in runs])
    else:
        tokens, logits = generate(model, job["ids"] if "ids" in job else encoded[0], job["search"])
    np.save(out + ".npy", logits)
    decoded = [tok.decode(np.array(ids, dtype=np.int32)) for ids in job.get("decode", [])]
    json.dump({"encoded": encoded, "tokens": tokens, "decoded": decoded}, open(out + ".json", "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
