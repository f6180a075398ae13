"""Reading a ZeroMQ socket from an asyncio loop: :class:`Channel`.

The socket is a plain pyzmq socket whose file descriptor is watched with ``loop.add_reader``;
that costs less per message than ``zmq.asyncio``. ZeroMQ's descriptor is edge-triggered, so the
reader drains the socket completely, and a send made outside the reader re-checks for pending
input (a send may consume the edge). Sends made while draining need no check: the drain ends
with a receive that finds nothing, after the send.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import zmq

from arena.bus.sockets import EVENTS, NOBLOCK, POLLIN, RCVMORE, send

log = logging.getLogger("arena.bus")


class Channel:
    """One socket on the loop: every multipart message it receives goes to ``on_frames``."""

    __slots__ = ("sock", "on_frames", "loop", "draining", "scheduled", "_fd", "name", "counters")

    def __init__(
        self,
        sock: zmq.Socket,
        on_frames: Callable[[list[Any]], None],
        loop: asyncio.AbstractEventLoop,
        name: str,
        counters: Counter[str] | None = None,
    ) -> None:
        self.sock: zmq.Socket | None = sock
        self.counters = counters if counters is not None else Counter()
        """``dispatch_error`` counts the messages whose handling raised."""
        self.on_frames = on_frames
        self.loop = loop
        self.name = name
        self.draining = False
        self.scheduled = False
        self._fd = sock.getsockopt(zmq.FD)
        loop.add_reader(self._fd, self.drain)
        # Input may already be queued (the edge fired before the reader was added).
        self.scheduled = True
        loop.call_soon(self.drain)

    def send(self, frames: list[Any]) -> None:
        """Send without blocking (``zmq.Again`` when the queue is full), then make sure pending
        input is not stranded by a swallowed edge."""
        sock = self.sock
        if sock is None:
            raise zmq.ZMQError(zmq.ENOTSOCK, "channel closed")
        send(sock, frames)
        if self.draining or self.scheduled:
            return
        if sock.getsockopt(EVENTS) & POLLIN:
            self.scheduled = True
            self.loop.call_soon(self.drain)

    def drain(self) -> None:
        self.scheduled = False
        if self.sock is None or self.draining:
            return
        self.draining = True
        try:
            # Asking for EVENTS before each receive costs less than the zmq.Again that a
            # receive on an empty socket raises.
            while (sock := self.sock) is not None and sock.getsockopt(EVENTS) & POLLIN:
                try:
                    frames = [sock.recv(NOBLOCK)]  # first frame: small, so copied
                except zmq.Again:  # the input went away after EVENTS (a dropped connection)
                    break
                while sock.getsockopt(RCVMORE):
                    frames.append(sock.recv(copy=False))  # binary frames, zero-copy
                try:
                    self.on_frames(frames)
                except Exception:  # e.g. a reply that found the send queue full
                    # Keep draining: stopping here would strand the queued messages, since the
                    # descriptor will not signal them again.
                    self.counters["dispatch_error"] += 1
                    log.exception("%s failed to handle a message", self.name)
        finally:
            self.draining = False

    def detach(self) -> zmq.Socket | None:
        """Stop watching; the socket stays open and is returned (its owner closes it)."""
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                self.loop.remove_reader(self._fd)
            except (ValueError, RuntimeError):  # the loop is already closed
                pass
        return sock

    def close(self, linger: int = 0) -> None:
        """Stop watching and close the socket."""
        sock = self.detach()
        if sock is not None:
            sock.close(linger=linger)
