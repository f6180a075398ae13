"""The broker's side of liveness: heartbeating the actors it knows, declaring the silent ones
dead (failing the requests pending on them and telling the subscribers of ``actor.dead``), and
forgiving the time it did not run itself.

:class:`Reaping` is mixed into :class:`arena.bus.broker.Broker`, which owns the registry and the
socket; it needs only what :class:`Reaping` declares.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from arena.bus.registry import ActorInfo, Registry

log = logging.getLogger("arena.broker")

STALL = 1.0
"""Seconds between two turns of the broker's loop that mean it did not run (a turn takes at
most its 0.1 s receive timeout and one message's handling)."""


class Reaping:
    """Heartbeats out, and the dead declared; mixed into the broker."""

    heartbeat_timeout: float
    pending_ttl: float
    counters: Counter[str]
    registry: Registry
    _actors: dict[str, ActorInfo]
    _pending: dict[tuple[str, str], Any]

    if TYPE_CHECKING:  # the broker's own

        def _send(self, identity: bytes, mtype: str, body: Any, **route: Any) -> None: ...
        def _remove(self, actor: ActorInfo) -> None: ...

    def _stalled(self, seconds: float) -> None:
        """The loop did not run for ``seconds``: nobody could be heard meanwhile, so nobody's
        silence grows by it."""
        self.counters["stalls"] += 1
        log.warning("the broker did not run for %.1fs; that time counts against no actor", seconds)
        for actor in self._actors.values():
            actor.last_seen += seconds

    def _tick(self) -> None:
        now = time.monotonic()
        for actor in list(self._actors.values()):
            if now - actor.last_seen > self.heartbeat_timeout:
                self._declare_dead(actor)
            else:
                self._send(actor.identity, "heartbeat", None)
        self.registry.expire(now, self.pending_ttl)

    def _declare_dead(self, actor: ActorInfo, reason: str | None = None) -> None:
        self.counters["actor_dead"] += 1
        reason = reason or f"missed heartbeats for {self.heartbeat_timeout:.1f}s"
        log.warning("actor %s (pid %s) %s: declared dead", actor.name, actor.pid, reason)
        self._remove(actor)
        failed = sorted(actor.outstanding)
        for requester_name, request_id in failed:
            self._pending.pop((requester_name, request_id), None)
            requester = self._actors.get(requester_name)
            if requester is not None:
                self._send(
                    requester.identity,
                    "error",
                    {
                        "code": "actor_dead",
                        "message": f"actor {actor.name!r} died before answering",
                    },
                    dst=requester_name,
                    reply_to=request_id,
                )
        self._notify(
            "actor.dead",
            {
                **actor.public(),
                "requests": [r for _, r in failed],
                "delivered": list(actor.delivered),
            },
        )

    def _notify(self, topic: str, body: Any) -> None:
        for actor in list(self._actors.values()):
            if any(topic.startswith(t) for t in actor.topics):
                self._send(actor.identity, "control", body, topic=topic)
