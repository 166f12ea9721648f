"""Ray Serve scale-out of dvm's generation models: replicas of `DvmLLM`,
each holding a generation model (a GenAI builder folder) loaded through the
Python package and a continuous-batching engine over it (`dvm.engine`:
`slots` sequences in every step, a request joining at the next step and
leaving when it ends), behind an ingress, `Completions`, that answers
OpenAI's completion request (`prompt`, `max_tokens`, `temperature`,
`top_p`, `seed`, `stream`: whole, or as server-sent events) and, when the
replica running a request dies (its node went away), sends it to another
replica, which makes it again and passes on only the tokens not yet sent,
so an accepted request, streamed or not, is not lost. Ray Serve
autoscales the replicas by queue length: it adds one while more than
`target_ongoing_requests` requests per replica are queued or running
(docs/serving.md, "Ray Serve").

    serve run dvm_ray:app model_dir=/models/llama      # from deploy/ray

`build_app` takes the same arguments as a Python call, plus Ray resources
that pin replicas and the ingress to nodes."""
import asyncio
import json
import os
import random
import time

import ray
from ray import serve
from ray.exceptions import ActorUnavailableError, RayActorError
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

# a replica's death as its caller sees it: the actor died, or is unreachable
# while Ray decides whether it died
REPLICA_GONE = (RayActorError, ActorUnavailableError)


class DvmLLM:
    """One replica: a model and its engine."""

    def __init__(self, model_dir, threads=1, slots=8):
        import dvm.genai as og
        from dvm.engine import Engine

        config = og.Config(model_dir)
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}))
        self.model = og.Model(config)
        self.tokenizer = og.Tokenizer(self.model)
        self.engine = Engine(self.model, slots=slots)
        self.node = ray.get_runtime_context().get_node_id()

    async def generate(self, prompt, max_tokens, temperature, top_p, seed, skip=0):
        """Yields {"text": piece} for each new token after the first
        `skip` (those a caller already has from a replica that died), then
        one item that ends the request: its finish_reason and counts, and
        the text the pieces did not yet carry (a last incomplete
        character); or only {"error": message} for a request the engine
        refuses."""
        ids = self.tokenizer.encode(prompt)
        try:
            req = self.engine.submit(ids, max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed)
        except ValueError as e:
            yield {"error": str(e)}
            return
        stream, made, sent = self.tokenizer.create_stream(), [], ""
        try:
            async for new in req:
                for t in new:
                    made.append(t)
                    piece = stream.decode(t)
                    sent += piece
                    if len(made) > skip:
                        yield {"text": piece}
        finally:
            req.cancel()  # the caller went away: the slot is free at the next step
        whole = self.tokenizer.decode(made)
        yield {"finish_reason": "length" if req.finish_reason == "length" else "stop",
               "rest": whole[len(sent):] if whole.startswith(sent) else "",                "prompt_tokens": len(ids), "completion_tokens": len(made), "node": self.node, "pid": os.getpid()}


def completion_fields(body):
    """The request's fields, checked: (prompt, max_tokens, temperature,
    top_p, seed, stream), or a message naming what is wrong. A sampled
    request without a seed gets one here, so that another replica makes
    the same tokens again after a failure."""
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    for name in ("stop", "n", "logprobs", "suffix", "echo", "best_of"):
        if body.get(name) not in (None, 1 if name in ("n", "best_of") else None):
            return f"{name}: not supported by the Ray deployment (dvm serve's OpenAI routes take it)"
    prompt, max_tokens = body.get("prompt"), body.get("max_tokens", 16)
    temperature, seed = body.get("temperature", 1.0), body.get("seed")
    top_p, stream = body.get("top_p", 1.0), body.get("stream", False)
    if not isinstance(prompt, str) or not prompt:
        return "prompt: a non-empty string expected"
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= 1 << 20:
        return "max_tokens must be an integer in [1, 1048576]"
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not 0 <= temperature <= 2:
        return "temperature must be a number in [0, 2]"
    if not isinstance(top_p, (int, float)) or isinstance(top_p, bool) or not 0 < top_p <= 1:
        return "top_p must be a number in (0, 1]"
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        return "seed must be a non-negative integer"
    if not isinstance(stream, bool):
        return "stream must be true or false"
    if temperature > 0 and seed is None:
        seed = random.randrange(1 << 62)
    return prompt, max_tokens, float(temperature), float(top_p), seed, stream


