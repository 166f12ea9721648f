"""dvm.engine: continuous batching of generation requests, for servers
written in Python (deploy/ray/dvm_ray.py is one).

One thread steps libdvm's generator over `slots` sequences, as `dvm
serve`'s engine does in C (docs/serving.md): a request takes a free slot
at the next step, every running sequence makes its next token in the same
step (each at its own length, no padding), and a sequence leaves its slot
the moment it ends (max_tokens, an EOS, max_length, or cancel). Requests
wait in arrival order. A request's tokens reach it as they are made, to a
thread (iterate it) or to asyncio (`async for`). The KV cache is the
contiguous one (a slot holds max_length rows), or with kv_block_size a
paged one as `dvm serve`'s: blocks from a pool of kv_budget bytes, taken as
a sequence grows; when the running sequences need more than are free, the
most recently admitted is preempted (its slot and blocks freed, back at the
head of the queue; readmitted, it runs its prompt and the tokens it had
made as one prompt and goes on, its client seeing no token twice, its
random stream where it stood), and a waiting request is admitted only when
its blocks fit. A request may ask for each token's log-probability and
its most likely alternatives' (the model's raw distribution)."""
from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, AsyncIterator, Deque, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from . import _dvm
from .genai import Model, _ConfigFile, _generator_json

__all__ = ["Engine", "Request"]

FINISH_LENGTH, FINISH_STOP, FINISH_CANCELLED, FINISH_ERROR = "length", "stop", "cancelled", "error"


