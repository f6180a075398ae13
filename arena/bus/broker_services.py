"""The services the broker answers itself, whoever else registers.

- ``echo``: the request's body back (``arena ping``);
- ``broker.actors``: every registered actor's public record (``arena status``);
- ``broker.stats``: the broker's fault counters (with keys on, ``keys_refused``: handshakes
  that ZAP refused because the peer's key is not allow-listed);
- ``broker.resolve``: a directory entry (body ``{"key": "service:NAME"}`` or
  ``{"key": "name:ACTOR"}``), which the asker then watches (:mod:`arena.bus.registry`).

A registered actor may offer one of these names too; the broker answers only while none does.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from arena.bus.codec import Message
from arena.bus.errors import ProtocolError
from arena.bus.registry import Registry

BUILTIN_SERVICES = ("echo", "broker.actors", "broker.stats", "broker.resolve")


def answer_builtin(
    registry: Registry, counters: Counter[str], identity: bytes, msg: Message
) -> Any:
    """The reply body to ``msg``, sent by routing id ``identity`` to a built-in service (or to
    the broker by name); :class:`ProtocolError` is the error reply to send instead."""
    if msg.type != "request":
        raise ProtocolError("unknown_service", "broker takes requests only")
    if msg.service == "broker.actors":
        return [a.public() for a in registry.actors.values()]
    if msg.service == "broker.stats":
        return dict(counters)
    if msg.service == "broker.resolve":
        requester = registry.by_identity.get(identity)
        if requester is None:
            raise ProtocolError("not_registered", "register before resolving")
        key = msg.body.get("key") if isinstance(msg.body, dict) else None
        instances = registry.resolve(requester, key)
        if instances is None:
            raise ProtocolError("schema", 'resolve takes {"key": "service:NAME" or "name:ACTOR"}')
        return instances
    if msg.service == "echo":
        return msg.body
    raise ProtocolError("unknown_service", f"broker has no {msg.service!r}")