class Completions:
    """The ingress: checks a request, hands it to a replica and, when that
    replica dies under it, to another, up to `attempts` times."""

    def __init__(self, llm, name, attempts=4):
        self.llm, self.name, self.attempts = llm, name, attempts

    async def _items(self, prompt, max_tokens, temperature, top_p, seed):
        """The replicas' items for one request, across retries: each token's
        piece once, then the end (with "attempts"), or an error."""
        sent, gone = 0, None
        for attempt in range(1, self.attempts + 1):
            try:
                gen = self.llm.options(stream=True).generate.remote(prompt, max_tokens, temperature, top_p, seed,
                                                                     skip=sent)
                async for item in gen:
                    if "text" in item:
                        sent += 1
                    elif "finish_reason" in item:
                        item["attempts"] = attempt
                    yield item
                return
            except REPLICA_GONE as e:
                gone = e
                await asyncio.sleep(0.2 * attempt)  # while Ray replaces the replica
        yield {"error": f"no replica finished it in {self.attempts} attempts: {gone}", "status": 503}

    @staticmethod
    def _error(item):
        return JSONResponse({"error": {"message": item["error"], "type": "invalid_request_error"
                                       if item.get("status", 400) == 400 else "server_error"}},
                            status_code=item.get("status", 400))

    def _dvm(self, end):
        return {"node": end["node"], "pid": end["pid"], "attempts": end["attempts"]}

    async def __call__(self, request: Request):
        try:
            fields = completion_fields(await request.json())
        except json.JSONDecodeError as e:
            fields = f"the body is not JSON: {e}"
        if isinstance(fields, str):
            return self._error({"error": fields})
        *args, stream = fields
        items = self._items(*args)
        first = await items.__anext__()
        if "error" in first:
            return self._error(first)
        created, rid = int(time.time()), f"cmpl-{random.randrange(1 << 64):016x}"
        if stream:
            return StreamingResponse(self._events(first, items, created, rid), media_type="text/event-stream")
        text, end = [], first
        while "finish_reason" not in end and "error" not in end:
            text.append(end["text"])
            end = await items.__anext__()
        if "error" in end:
            return self._error(end)
        return JSONResponse({
            "id": rid, "object": "text_completion", "created": created, "model": self.name,
            "choices": [{"index": 0, "text": "".join(text) + end["rest"], "logprobs": None,
                         "finish_reason": end["finish_reason"]}],
            "usage": {"prompt_tokens": end["prompt_tokens"], "completion_tokens": end["completion_tokens"],
                      "total_tokens": end["prompt_tokens"] + end["completion_tokens"]},
            "dvm": self._dvm(end)})

    async def _events(self, first, items, created, rid):
        """Server-sent events as OpenAI streams a completion: a chunk per
        piece, the last with finish_reason, then [DONE]; a failure after
        the first chunk is an error event (the status is sent)."""
        def chunk(text, finish=None, **extra):
            body = {"id": rid, "object": "text_completion", "created": created, "model": self.name,
                    "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}], **extra}
            return f"data: {json.dumps(body)}\n\n"

        item = first
        while True:
            if "error" in item:
                yield f"data: {json.dumps({'error': {'message': item['error'], 'type': 'server_error'}})}\n\n"
                return
            if "finish_reason" in item:
                yield chunk(item["rest"], item["finish_reason"], dvm=self._dvm(item))
                yield "data: [DONE]\n\n"
                return
            yield chunk(item["text"])
            item = await items.__anext__()


def build_app(model_dir, name="llm", threads=1, slots=8, min_replicas=1, max_replicas=4,
              target_ongoing_requests=8, max_ongoing_requests=16, replica_resources=None, ingress_resources=None):
    llm = serve.deployment(DvmLLM, name="DvmLLM", max_ongoing_requests=max_ongoing_requests,
                           ray_actor_options={"num_cpus": 0, "resources": replica_resources or {}},
                           autoscaling_config={"min_replicas": min_replicas, "max_replicas": max_replicas,
                                               "target_ongoing_requests": target_ongoing_requests})
    ingress = serve.deployment(Completions, name="Completions", max_ongoing_requests=1000,
                               ray_actor_options={"num_cpus": 0, "resources": ingress_resources or {}})
    return ingress.bind(llm.bind(model_dir, threads, slots), name)


def app(args):
    """`serve run dvm_ray:app model_dir=... [name=...] [slots=...]`."""
    return build_app(args["model_dir"], name=args.get("name", "llm"), slots=int(args.get("slots", 8)))
