"""The actor client: a DEALER to the broker, its own ROUTER for direct requests, on asyncio.

An actor registers under a unique name, may offer services and subscribe to topics, and sends
requests that return futures with a per-request timeout::

    actor = Actor("rollout-0", "ipc:///tmp/arena.sock", services={"echo": lambda m: m.body})
    await actor.start()
    reply = await actor.request(service="policy:main", body={...}, timeout=10)

Handlers receive the decoded :class:`~arena.bus.codec.Message` and return the reply body (or an
awaitable of it); an exception becomes an ``error`` reply with code ``handler_error``. Messages
of type ``episode``, ``weights`` and ``control`` go to the callbacks given to :meth:`Actor.on`
(by type) or :meth:`Actor.subscribe` (by topic prefix).

**Routing** (``routing=``, see :mod:`arena.bus.peers`): an actor that serves binds its own socket
and registers its endpoint; requests and directly addressed messages to a resolved service or
actor go peer to peer, and the broker keeps registration, heartbeats, death notices, pub/sub
and the directory. ``auto`` (the default) falls back to the broker while a peer's connection
is not up; ``brokered`` sends everything through the broker.

**Liveness** (heartbeats, a lost broker, registering again) and **hangs**:
:mod:`arena.bus.liveness`. A background task that fails (heartbeats, the request sweeper, a
re-registration) is logged, never lost silently.

For threads that are not asyncio, :class:`~arena.bus.blocking.BlockingActor` runs an actor on a
background loop and offers the same calls as blocking methods and ``concurrent.futures``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import zmq

from arena.bus.channel import Channel
from arena.bus.codec import Message, decode, encode
from arena.bus.directory import Directory
from arena.bus.errors import BusError, BusTimeout, ProtocolError
from arena.bus.headers import DEFAULT_MAX_MESSAGE_BYTES
from arena.bus.keys import Security
from arena.bus.liveness import Liveness
from arena.bus.security import curve_client, curve_server, resolve_security
from arena.bus.serving import Handler, Serving
from arena.bus.sockets import check_address, configure_socket, host_info

log = logging.getLogger("arena.bus")

BROKER = "broker"
_AUTO: Any = object()

__all__ = ["Actor", "BusError", "BusTimeout", "Handler"]


class Actor(Serving):
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
        routing: str | None = None,
        listen: str | None = None,
        security: Security | None = _AUTO,
    ) -> None:
        """``routing``: ``auto``, ``direct`` or ``brokered`` (default ``ARENA_ROUTING``, else
        ``auto``); ``listen``: where to bind the
        direct socket (default: beside the broker, :func:`arena.bus.peers.listen_address`);
        ``security``: CURVE keys, by default from ``ARENA_KEYS`` (required for ``tcp://`` to a
        non-loopback address unless ``ARENA_INSECURE=1``, :mod:`arena.bus.security`)."""
        super().__init__(name, max_message_bytes, services)
        self.address = check_address(address)
        self.kind = kind
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout = 5.0 * heartbeat_interval
        """Silence after which the broker counts as lost (the broker's own value once known)."""
        self.request_timeout = request_timeout
        self.counters: Counter[str] = Counter()
        self.security = resolve_security(address) if security is _AUTO else security
        self.status: dict[str, Any] = {}
        """Sent with every heartbeat and listed by ``arena status`` (e.g. ``policy_version``); a
        callable value is called at each heartbeat."""
        self.answering: Callable[[], bool] | None = None
        """Whether this actor's work still answers (**Hangs**, :mod:`arena.bus.liveness`); None:
        always."""
        self._topic_handlers: dict[str, Handler] = {t: self._ignore for t in topics}
        self._pending: dict[str, tuple[asyncio.Future[Message], float, float]] = {}
        """Request id -> (future, deadline, timeout): one dict, one insert and one pop per call."""
        self.timeout_resolution = 0.05
        self._ctx = context or zmq.Context.instance()
        self._broker: Channel | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: list[asyncio.Task[None]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self.broker_last_seen = 0.0
        self.broker_up = False
        self.broker_sessions = 0
        """Registrations the broker accepted, and lost brokers taken back at their heartbeat:
        more than one means the broker restarted, lost this actor or was lost meanwhile, and
        what went through it at the time may be lost."""
        self.directory = Directory(self, routing, listen)
        self.liveness = Liveness(self)

    # -- configuration -----------------------------------------------------------------------
    def subscribe(self, topic: str, handler: Handler) -> None:
        """Receive broadcasts whose topic starts with ``topic`` (call before :meth:`start`)."""
        self._topic_handlers[topic] = handler

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, timeout: float = 10.0) -> None:
        """Bind the direct socket (if this actor serves), connect, register, start heartbeats.
        A start that fails (no broker, refused keys) closes what it opened: a socket left open
        would hold the process at exit, its context waiting for it."""
        self._loop = asyncio.get_running_loop()
        try:
            self.directory.bind()
            self._connect_broker()
            self._background = [self._background_task(self._expire_requests())]
            await self._register(timeout)
        except BaseException:
            await self.close()
            raise
        self._background.append(self._background_task(self.liveness.heartbeats()))

    def _background_task(self, coro: Any) -> asyncio.Task[None]:
        task = self._running_loop().create_task(coro)
        task.add_done_callback(self._log_failure)
        return task

    def _log_failure(self, task: asyncio.Task[Any]) -> None:
        """A background task that raised: say so (nobody awaits it)."""
        if not task.cancelled() and (err := task.exception()) is not None:
            self.counters["task_error"] += 1
            log.error("%s: task %s failed", self.name, task.get_coro(), exc_info=err)

    def _connect_broker(self) -> None:
        sock = self._ctx.socket(zmq.DEALER)
        configure_socket(sock, self.max_message_bytes)
        sock.setsockopt(zmq.ROUTING_ID, self.name.encode())
        if self.security is not None:
            curve_client(sock, self.security, self.security.broker_public)
        sock.connect(self.address)
        self._broker = Channel(sock, self._dispatch, self._running_loop(), self.name, self.counters)

    async def _register(self, timeout: float) -> None:
        body = {
            "name": self.name,
            "kind": self.kind,
            "services": sorted(self._services),
            "topics": sorted(self._topic_handlers),
            "endpoint": self.directory.endpoint,
            "public_key": self.security.keys.public.decode() if self.security else None,
            **host_info(),
        }
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                reply = await self._request("register", body, None, BROKER, left, via_broker=True)
                break
            except BusTimeout:
                pass
            except BusError as err:
                # No connection to queue on (the broker refused this actor's keys and the
                # socket has not reconnected yet) is a broker not answering, not a full queue.
                if err.code != "busy":
                    raise
                if left > 0:
                    await asyncio.sleep(min(0.05, left))
                    continue
            raise BusError(
                "no_broker", f"no broker answered at {self.address} within {timeout:g}s"
            ) from None
        settings = reply.body if isinstance(reply.body, dict) else {}
        self.heartbeat_timeout = float(settings.get("heartbeat_timeout", self.heartbeat_timeout))
        self.broker_last_seen = time.monotonic()
        self.broker_up = True
        self.broker_sessions += 1

    async def close(self) -> None:
        """Stop heartbeats, fail pending requests, and close the sockets."""
        for task in [*self._background, *self._tasks]:
            task.cancel()
        if self._broker is not None:
            try:
                self.send("control", {"op": "unregister"}, dst=BROKER)
            except BusError:
                pass  # the broker will notice the silence instead
        self._fail_pending(lambda _: True, BusError("closed", f"actor {self.name} closed"))
        self.directory.close()
        if self._broker is not None:
            self._broker.close(linger=500)  # long enough to flush the unregister message
            self._broker = None

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
        return self._request(mtype, body, service, dst, timeout)

    def _request(
        self,
        mtype: str,
        body: Any,
        service: str | None,
        dst: str | None,
        timeout: float | None,
        via_broker: bool = False,
    ) -> asyncio.Future[Message]:
        # The hot path of every request: explicit arguments, no ``**route`` dicts.
        future: asyncio.Future[Message] = self._running_loop().create_future()
        msg_id, frames = encode(
            mtype, body, src=self.name, dst=dst, service=service, max_bytes=self.max_message_bytes
        )
        delay = self.request_timeout if timeout is None else timeout
        self._pending[msg_id] = (future, time.monotonic() + delay, delay)
        try:
            if via_broker:
                self.send_to_broker(frames)
            else:
                self.directory.route(msg_id, frames, service, dst)
        except BaseException:
            self._pending.pop(msg_id, None)  # the caller gets the error, not the sweeper
            raise
        return future

    def send(self, mtype: str, body: Any = None, **route: Any) -> str:
        """Fire-and-forget (``episode``, ``weights``, ``control``); returns the message id."""
        msg_id, frames = encode(
            mtype, body, src=self.name, max_bytes=self.max_message_bytes, **route
        )
        if route.get("topic") is None:
            self.directory.route(None, frames, route.get("service"), route.get("dst"))
        else:
            self.send_to_broker(frames)
        return msg_id

    def publish(self, topic: str, body: Any = None, mtype: str = "control") -> str:
        """Broadcast (through the broker) to every actor subscribed to a prefix of ``topic``."""
        return self.send(mtype, body, topic=topic)

    def send_to_broker(self, frames: list[Any]) -> None:
        if self._broker is None:
            raise BusError("closed", f"actor {self.name} is not connected")
        try:
            self._broker.send(frames)
        except zmq.Again:
            raise BusError("busy", f"send queue of {self.name} is full") from None

    def _reply_to_broker(self, frames: list[Any]) -> None:
        if self._broker is not None:
            self.send_to_broker(frames)

    def _reply_direct(self, identity: bytes, frames: list[Any]) -> None:
        self.directory.server.reply(identity, frames)

    async def _expire_requests(self) -> None:
        # One sweeper instead of a timer per request: timers cost more than the sends they guard.
        while True:
            await asyncio.sleep(self.timeout_resolution)
            now = time.monotonic()
            expired = [i for i, (_, t, _) in self._pending.items() if t <= now]
            for msg_id in expired:
                future, _, delay = self._pending.pop(msg_id)
                self.directory.forget(msg_id)
                if not future.done():
                    self.counters["timeouts"] += 1
                    future.set_exception(BusTimeout("timeout", f"no reply within {delay:g}s"))

    def fail(self, msg_id: str, error: BusError) -> None:
        """Fail one pending request now (its peer died, it could not be routed)."""
        entry = self._pending.pop(msg_id, None)
        if entry is not None and not entry[0].done():
            entry[0].set_exception(error)

    def _fail_pending(self, which: Any, error: BusError) -> None:
        for msg_id in [i for i in self._pending if which(i)]:
            self.fail(msg_id, error)

    def fail_brokered(self, error: BusError) -> None:
        """Fail every pending request that went through the broker (not peer to peer)."""
        self._fail_pending(lambda i: not self.directory.is_direct(i), error)

    def reconnect_broker(self) -> None:
        """Drop the broker connection, and what is queued on it, and connect again."""
        if self._broker is not None:
            self._broker.close()
        self._connect_broker()

    # -- receiving ---------------------------------------------------------------------------
    def _dispatch(self, frames: list[Any]) -> None:
        """A message from the broker."""
        try:
            msg = decode(frames, self.max_message_bytes)
        except ProtocolError as err:
            self.counters[err.code] += 1
            log.warning("%s dropped a malformed message: %s", self.name, err)
            return
        self.broker_last_seen = time.monotonic()
        mtype = msg.type
        if mtype in ("reply", "error"):
            self.resolve(msg)
        elif mtype == "request":
            self.handle_request(msg, None)
        elif mtype == "heartbeat":
            # the broker beats only actors it knows: one lost and back (a pause, a partition
            # shorter than its timeout) still knows this one, and nothing else would say so
            if not self.broker_up:
                self.broker_up = True
                self.broker_sessions += 1
        elif msg.topic is not None:
            self.call_handler(self._match_topic(msg.topic), msg)
        elif mtype == "control" and msg.src == BROKER:
            self._broker_control(msg)
        else:
            self.call_handler(self._type_handlers.get(mtype), msg)

    def resolve(self, msg: Message) -> None:
        """Settle the request that ``msg`` (a reply or an error) answers."""
        self.directory.forget(msg.reply_to or "")
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
            if code == "not_registered" and msg.src == BROKER:
                # The broker restarted (or declared this actor dead) and the request reached it
                # before a heartbeat did: register again, and fail the request as lost with the
                # old broker, which its caller may simply send again.
                self.counters["error:not_registered"] += 1
                self.liveness.register_again("the broker does not know this actor (it restarted)")
                code, text = "broker_lost", f"the broker did not know {self.name}: {text}"
            future.set_exception(BusError(code, text))
        else:
            future.set_result(msg)

    def _on_orphan_error(self, msg: Message) -> None:
        try:
            code = msg.body.get("code")
        except (ProtocolError, AttributeError):
            code = None
        self.counters[f"error:{code}"] += 1
        if code == "not_registered" and msg.src == BROKER:
            self.liveness.register_again("the broker does not know this actor (it restarted)")
        else:
            log.warning("%s got error %r for message %r", self.name, code, msg.reply_to)

    def _broker_control(self, msg: Message) -> None:
        try:
            body = msg.body
            op = body.get("op") if isinstance(body, dict) else None
        except ProtocolError:
            op = None
        if op == "directory":
            self.directory.update(body)
        elif op == "register":
            self.liveness.register_again("the broker asked")
        else:
            self.counters["bad_control"] += 1
            log.warning("%s got an unknown control op %r from the broker", self.name, op)

    def _match_topic(self, topic: str) -> Handler | None:
        best = max((t for t in self._topic_handlers if topic.startswith(t)), key=len, default=None)
        return self._topic_handlers.get(best) if best is not None else None

    @staticmethod
    def _ignore(msg: Message) -> None:
        return None

    # -- plumbing used by the serving side and the directory ----------------------------------
    def _spawn(self, coro: Any) -> None:
        task = self._running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(self._log_failure)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise BusError("closed", f"actor {self.name} has not been started")
        return self._loop

    @property
    def context(self) -> zmq.Context:
        return self._ctx

    def server_security(self, sock: zmq.Socket) -> None:
        if self.security is not None:
            curve_server(sock, self.security)
