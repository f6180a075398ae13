"""The direct data plane: an actor's own endpoint, its connections to peers, and which to use.

A request through the broker takes four ZeroMQ hops; peer to peer it takes two. So every actor
that serves binds its own ROUTER (:func:`listen_address`) and registers that endpoint with the
broker. A client resolves a service or an actor name through the broker once (service
``broker.resolve``, body ``{"key": "service:NAME"}`` or ``{"key": "name:ACTOR"}``); the broker
answers with the instances (name, endpoint, public key) and then tells the client of every change
to that entry (a ``control`` message ``{"op": "directory", "key", "instances"}``). The client
keeps one :class:`Peer` (a DEALER) per serving actor it talks to and balances a service's
requests over the connected instances by least outstanding requests.

A peer's connection is watched through a ZeroMQ socket monitor: when it drops (the process
died, the host went away), every request pending on it fails at once with ``actor_dead``,
whether or not the broker is alive to say so.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import socket as pysocket
import stat
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import zmq
from zmq.utils.monitor import recv_monitor_message

from arena.bus.keys import Security
from arena.bus.security import curve_client, is_loopback
from arena.bus.sockets import configure_socket
from arena.core.process import alive

log = logging.getLogger("arena.bus.peers")

ROUTINGS = ("direct", "brokered", "auto")
"""``direct``: requests to a resolved service go peer to peer (waiting for the connection);
``brokered``: everything through the broker; ``auto``: peer to peer where a connection is up,
through the broker otherwise (first contact, a peer behind NAT)."""

ROUTING_ENV = "ARENA_ROUTING"
"""The routing of actors that are not given one (``arena train`` sets it from ``bus.routing``)."""

ADVERTISE_ENV = "ARENA_ADVERTISE_HOST"
"""The host name or address other hosts reach this process's endpoint at (multi-host, NAT)."""

IPC_PATH_LIMIT = 100
"""The longest ipc:// socket path used: a unix socket's address holds 107 bytes; a margin."""
STALE_AFTER_S = 10.0
"""A socket file younger than this is never stale: its process may have bound it and not yet be
listening (connections to it are refused in between)."""
_SOCKET_NAME = re.compile(r"-(\d+)-[0-9a-f]{6}\.sock$")
"""The end of a socket file :func:`listen_address` names: the binding process's pid, a token."""
_CONNECTION_EVENTS = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
_ROTATION = itertools.count()


def check_routing(routing: str | None) -> str:
    """``routing``, or ``ARENA_ROUTING``, or ``auto``; refuses anything else."""
    routing = routing or os.environ.get(ROUTING_ENV) or "auto"
    if routing not in ROUTINGS:
        raise ValueError(f"routing {routing!r} must be one of {', '.join(ROUTINGS)}")
    return routing


def socket_temp_dir(room: int) -> str:
    """Where a socket file of ``room`` more bytes goes when its own place is too deep: the temp
    directory, or ``/tmp`` where that leaves no room for it (a deep ``TMPDIR``, such as a test's
    own directory: a longer path fails to bind, and the process exits)."""
    temp = tempfile.gettempdir()
    return temp if len(temp) + 1 + room <= IPC_PATH_LIMIT else "/tmp"


def listen_address(broker_address: str, name: str) -> str:
    """Where an actor named ``name`` binds its own socket, on the broker's transport.

    ``ipc://``: a socket file beside the broker's (or in :func:`socket_temp_dir` when that path
    would be too long); ``tcp://``: an ephemeral port on loopback when the broker is on loopback, on
    every interface otherwise; ``inproc://``: a name derived from the actor's.
    """
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    token = uuid.uuid4().hex[:6]
    if broker_address.startswith("ipc://"):
        directory = os.path.dirname(broker_address[len("ipc://") :]) or "."
        path = f"{directory}/{safe}-{os.getpid()}-{token}.sock"
        if len(path) > IPC_PATH_LIMIT:
            file = f"arena-{safe[:40]}-{os.getpid()}-{token}.sock"
            path = f"{socket_temp_dir(len(file))}/{file}"
        return f"ipc://{path}"
    if broker_address.startswith("tcp://"):
        return "tcp://127.0.0.1:*" if is_loopback(broker_address) else "tcp://0.0.0.0:*"
    return f"inproc://{safe}-{token}.direct"


def advertised(bound: str, broker_address: str) -> str:
    """The endpoint peers connect to: ``bound`` with a wildcard host replaced by this host's
    address as seen from the broker's network (or ``ARENA_ADVERTISE_HOST``)."""
    if not bound.startswith("tcp://"):
        return bound
    parts = urlsplit(bound)
    if parts.hostname not in ("0.0.0.0", "::", "*"):
        return bound
    host = os.environ.get(ADVERTISE_ENV) or _route_to(urlsplit(broker_address).hostname or "")
    return f"tcp://{host}:{parts.port}"


