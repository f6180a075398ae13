"""Socket settings shared by the broker and actors, and address helpers.

``inproc://``, ``ipc://`` and ``tcp://`` all go through the same code; the URL picks the transport.
"""

from __future__ import annotations

import os
import socket as pysocket
import threading
from typing import Any

import zmq

from arena.core.errors import ConfigError

HARD_LIMIT_MARGIN = 1 << 20
"""Bytes allowed over the codec's soft limit before libzmq itself drops the peer."""


def configure_socket(sock: zmq.Socket, max_message_bytes: int) -> None:
    """Apply Arena's settings: a hard size cap, no linger on close, deep queues.

    ``ZMQ_MAXMSGSIZE`` is enforced by libzmq per frame, before Python sees anything: a peer that
    exceeds it is disconnected. It sits a little above the codec's soft limit, so an oversize
    message normally earns an ``error`` reply and only an abusive one costs the connection.
    """
    sock.setsockopt(zmq.MAXMSGSIZE, max_message_bytes + HARD_LIMIT_MARGIN)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 100_000)
    sock.setsockopt(zmq.RCVHWM, 100_000)


def flush_context(timeout: float = 2.0) -> bool:
    """Terminate this process's shared ZeroMQ context: wait, at most ``timeout`` seconds, until
    every socket is closed and what closed sockets still hold within their linger is sent (an
    actor's unregister, its last replies). For a process that then leaves with ``os._exit``,
    which would drop them. True when the context terminated in time."""
    done = threading.Thread(target=zmq.Context.instance().term, name="zmq-term", daemon=True)
    done.start()
    done.join(timeout)
    return not done.is_alive()


def host_info() -> dict[str, Any]:
    """This process's host name and pid, as sent in ``register``."""
    return {"host": pysocket.gethostname(), "pid": os.getpid()}


def check_address(address: str) -> str:
    """Reject an address whose transport the bus does not speak, with a clear message (a
    :class:`~arena.core.errors.ConfigError`, so a command exits with status 2)."""
    if not address.startswith(("tcp://", "ipc://", "inproc://")):
        raise ConfigError(
            f"bus address {address!r} names no ZeroMQ transport: write tcp://HOST:PORT, "
            "ipc:///PATH or inproc://NAME"
        )
    return address


# Plain ints: pyzmq converts its enum flags on every call, which costs ~0.3 µs per send or recv.
NOBLOCK = int(zmq.NOBLOCK)
SNDMORE = int(zmq.SNDMORE)
RCVMORE = int(zmq.RCVMORE)
EVENTS = int(zmq.EVENTS)
POLLIN = int(zmq.POLLIN)


COPY_BELOW = 1 << 16
"""Parts smaller than this are copied: cheaper than pyzmq's zero-copy bookkeeping."""


def send(sock: zmq.Socket, parts: list[Any], flags: int = NOBLOCK) -> None:
    """Send a multipart message (``parts`` is not empty). Small ``bytes`` parts are copied;
    large ones, arrays and received ``zmq.Frame`` objects go without a copy."""
    more = flags | SNDMORE
    for i in range(len(parts) - 1):
        part = parts[i]
        sock.send(part, more, type(part) is bytes and len(part) < COPY_BELOW)
    part = parts[-1]
    sock.send(part, flags, type(part) is bytes and len(part) < COPY_BELOW)
