"""A policy served by an inference actor (:mod:`arena.actors.inference`) over the bus.

Each prompt becomes one request to service ``policy:<name>`` (a generation, or with
``continuations`` a scoring: :meth:`RemotePolicy.ascore`); the inference actor batches
requests from every caller. Request and reply bodies are described in :mod:`arena.actors.inference`.
Chat rendering and token-in/token-out continuation happen on the serving side, so callers
need no tokenizer.

From asyncio code (rollout actors), share the process's :class:`~arena.bus.Actor` and await
:meth:`RemotePolicy.agenerate`; from plain code, :meth:`RemotePolicy.connect` opens its own
:class:`~arena.bus.BlockingActor`. A dead or missing inference actor surfaces as a
:class:`~arena.bus.BusError` (``actor_dead``, ``unknown_service``, ``timeout``), never a hang;
a prompt the server refuses as too long for the context as the
:class:`~arena.policies.types.ContextOverflow` a local policy raises.

**No server, no storm.** On the asyncio path a request that finds no inference actor to serve
it (:data:`NO_SERVER`: the one serving it died, hung and was killed, is restarting, or the
broker is) is sent again after a pause that doubles up to :data:`MAX_BACKOFF`, until the
policy's ``timeout`` (the run's ``inference.timeout``) since the first try; only then does it
fail, and its episode with it. So while no actor serves a policy, the rollout actors' episodes
wait instead of failing by the thousand, no new job starts (the jobs in flight hold the
admission room), and a step drops at most the episodes whose requests outwaited the timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import uuid
from collections.abc import Sequence
from typing import Any

from arena.bus import Actor, BlockingActor, BusError, Message
from arena.policies.base import Policy
from arena.policies.config import PolicyConfig
from arena.policies.types import (
    ContextOverflow,
    Generation,
    InvalidRequest,
    PromptLike,
    SamplingParams,
    Scoring,
    as_continuations,
    as_prompt,
    per_request,
)

NO_SERVER = frozenset(
    {"actor_dead", "unknown_service", "unreachable", "broker_lost", "shutting_down", "closed"}
)
"""Error codes that mean nobody served the request (rather than that it was refused)."""
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 5.0
"""Seconds between tries of a request that found no server: from the first, doubling to this."""

log = logging.getLogger("arena.policies.remote")


def _raise_overflow(err: BusError) -> None:
    """The server's ``context_overflow`` refusal as the :class:`ContextOverflow` a local policy
    raises, so that an episode ends with termination ``context_overflow`` (keeping what was
    played) whichever side measured the prompt, instead of failing."""
    if err.code == ContextOverflow.code:
        raise ContextOverflow(err.message) from err


def _answer(future: concurrent.futures.Future[Message]) -> Message:
    try:
        return future.result()
    except BusError as err:
        _raise_overflow(err)
        raise


def service_name(policy_name: str) -> str:
    """The bus service an inference actor for ``policy_name`` offers."""
    return f"policy:{policy_name}"


def request_body(prompt: PromptLike, params: SamplingParams) -> dict[str, Any]:
    return {"prompt": as_prompt(prompt).to_dict(), "params": params.to_dict()}


class RemotePolicy(Policy):
    """The :class:`Policy` interface over an inference actor's ``policy:<name>`` service."""

    def __init__(
        self,
        actor: Actor | BlockingActor,
        name: str = "main",
        timeout: float = PolicyConfig.timeout,
    ) -> None:
        self.actor = actor
        self.name = name
        self.service = service_name(name)
        self.timeout = timeout
        self.version = -1
        """The version of the latest reply (-1 before the first)."""
        self.waits = 0
        """Requests sent again because no server answered them (asyncio path)."""
        self._owned = False

    @classmethod
    def connect(
        cls, address: str, name: str = "main", timeout: float = PolicyConfig.timeout
    ) -> RemotePolicy:
        """A policy with its own blocking bus client (closed by :meth:`close`)."""
        client = BlockingActor(f"policy-client-{os.getpid()}-{uuid.uuid4().hex[:6]}", address)
        client.start()
        policy = cls(client, name, timeout)
        policy._owned = True
        return policy

    @classmethod
    def from_config(cls, config: PolicyConfig) -> RemotePolicy:
        if not config.address:
            raise InvalidRequest("a remote policy needs 'address', the broker to reach it through")
        return cls.connect(config.address, config.name, config.timeout)

    def generate(
        self,
        prompts: Sequence[PromptLike],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[Generation]:
        if not isinstance(self.actor, BlockingActor):
            raise TypeError(
                "generate() needs a BlockingActor; with an asyncio Actor await agenerate()"
            )
        bodies = self._bodies(prompts, params)
        futures = [
            self.actor.request(b, service=self.service, timeout=self.timeout) for b in bodies
        ]
        concurrent.futures.wait(futures)
        return [self._result(_answer(f)) for f in futures]

    async def agenerate(
        self,
        prompts: Sequence[PromptLike],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[Generation]:
        if isinstance(self.actor, BlockingActor):
            return await asyncio.to_thread(self.generate, prompts, params)
        bodies = self._bodies(prompts, params)
        replies = await asyncio.gather(*(self._arequest(b) for b in bodies))
        return [self._result(reply) for reply in replies]

    def score(
        self,
        prompts: Sequence[PromptLike],
        continuations: Sequence[Sequence[Any]],
        adapters: Sequence[str | None] | None = None,
    ) -> list[Scoring]:
        if not isinstance(self.actor, BlockingActor):
            raise TypeError("score() needs a BlockingActor; with an asyncio Actor await ascore()")
        futures = [
            self.actor.request(b, service=self.service, timeout=self.timeout)
            for b in self._score_bodies(prompts, continuations, adapters)
        ]
        concurrent.futures.wait(futures)
        return [self._scoring(_answer(f)) for f in futures]

    async def ascore(
        self,
        prompts: Sequence[PromptLike],
        continuations: Sequence[Sequence[Any]],
        adapters: Sequence[str | None] | None = None,
    ) -> list[Scoring]:
        if isinstance(self.actor, BlockingActor):
            return await asyncio.to_thread(self.score, prompts, continuations, adapters)
        bodies = self._score_bodies(prompts, continuations, adapters)
        replies = await asyncio.gather(*(self._arequest(b) for b in bodies))
        return [self._scoring(reply) for reply in replies]

    async def _arequest(self, body: dict[str, Any]) -> Message:
        """One request, sent again while no server answers it (see **No server, no storm**)."""
        assert isinstance(self.actor, Actor)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        delay = FIRST_BACKOFF
        while True:
            left = deadline - loop.time()
            try:
                return await self.actor.request(body, service=self.service, timeout=left)
            except BusError as err:
                _raise_overflow(err)
                if err.code not in NO_SERVER or loop.time() + delay >= deadline:
                    raise
                self.waits += 1
                if self.waits == 1 or self.waits % 1000 == 0:
                    log.warning(
                        "no inference actor answers %s (%s): requests wait and are sent again "
                        "(%d so far) until inference.timeout (%g s)",
                        self.service,
                        err,
                        self.waits,
                        self.timeout,
                    )
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF)

    def close(self) -> None:
        if self._owned and isinstance(self.actor, BlockingActor):
            self.actor.close()
            self._owned = False

    def _bodies(self, prompts: Sequence[PromptLike], params: Any) -> list[dict[str, Any]]:
        all_params = per_request(params, len(prompts))
        return [request_body(p, sp) for p, sp in zip(prompts, all_params, strict=True)]

    @staticmethod
    def _score_bodies(
        prompts: Sequence[PromptLike],
        continuations: Sequence[Sequence[Any]],
        adapters: Sequence[str | None] | None = None,
    ) -> list[dict[str, Any]]:
        if len(prompts) != len(continuations):
            raise InvalidRequest(f"{len(prompts)} prompts but {len(continuations)} continuations")
        adapters = list(adapters) if adapters is not None else [None] * len(prompts)
        bodies = []
        for prompt, replies, adapter in zip(prompts, continuations, adapters, strict=True):
            body = {
                "prompt": as_prompt(prompt).to_dict(),
                "continuations": as_continuations(replies),
            }
            if adapter is not None:
                body["params"] = {"adapter": adapter}
            bodies.append(body)
        return bodies

    def _scoring(self, reply: Message) -> Scoring:
        scoring = Scoring.from_dict(reply.body)
        self.version = max(self.version, scoring.version)
        return scoring

    def _result(self, reply: Message) -> Generation:
        generation = Generation.from_dict(reply.body)
        self.version = max(self.version, generation.version)
        return generation