def _route_to(host: str) -> str:
    """This host's address on the interface that routes to ``host`` (no packet is sent)."""
    try:
        with pysocket.socket(pysocket.AF_INET, pysocket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))
            return probe.getsockname()[0]
    except OSError:
        return pysocket.gethostname()


def remove_ipc_file(endpoint: str | None) -> None:
    if endpoint and endpoint.startswith("ipc://"):
        try:
            os.unlink(endpoint[len("ipc://") :])
        except OSError:
            pass


def remove_stale_sockets(directory: str) -> int:
    """Remove the socket files in ``directory`` that :func:`listen_address` named for processes
    that are gone (one killed by SIGKILL leaves its file); returns how many.

    A file is stale when the pid in its name is not alive, nothing accepts a connection on it
    (a pid from another pid namespace), and it is older than :data:`STALE_AFTER_S`. Actors call
    this before they bind, so a restarted actor, or the next run, clears what a killed one left.
    """
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    removed = 0
    for name in names:
        match = _SOCKET_NAME.search(name)
        if match is None or alive(int(match.group(1))):
            continue
        path = os.path.join(directory, name)
        try:
            status = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISSOCK(status.st_mode) or time.time() - status.st_mtime < STALE_AFTER_S:
            continue
        if not _accepts(path):
            try:
                os.unlink(path)
                removed += 1
            except OSError:
                pass
    if removed:
        log.info("removed %d socket files of ended processes from %s", removed, directory)
    return removed


def _accepts(path: str) -> bool:
    """Whether something listens on the unix socket ``path`` (anything but a refusal: yes)."""
    with pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            return False
        except OSError:
            pass
        return True


@dataclass(frozen=True)
class Instance:
    """One serving actor as the directory lists it."""

    name: str
    endpoint: str
    public_key: str | None = None

    @classmethod
    def parse(cls, entry: Any) -> Instance:
        return cls(str(entry["name"]), str(entry["endpoint"]), entry.get("public_key"))


@dataclass(eq=False)
class Peer:
    """A DEALER connected to one serving actor's endpoint, and a monitor on that connection."""

    instance: Instance
    sock: zmq.Socket
    monitor: zmq.Socket
    connected: bool = False
    outstanding: set[str] = field(default_factory=set)
    """Ids of the requests sent to this peer and not yet answered."""

    @property
    def name(self) -> str:
        return self.instance.name

    @classmethod
    def connect(
        cls,
        context: zmq.Context,
        own_name: str,
        instance: Instance,
        security: Security | None,
        max_message_bytes: int,
        heartbeat_ms: int,
        timeout_ms: int | None = None,
    ) -> Peer:
        sock = context.socket(zmq.DEALER)
        configure_socket(sock, max_message_bytes)
        sock.setsockopt(zmq.ROUTING_ID, own_name.encode())
        # ZMTP heartbeats notice a peer whose host vanished without closing the connection,
        # after ``timeout_ms`` of silence (default 5 intervals): the bus's heartbeat timeout, so
        # that a peer that is only slow (paused, swapping) counts as dead on neither path sooner
        sock.setsockopt(zmq.HEARTBEAT_IVL, heartbeat_ms)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, timeout_ms or heartbeat_ms * 5)
        if security is not None and instance.public_key:
            curve_client(sock, security, instance.public_key.encode())
        monitor = sock.get_monitor_socket(_CONNECTION_EVENTS)
        sock.connect(instance.endpoint)
        return cls(instance, sock, monitor)

    def connection_events(self) -> list[bool]:
        """Drain the monitor: True for each connection that came up, False for each drop."""
        events = []
        while True:
            try:
                event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return events
            events.append(event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED)

    def close(self) -> None:
        try:
            self.sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self.monitor.close(linger=0)
        self.sock.close(linger=0)


def pick(peers: list[Peer]) -> Peer | None:
    """The connected peer with the fewest outstanding requests; ties rotate, so several clients
    sharing the instances spread evenly too."""
    if len(peers) == 1:
        return peers[0] if peers[0].connected else None
    best: list[Peer] = []
    least = -1
    for peer in peers:
        if not peer.connected:
            continue
        load = len(peer.outstanding)
        if not best or load < least:
            best, least = [peer], load
        elif load == least:
            best.append(peer)
    if not best:
        return None
    return best[0] if len(best) == 1 else best[next(_ROTATION) % len(best)]
