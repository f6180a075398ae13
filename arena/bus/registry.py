"""The broker's registry: which actors are registered, what they offer, and who watches which
directory entry. Bookkeeping only: it sends nothing, and :mod:`arena.bus.broker` turns what it
reports into messages.

- **Actors** are known by name and by ZeroMQ routing id (the same bytes: an actor's routing id
  is its name).
- **Services.** :meth:`Registry.pick` chooses among the actors offering a service the one with
  the fewest outstanding requests; ties rotate.
- **Registration.** :func:`actor_from_register` reads a ``register`` body into an
  :class:`ActorInfo`, refusing a malformed one.
- **Pending requests** the broker routed: :meth:`Registry.answered` and :meth:`Registry.expire`
  forget them, and the actor they went to no longer counts them as outstanding.
- **The directory.** An entry is ``service:NAME`` (the instances offering it) or ``name:ACTOR``
  (that actor). Whoever resolves an entry watches it: :meth:`Registry.changes` lists, for an
  actor that joined, left or died, the directory updates its watchers must get.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from arena.bus.errors import ProtocolError
from arena.bus.headers import validate_body


@dataclass
class ActorInfo:
    """What the broker knows of one registered actor."""

    name: str
    kind: str
    services: list[str]
    topics: list[str]
    host: str
    pid: int
    identity: bytes
    last_seen: float
    endpoint: str | None = None
    """Where peers send requests straight to it (None: only through the broker)."""
    public_key: str | None = None
    """Its CURVE public key (z85), for peers connecting to its endpoint."""
    status: dict[str, Any] = field(default_factory=dict)
    """What its last heartbeat reported: ``load`` (requests in service), e.g. ``policy_version``."""
    outstanding: set[tuple[str, str]] = field(default_factory=set)
    """(requester, request id) pairs routed to this actor and not yet answered."""
    delivered: list[str] = field(default_factory=list)
    """Ids of recent episode/weights messages sent to it, reported if it dies."""

    def public(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "services": self.services,
            "topics": self.topics,
            "host": self.host,
            "pid": self.pid,
            "endpoint": self.endpoint,
            "status": self.status,
            "last_heartbeat": round(time.monotonic() - self.last_seen, 3),
        }

    def instance(self) -> dict[str, Any]:
        """Its directory entry."""
        return {"name": self.name, "endpoint": self.endpoint, "public_key": self.public_key}


def actor_from_register(identity: bytes, body: Any, now: float) -> ActorInfo:
    """The actor a ``register`` body describes, sent from routing id ``identity`` at ``now``;
    :class:`ProtocolError` when the body is malformed or names another actor than its sender."""
    validate_body("register", body)
    endpoint = _optional_str(body.get("endpoint"))
    public_key = _optional_str(body.get("public_key"))
    if body["name"].encode() != identity:
        raise ProtocolError("schema", "actor name must equal its routing id")
    return ActorInfo(
        name=body["name"],
        kind=body["kind"],
        services=[str(s) for s in body["services"]],
        topics=[str(t) for t in body["topics"]],
        host=body["host"],
        pid=body["pid"],
        identity=identity,
        last_seen=now,
        endpoint=endpoint,
        public_key=public_key,
    )


def _optional_str(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ProtocolError("schema", f"expected a string or nil, got {type(value).__name__}")
    return value


class Registry:
    """The registered actors, indexed by name, routing id and service, and the directory's
    watchers."""

    def __init__(self) -> None:
        self.actors: dict[str, ActorInfo] = {}
        self.by_identity: dict[bytes, ActorInfo] = {}
        self._offering: dict[str, list[ActorInfo]] = {}
        self._watchers: dict[str, set[str]] = {}
        """Directory key -> names of the actors that resolved it (told of every change)."""
        self._rotation = itertools.count()
        self._reminded: dict[bytes, float] = {}
        """Routing id of an unknown sender -> when it was last told to register."""
        self.pending: dict[tuple[str, str], tuple[str, float]] = {}
        """(requester, request id) -> (the actor it was routed to, when): requests the broker
        routed and awaits the answers of (it adds them itself, on its hot path)."""

    def add(self, actor: ActorInfo) -> None:
        """Register ``actor`` (the caller has removed an earlier actor of the same name)."""
        self.actors[actor.name] = actor
        self.by_identity[actor.identity] = actor
        self._reminded.pop(actor.identity, None)
        self._reindex()

    def remove(self, actor: ActorInfo) -> None:
        """Forget ``actor``; it no longer watches any entry."""
        self.actors.pop(actor.name, None)
        if self.by_identity.get(actor.identity) is actor:
            self.by_identity.pop(actor.identity, None)
        self._reindex()
        for watchers in self._watchers.values():
            watchers.discard(actor.name)

    def pick(self, service: str) -> ActorInfo | None:
        """The actor offering ``service`` with the fewest outstanding requests (ties rotate)."""
        offering = self._offering.get(service)
        if not offering:
            return None
        if len(offering) == 1:
            return offering[0]
        least = min(len(a.outstanding) for a in offering)
        candidates = [a for a in offering if len(a.outstanding) == least]
        return candidates[next(self._rotation) % len(candidates)]

    def _reindex(self) -> None:
        self._offering = {}
        for actor in self.actors.values():
            for service in actor.services:
                self._offering.setdefault(service, []).append(actor)

    # -- the directory -----------------------------------------------------------------------
    def instances(self, key: str) -> list[dict[str, Any]] | None:
        """The entry ``key``: the instances with an endpoint (None: not a directory key)."""
        kind, _, name = key.partition(":")
        if kind == "service":
            actors = self._offering.get(name, [])
        elif kind == "name":
            actors = [self.actors[name]] if name in self.actors else []
        else:
            return None
        return [a.instance() for a in actors if a.endpoint is not None]

    def remind(self, identity: bytes, now: float, interval: float, mtype: str) -> bool:
        """Whether to tell the unknown sender ``identity`` of an ``mtype`` message to register:
        always for a request (its sender waits for an answer), otherwise at most once per
        ``interval`` seconds, so that a stream of heartbeats does not earn a stream of errors."""
        if mtype != "request" and now - self._reminded.get(identity, 0.0) < interval:
            return False
        if len(self._reminded) >= 4096:
            self._reminded.clear()
        self._reminded[identity] = now
        return True

    def answered(self, key: tuple[str, str]) -> bool:
        """Forget the routed request ``key``, now answered; False when none was pending."""
        entry = self.pending.pop(key, None)
        if entry is None:
            return False
        target = self.actors.get(entry[0])
        if target is not None:
            target.outstanding.discard(key)
        return True

    def expire(self, now: float, ttl: float) -> None:
        """Forget the routed requests older than ``ttl`` seconds (their requesters timed out)."""
        for key in [k for k, (_, t) in self.pending.items() if now - t > ttl]:
            target_name, _ = self.pending.pop(key)
            if target_name in self.actors:
                self.actors[target_name].outstanding.discard(key)

    def resolve(self, requester: ActorInfo, key: Any) -> list[dict[str, Any]] | None:
        """The entry ``key``, which ``requester`` watches from now on (None: not a key)."""
        instances = self.instances(key) if isinstance(key, str) else None
        if instances is not None:
            self._watchers.setdefault(key, set()).add(requester.name)
        return instances

    def changes(self, actor: ActorInfo) -> Iterator[tuple[ActorInfo, dict[str, Any]]]:
        """(watcher, ``directory`` control body) for every entry ``actor`` belongs to, after it
        joined, left or died; ``actor`` itself is not told, and gone watchers are dropped."""
        keys = [f"name:{actor.name}", *(f"service:{s}" for s in actor.services)]
        for key in keys:
            watchers = self._watchers.get(key)
            if not watchers:
                continue
            body = {"op": "directory", "key": key, "instances": self.instances(key)}
            for name in list(watchers):
                watcher = self.actors.get(name)
                if watcher is None:
                    watchers.discard(name)
                elif watcher is not actor:
                    yield watcher, body
