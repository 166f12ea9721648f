"""Ray Serve scale-out of dvm's generation models: replicas of `DvmLLM`,
each holding a generation model (a GenAI builder folder) loaded through the
Python package (`dvm.genai`, libdvm's generator) and making each request's
tokens with a generator of its own, behind an ingress, `Completions`, that
answers a JSON completion request (`prompt`, `max_tokens`, `temperature`,
`seed`; OpenAI's answer form) and retries a request on another replica when
the replica running it dies (its node went away), so an accepted request is
not lost. Ray Serve autoscales the replicas by queue length: it adds one
while more than `target_ongoing_requests` requests per replica are queued
or running (docs/serving.md, "Ray Serve").

    serve run dvm_ray:app model_dir=/models/llama      # from deploy/ray

`build_app` takes the same arguments as a Python call, plus Ray resources
that pin replicas and the ingress to nodes."""
import asyncio
import json
import os
import time

import ray
from ray import serve
from ray.exceptions import ActorUnavailableError, RayActorError
from starlette.requests import Request
from starlette.responses import JSONResponse

# a replica's death as its caller sees it: the actor died, or is unreachable
# while Ray decides whether it died
REPLICA_GONE = (RayActorError, ActorUnavailableError)


class DvmLLM:
    """One replica: a model, each request on a generator of its own (the
    generator releases the GIL while it computes, so requests overlap)."""

    def __init__(self, model_dir, threads=1):
        import dvm.genai as og

        config = og.Config(model_dir)
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}))
        self.og = og
        self.model = og.Model(config)
        self.tokenizer = og.Tokenizer(self.model)
        self.node = ray.get_runtime_context().get_node_id()

    def _generate(self, prompt, max_tokens, temperature, seed):
        ids = self.tokenizer.encode(prompt)
        params = self.og.GeneratorParams(self.model)
        search = {"max_length": len(ids) + max_tokens, "do_sample": temperature > 0}
        if temperature > 0:
            search["temperature"] = temperature
        if seed is not None:
            search["random_seed"] = seed
        params.set_search_options(**search)
        gen = self.og.Generator(self.model, params)
        gen.append_tokens(ids)
        while not gen.is_done():
            gen.generate_next_token()
        made = [int(t) for t in gen.get_sequence(0)[len(ids):]]
        return {"text": self.tokenizer.decode(made), "prompt_tokens": len(ids), "completion_tokens": len(made),
                "finish_reason": "length" if len(made) == max_tokens else "stop", "node": self.node,
                "pid": os.getpid()}

    async def generate(self, prompt, max_tokens, temperature, seed):
        return await asyncio.to_thread(self._generate, prompt, max_tokens, temperature, seed)


def completion_fields(body):
    """The request's fields, checked: (prompt, max_tokens, temperature,
    seed), or a message naming what is wrong."""
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    prompt, max_tokens = body.get("prompt"), body.get("max_tokens", 16)
    temperature, seed = body.get("temperature", 1.0), body.get("seed")
    if not isinstance(prompt, str) or not prompt:
        return "prompt: a non-empty string expected"
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= 1 << 20:
        return "max_tokens must be an integer in [1, 1048576]"
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not 0 <= temperature <= 2:
        return "temperature must be a number in [0, 2]"
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        return "seed must be a non-negative integer"
    return prompt, max_tokens, float(temperature), seed


class Completions:
    """The ingress: checks a request, hands it to a replica and, when that
    replica dies under it, to another, up to `attempts` times."""

    def __init__(self, llm, name, attempts=4):
        self.llm, self.name, self.attempts = llm, name, attempts

    async def __call__(self, request: Request):
        try:
            fields = completion_fields(await request.json())
        except json.JSONDecodeError as e:
            fields = f"the body is not JSON: {e}"
        if isinstance(fields, str):
            return JSONResponse({"error": {"message": fields, "type": "invalid_request_error"}}, status_code=400)
        for attempt in range(1, self.attempts + 1):
            try:
                r = await self.llm.generate.remote(*fields)
                break
            except REPLICA_GONE as e:
                gone = e
                await asyncio.sleep(0.2 * attempt)  # while Ray replaces the replica
        else:
            return JSONResponse({"error": {"message": f"no replica finished it in {self.attempts} attempts: {gone}",
                                           "type": "server_error"}}, status_code=503)
        return JSONResponse({
            "object": "text_completion", "created": int(time.time()), "model": self.name,
            "choices": [{"index": 0, "text": r["text"], "logprobs": None, "finish_reason": r["finish_reason"]}],
            "usage": {"prompt_tokens": r["prompt_tokens"], "completion_tokens": r["completion_tokens"],
                      "total_tokens": r["prompt_tokens"] + r["completion_tokens"]},
            "dvm": {"node": r["node"], "pid": r["pid"], "attempts": attempt}})


def build_app(model_dir, name="llm", threads=1, min_replicas=1, max_replicas=4, target_ongoing_requests=2,
              max_ongoing_requests=4, replica_resources=None, ingress_resources=None):
    llm = serve.deployment(DvmLLM, name="DvmLLM", max_ongoing_requests=max_ongoing_requests,
                           ray_actor_options={"num_cpus": 0, "resources": replica_resources or {}},
                           autoscaling_config={"min_replicas": min_replicas, "max_replicas": max_replicas,
                                               "target_ongoing_requests": target_ongoing_requests})
    ingress = serve.deployment(Completions, name="Completions", max_ongoing_requests=1000,
                               ray_actor_options={"num_cpus": 0, "resources": ingress_resources or {}})
    return ingress.bind(llm.bind(model_dir, threads), name)


def app(args):
    """`serve run dvm_ray:app model_dir=... [name=...]`."""
    return build_app(args["model_dir"], name=args.get("name", "llm"))
