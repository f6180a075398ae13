"""The actor client: one DEALER socket to the broker, driven by an asyncio event loop.

An actor registers under a unique name, may offer services and subscribe to topics, and sends
requests that return futures with a per-request timeout::

    actor = Actor("rollout-0", "ipc:///tmp/arena.sock", services={"echo": lambda m: m.body})
    await actor.start()
    reply = await actor.request(service="policy:main", body={...}, timeout=10)

Handlers receive the decoded :class:`~arena.bus.codec.Message` and return the reply body (or an
awaitable of it); an exception becomes an ``error`` reply with code ``handler_error``. Messages
of type ``episode``, ``weights`` and ``control`` go to the callbacks given to :meth:`Actor.on`
(by type) or :meth:`Actor.subscribe` (by topic prefix).

For threads that are not asyncio, :class:`~arena.bus.blocking.BlockingActor` runs an actor on a
background loop and offers the same calls as blocking methods and ``concurrent.futures``.

The socket is a plain pyzmq socket whose file descriptor is watched with ``loop.add_reader``;
that costs less per message than ``zmq.asyncio``. ZeroMQ's descriptor is edge-triggered, so the
reader drains the socket completely, and a send made outside the reader re-checks for pending
input (a send may consume the edge). Sends made while draining need no check: the drain ends
with a receive that finds nothing, after the send.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import zmq

from arena.bus.codec import (
    DEFAULT_MAX_MESSAGE_BYTES,
    Message,
    ProtocolError,
    decode,
    encode,
)
from arena.bus.sockets import (
    EVENTS,
    NOBLOCK,
    POLLIN,
    RCVMORE,
    check_address,
    configure_socket,
    host_info,
    send,
)

log = logging.getLogger("arena.bus")

Handler = Callable[[Message], Any]


class BusError(RuntimeError):
    """A request that failed: the remote side, the broker, or the bus itself said no."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class BusTimeout(BusError, TimeoutError):
    """No reply arrived within the request's timeout."""


