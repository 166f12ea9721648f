"""Ray Serve scale-out of dvm's generation models: replicas of `DvmLLM`,
each holding a generation model (a GenAI builder folder) loaded through the
Python package and a continuous-batching engine over it (`dvm.engine`:
`slots` sequences in every step, a request joining at the next step and
leaving when it ends, over a paged KV cache of kv_block_size-row blocks
within kv_budget bytes, preempting the newest sequence when they run out), behind an ingress, `Completions`, that answers
OpenAI's completion and chat completion requests (`prompt` or `messages`
through the model folder's chat template, `max_tokens`, `temperature`,
`top_p`, `seed`, `stop`, `n`, `stream`: whole, or as server-sent events)
and, when the replica running a choice dies (its node went away), sends it
to another replica, which makes it again and passes on only the text not
yet sent, so an accepted request, streamed or not, is not lost. Ray Serve
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

    def __init__(self, model_dir, threads=1, slots=8, kv_block_size=16, kv_budget=0):
        import dvm.genai as og
        from dvm.engine import Engine

        config = og.Config(model_dir)
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}))
        self.model = og.Model(config)
        self.tokenizer = og.Tokenizer(self.model)
        self.engine = Engine(self.model, slots=slots, kv_block_size=kv_block_size, kv_budget=kv_budget)
        self.node = ray.get_runtime_context().get_node_id()

    async def generate(self, prompt, max_tokens, temperature, top_p, seed, stop=(), skip=0):
        """Yields {"text": piece} as the completion's text is made, after its
        first `skip` characters (those a caller has from a replica that
        died), then one item that ends it: its finish_reason and counts; or
        only {"error": message} for a request the model refuses. `prompt`
        is text, or chat messages (a list) for the model's chat template.
        The text ends before the first of the `stop` strings; the last
        characters that may begin one are held back until they do not."""
        from dvm import Error

        try:
            if isinstance(prompt, list):
                prompt = self.tokenizer.apply_chat_template(json.dumps(prompt), add_generation_prompt=True)
            ids = self.tokenizer.encode(prompt)
            req = self.engine.submit(ids, max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed)
        except (ValueError, Error) as e:
            yield {"error": str(e)}
            return
        stream, made, text, given = self.tokenizer.create_stream(), [], "", 0
        hold, finish = max(map(len, stop), default=1) - 1, None
        try:
            async for new in req:
                for t in new:
                    made.append(t)
                    text += stream.decode(t)
                    cut = min((i for i in (text.find(s, given) for s in stop) if i >= 0), default=-1)
                    if cut >= 0:
                        text, finish = text[:cut], "stop"
                        break
                    if len(text) - hold > max(given, skip):
                        yield {"text": text[max(given, skip):len(text) - hold]}
                    given = max(given, len(text) - hold)
                if finish:
                    break
        finally:
            req.cancel()  # a stop string, or the caller went away: the slot is free at the next step
        if not finish:
            whole = self.tokenizer.decode(made)  # with a last incomplete character
            text = whole if whole.startswith(text) else text
            finish = "length" if req.finish_reason == "length" else "stop"
        if len(text) > max(given, skip):
            yield {"text": text[max(given, skip):]}
        yield {"finish_reason": finish, "prompt_tokens": len(ids), "completion_tokens": len(made),
               "node": self.node, "pid": os.getpid()}


def _number(value, name, low, high, integer=False):
    """None if value is a number in [low, high] (an integer if asked), else
    the message."""
    kinds = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        return f"{name} must be {'an integer' if integer else 'a number'} in [{low}, {high}]"
    return None


def request_fields(body, chat):
    """The request's fields, checked: {prompt (text, or the chat messages),
    max_tokens, temperature, top_p, seed, stop, n, stream}, or a message
    naming what is wrong. A sampled request without a seed gets one here,
    so that another replica makes the same tokens again after a failure;
    choice i of n is sampled with seed + i."""
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    for name in ("logprobs", "top_logprobs", "suffix", "echo", "best_of", "tools", "response_format"):
        if body.get(name) not in (None, False, 1 if name == "best_of" else None):
            return f"{name}: not supported by the Ray deployment"
    if chat:
        prompt = body.get("messages")
        if (not isinstance(prompt, list) or not prompt or
                not all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                        for m in prompt)):
            return 'messages: a non-empty list of {"role": string, "content": string} expected'
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            return "prompt: a non-empty string expected"
    f = {"prompt": prompt, "max_tokens": body.get("max_tokens", body.get("max_completion_tokens", 16)),
         "temperature": body.get("temperature", 1.0), "top_p": body.get("top_p", 1.0), "seed": body.get("seed"),
         "stop": body.get("stop") or [], "n": body.get("n", 1), "stream": body.get("stream", False)}
    f["stop"] = [f["stop"]] if isinstance(f["stop"], str) else f["stop"]
    bad = (_number(f["max_tokens"], "max_tokens", 1, 1 << 20, True) or
           _number(f["temperature"], "temperature", 0, 2) or _number(f["n"], "n", 1, 16, True) or
           (f["seed"] is not None and _number(f["seed"], "seed", 0, (1 << 63) - 1, True)))
    if bad:
        return bad
    if isinstance(f["top_p"], bool) or not isinstance(f["top_p"], (int, float)) or not 0 < f["top_p"] <= 1:
        return "top_p must be a number in (0, 1]"
    if (not isinstance(f["stop"], list) or len(f["stop"]) > 4 or
            not all(isinstance(x, str) and x for x in f["stop"])):
        return "stop: a non-empty string or a list of up to 4 expected"
    if not isinstance(f["stream"], bool):
        return "stream must be true or false"
    if f["temperature"] > 0 and f["seed"] is None:
        f["seed"] = random.randrange(1 << 62)
    f["temperature"], f["top_p"] = float(f["temperature"]), float(f["top_p"])
    return f


class Completions:
    """The ingress: OpenAI's /v1/completions and /v1/chat/completions. It
    checks a request, hands each of its n choices to a replica and, when
    that replica dies under it, to another, up to `attempts` times."""

    def __init__(self, llm, name, attempts=4):
        self.llm, self.name, self.attempts = llm, name, attempts

    async def _items(self, f, i):
        """Choice i's items across retries: its text once, in pieces, then
        the end (with "attempts"), or an error."""
        seed = None if f["seed"] is None else f["seed"] + i
        sent, gone = 0, None
        for attempt in range(1, self.attempts + 1):
            try:
                gen = self.llm.options(stream=True).generate.remote(f["prompt"], f["max_tokens"], f["temperature"],
                                                                     f["top_p"], seed, f["stop"], skip=sent)
                async for item in gen:
                    if "text" in item:
                        sent += len(item["text"])
                    elif "finish_reason" in item:
                        item["attempts"] = attempt
                    yield item
                return
            except REPLICA_GONE as e:
                gone = e
                await asyncio.sleep(0.2 * attempt)  # while Ray replaces the replica
        yield {"error": f"no replica finished it in {self.attempts} attempts: {gone}", "status": 503}

    async def _choices(self, f):
        """(i, item) for every choice's items, as they come; a choice's last
        item is its end or an error."""
        queue = asyncio.Queue()

        async def pump(i):
            async for item in self._items(f, i):
                await queue.put((i, item))

        tasks = [asyncio.create_task(pump(i)) for i in range(f["n"])]
        try:
            ended = 0
            while ended < f["n"]:
                i, item = await queue.get()
                ended += "text" not in item
                yield i, item
        finally:  # the client went away, or an error ends the request: the other choices are cancelled
            for t in tasks:
                t.cancel()

    @staticmethod
    def _error(item):
        return JSONResponse({"error": {"message": item["error"], "type": "invalid_request_error"
                                       if item.get("status", 400) < 500 else "server_error"}},
                            status_code=item.get("status", 400))

    @staticmethod
    def _end(end):
        return {"node": end["node"], "pid": end["pid"], "attempts": end["attempts"]}

    async def __call__(self, request: Request):
        path = request.url.path.rstrip("/")
        chat = path.endswith("/chat/completions")
        if not chat and not path.endswith("/completions"):
            return self._error({"error": f"{path}: no such route (/v1/completions, /v1/chat/completions)",
                                "status": 404})
        try:
            f = request_fields(await request.json(), chat)
        except json.JSONDecodeError as e:
            f = f"the body is not JSON: {e}"
        if isinstance(f, str):
            return self._error({"error": f})
        items = self._choices(f)
        first = await items.__anext__()
        if "error" in first[1]:
            await items.aclose()
            return self._error(first[1])
        head = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{random.randrange(1 << 64):016x}",
                "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                "model": self.name}
        if f["stream"]:
            return StreamingResponse(self._events(first, items, head, chat), media_type="text/event-stream")
        texts, ends, pair = [[] for _ in range(f["n"])], [None] * f["n"], first
        while pair:
            i, item = pair
            if "error" in item:
                await items.aclose()
                return self._error(item)
            if "text" in item:
                texts[i].append(item["text"])
            else:
                ends[i] = item
            pair = await anext(items, None)
        choices = [{"index": i, **({"message": {"role": "assistant", "content": "".join(t)}} if chat else
                                   {"text": "".join(t)}),
                    "logprobs": None, "finish_reason": e["finish_reason"], "dvm": self._end(e)}
                   for i, (t, e) in enumerate(zip(texts, ends))]
        made = sum(e["completion_tokens"] for e in ends)
        return JSONResponse({**head, "choices": choices,
                             "usage": {"prompt_tokens": ends[0]["prompt_tokens"], "completion_tokens": made,
                                       "total_tokens": ends[0]["prompt_tokens"] + made}})

    async def _events(self, first, items, head, chat):
        """Server-sent events as OpenAI streams: a chunk per piece of each
        choice (a chat choice's first with the assistant's role), the
        choice's last with its finish_reason, then [DONE]; a failure after
        the first chunk is an error event (the status is sent)."""
        head = {**head, "object": "chat.completion.chunk" if chat else "text_completion"}
        started = set()

        def chunk(i, text, finish=None, **extra):
            if chat:
                body = {"delta": {} if finish else {"content": text}}
                if i not in started:
                    body["delta"]["role"] = "assistant"
            else:
                body = {"text": text}
            started.add(i)
            choice = {"index": i, **body, "logprobs": None, "finish_reason": finish, **extra}
            return f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"

        pair = first
        try:
            while pair:
                i, item = pair
                if "error" in item:
                    yield f"data: {json.dumps({'error': {'message': item['error'], 'type': 'server_error'}})}\n\n"
                    return
                yield chunk(i, item["text"]) if "text" in item else \
                    chunk(i, "", item["finish_reason"], dvm=self._end(item))
                pair = await anext(items, None)
            yield "data: [DONE]\n\n"
        finally:
            await items.aclose()


def build_app(model_dir, name="llm", threads=1, slots=8, kv_block_size=16, kv_budget=0, min_replicas=1,
              max_replicas=4, target_ongoing_requests=8, max_ongoing_requests=16, replica_resources=None,
              ingress_resources=None):
    llm = serve.deployment(DvmLLM, name="DvmLLM", max_ongoing_requests=max_ongoing_requests,
                           ray_actor_options={"num_cpus": 0, "resources": replica_resources or {}},
                           autoscaling_config={"min_replicas": min_replicas, "max_replicas": max_replicas,
                                               "target_ongoing_requests": target_ongoing_requests})
    ingress = serve.deployment(Completions, name="Completions", max_ongoing_requests=1000,
                               ray_actor_options={"num_cpus": 0, "resources": ingress_resources or {}})
    return ingress.bind(llm.bind(model_dir, threads, slots, kv_block_size, kv_budget), name)


def app(args):
    """`serve run dvm_ray:app model_dir=... [name=...] [slots=...] [kv_block_size=...] [kv_budget=...]`."""
    return build_app(args["model_dir"], name=args.get("name", "llm"), slots=int(args.get("slots", 8)),
                     kv_block_size=int(args.get("kv_block_size", 16)), kv_budget=int(args.get("kv_budget", 0)))
