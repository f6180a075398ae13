"""The inference actor: serves one policy on the bus, batching requests from every rollout actor.

Services and topics for a policy named ``NAME``:

- service ``policy:NAME``, one prompt per request. Request body::

      {"prompt": {"messages": [{"role": "user", "content": "..."}, ...]}   # and/or
                 {"ids": int32 array},                                       # see Prompt
       "params": {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 128,
                  "stop": [], "stop_token_ids": [], "seed": null}}           # all optional

  Reply body (arrays travel as raw frames)::

      {"prompt_ids": int32[P], "token_ids": int32[T], "logprobs": float32[T], "text": str,
       "finish_reason": "stop" | "length", "version": int, "extra": {}}

  A *scoring* request carries ``"continuations": [int32 array, ...]`` (token ids to score after
  the prompt; ``params`` is then ignored) and is answered with each continuation's per-token
  log-probabilities, untempered, the prompt computed once for all of them::

      {"prompt_ids": int32[P], "logprobs": float32[sum of lengths], "lengths": int32[N],
       "version": int}

  Scoring and generation requests share the queue and the batches; a batch's generations and
  scorings come from one policy version. A continuation that does not fit the context after
  its prompt is refused (``context_overflow``), never truncated.

  Error codes: ``bad_request`` (malformed body, invalid params; the message names the field),
  ``context_overflow``, ``busy`` (the queue holds ``max_queue`` requests: retry later),
  ``policy_error`` (the backend failed on this batch).
- service ``policy:NAME:status``: ``{"version", "paused", "queued", "batch_sizes" (recent),
  "counters", "weights" (applied/rejected/stale/fetched counts)}``.
- its heartbeat status (what ``arena status --json`` lists): ``policy_version``, ``queued`` and
  ``settings``, the config fields it shares with the run's ``inference`` section
  (:func:`arena.policies.config.shared_settings`), which ``arena train`` checks.
- topic ``weights.NAME``: ``weights`` messages, one per bucket (:mod:`arena.weights.buckets`), carrying
  the bytes or, from a publisher on this host, a reference to a shared-memory file that the actor
  maps (a reference it cannot map, or any with ``--no-shm-weights``, is fetched in bytes form
  from the publisher; see :mod:`arena.weights.receiver`). A complete, valid update is applied
  between batches; a partial or corrupt one is refused and the old weights keep serving.
- ``control`` messages, on topic ``control.policy.NAME`` or addressed to the actor:
  ``{"command": "pause" | "resume"}``: while paused no batch starts; requests wait in the queue.
  ``{"command": "load", "path": "<Hugging Face model directory>", "version": int}``: serve that
  directory's safetensors weights as ``version``, checked like any update (names, shapes,
  dtypes, floats cast to the served dtype) and applied between batches. ``path`` may also be a
  shipped model's spec (``smollm2-135m``, ``tiny``), found in this actor's host's cache: a
  population's initial model. A load need not be newer than what is served (population play
  goes back to old checkpoints) and leaves the bus updates' version order alone.
  ``{"command": "load", "adapters": {"<name>": "<peft adapter directory>", ...}, "version": int}``:
  serve each directory under its adapter's name (each one the actor serves already; the base
  stays), as ``version``, between batches: the pool actor of a population run with named
  policies (:mod:`arena.run.population`). A name it does not serve, or a directory that is no
  adapter or was made for another base, is refused before any adapter changes.
- Every update's outcome is announced as a ``control`` message on topic ``weights_ack.NAME``:
  ``{"actor", "version", "applied": bool, "reason", "serving": the version now served,
  "transport": "shm" | "bus" | "fetch" | "cuda_ipc" | "load", "device": the served weights'
  CUDA device id or None}`` (a learner on the same GPU then sends its updates by CUDA IPC,
  :mod:`arena.weights.cuda_ipc`). A stale update (not newer than the served
  version) is refused once, not once per bucket.

A batch that runs out of memory is served in halves, down to one request, and the largest
part that fit bounds the batches after it (:func:`~arena.actors.backend_watch.serve_in_halves`)
until ``oom_regrow_batches`` full batches in a row went through: the bound then doubles, back
towards ``max_batch`` (:class:`~arena.actors.backend_watch.BatchCeiling`).
An actor that can no longer serve leaves: after ``max_oom_batches`` batches in a row failed
out of memory even so (:class:`~arena.actors.backend_watch.OutOfMemoryStreak`) it fails that batch's
requests, stops (:attr:`InferenceActor.gave_up` says why, :meth:`InferenceActor.serving`
returns) and ``arena inference`` exits with status 1, that reason its last line, for ``arena
train`` to restart it; its queued requests fail with ``shutting_down``, which requesters send
again. A lone failed batch fails only its own requests.

Generation runs on one worker thread, so the event loop keeps answering heartbeats, queueing
and refusing requests while a batch is being generated. Run it as a process with
``arena inference --address ipc:///tmp/arena.sock --model tiny --name main`` (its flags are the
fields of :class:`~arena.policies.config.InferenceConfig`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from arena.actors.backend_watch import (
    BackendWatch,
    BatchCeiling,
    OutOfMemoryStreak,
    serve_in_halves,
)
from arena.actors.batching import BatchQueue, Pending
from arena.actors.weight_intake import WeightIntake, located
from arena.bus import Actor, BusError, Message
from arena.policies.base import Policy
from arena.policies.config import InferenceConfig, shared_settings
from arena.policies.remote import service_name
from arena.policies.types import (
    Generation,
    InvalidRequest,
    PolicyError,
    Prompt,
    SamplingParams,
    Scoring,
    check_keys,
)
from arena.weights.cuda_ipc import device_id
from arena.weights.receiver import WeightReceiver

log = logging.getLogger("arena.actors.inference")
ERROR_CHARS = 300
"""The failing batch's error is cut to this many characters in the reason an actor leaves with."""


