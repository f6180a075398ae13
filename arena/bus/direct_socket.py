"""An actor's own direct socket: the ROUTER that takes messages straight from peers.

An actor that serves binds it (beside the broker, :func:`arena.bus.peers.listen_address`, unless
told where) and registers its endpoint; peers resolve that endpoint through the broker and send
to it without the broker in the path (:mod:`arena.bus.directory` is the sending side). Replies
go back on this socket to the peer's routing id.

**Bad input on the direct socket** gets what the broker gives: an ``error`` reply, a counter and
a logged warning. The socket enforces the size limit (libzmq's hard cap, then the codec's soft
one) and the schema; it takes ``request``, ``episode``, ``weights`` and ``control`` only, and a
message whose ``src`` is not the sender's routing id is refused (``schema``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from typing import Any, Protocol

import zmq

from arena.bus.channel import Channel
from arena.bus.codec import decode, encode
from arena.bus.errors import BusError, ProtocolError
from arena.bus.peers import advertised, listen_address, remove_ipc_file, remove_stale_sockets
from arena.bus.sockets import configure_socket

log = logging.getLogger("arena.bus")

DIRECT_TYPES = frozenset({"request", "episode", "weights", "control"})
"""What a peer may send to an actor's own socket; everything else goes through the broker."""


class Host(Protocol):
    """What :class:`DirectSocket` needs of its actor (:class:`arena.bus.actor.Actor`)."""

    name: str
    address: str
    max_message_bytes: int
    serves: bool
    _type_handlers: dict[str, Any]
    counters: Counter[str]

    @property
    def context(self) -> zmq.Context: ...

    def server_security(self, sock: zmq.Socket) -> None: ...
    def _running_loop(self) -> asyncio.AbstractEventLoop: ...
    def handle_request(self, msg: Any, origin: bytes | None) -> None: ...
    def call_handler(self, handler: Any, msg: Any) -> None: ...


class DirectSocket:
    """This actor's own ROUTER: requests and messages from peers in, replies to them out."""

    def __init__(self, actor: Host, listen: str | None) -> None:
        self.actor = actor
        self.listen = listen
        self.endpoint: str | None = None
        """Where peers reach this actor (None: not bound)."""
        self._server: Channel | None = None

    def bind(self) -> None:
        """Bind and start reading, if the actor serves (else there is nothing to take)."""
        actor = self.actor
        if not actor.serves:
            return
        sock = actor.context.socket(zmq.ROUTER)
        configure_socket(sock, actor.max_message_bytes)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a restarted client takes its name back
        actor.server_security(sock)
        address = self.listen or listen_address(actor.address, actor.name)
        if address.startswith("ipc://"):
            remove_stale_sockets(os.path.dirname(address[len("ipc://") :]) or ".")
        sock.bind(address)
        bound = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.endpoint = advertised(bound, actor.address)
        loop = actor._running_loop()
        self._server = Channel(sock, self._on_direct, loop, f"{actor.name}/direct", actor.counters)
        log.info("%s takes direct requests at %s", actor.name, self.endpoint)

    def _on_direct(self, frames: list[Any]) -> None:
        actor = self.actor
        identity = frames[0]
        try:
            msg = decode(frames[1:], actor.max_message_bytes)
            if msg.type not in DIRECT_TYPES:
                raise ProtocolError("schema", f"a direct socket takes no {msg.type!r} messages")
            if msg.src.encode() != identity:
                raise ProtocolError("schema", "src must equal the sender's routing id")
        except ProtocolError as err:
            actor.counters[err.code] += 1
            log.warning("%s rejected a direct message from %r: %s", actor.name, identity, err)
            self._reject(identity, frames, err)
            return
        if msg.type == "request":
            actor.handle_request(msg, identity)
        else:
            actor.call_handler(actor._type_handlers.get(msg.type), msg)

    def _reject(self, identity: bytes, frames: list[Any], err: ProtocolError) -> None:
        try:
            header_id = decode(frames[1:], self.actor.max_message_bytes).id
        except ProtocolError:
            header_id = ""
        _, reply = encode(
            "error",
            {"code": err.code, "message": err.message},
            src=self.actor.name,
            dst=identity.decode(errors="replace"),
            reply_to=header_id,
        )
        self.reply(identity, reply)

    def reply(self, identity: bytes, frames: list[Any]) -> None:
        """Send ``frames`` to the peer whose routing id is ``identity``."""
        if self._server is None:
            raise BusError("closed", f"{self.actor.name} has no direct socket")
        try:
            self._server.send([identity, *frames])
        except zmq.ZMQError as err:  # the peer left (ROUTER_MANDATORY) or its queue is full
            raise BusError("undeliverable", f"{identity!r}: {err}") from None

    def close(self) -> None:
        if self._server is not None:
            self._server.close(linger=500)  # long enough to send the last replies to peers
            self._server = None
        remove_ipc_file(self.endpoint)
