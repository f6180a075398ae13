"""Reading a ZeroMQ socket from an asyncio loop: :class:`Channel`.

The socket is a plain pyzmq socket whose file descriptor is watched with ``loop.add_reader``;
that costs less per message than ``zmq.asyncio``. ZeroMQ's descriptor is edge-triggered, so the
reader drains the socket completely: it receives until a receive finds nothing (``zmq.Again``),
which also re-arms the edge. A send made outside the reader may consume the edge, so it leaves
one check for pending input to the next turn of the loop (one check for all the sends of a
turn, not one per send). Sends made while draining need no check: the drain ends with a
receive that finds nothing, after the send.

Why receive until ``zmq.Again`` rather than ask ``EVENTS`` before each receive: each of the two
costs one system call (libzmq polls its mailbox), but ``EVENTS`` costs it per message and the
final ``Again`` once per drain; under load a drain takes tens of messages. Frames are received
without a copy, so each says whether more follow (``Frame.more``) with no ``RCVMORE`` query; the
one exception, a ROUTER's first frame (the sender's id), is always followed by more.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import zmq

from arena.bus.sockets import EVENTS, NOBLOCK, POLLIN, send

log = logging.getLogger("arena.bus")


class Channel:
    """One socket on the loop: every multipart message it receives goes to ``on_frames``."""

    __slots__ = (
        "sock",
        "on_frames",
        "loop",
        "draining",
        "scheduled",
        "checking",
        "_router",
        "_fd",
        "name",
        "counters",
    )

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
        self.checking = False
        """A check for input stranded by a send is queued for the next turn of the loop."""
        self._router = sock.type == zmq.ROUTER
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
        if self.draining or self.scheduled or self.checking:
            return
        # Checked on the next turn, not now: a burst of sends (64 requests resumed in one turn)
        # then pays one check, not one each. The loop runs queued callbacks before it sleeps,
        # so input that arrived meanwhile is not left waiting.
        self.checking = True
        self.loop.call_soon(self._check)

    def _check(self) -> None:
        self.checking = False
        sock = self.sock
        if sock is not None and not self.draining and sock.getsockopt(EVENTS) & POLLIN:
            self.drain()

    def drain(self) -> None:
        """Receive and hand on every message queued on the socket (the first frame as
        ``bytes``, the rest as zero-copy ``zmq.Frame`` objects)."""
        self.scheduled = False
        if self.sock is None or self.draining:
            return
        self.draining = True
        try:
            router = self._router
            while (sock := self.sock) is not None:
                try:
                    if router:
                        # A ROUTER message is the sender's id and at least one frame: the id
                        # (small) is received copied, with no need to ask whether more follows.
                        frames: list[Any] = [sock.recv(NOBLOCK)]
                        frame = sock.recv(copy=False)
                        frames.append(frame)
                    else:
                        frame = sock.recv(NOBLOCK, copy=False)
                        frames = [frame.bytes]  # first frame: a header, small
                except zmq.Again:  # nothing left; the edge is re-armed
                    break
                while frame.more:
                    frame = sock.recv(copy=False)
                    frames.append(frame)
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