class InferenceActor(WeightIntake):
    """Serves ``policy`` as ``policy:<name>`` on the broker at ``address``; weight and adapter
    updates are applied and acknowledged by :class:`~arena.actors.weight_intake.WeightIntake`."""

    def __init__(
        self,
        policy: Policy,
        address: str,
        config: InferenceConfig | None = None,
        *,
        actor_name: str | None = None,
        heartbeat_interval: float = 1.0,
        close_grace: float = 10.0,
    ) -> None:
        """``close_grace``: seconds :meth:`close` waits for a backend call in progress (a
        batch or a weight update) to return before it gives up on it (:attr:`wedged`)."""
        self.policy = policy
        self.close_grace = close_grace
        self.config = config = config or InferenceConfig()
        self.name = name = config.name
        self.service = service_name(name)
        self.counters: Counter[str] = Counter()
        self.batch_sizes: deque[int] = deque(maxlen=1024)
        self.actor = Actor(
            actor_name or f"inference-{name}-{os.getpid()}",
            address,
            kind="inference",
            heartbeat_interval=heartbeat_interval,
        )
        self.actor.serve(self.service, self._on_request)
        self.actor.status["policy_version"] = lambda: self.policy.version
        self.actor.status["queued"] = lambda: len(self.queue)
        # what the run compares with its inference section (arena/run/inference_settings.py)
        self.actor.status["settings"] = shared_settings(config)
        # a backend call stuck past inference.hang_timeout withholds the heartbeats, so the run
        # finds this actor hung as it finds a stopped one (arena/run/hangs.py)
        self.actor.answering = self._answering
        self.slowest_batch: tuple[float, int] = (0.0, 0)
        """(seconds, requests) of the slowest batch so far: ``arena train`` names a hang timeout
        that healthy batches this long come near (arena/run/hangs.py)."""
        self.actor.status["slowest_batch"] = lambda: list(self.slowest_batch)
        self.backend = BackendWatch(config.hang_timeout)
        """The backend call in progress and the slowest so far (the hang limit)."""
        self.actor.status["hang_limit"] = lambda: self.backend.limit
        self.actor.serve(f"{self.service}:status", self._on_status)
        self.weights = WeightReceiver(
            self.actor,
            name,
            policy,
            deliver=self._deliver,
            refuse=self._refuse,
            timeout=self.config.weight_timeout,
            shm=self.config.shm_weights,
            device=device_id(getattr(policy, "device", None)),
            locate=located,
        )
        self.actor.subscribe(f"weights.{name}", self.weights.on_weights)
        self.actor.subscribe(f"control.policy.{name}", self._on_control)
        self.actor.on("control", self._on_control)
        self.actor.on("weights", self.weights.on_weights)
        self.queue = BatchQueue(config.max_batch, config.max_wait_ms)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix=f"generate-{name}"
        )
        self._batcher: asyncio.Task[None] | None = None
        self._replies: set[asyncio.Future[Any]] = set()
        """The replies this actor owes: one per request it took and has not answered."""
        self.oom = OutOfMemoryStreak(config.max_oom_batches)
        self.ceiling = BatchCeiling(config.max_batch, config.oom_regrow_batches)
        self.actor.status["max_batch"] = lambda: self.queue.max_batch
        self.gave_up: str | None = None
        """Why this actor stopped serving on its own, in one line; None while it serves."""
        self._unable = asyncio.Event()

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        self.queue.start()
        await self.actor.start()
        self._batcher = asyncio.get_running_loop().create_task(self._batch_loop())

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set (or forever), then close."""
        await self.start()
        try:
            await self.serving(stop)
        finally:
            await self.close()

    async def serving(self, stop: asyncio.Event | None = None) -> None:
        """Wait until ``stop`` is set or this actor can no longer serve (:attr:`gave_up`)."""
        waits = [asyncio.ensure_future(self._unable.wait())]
        if stop is not None:
            waits.append(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    async def close(self) -> None:
        """Answer every request taken, fail the queued ones and the batch being generated
        (``shutting_down``), and close the bus; then wait up to ``close_grace`` for a backend
        call in progress before closing the policy."""
        if self._batcher is not None:
            self._batcher.cancel()
        self.queue.fail_all(BusError("shutting_down", f"{self.actor.name} is stopping"))
        if self._replies:  # their error replies are sent before the sockets close
            await asyncio.wait(self._replies, timeout=1.0)
            await asyncio.sleep(0)
        await self.actor.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + self.close_grace
        while self.backend.since is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self.backend.since is not None:
            log.error(
                "%s: the backend has been in one call for %.0f s and has not returned; closing "
                "without it (the process must exit without joining its thread)",
                self.actor.name,
                time.monotonic() - self.backend.since,
            )
            return  # closing the policy under a call in progress could crash the process
        self.policy.close()

    @property
    def wedged(self) -> bool:
        """Whether a backend call is still in progress: after :meth:`close`, one that did not
        return within ``close_grace`` (a hung engine), which the interpreter's exit would wait
        for forever (``arena inference`` leaves with :func:`arena.core.process.exit_now`, 1)."""
        return self.backend.since is not None

    def _answering(self) -> bool:
        """False while one backend call has run longer than ``inference.hang_timeout``: a
        wedged engine or a stuck batch, which the heartbeats (sent from the event loop, which
        still runs) must not hide."""
        overdue = self.backend.overdue()
        if overdue is None:
            return True
        if not self.counters["hung"]:
            log.error(
                "%s: one backend call has run for %.0f s, past inference.hang_timeout (%g s): "
                "heartbeats withheld, so the run declares this actor hung and replaces it",
                self.actor.name,
                overdue,
                self.backend.limit,
            )
        self.counters["hung"] += 1
        return False

    # -- requests ----------------------------------------------------------------------------
    def _on_request(self, msg: Message) -> asyncio.Future[Any]:
        body = msg.body
        if not isinstance(body, Mapping):
            raise BusError("bad_request", f"request body must be a map, got {type(body).__name__}")
        try:
            check_keys(body, ["prompt", "params", "continuations"], "request")
            if "prompt" not in body:
                raise InvalidRequest("request lacks 'prompt'")
            params = SamplingParams.from_dict(body.get("params"))
            continuations = None
            if "continuations" in body:
                prompt, continuations = self.policy.prepare_scoring(
                    Prompt.from_dict(body["prompt"]), body["continuations"], params.adapter
                )
            else:
                prompt = self.policy.prepare(Prompt.from_dict(body["prompt"]), params)
        except PolicyError as err:
            self.counters[err.code] += 1
            raise BusError(err.code, str(err)) from None
        if len(self.queue) >= self.config.max_queue:
            self.counters["busy"] += 1
            raise BusError(
                "busy",
                f"{self.actor.name} has {len(self.queue)} requests queued "
                f"(max_queue={self.config.max_queue}); retry later",
            )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.queue.put(Pending(prompt, params, future, continuations))
        reply = asyncio.ensure_future(self._reply(future))
        self._replies.add(reply)
        reply.add_done_callback(self._replies.discard)
        return reply

    @staticmethod
    async def _reply(future: asyncio.Future[Any]) -> dict[str, Any]:
        return (await future).to_dict()

    def _on_status(self, msg: Message) -> dict[str, Any]:
        return {
            "version": self.policy.version,
            "paused": self.queue.paused,
            "queued": len(self.queue),
            "batch_sizes": list(self.batch_sizes),
            "counters": dict(self.counters),
            "weights": self.weights.status(),
        }

    def _on_control(self, msg: Message) -> None:
        body = msg.body
        command = body.get("command") if isinstance(body, Mapping) else None
        if command == "pause":
            self.queue.pause()
        elif command == "resume":
            self.queue.resume()
        elif command == "load" and isinstance(body, Mapping) and "adapters" in body:
            self._load_adapters(body)
        elif command == "load":
            self.weights.on_load(body)
        else:
            self.counters["bad_control"] += 1
            log.warning("%s ignored control message %r", self.actor.name, body)

    # -- batching ----------------------------------------------------------------------------
    async def _batch_loop(self) -> None:
        while self.gave_up is None:
            batch = await self.queue.next_batch()
            if batch:
                await self._generate(batch)

    def _serve(self, batch: list[Pending]) -> tuple[list[Generation | Scoring], int]:
        """Generate and score one batch on the generation thread: weight updates run on the same
        thread, between batches, so every result of a batch comes from one version. A batch out
        of memory is served in parts; the size of the largest part served whole comes back."""
        return serve_in_halves(self._serve_whole, batch)

    def _serve_whole(self, batch: list[Pending]) -> list[Generation | Scoring]:
        generating = [p for p in batch if p.continuations is None]
        scoring = [p for p in batch if p.continuations is not None]
        results: dict[int, Generation | Scoring] = {}
        if generating:
            generated = self.policy.generate(
                [p.prompt for p in generating], [p.params for p in generating]
            )
            results |= {id(p): r for p, r in zip(generating, generated, strict=True)}
        if scoring:
            scored = self.policy.score(
                [p.prompt for p in scoring],
                [p.continuations or [] for p in scoring],
                [p.params.adapter for p in scoring],
            )
            results |= {id(p): r for p, r in zip(scoring, scored, strict=True)}
        return [results[id(p)] for p in batch]

    async def _generate(self, batch: list[Pending]) -> None:
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        try:
            results, fits = await loop.run_in_executor(
                self._executor, self.backend.call, self._serve, batch
            )
        except Exception as err:
            self.counters["batch_failed"] += 1
            log.exception("%s: a batch of %d failed", self.actor.name, len(batch))
            code = err.code if isinstance(err, PolicyError) else "policy_error"
            for pending in batch:
                if not pending.future.done():
                    pending.future.set_exception(BusError(code, f"generation failed: {err!r}"))
            if self.oom.failed(err):
                self._give_up(err, len(batch))
            return
        self.oom.served()
        if fits < len(batch):
            self.counters["oom_splits"] += 1
        if moved := self.ceiling.served(len(batch), fits):
            log.warning("%s: %s", self.actor.name, moved)
            self.queue.max_batch = self.ceiling.now
        self.batch_sizes.append(len(batch))
        elapsed = time.monotonic() - start
        if elapsed > self.slowest_batch[0]:
            self.slowest_batch = (round(elapsed, 3), len(batch))
        self.counters["batches"] += 1
        self.counters["requests"] += len(batch)
        self.counters["tokens"] += sum(
            len(r.token_ids) for r in results if isinstance(r, Generation)
        )
        self.counters["scorings"] += sum(isinstance(r, Scoring) for r in results)
        log.debug("batch of %d in %.2fs", len(batch), elapsed)
        for pending, result in zip(batch, results, strict=True):
            if not pending.future.done():
                pending.future.set_result(result)

    def _give_up(self, err: Exception, size: int) -> None:
        """Stop serving, ``max_oom_batches`` batches in a row having failed out of memory."""
        error = " ".join(repr(err).split())[:ERROR_CHARS]
        self.gave_up = (
            f"{self.actor.name} cannot serve: {self.oom.limit} batches in a row failed out of "
            f"memory (inference.max_oom_batches; the last, a batch of {size}: {error}); it "
            "exits to be restarted (a smaller inference.max_batch needs less memory)"
        )
        log.error("%s", self.gave_up)
        self._unable.set()
