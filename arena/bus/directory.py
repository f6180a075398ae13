"""An actor's side of the direct data plane (see :mod:`arena.bus.peers` for the design).

:class:`Directory` owns the cache of resolved services and names, the DEALERs to peers, and the
routing decision for each outgoing request or message: peer to peer, or through the broker. It
also holds the actor's own ROUTER, where peers' requests come in (:class:`DirectSocket`, bound
unless routing is ``brokered``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, Protocol

import zmq
from zmq.utils.monitor import parse_monitor_message

from arena.bus.channel import Channel
from arena.bus.codec import decode
from arena.bus.direct_socket import DirectSocket, Host
from arena.bus.errors import BusError, ProtocolError
from arena.bus.keys import Security
from arena.bus.peers import Instance, Peer, check_routing, pick

log = logging.getLogger("arena.bus")


class Owner(Host, Protocol):
    """What :class:`Directory` needs of its actor (:class:`arena.bus.actor.Actor`), on top of
    what its :class:`DirectSocket` needs."""

    heartbeat_interval: float
    heartbeat_timeout: float
    broker_up: bool
    security: Security | None

    def send_to_broker(self, frames: list[Any]) -> None: ...
    def fail(self, msg_id: str, error: BusError) -> None: ...
    def resolve(self, msg: Any) -> None: ...
    def request(self, body: Any = None, **route: Any) -> asyncio.Future[Any]: ...
    def _spawn(self, coro: Any) -> None: ...


class Directory:
    """Resolved names, peer connections and this actor's own endpoint."""

    def __init__(self, actor: Owner, routing: str | None, listen: str | None) -> None:
        self.actor = actor
        self.routing = check_routing(routing)
        self.server = DirectSocket(actor, listen)
        """This actor's own socket, where peers' requests come in."""
        self.connect_timeout = 10.0
        """``direct`` routing: how long a message waits for a peer's connection to come up."""
        self.auto_grace = 0.25
        """``auto`` routing: how long a first contact waits for the name to resolve and the
        connection to come up before it goes through the broker instead."""
        self._entries: dict[str, list[Instance]] = {}
        self._candidates: dict[str, list[Peer]] = {}
        """Key -> the peers of its instances (what :func:`pick` chooses from), kept in step with
        ``_entries`` and ``_peers`` so the per-request path builds nothing."""
        self._resolving: set[str] = set()
        self._peers: dict[str, Peer] = {}
        self._channels: dict[str, tuple[Channel, Channel]] = {}
        self._routed: dict[str, Peer] = {}
        """Request id -> the peer it was sent to, until answered."""
        self._held: dict[str, deque[tuple[str | None, list[Any]]]] = {}
        """Key -> messages waiting for its first contact, in order. While a key has some,
        later messages to it queue behind them: messages from one actor to one destination
        arrive in the order they were sent (as they did through the broker)."""
        self._held_ids: set[str] = set()

    # -- this actor's own socket ---------------------------------------------------------------
    def bind(self) -> None:
        """Bind this actor's own socket, unless every message goes through the broker."""
        if self.routing != "brokered":
            self.server.bind()

    @property
    def endpoint(self) -> str | None:
        """Where peers reach this actor (None: it does not serve, or routing is brokered)."""
        return self.server.endpoint

    # -- routing outgoing messages ---------------------------------------------------------------
    def route(
        self, msg_id: str | None, frames: list[Any], service: str | None, dst: str | None
    ) -> None:
        """Send ``frames`` (a request if ``msg_id``) peer to peer or through the broker."""
        key = self._key(service, dst)
        if key is None:
            self._via_broker(msg_id, frames)
            return
        held = self._held.get(key)
        if held is not None:
            self._hold(held, msg_id, frames)
            return
        instances = self._entries.get(key)
        if instances is None:
            self._resolve(key)
        else:
            peer = pick(self._candidates[key])
            if peer is not None:
                self._send(peer, msg_id, frames)
                return
            if not instances:  # nobody serves it directly: the broker answers (or says so)
                self._via_broker(msg_id, frames)
                return
        self._held[key] = held = deque()
        self._hold(held, msg_id, frames)
        self.actor._spawn(self._send_when_connected(key, held))

    def _hold(
        self, held: deque[tuple[str | None, list[Any]]], msg_id: str | None, frames: list[Any]
    ) -> None:
        held.append((msg_id, frames))
        if msg_id is not None:
            self._held_ids.add(msg_id)

    def _key(self, service: str | None, dst: str | None) -> str | None:
        if self.routing == "brokered":
            return None
        if dst is not None:
            return None if dst == "broker" else f"name:{dst}"
        if service is None or service.startswith("broker."):
            return None
        return f"service:{service}"

    def _via_broker(self, msg_id: str | None, frames: list[Any]) -> None:
        if msg_id is not None and not self.actor.broker_up:
            # Nobody would answer: say so now instead of at the request's timeout.
            error = BusError("broker_lost", f"the broker at {self.actor.address} is not answering")
            self.actor.fail(msg_id, error)
            return
        try:
            self.actor.send_to_broker(frames)
        except BusError as err:
            if msg_id is None:
                raise
            self.actor.fail(msg_id, err)

    def _send(self, peer: Peer, msg_id: str | None, frames: list[Any]) -> None:
        channel = self._channels[peer.name][0]
        try:
            channel.send(frames)
        except zmq.Again:
            error = BusError("busy", f"send queue to {peer.name} is full")
            if msg_id is None:
                raise error from None
            self.actor.fail(msg_id, error)
            return
        if msg_id is not None:
            self._routed[msg_id] = peer
            peer.outstanding.add(msg_id)

    async def _send_when_connected(
        self, key: str, held: deque[tuple[str | None, list[Any]]]
    ) -> None:
        """First contact: wait for the resolution and the connections (about a round trip
        each), then send what waits peer to peer, in order, balanced over the instances.

        Until ``auto_grace`` it waits for every instance to connect (so a burst is not all
        handed to the first one up); after that, any connected instance will do. With none
        connected by then, ``auto`` sends through the broker, and ``direct`` waits up to
        ``connect_timeout`` before failing with ``unreachable``.
        """
        direct = self.routing == "direct"
        start = time.monotonic()
        deadline = start + (self.connect_timeout if direct else self.auto_grace)
        try:
            while True:
                now = time.monotonic()
                instances = self._entries.get(key)
                if instances is not None:
                    if not instances:  # nobody serves it directly: the broker answers
                        self._release(held, self._via_broker)
                        return
                    peers = self._candidates[key]
                    up = [p for p in peers if p.connected]
                    settled = now - start >= self.auto_grace
                    if up and (settled or len(up) == len(peers)):
                        self._release(held, lambda m, f: self._send_to(key, m, f))
                        return
                if now >= deadline:
                    break
                await asyncio.sleep(0.002)
            if not direct:
                self._release(held, self._via_broker)
                return
            endpoints = [i.endpoint for i in self._entries.get(key) or []]
            error = BusError(
                "unreachable",
                f"no instance of {key} could be reached directly within "
                f"{self.connect_timeout:g}s (endpoints {endpoints}); use routing 'auto' to "
                "fall back to the broker",
            )
            self._release(held, lambda m, f: self._unreachable(m, error))
        finally:
            if self._held.get(key) is held:
                del self._held[key]

    def _release(self, held: deque[tuple[str | None, list[Any]]], send: Any) -> None:
        while held:
            msg_id, frames = held.popleft()
            if msg_id is not None:
                self._held_ids.discard(msg_id)
            send(msg_id, frames)

    def _send_to(self, key: str, msg_id: str | None, frames: list[Any]) -> None:
        peer = pick(self._candidates[key])
        if peer is None:
            self._via_broker(msg_id, frames)
        else:
            self._send(peer, msg_id, frames)

    def _unreachable(self, msg_id: str | None, error: BusError) -> None:
        if msg_id is None:
            log.warning("%s dropped a message: %s", self.actor.name, error)
            self.actor.counters["unreachable"] += 1
        else:
            self.actor.fail(msg_id, error)

    def forget(self, msg_id: str) -> None:
        """A request was answered or timed out."""
        peer = self._routed.pop(msg_id, None)
        if peer is not None:
            peer.outstanding.discard(msg_id)

    def is_direct(self, msg_id: str) -> bool:
        """Whether a pending request went (or waits to go) peer to peer."""
        return msg_id in self._routed or msg_id in self._held_ids

    # -- the directory cache -----------------------------------------------------------------
    def _resolve(self, key: str) -> None:
        if key in self._resolving:
            return
        self._resolving.add(key)
        self.actor._spawn(self._ask(key))

    async def _ask(self, key: str) -> None:
        try:
            reply = await self.actor.request(
                {"key": key}, service="broker.resolve", timeout=self.actor.heartbeat_timeout
            )
            self.update({"key": key, "instances": reply.body})
        except BusError as err:
            log.info("%s could not resolve %s: %s", self.actor.name, key, err)
        finally:
            self._resolving.discard(key)

    def refresh(self) -> None:
        """Ask again for every entry (a restarted broker knows nobody's interest)."""
        for key in list(self._entries):
            self._resolve(key)

    def update(self, body: Any) -> None:
        """A resolution or a change notice: ``{"key", "instances": [{name, endpoint, ...}]}``."""
        try:
            key = str(body["key"])
            instances = [Instance.parse(entry) for entry in body["instances"]]
        except (KeyError, TypeError, ValueError) as err:
            self.actor.counters["bad_directory"] += 1
            log.warning("%s got an unreadable directory entry: %s", self.actor.name, err)
            return
        self._entries[key] = instances
        for instance in instances:
            peer = self._peers.get(instance.name)
            if peer is not None and peer.instance != instance:
                self._drop(peer, "moved to a new endpoint (restarted)")
                peer = None
            if peer is None:
                self._connect(instance)
        # A peer no entry lists any more is dropped once its connection is down: a restarted
        # broker answers before every actor has registered again, and a live connection
        # should not be cut for that.
        for peer in [p for p in self._peers.values() if not self._wanted(p) and not p.connected]:
            self._drop(peer, "left the directory")
        self._index()

    def _index(self) -> None:
        self._candidates = {
            key: [self._peers[i.name] for i in instances if i.name in self._peers]
            for key, instances in self._entries.items()
        }

    def _wanted(self, peer: Peer) -> bool:
        return any(peer.instance in entry for entry in self._entries.values())

    def _connect(self, instance: Instance) -> None:
        actor = self.actor
        if actor.security is None and instance.public_key:
            log.warning("%s: %s needs CURVE keys; using the broker", actor.name, instance.name)
            return
        peer = Peer.connect(
            actor.context,
            actor.name,
            instance,
            actor.security,
            actor.max_message_bytes,
            max(100, round(actor.heartbeat_interval * 1000)),
            max(100, round(actor.heartbeat_timeout * 1000)),
        )
        loop = actor._running_loop()
        label = f"{actor.name}->{instance.name}"
        data = Channel(peer.sock, lambda frames: self._on_peer(peer, frames), loop, label)
        watch = Channel(peer.monitor, lambda frames: self._on_event(peer, frames), loop, label)
        self._peers[instance.name] = peer
        self._channels[instance.name] = (data, watch)

    def _on_peer(self, peer: Peer, frames: list[Any]) -> None:
        actor = self.actor
        try:
            msg = decode(frames, actor.max_message_bytes)
        except ProtocolError as err:
            actor.counters[err.code] += 1
            log.warning("%s dropped a malformed message from %s: %s", actor.name, peer.name, err)
            return
        if msg.type in ("reply", "error"):
            actor.resolve(msg)
        else:
            actor.counters["unexpected_direct"] += 1
            log.warning("%s: %s sent a %s on a reply path", actor.name, peer.name, msg.type)

    def _on_event(self, peer: Peer, frames: list[Any]) -> None:
        raw = [f if isinstance(f, bytes) else f.bytes for f in frames]
        event = parse_monitor_message(raw)["event"]
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            peer.connected = True
        elif event == zmq.EVENT_DISCONNECTED and peer.connected:
            self._lost(peer, "connection lost (the actor died or its host is unreachable)")
            if not self._wanted(peer):
                self._drop(peer, "left the directory")

    def _lost(self, peer: Peer, reason: str) -> None:
        if peer.connected or peer.outstanding:
            self.actor.counters["peer_lost"] += 1
        peer.connected = False
        error = BusError("actor_dead", f"{peer.name} at {peer.instance.endpoint}: {reason}")
        for msg_id in list(peer.outstanding):
            self._routed.pop(msg_id, None)
            self.actor.fail(msg_id, error)
        peer.outstanding.clear()

    def _drop(self, peer: Peer, reason: str) -> None:
        self._lost(peer, reason)
        self._peers.pop(peer.name, None)
        for channel in self._channels.pop(peer.name, ()):
            channel.detach()
        peer.close()
        self._index()

    def close(self) -> None:
        for peer in list(self._peers.values()):
            self._drop(peer, "closed")
        self.server.close()
