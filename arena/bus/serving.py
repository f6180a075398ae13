"""The serving half of an actor: services, handlers, and the reply to each request.

A request comes either through the broker or straight from a peer (:mod:`arena.bus.peers`);
``origin`` says which (None: the broker; bytes: the peer's routing id on this actor's own
socket), and the reply goes back the way the request came.
"""

from __future__ import annotations

import inspect
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from arena.bus.codec import Message, encode
from arena.bus.errors import BusError, ProtocolError

log = logging.getLogger("arena.bus")

Handler = Callable[[Message], Any]


class Serving:
    """Services and type handlers; :class:`arena.bus.actor.Actor` adds the sockets."""

    counters: Counter[str]

    def __init__(
        self, name: str, max_message_bytes: int, services: Mapping[str, Handler] | None
    ) -> None:
        self.name = name
        self.max_message_bytes = max_message_bytes
        self._services: dict[str, Handler] = dict(services or {})
        self._type_handlers: dict[str, Handler] = {}
        self.load = 0
        """Requests being handled now (reported in heartbeats as the actor's queue load)."""

    def serve(self, service: str, handler: Handler) -> None:
        """Offer ``service``; takes effect at registration (call before ``start``)."""
        self._services[service] = handler

    def on(self, mtype: str, handler: Handler) -> None:
        """Receive directly addressed ``episode``, ``weights`` or ``control`` messages."""
        self._type_handlers[mtype] = handler

    @property
    def serves(self) -> bool:
        """Whether anything may be addressed to this actor (so it needs its own socket)."""
        return bool(self._services or self._type_handlers)

    # -- requests ----------------------------------------------------------------------------
    def handle_request(self, msg: Message, origin: bytes | None) -> None:
        handler = self._services.get(msg.service or "")
        if handler is None:
            self.counters["unknown_service"] += 1
            message = f"{self.name} does not serve {msg.service!r}"
            self._reply(msg, origin, "error", {"code": "unknown_service", "message": message})
            return
        self.load += 1
        self.counters["served_direct" if origin else "served_brokered"] += 1
        try:
            result = handler(msg)
        except ProtocolError as err:
            self.counters[err.code] += 1
            self._done(msg, origin, "error", {"code": err.code, "message": err.message})
            return
        except BusError as err:
            self._done(msg, origin, "error", {"code": err.code, "message": err.message})
            return
        except Exception as err:
            self.counters["handler_error"] += 1
            log.exception("%s: handler for %r failed", self.name, msg.service)
            self._done(msg, origin, "error", {"code": "handler_error", "message": _said(err)})
            return
        if inspect.isawaitable(result):
            self._spawn(self._finish(msg, origin, result))
        else:
            self._done(msg, origin, "reply", result)

    async def _finish(self, msg: Message, origin: bytes | None, pending: Awaitable[Any]) -> None:
        try:
            result = await pending
        except (ProtocolError, BusError) as err:
            self._done(msg, origin, "error", {"code": err.code, "message": err.message})
        except Exception as err:
            self.counters["handler_error"] += 1
            log.exception("%s: handler for %r failed", self.name, msg.service)
            self._done(msg, origin, "error", {"code": "handler_error", "message": _said(err)})
        else:
            self._done(msg, origin, "reply", result)

    def _done(self, msg: Message, origin: bytes | None, mtype: str, body: Any) -> None:
        self.load -= 1
        self._reply(msg, origin, mtype, body)

    def _reply(self, request: Message, origin: bytes | None, mtype: str, body: Any) -> None:
        src, dst, reply_to = self.name, request.src, request.id
        try:
            _, frames = encode(
                mtype, body, src=src, dst=dst, reply_to=reply_to, max_bytes=self.max_message_bytes
            )
        except (TypeError, ValueError) as err:
            self.counters["bad_reply"] += 1
            error = {"code": "handler_error", "message": str(err)}
            _, frames = encode("error", error, src=src, dst=dst, reply_to=reply_to)
        try:
            if origin is None:
                self._reply_to_broker(frames)
            else:
                self._reply_direct(origin, frames)
        except BusError as err:
            self.counters["undeliverable"] += 1
            log.warning("%s could not reply to %s: %s", self.name, request.src, err)

    # -- other messages ----------------------------------------------------------------------
    def call_handler(self, handler: Handler | None, msg: Message) -> None:
        if handler is None:
            self.counters[f"unhandled:{msg.type}"] += 1
            log.warning("%s has no handler for %s message %s", self.name, msg.type, msg.id)
            return
        try:
            result = handler(msg)
        except Exception:
            self.counters["handler_error"] += 1
            log.exception("%s: %s handler failed", self.name, msg.type)
            return
        if inspect.isawaitable(result):
            self._spawn(self._guard(result))

    async def _guard(self, pending: Awaitable[Any]) -> None:
        try:
            await pending
        except Exception:
            self.counters["handler_error"] += 1
            log.exception("%s: async handler failed", self.name)

    # -- provided by the actor ---------------------------------------------------------------
    def _spawn(self, coro: Any) -> None:
        raise NotImplementedError

    def _reply_to_broker(self, frames: list[Any]) -> None:
        raise NotImplementedError

    def _reply_direct(self, identity: bytes, frames: list[Any]) -> None:
        raise NotImplementedError


def _said(err: Exception) -> str:
    """A handler's exception as its error reply says it: ``repr``, except that an OSError
    keeps the path it failed on (``OSError(30, 'Read-only file system')`` names none)."""
    if isinstance(err, OSError) and err.filename is not None:
        return f"{type(err).__name__}: {err}"
    return repr(err)
