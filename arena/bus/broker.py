"""The broker: one ROUTER socket that registers actors and routes messages between them.

- **Registry.** Actors send ``register`` (name, kind, services, topics, host, pid); the broker
  answers with a ``reply``. An actor's ZeroMQ routing id is its name. The bookkeeping (who is
  registered, who offers what, who watches which directory entry) is :mod:`arena.bus.registry`.
- **Routing.** A message with ``dst`` goes to that actor. A message with only ``service`` goes to
  the least-loaded actor offering it (fewest outstanding requests; ties rotate). A message with
  ``topic`` is broadcast to every actor subscribed to a prefix of it. ``reply``/``error`` go back
  to the requester named in ``dst``, and must answer a request the broker routed.
- **Liveness.** Actors send heartbeats; the broker sends its own. An actor silent for
  ``heartbeat_timeout`` seconds is declared dead: each request still pending on it is answered with
  an ``actor_dead`` error, and a ``control`` message on topic ``actor.dead`` (with the ids of
  those requests and of the episodes/weights it was sent) tells subscribers, so work can be
  re-queued. An actor that closes cleanly sends ``control`` ``{"op": "unregister"}`` to
  ``broker`` instead, and subscribers see ``actor.left``. Time the broker itself did not run
  (stopped, starved of CPU, swapped out: a gap of over :data:`STALL` seconds between two turns
  of its loop) counts against nobody: every actor's silence is shortened by it, so a broker
  that wakes does not declare dead the actors whose heartbeats wait unread in its queue
  (``stalls`` in its counters).
- **Bad input** never stops the broker: it counts the fault in :attr:`Broker.counters`, logs a
  warning and, where the sender can be addressed, sends it an ``error`` reply (``too_large``
  for a message over ``max_message_bytes``). A frame over that limit plus 1 MiB never reaches
  the broker: libzmq drops the sender's connection unread (:mod:`arena.bus.sockets`), so it
  gets no reply and nothing is counted or logged.
- **Directory.** An actor that serves registers the endpoint of its own socket (and its CURVE
  public key). ``broker.resolve`` (body ``{"key": "service:NAME"}`` or ``{"key": "name:ACTOR"}``)
  answers with the instances (name, endpoint, public key), and from then on the asker gets a
  ``control`` message ``{"op": "directory", "key", "instances"}`` whenever that entry changes
  (an instance joined, left or died). Requests then go peer to peer (:mod:`arena.bus.peers`);
  the broker routes only what is sent to it: first contacts, fallbacks, broadcasts.
- **Restarts.** A broker that restarts knows nobody: a message from an unknown actor, heartbeat
  included, is answered with ``not_registered`` (a request always, anything else at most once
  per heartbeat interval), and the actor registers again.
- **Security.** With CURVE keys (:mod:`arena.bus.security`) only allow-listed public keys get
  through the handshake; without keys, binding a non-loopback ``tcp://`` address needs
  ``insecure``.
- **Built-in services** answered by the broker itself (:mod:`arena.bus.broker_services`):
  ``echo``, ``broker.actors``, ``broker.stats`` and ``broker.resolve``.

The broker never unpacks message bodies it routes; it forwards the original frames.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

import zmq

from arena.bus import zap
from arena.bus.broker_liveness import STALL, Reaping
from arena.bus.broker_services import BUILTIN_SERVICES, answer_builtin
from arena.bus.codec import Message, encode, message_from_header
from arena.bus.errors import ProtocolError
from arena.bus.headers import DEFAULT_MAX_MESSAGE_BYTES, decode_header
from arena.bus.keys import Security
from arena.bus.registry import ActorInfo, Registry, actor_from_register
from arena.bus.security import curve_server, resolve_security
from arena.bus.sockets import RCVMORE, configure_socket, send
from arena.core.limits import BROKER_PENDING_TTL

log = logging.getLogger("arena.broker")

BROKER_NAME = "broker"
_AUTO: Any = object()


class Broker(Reaping):
    """A ROUTER that routes by actor name, service and topic. Run it with :meth:`serve_forever`."""

    def __init__(
        self,
        bind: str | list[str],
        *,
        heartbeat_interval: float = 1.0,
        heartbeat_timeout: float = 5.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        pending_ttl: float = BROKER_PENDING_TTL,
        context: zmq.Context | None = None,
        security: Security | None = _AUTO,
    ) -> None:
        """``security``: CURVE keys (identity ``broker``), by default from ``ARENA_KEYS``; see
        :func:`arena.bus.security.resolve_security` for when plain ``tcp://`` is refused."""
        self.addresses = [bind] if isinstance(bind, str) else list(bind)
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout = heartbeat_timeout
        self.max_message_bytes = max_message_bytes
        self.pending_ttl = pending_ttl
        self.counters: Counter[str] = Counter()
        self.registry = Registry()
        # the hot path's lookups, one attribute away (the registry mutates these dicts in place)
        self._by_identity = self.registry.by_identity
        self._actors = self.registry.actors
        self._pending = self.registry.pending
        self._stopping = False
        """Set by :meth:`stop`: a plain flag, see there."""
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.ROUTER)
        configure_socket(self._sock, max_message_bytes)
        self._sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._sock.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a restarted actor takes its name back
        if security is _AUTO:
            securities = {resolve_security(a, identity="broker") for a in self.addresses}
            security = next((s for s in securities if s is not None), None)
        self.security = security
        if security is not None:
            curve_server(self._sock, security)
        self.bound: list[str] = []
        for address in self.addresses:
            self._sock.bind(address)
            self.bound.append(self._sock.getsockopt_string(zmq.LAST_ENDPOINT))

    def _message(self, header: dict[str, Any], frames: list[Any]) -> Message:
        return message_from_header(header, frames, self.max_message_bytes)

    @property
    def actors(self) -> dict[str, ActorInfo]:
        """The registered actors by name."""
        return self.registry.actors

    # -- main loop ---------------------------------------------------------------------------
    def serve_forever(self) -> None:
        """Route until :meth:`stop` is called; then close the socket."""
        log.info("broker listening on %s", ", ".join(self.bound))
        sock = self._sock
        # A blocking recv makes no system call while messages are queued; zmq_poll and a NOBLOCK
        # recv that ends in EAGAIN each poll libzmq's mailbox, and system calls are the broker's
        # main cost. The timeout bounds how late a heartbeat tick or a stop() can be.
        sock.setsockopt(zmq.RCVTIMEO, max(1, round(min(self.heartbeat_interval, 0.1) * 1000)))
        recv, more, monotonic = sock.recv, sock.getsockopt, time.monotonic
        next_tick = monotonic() + self.heartbeat_interval
        last = monotonic()
        try:
            while not self._stopping:
                try:
                    frames = [recv(), recv()]  # routing id, header: small, so copied
                except zmq.Again:
                    frames = None
                now = monotonic()
                if now - last > STALL:
                    self._stalled(now - last)
                last = now
                if frames is not None:
                    while more(RCVMORE):
                        frames.append(recv(copy=False))  # binary frames are forwarded uncopied
                    self._handle(frames, now)
                if now >= next_tick:
                    self._tick()
                    next_tick = monotonic() + self.heartbeat_interval
        finally:
            sock.close(linger=0)
            log.info("broker stopped")

    def stop(self) -> None:
        """Ask the loop to finish. Thread- and signal-safe: it sets a flag and takes no lock.

        A lock would deadlock: a process whose launcher dies gets its death signal once per
        exiting thread of the launcher (the kernel reparents it once per thread), so a second
        SIGTERM can run this handler again while the first still holds the lock."""
        self._stopping = True

    # -- handling ----------------------------------------------------------------------------
    def _handle(self, frames: list[Any], now: float) -> None:
        """Validate one message and act on it. Requests and replies, the bulk of the traffic,
        are routed from the validated header alone; a :class:`Message` is built only for the
        rarer types the broker itself must read."""
        identity = frames[0]
        body_frames = frames[1:]
        try:
            header = decode_header(body_frames, self.max_message_bytes)
        except ProtocolError as err:
            self._reject(identity, None, err)
            return
        actor = self._by_identity.get(identity)
        if actor is not None:
            actor.last_seen = now
        mtype = header["type"]
        if mtype == "reply" or mtype == "error":
            if actor is not None:
                self._route_reply(identity, header, body_frames)
                return
        elif mtype == "heartbeat" and actor is not None:
            self._heard(actor, header, body_frames)
            return
        elif mtype == "register":
            self._register(identity, self._message(header, body_frames))
            return
        if actor is None:
            self._unknown(identity, header, body_frames, now)
            return
        dst = header["dst"]
        if dst is not None:
            if dst == BROKER_NAME:
                msg = self._message(header, body_frames)
                if mtype == "control":
                    self._control(actor, msg)
                else:
                    self._serve_builtin(identity, msg)
                return
            target = self._actors.get(dst)
            if target is None:
                self._reject(
                    identity,
                    self._message(header, body_frames),
                    ProtocolError("unknown_actor", f"no actor {dst!r}"),
                )
                return
        elif (service := header["service"]) is not None:
            target = self.registry.pick(service)
            if target is None:
                msg = self._message(header, body_frames)
                if service in BUILTIN_SERVICES:
                    self._serve_builtin(identity, msg)
                    return
                self._reject(
                    identity, msg, ProtocolError("unknown_service", f"no actor offers {service!r}")
                )
                return
        else:
            self._broadcast(actor, header["topic"] or "", body_frames)
            return
        if mtype == "request":
            key = (actor.name, header["id"])
            self._pending[key] = (target.name, now)
            target.outstanding.add(key)
        elif mtype == "episode" or mtype == "weights":
            target.delivered.append(header["id"])
            del target.delivered[:-1024]
        self._forward(target.identity, body_frames)

    def _register(self, identity: bytes, msg: Message) -> None:
        try:
            info = actor_from_register(identity, msg.body, time.monotonic())
        except ProtocolError as err:
            self._reject(identity, msg, err)
            return
        name = info.name
        previous = self._actors.get(name)
        if previous is not None:
            # A restarted actor under the same name: its earlier life's work is lost, so the
            # requests pending on it fail now rather than at their timeouts.
            self._declare_dead(previous, reason="registered again (restarted)")
        self.registry.add(info)
        self._tell_watchers(info)
        self.counters["registered"] += 1
        log.info("registered %s (%s) services=%s", name, info.kind, info.services)
        self._send(
            identity,
            "reply",
            {
                "ok": True,
                "heartbeat_interval": self.heartbeat_interval,
                "heartbeat_timeout": self.heartbeat_timeout,
            },
            dst=name,
            reply_to=msg.id,
        )
        self._notify("actor.joined", info.public())

    def _route_reply(self, identity: bytes, header: dict[str, Any], body_frames: list[Any]) -> None:
        key = (header["dst"], header["reply_to"])  # both checked non-empty by decode_header
        if not self.registry.answered(key):
            self._reject(
                identity,
                self._message(header, body_frames),
                ProtocolError("unknown_request", f"no pending request {key[1]!r}"),
            )
            return
        requester = self._actors.get(key[0])
        if requester is not None:
            self._forward(requester.identity, body_frames)

    def _broadcast(self, sender: ActorInfo, topic: str, body_frames: list[Any]) -> None:
        for actor in list(self._actors.values()):
            if actor is not sender and any(topic.startswith(t) for t in actor.topics):
                self._forward(actor.identity, body_frames)

    def _serve_builtin(self, identity: bytes, msg: Message) -> None:
        if self.security is not None and msg.service == "broker.stats":
            self.counters["keys_refused"] = zap.denied(self._ctx)  # counted on the ZAP thread
        try:
            body = answer_builtin(self.registry, self.counters, identity, msg)
        except ProtocolError as err:
            self._reject(identity, msg, err)
            return
        self._send(identity, "reply", body, dst=msg.src, reply_to=msg.id)

    def _control(self, actor: ActorInfo, msg: Message) -> None:
        try:
            op = msg.body.get("op") if isinstance(msg.body, dict) else None
        except ProtocolError as err:
            self._reject(actor.identity, msg, err)
            return
        if op != "unregister":
            self._reject(actor.identity, msg, ProtocolError("schema", f"unknown broker op {op!r}"))
            return
        self._remove(actor)
        log.info("%s unregistered", actor.name)
        self._notify("actor.left", actor.public())

    def _remove(self, actor: ActorInfo) -> None:
        self.registry.remove(actor)
        self._tell_watchers(actor)

    # -- the directory -----------------------------------------------------------------------
    def _tell_watchers(self, actor: ActorInfo) -> None:
        """Tell everyone who resolved an entry that ``actor`` belongs to that it changed."""
        for watcher, body in self.registry.changes(actor):
            self._send(watcher.identity, "control", body, dst=watcher.name)

    # -- liveness of what the broker hears -----------------------------------------------------
    def _heard(self, actor: ActorInfo, header: dict[str, Any], body_frames: list[Any]) -> None:
        """A heartbeat: its body, if any, is the actor's status (load, policy version)."""
        if len(header["body"]) <= 1:  # msgpack nil: an old-style empty heartbeat
            return
        try:
            status = self._message(header, body_frames).body
        except ProtocolError as err:
            self.counters[err.code] += 1
            return
        if isinstance(status, dict):
            actor.status = status

    def _unknown(
        self, identity: bytes, header: dict[str, Any], body_frames: list[Any], now: float
    ) -> None:
        """A message from an actor this broker does not know (it restarted, or the actor was
        declared dead): tell it to register. A request always gets that answer (its sender
        waits for one, and registers again on it); anything else at most once per heartbeat
        interval, so that a stream of heartbeats or episodes does not earn a stream of errors."""
        self.counters["not_registered"] += 1
        if not self.registry.remind(identity, now, self.heartbeat_interval, header["type"]):
            return
        msg = self._message(header, body_frames)
        log.warning("message from unknown actor %r: telling it to register", identity)
        self._send(
            identity,
            "error",
            {"code": "not_registered", "message": "register before sending"},
            dst=msg.src,
            reply_to=msg.id,
        )

    # -- sending -----------------------------------------------------------------------------
    def _reject(self, identity: bytes, msg: Message | None, err: ProtocolError) -> None:
        self.counters[err.code] += 1
        log.warning("rejected message from %r: %s", identity, err)
        if msg is not None and msg.type in ("error", "heartbeat"):
            # Answering these with an error could ping-pong forever; counting is enough.
            return
        dst = msg.src if msg is not None else identity.decode(errors="replace")
        self._send(
            identity,
            "error",
            {"code": err.code, "message": err.message},
            dst=dst,
            reply_to=msg.id if msg is not None else "",
        )

    def _send(self, identity: bytes, mtype: str, body: Any, **route: Any) -> None:
        _, frames = encode(mtype, body, src=BROKER_NAME, max_bytes=self.max_message_bytes, **route)
        self._forward(identity, frames)

    def _forward(self, identity: bytes, frames: list[Any]) -> None:
        try:
            send(self._sock, [identity, *frames])
        except zmq.ZMQError as err:  # peer gone (ROUTER_MANDATORY) or its queue is full
            self.counters["undeliverable"] += 1
            log.warning("could not deliver to %r: %s", identity, err)
