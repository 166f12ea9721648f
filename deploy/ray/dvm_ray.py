"""Ray Serve scale-out of dvm's generation models: replicas of `DvmLLM`,
each holding a generation model (a GenAI builder folder) loaded through the
Python package and a continuous-batching engine over it (`dvm.engine`:
`slots` sequences in every step, a request joining at the next step and
leaving when it ends, over a paged KV cache of kv_block_size-row blocks
within kv_budget bytes, preempting the newest sequence when they run out), behind an ingress, `Completions`, that answers
OpenAI's completion and chat completion requests (`prompt` or `messages`
through the model folder's chat template, `max_tokens`, `temperature`,
`top_p`, `seed`, `stop`, `n`, `logprobs` (chat's with `top_logprobs`),
`stream`: whole, or as server-sent events)
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

    async def generate(self, prompt, max_tokens, temperature, top_p, seed, stop=(), skip=0, logprobs=None,
                       skip_logprobs=0):
        """Yields {"text": piece} as the completion's text is made, after its
        first `skip` characters (those a caller has from a replica that
        died), then one item that ends it: its finish_reason and counts; or
        only {"error": message} for a request the model refuses. `prompt`
        is text, or chat messages (a list) for the model's chat template.
        The text ends before the first of the `stop` strings; the last
        characters that may begin one are held back until they do not.
        With `logprobs` (the alternatives per token), an item also carries
        "logprobs": the entries of the tokens whose text it completes (after
        the first `skip_logprobs`), each {"token": its text, "logprob",
        "top": [[text, logprob], ...]}; a stop string keeps the tokens whose
        text begins before it."""
        from dvm import Error

        try:
            if isinstance(prompt, list):
                prompt = self.tokenizer.apply_chat_template(json.dumps(prompt), add_generation_prompt=True)
            ids = self.tokenizer.encode(prompt)
            req = self.engine.submit(ids, max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed,
                                     logprobs=logprobs)
        except (ValueError, Error) as e:
            yield {"error": str(e)}
            return
        stream, made, text, given = self.tokenizer.create_stream(), [], "", 0
        hold, finish = max(map(len, stop), default=1) - 1, None
        pieces, ends, entered = [], [], skip_logprobs  # each token's text and where it ends; entries given

        def item(upto, kept=None):
            """The text after what was given up to `upto` and the entries of
            the tokens it completes (of the first `kept`, at the end)."""
            nonlocal entered
            out = {"text": text[max(given, skip):upto]}
            if logprobs is not None:
                last = kept if kept is not None else len([e for e in ends if e <= upto])
                out["logprobs"] = [self._entry(ids, made, req.logprobs, pieces, i) for i in range(entered, last)]
                entered = max(entered, last)
            return out

        try:
            async for new in req:
                for t in new:
                    made.append(t)
                    pieces.append(stream.decode(t))
                    text += pieces[-1]
                    ends.append(len(text))
                    cut = min((i for i in (text.find(s, given) for s in stop) if i >= 0), default=-1)
                    if cut >= 0:
                        text, finish = text[:cut], "stop"
                        break
                    if len(text) - hold > max(given, skip):
                        yield item(len(text) - hold)
                    given = max(given, len(text) - hold)
                if finish:
                    break
        finally:
            req.cancel()  # a stop string, or the caller went away: the slot is free at the next step
        kept = len(made)
        if finish:  # the tokens whose text begins before the cut, or lies before it (an empty one)
            while kept and (ends[kept - 2] if kept > 1 else 0) >= len(text) and ends[kept - 1] > len(text):
                kept -= 1
        else:
            whole = self.tokenizer.decode(made)  # with a last incomplete character
            if whole.startswith(text) and made:
                pieces[-1] += whole[len(text):]
                text = whole
            finish = "length" if req.finish_reason == "length" else "stop"
        if len(text) > max(given, skip) or entered < kept:
            yield item(len(text), kept)
        yield {"finish_reason": finish, "prompt_tokens": len(ids), "completion_tokens": len(made),
               "node": self.node, "pid": os.getpid()}

    def _entry(self, ids, made, logprobs, pieces, i):
        """Token i's logprobs entry: an alternative's text is its decode after
        the token before it (a word's first piece keeps its space), or alone
        when that does not extend the token before's."""
        prev = made[i - 1] if i else int(ids[-1])
        one = self.tokenizer.decode([prev])
        lp, top = logprobs[i]

        def text(t):
            if t == made[i]:
                return pieces[i]
            both = self.tokenizer.decode([prev, t])
            return both[len(one):] if both.startswith(one) else self.tokenizer.decode([t])

        return {"token": pieces[i], "logprob": lp, "top": [[text(t), v] for t, v in top]}


def _number(value, name, low, high, integer=False):
    """None if value is a number in [low, high] (an integer if asked), else
    the message."""
    kinds = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        return f"{name} must be {'an integer' if integer else 'a number'} in [{low}, {high}]"
    return None


def _logprobs_field(body, chat):
    """The alternatives per token that the request asks for (None: no
    logprobs), or a message naming what is wrong: completions' `logprobs`
    0 to 5, chat's `logprobs: true` with `top_logprobs` 0 to 20, as dvm
    serve takes them."""
    lp, top = body.get("logprobs"), body.get("top_logprobs")
    if not chat:
        if top is not None:
            return "top_logprobs is chat's; completions take logprobs, an integer in [0, 5]"
        return lp if lp is None else _number(lp, "logprobs", 0, 5, True) or lp
    if lp is not None and not isinstance(lp, bool):
        return "logprobs must be true or false"
    if top is not None and (_number(top, "top_logprobs", 0, 20, True) or not lp):
        return _number(top, "top_logprobs", 0, 20, True) or "top_logprobs needs logprobs: true"
    return (top or 0) if lp else None


def request_fields(body, chat):
    """The request's fields, checked: {prompt (text, or the chat messages),
    max_tokens, temperature, top_p, seed, stop, n, stream, logprobs (the
    alternatives per token, or None)}, or a message naming what is wrong. A
    sampled request without a seed gets one here, so that another replica
    makes the same tokens again after a failure; choice i of n is sampled
    with seed + i."""
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    for name in ("suffix", "echo", "best_of", "tools", "response_format"):
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
    f["logprobs"] = _logprobs_field(body, chat)
    if isinstance(f["logprobs"], str):
        return f["logprobs"]
    if f["temperature"] > 0 and f["seed"] is None:
        f["seed"] = random.randrange(1 << 62)
    f["temperature"], f["top_p"] = float(f["temperature"]), float(f["top_p"])
    return f


def _logprob(v):
    """vLLM's floor: a token the model rules out is -9999, which JSON carries."""
    return v if v >= -9999.0 else -9999.0


def logprobs_json(entries, chat, offset=0):
    """OpenAI's logprobs object of a choice's entries (or a chunk's, its
    text starting `offset` characters into the choice's): completions'
    lists, the dict of each token's alternatives holding the token chosen
    too; chat's content entries with their bytes."""
    if chat:
        def one(text, v):
            return {"token": text, "logprob": _logprob(v), "bytes": list(text.encode())}

        return {"content": [{**one(e["token"], e["logprob"]), "top_logprobs": [one(t, v) for t, v in e["top"]]}
                            for e in entries]}
    offsets = []
    for e in entries:
        offsets.append(offset)
        offset += len(e["token"])
    return {"tokens": [e["token"] for e in entries], "token_logprobs": [_logprob(e["logprob"]) for e in entries],
            "top_logprobs": [{**{t: _logprob(v) for t, v in e["top"]}, e["token"]: _logprob(e["logprob"])}
                             for e in entries], "text_offset": offsets}


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
        sent, entries, gone = 0, 0, None
        for attempt in range(1, self.attempts + 1):
            try:
                gen = self.llm.options(stream=True).generate.remote(f["prompt"], f["max_tokens"], f["temperature"],
                                                                     f["top_p"], seed, f["stop"], skip=sent,
                                                                     logprobs=f["logprobs"], skip_logprobs=entries)
                async for item in gen:
                    if "text" in item:
                        sent += len(item["text"])
                        entries += len(item.get("logprobs", ()))
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
            return StreamingResponse(self._events(first, items, head, chat, f["logprobs"] is not None),
                                     media_type="text/event-stream")
        texts, ends, pair = [[] for _ in range(f["n"])], [None] * f["n"], first
        entries = [[] for _ in range(f["n"])]
        while pair:
            i, item = pair
            if "error" in item:
                await items.aclose()
                return self._error(item)
            if "text" in item:
                texts[i].append(item["text"])
                entries[i] += item.get("logprobs", [])
            else:
                ends[i] = item
            pair = await anext(items, None)
        choices = [{"index": i, **({"message": {"role": "assistant", "content": "".join(t)}} if chat else
                                   {"text": "".join(t)}),
                    "logprobs": logprobs_json(entries[i], chat) if f["logprobs"] is not None else None,
                    "finish_reason": e["finish_reason"], "dvm": self._end(e)}
                   for i, (t, e) in enumerate(zip(texts, ends))]
        made = sum(e["completion_tokens"] for e in ends)
        return JSONResponse({**head, "choices": choices,
                             "usage": {"prompt_tokens": ends[0]["prompt_tokens"], "completion_tokens": made,
                                       "total_tokens": ends[0]["prompt_tokens"] + made}})

    async def _events(self, first, items, head, chat, logprobs):
        """Server-sent events as OpenAI streams: a chunk per piece of each
        choice (a chat choice's first with the assistant's role; with
        logprobs, the entries of the tokens the piece completes), the
        choice's last with its finish_reason, then [DONE]; a failure after
        the first chunk is an error event (the status is sent)."""
        head = {**head, "object": "chat.completion.chunk" if chat else "text_completion"}
        started, offsets = set(), {}

        def chunk(i, text, finish=None, entries=(), **extra):
            if chat:
                body = {"delta": {} if finish else {"content": text}}
                if i not in started:
                    body["delta"]["role"] = "assistant"
            else:
                body = {"text": text}
            started.add(i)
            lp = None
            if logprobs:
                lp = logprobs_json(entries, chat, offsets.get(i, 0))
                offsets[i] = offsets.get(i, 0) + sum(len(e["token"]) for e in entries)
            choice = {"index": i, **body, "logprobs": lp, "finish_reason": finish, **extra}
            return f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"

        pair = first
        try:
            while pair:
                i, item = pair
                if "error" in item:
                    yield f"data: {json.dumps({'error': {'message': item['error'], 'type': 'server_error'}})}\n\n"
                    return
                yield chunk(i, item["text"], entries=item.get("logprobs", ())) if "text" in item else \
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