class Request:
    """One sequence's tokens as the engine makes them. Iterating (or `async
    for`) yields lists of new token ids until the request ends; then
    `finish_reason` says why ("length", "stop" for an EOS, "cancelled",
    "error"), and iteration raises `error` if there was one. Submitted with
    `logprobs`, `logprobs[i]` is token i's (logprob, [(id, logprob), ...]),
    there before the token is yielded."""

    def __init__(self, prompt: np.ndarray, max_tokens: int, search: dict) -> None:
        self.prompt, self.max_tokens, self._search = prompt, max_tokens, search
        self.tokens: List[int] = []
        self.logprobs: List[Tuple[float, List[Tuple[int, float]]]] = []
        self._rng: Optional[Tuple[int, int, int, int]] = None  # its random stream at a preemption
        self.finish_reason: Optional[str] = None
        self.error: Optional[BaseException] = None
        self._cond = threading.Condition()
        self._events: List[Tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._cancel = False
        self._admitted = 0  # the engine's count when it last took a slot: the newest is preempted first

    def cancel(self) -> None:
        """Ends the request at the engine's next step; its slot is free then."""
        self._cancel = True

    def _push(self, token: Optional[int] = None, finish: Optional[str] = None,
              error: Optional[BaseException] = None, logprobs: Optional[tuple] = None) -> None:
        """From the engine's thread: a new token (with its logprobs, when
        asked), or the end."""
        with self._cond:
            if logprobs is not None:
                self.logprobs.append((logprobs[1], logprobs[2]))
            if token is not None:
                self.tokens.append(token)
            if finish:
                self.finish_reason, self.error = finish, error
            self._cond.notify_all()
            events = list(self._events)
        for loop, ev in events:
            loop.call_soon_threadsafe(ev.set)

    def _since(self, pos: int) -> Tuple[List[int], bool]:
        return self.tokens[pos:], self.finish_reason is not None

    def _end(self) -> None:
        if self.error is not None:
            raise self.error

    def __iter__(self) -> Iterator[List[int]]:
        pos = 0
        while True:
            with self._cond:
                self._cond.wait_for(lambda: len(self.tokens) > pos or self.finish_reason is not None)
                new, done = self._since(pos)
            pos += len(new)
            if new:
                yield new
            if done:  # nothing comes after the end: new held the rest
                self._end()
                return

    async def __aiter__(self) -> AsyncIterator[List[int]]:
        ev = asyncio.Event()
        entry = (asyncio.get_running_loop(), ev)
        with self._cond:
            self._events.append(entry)
        try:
            pos = 0
            while True:
                ev.clear()
                with self._cond:
                    new, done = self._since(pos)
                pos += len(new)
                if new:
                    yield new
                if done:
                    self._end()
                    return
                if not new:
                    await ev.wait()
        finally:
            with self._cond:
                self._events.remove(entry)

    def result(self) -> List[int]:
        """Waits for the end: every token made (raises the request's error)."""
        for _ in self:
            pass
        return list(self.tokens)


class Engine:
    """Engine(model, slots=8, max_queue=1024, kv_dtype="f32",
    kv_block_size=0, kv_budget=0): `slots` sequences at a time over `model`
    (a dvm.genai.Model), the others waiting, up to max_queue; kv_dtype
    "f16" keeps an f32 model's KV cache in half precision; kv_block_size > 0
    pages it in blocks of that many rows, kv_budget bytes of them (0: enough
    for every slot at max_length) (docs/generation.md)."""

    def __init__(self, model: Model, slots: int = 8, max_queue: int = 1024, kv_dtype: str = "f32",
                 kv_block_size: int = 0, kv_budget: int = 0) -> None:
        if not 1 <= slots <= 256:
            raise ValueError(f"slots must be in [1, 256], got {slots}")
        with _ConfigFile(_generator_json(model.config._json, model.config._json.get("search", {}))) as cf:
            self._g = _dvm.Generator(model._module, cf.path, batch_size=slots, threads=model._threads,
                                     kv_dtype=kv_dtype, kv_block_size=kv_block_size, kv_budget=kv_budget)
        kv = self._g.stats()
        if kv_block_size and kv["kv_block_size"] != kv_block_size:
            raise ValueError(f"kv_block_size {kv_block_size}: {kv['kv_note'] or 'the cache is not paged'}")
        self.slots, self.max_queue, self.preemptions = slots, max_queue, 0
        self.kv_block_size, self._kv_blocks = kv["kv_block_size"], kv["kv_blocks"]
        self.max_length, self.vocab_size = self._g.max_length, self._g.vocab_size
        self._admissions = 0
        self._mu = threading.Condition()
        self._waiting: Deque[Request] = collections.deque()
        self._running: List[Optional[Request]] = [None] * slots
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="dvm-engine", daemon=True)
        self._thread.start()

    def submit(self, prompt: Sequence[int], max_tokens: int = 16, temperature: float = 0.0, top_p: float = 1.0,
               top_k: int = 0, repetition_penalty: float = 1.0, seed: Optional[int] = None,
               logprobs: Optional[int] = None) -> Request:
        """Queues a request: prompt token ids, then up to max_tokens more,
        greedy at temperature 0, else sampled (top_k, top_p; a seed gives
        the request a random stream of its own, so that it makes the same
        tokens again). logprobs (0 to 20) keeps each token's log-probability
        and its `logprobs` most likely alternatives' in `Request.logprobs`.
        ValueError names a bad argument; RuntimeError when the queue is full
        or the engine closed."""
        ids = np.asarray(prompt)
        if ids.ndim != 1 or not ids.size or ids.dtype.kind not in "iu":
            raise ValueError("prompt: a non-empty 1-D sequence of token ids expected")
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise ValueError(f"prompt: token {ids.min() if ids.min() < 0 else ids.max()} is outside the vocabulary "
                             f"(0 to {self.vocab_size - 1})")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be an integer of 1 or more, got {max_tokens!r}")
        if len(ids) + max_tokens > self.max_length:
            raise ValueError(f"prompt of {len(ids)} tokens + max_tokens {max_tokens} is over the model's max_length "
                             f"{self.max_length}")
        bs = self.kv_block_size
        if bs and -(-(len(ids) + max_tokens) // bs) > self._kv_blocks:
            raise ValueError(f"prompt of {len(ids)} tokens + max_tokens {max_tokens} needs "
                             f"{-(-(len(ids) + max_tokens) // bs)} KV blocks of {bs} rows; the kv_budget holds "
                             f"{self._kv_blocks}")
        if not 0 <= temperature <= 100:
            raise ValueError(f"temperature must be in [0, 100], got {temperature!r}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int) or
                                     not 0 <= logprobs <= 20):
            raise ValueError(f"logprobs must be an integer in [0, 20], got {logprobs!r}")
        search: dict[str, Any] = {"do_sample": temperature > 0, "repetition_penalty": float(repetition_penalty)}
        if temperature > 0:
            search.update(temperature=float(temperature), top_p=float(top_p), top_k=int(top_k))
        if seed is not None:
            search["seed"] = seed
        if logprobs is not None:
            search["logprobs"] = logprobs
        req = Request(ids.astype(np.int32), max_tokens, search)
        with self._mu:
            if self._stop:
                raise RuntimeError("the engine is closed")
            if len(self._waiting) >= self.max_queue:
                raise RuntimeError(f"the queue is full ({self.max_queue} requests waiting)")
            self._waiting.append(req)
            self._mu.notify()
        return req

    def stats(self) -> dict:
        """Running and waiting requests now, and with a paged cache its
        blocks (all and free) and the preemptions so far."""
        with self._mu:
            out = {"running": sum(r is not None for r in self._running), "waiting": len(self._waiting),
                   "slots": self.slots}
            if self.kv_block_size:
                out.update(kv_blocks=self._kv_blocks, kv_free=self._g.stats()["kv_free"],
                           preemptions=self.preemptions)
            return out

    def close(self) -> None:
        """Cancels every request and stops the engine's thread."""
        with self._mu:
            self._stop = True
            for r in self._waiting:
                r.cancel()
            for r in self._running:
                if r:
                    r.cancel()
            self._mu.notify()
        self._thread.join()

    def _finish(self, s: int, why: str, error: Optional[BaseException] = None) -> None:
        req = self._running[s]
        self._g.reset(s)
        self._running[s] = None
        req._push(finish=why, error=error)

    def _need(self) -> int:
        """The blocks the running sequences take at the next step."""
        return sum(self._g.kv_need(s) for s, r in enumerate(self._running) if r)

    def _preempt(self) -> None:
        """The most recently admitted running sequence back to the head of
        the queue, its slot and blocks free."""
        s = max((s for s, r in enumerate(self._running) if r), key=lambda s: self._running[s]._admitted)
        self._waiting.appendleft(self._running[s])
        self._running[s]._rng = self._g.rng(s)
        self._g.reset(s)
        self._running[s] = None
        self.preemptions += 1

    def _admit(self, s: int) -> bool:
        """The oldest waiting request into free slot s: its prompt and the
        tokens it made before a preemption. False, leaving it waiting, when
        its blocks and the running sequences' do not fit."""
        req = self._waiting[0]
        if req._cancel:
            self._waiting.popleft()
            req._push(finish=FINISH_CANCELLED)
            return True
        self._g.reset(s)
        need = self._need()
        rows = [np.zeros(0, np.int32)] * self.slots
        rows[s] = np.concatenate([req.prompt, np.asarray(req.tokens, np.int32)])
        try:
            self._g.set_search(s, **req._search)
            if req._rng:
                self._g.set_rng(s, req._rng)
            self._g.append(rows)
        except _dvm.Error as e:
            self._waiting.popleft()
            self._g.reset(s)
            req._push(finish=FINISH_ERROR, error=e)
            return True
        if self.kv_block_size and need + self._g.kv_need(s) > self._g.stats()["kv_free"]:
            self._g.reset(s)
            return False
        self._waiting.popleft()
        req._admitted, self._admissions = self._admissions, self._admissions + 1
        self._running[s] = req
        return True

    def _loop(self) -> None:
        before = [0] * self.slots
        while True:
            with self._mu:
                for s, r in enumerate(self._running):
                    if r and r._cancel:
                        self._finish(s, FINISH_CANCELLED)
                while self.kv_block_size and any(self._running) and self._need() > self._g.stats()["kv_free"]:
                    self._preempt()
                for s in range(self.slots):
                    if self._running[s] is None and self._waiting and not self._admit(s):
                        break
                running = [s for s, r in enumerate(self._running) if r]
                if not running:
                    if self._stop and not self._waiting:
                        return
                    if not self._waiting:
                        self._mu.wait()
                    continue
            for s in running:
                before[s] = len(self._g.sequence(s))
            try:
                self._g.next()  # the step: the GIL is released while the model runs
            except _dvm.Error as e:
                with self._mu:
                    for s in running:
                        self._finish(s, FINISH_ERROR, e)
                continue
            with self._mu:
                for s in running:
                    req = self._running[s]
                    seq = self._g.sequence(s)
                    if len(seq) > before[s]:
                        req._push(int(seq[-1]), logprobs=self._g.token_logprobs(s) if "logprobs" in req._search
                                  else None)
                    if len(req.tokens) >= req.max_tokens or len(seq) >= self.max_length:
                        self._finish(s, FINISH_LENGTH)
                    elif self._g.seq_done(s):
                        self._finish(s, FINISH_STOP)