class Actor:
    """An asyncio bus client that can send requests, serve services and receive broadcasts."""

    def __init__(
        self,
        name: str,
        address: str,
        *,
        kind: str = "actor",
        services: Mapping[str, Handler] | None = None,
        topics: Iterable[str] = (),
        heartbeat_interval: float = 1.0,
        request_timeout: float = 30.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        context: zmq.Context | None = None,
    ) -> None:
        self.name = name
        self.address = check_address(address)
        self.kind = kind
        self.heartbeat_interval = heartbeat_interval
        self.request_timeout = request_timeout
        self.max_message_bytes = max_message_bytes
        self.counters: Counter[str] = Counter()
        self._services: dict[str, Handler] = dict(services or {})
        self._topic_handlers: dict[str, Handler] = {t: self._ignore for t in topics}
        self._type_handlers: dict[str, Handler] = {}
        self._pending: dict[str, tuple[asyncio.Future[Message], float, float]] = {}
        """Request id -> (future, deadline, timeout): one dict, one insert and one pop per call."""
        self._draining = False
        self._drain_scheduled = False
        self.timeout_resolution = 0.05
        self._ctx = context or zmq.Context.instance()
        self._sock: zmq.Socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._sweeper_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.broker_last_seen = 0.0

    # -- configuration -----------------------------------------------------------------------
    def serve(self, service: str, handler: Handler) -> None:
        """Offer ``service``; takes effect at registration (call before :meth:`start`)."""
        self._services[service] = handler

    def subscribe(self, topic: str, handler: Handler) -> None:
        """Receive broadcasts whose topic starts with ``topic`` (call before :meth:`start`)."""
        self._topic_handlers[topic] = handler

    def on(self, mtype: str, handler: Handler) -> None:
        """Receive directly addressed ``episode``, ``weights`` or ``control`` messages."""
        self._type_handlers[mtype] = handler

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, timeout: float = 10.0) -> None:
        """Connect, register with the broker, and start heartbeats."""
        self._loop = asyncio.get_running_loop()
        sock = self._ctx.socket(zmq.DEALER)
        configure_socket(sock, self.max_message_bytes)
        sock.setsockopt(zmq.ROUTING_ID, self.name.encode())
        sock.connect(self.address)
        self._sock = sock
        self._loop.add_reader(sock.getsockopt(zmq.FD), self._on_readable)
        self._sweeper_task = self._loop.create_task(self._expire_requests())
        await self._register(timeout)
        self._heartbeat_task = self._loop.create_task(self._heartbeat())

    async def _register(self, timeout: float) -> None:
        body = {
            "name": self.name,
            "kind": self.kind,
            "services": sorted(self._services),
            "topics": sorted(self._topic_handlers),
            **host_info(),
        }
        try:
            await self._request("register", body, timeout=timeout)
        except BusTimeout:
            raise BusError(
                "no_broker", f"no broker answered at {self.address} within {timeout:.0f}s"
            ) from None

    async def close(self) -> None:
        """Stop heartbeats, fail pending requests, and close the socket."""
        for background in (self._heartbeat_task, self._sweeper_task):
            if background is not None:
                background.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._sock is not None:
            try:
                self.send("control", {"op": "unregister"}, dst="broker")
            except BusError:
                pass  # the broker will notice the silence instead
        for future, _, _ in self._pending.values():
            if not future.done():
                future.set_exception(BusError("closed", f"actor {self.name} closed"))
        self._pending.clear()
        if self._sock is not None:
            if self._loop is not None:
                self._loop.remove_reader(self._sock.getsockopt(zmq.FD))
            self._sock.close(linger=500)  # long enough to flush the unregister message
            self._sock = None

    async def __aenter__(self) -> Actor:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- sending -----------------------------------------------------------------------------
    def request(
        self,
        body: Any = None,
        *,
        service: str | None = None,
        dst: str | None = None,
        timeout: float | None = None,
        mtype: str = "request",
    ) -> asyncio.Future[Message]:
        """Send a request; the future resolves to the reply :class:`Message`, or raises
        :class:`BusError` (an ``error`` reply) or :class:`BusTimeout`."""
        if service is None and dst is None:
            raise ValueError("a request needs a service or a dst")
        return self._request(mtype, body, service=service, dst=dst, timeout=timeout)

    def _request(
        self, mtype: str, body: Any, timeout: float | None = None, **route: Any
    ) -> asyncio.Future[Message]:
        loop = self._running_loop()
        future: asyncio.Future[Message] = loop.create_future()
        msg_id, frames = encode(
            mtype, body, src=self.name, max_bytes=self.max_message_bytes, **route
        )
        delay = self.request_timeout if timeout is None else timeout
        self._pending[msg_id] = (future, time.monotonic() + delay, delay)
        self._send(frames)
        return future

    def send(self, mtype: str, body: Any = None, **route: Any) -> str:
        """Fire-and-forget (``episode``, ``weights``, ``control``); returns the message id."""
        msg_id, frames = encode(
            mtype, body, src=self.name, max_bytes=self.max_message_bytes, **route
        )
        self._send(frames)
        return msg_id

    def publish(self, topic: str, body: Any = None, mtype: str = "control") -> str:
        """Broadcast to every actor subscribed to a prefix of ``topic``."""
        return self.send(mtype, body, topic=topic)

    def _send(self, frames: list[Any]) -> None:
        sock = self._sock
        if sock is None:
            raise BusError("closed", f"actor {self.name} is not connected")
        try:
            send(sock, frames)
        except zmq.Again:
            raise BusError("busy", f"send queue of {self.name} is full") from None
        # The descriptor is edge-triggered and a send can swallow the edge of pending input.
        # No check is needed while draining or with a drain already scheduled: either ends
        # with a receive that finds nothing, after this send.
        if self._draining or self._drain_scheduled or self._loop is None:
            return
        if sock.getsockopt(EVENTS) & POLLIN:
            self._drain_scheduled = True
            self._loop.call_soon(self._on_readable)

    def _reply(self, request: Message, mtype: str, body: Any) -> None:
        try:
            _, frames = encode(
                mtype,
                body,
                src=self.name,
                dst=request.src,
                reply_to=request.id,
                max_bytes=self.max_message_bytes,
            )
        except (TypeError, ValueError) as err:
            self.counters["bad_reply"] += 1
            _, frames = encode(
                "error",
                {"code": "handler_error", "message": str(err)},
                src=self.name,
                dst=request.src,
                reply_to=request.id,
            )
        if self._sock is not None:
            self._send(frames)

    async def _expire_requests(self) -> None:
        # One sweeper instead of a timer per request: timers cost more than the sends they guard.
        while True:
            await asyncio.sleep(self.timeout_resolution)
            now = time.monotonic()
            expired = [i for i, (_, t, _) in self._pending.items() if t <= now]
            for msg_id in expired:
                future, _, delay = self._pending.pop(msg_id)
                if not future.done():
                    self.counters["timeouts"] += 1
                    future.set_exception(BusTimeout("timeout", f"no reply within {delay:g}s"))

    # -- receiving ---------------------------------------------------------------------------
    def _on_readable(self) -> None:
        self._drain_scheduled = False
        sock = self._sock
        if sock is None or self._draining:
            return
        self._draining = True
        try:
            while True:
                try:
                    frames = [sock.recv(NOBLOCK)]  # the header: small, so copied
                except zmq.Again:
                    break
                while sock.getsockopt(RCVMORE):
                    frames.append(sock.recv(copy=False))  # binary frames, zero-copy
                try:
                    self._dispatch(frames)
                except Exception:  # e.g. a reply that found the send queue full
                    # Keep draining: stopping here would strand the queued messages, since
                    # the descriptor will not signal them again.
                    self.counters["dispatch_error"] += 1
                    log.exception("%s failed to handle a message", self.name)
                sock = self._sock
                if sock is None:
                    break
        finally:
            self._draining = False

    def _dispatch(self, frames: list[Any]) -> None:
        try:
            msg = decode(frames, self.max_message_bytes)
        except ProtocolError as err:
            self.counters[err.code] += 1
            log.warning("%s dropped a malformed message: %s", self.name, err)
            return
        self.broker_last_seen = time.monotonic()
        mtype = msg.type
        if mtype in ("reply", "error"):
            self._resolve(msg)
        elif mtype == "request":
            self._handle_request(msg)
        elif mtype == "heartbeat":
            return
        elif msg.topic is not None:
            handler = self._match_topic(msg.topic)
            self._call(handler, msg)
        else:
            self._call(self._type_handlers.get(mtype), msg)

    def _resolve(self, msg: Message) -> None:
        entry = self._pending.pop(msg.reply_to, None)  # type: ignore[arg-type]
        if entry is None:
            self.counters["unknown_reply"] += 1
            if msg.type == "error":
                self._on_orphan_error(msg)
            else:
                log.warning("%s got a reply to unknown request %r", self.name, msg.reply_to)
            return
        future = entry[0]
        if future.done():
            return
        if msg.type == "error":
            try:
                body = msg.body
                code, text = str(body.get("code", "error")), str(body.get("message", ""))
            except (ProtocolError, AttributeError):
                code, text = "malformed", "unreadable error reply"
            future.set_exception(BusError(code, text))
        else:
            future.set_result(msg)

    def _on_orphan_error(self, msg: Message) -> None:
        try:
            code = msg.body.get("code")
        except (ProtocolError, AttributeError):
            code = None
        self.counters[f"error:{code}"] += 1
        if code == "not_registered" and self._loop is not None:
            # The broker restarted and forgot us: register again.
            log.warning("%s is unknown to the broker; registering again", self.name)
            self._spawn(self._register(timeout=self.request_timeout))
        else:
            log.warning("%s got error %r for message %r", self.name, code, msg.reply_to)

    def _handle_request(self, msg: Message) -> None:
        handler = self._services.get(msg.service or "")
        if handler is None:
            self.counters["unknown_service"] += 1
            self._reply(
                msg,
                "error",
                {
                    "code": "unknown_service",
                    "message": f"{self.name} does not serve {msg.service!r}",
                },
            )
            return
        try:
            result = handler(msg)
        except ProtocolError as err:
            self.counters[err.code] += 1
            self._reply(msg, "error", {"code": err.code, "message": err.message})
            return
        except BusError as err:
            self._reply(msg, "error", {"code": err.code, "message": err.message})
            return
        except Exception as err:
            self.counters["handler_error"] += 1
            log.exception("%s: handler for %r failed", self.name, msg.service)
            self._reply(msg, "error", {"code": "handler_error", "message": repr(err)})
            return
        if inspect.isawaitable(result):
            self._spawn(self._finish(msg, result))
        else:
            self._reply(msg, "reply", result)

    async def _finish(self, msg: Message, pending: Awaitable[Any]) -> None:
        try:
            result = await pending
        except (ProtocolError, BusError) as err:
            self._reply(msg, "error", {"code": err.code, "message": err.message})
        except Exception as err:
            self.counters["handler_error"] += 1
            log.exception("%s: handler for %r failed", self.name, msg.service)
            self._reply(msg, "error", {"code": "handler_error", "message": repr(err)})
        else:
            self._reply(msg, "reply", result)

    def _match_topic(self, topic: str) -> Handler | None:
        best = max((t for t in self._topic_handlers if topic.startswith(t)), key=len, default=None)
        return self._topic_handlers.get(best) if best is not None else None

    def _call(self, handler: Handler | None, msg: Message) -> None:
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

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = self._running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    def _ignore(msg: Message) -> None:
        return None

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            try:
                self.send("heartbeat")
            except BusError as err:
                log.warning("%s could not send a heartbeat: %s", self.name, err)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise BusError("closed", f"actor {self.name} has not been started")
        return self._loop
