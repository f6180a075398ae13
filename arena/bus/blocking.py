"""Blocking style for the bus: an :class:`~arena.bus.actor.Actor` on a background event loop.

Use it from plain threads, scripts and the CLI::

    with BlockingActor("tool", "tcp://127.0.0.1:5555") as actor:
        reply = actor.call({"x": 1}, service="echo", timeout=2.0)
        future = actor.request({"x": 2}, service="echo")   # concurrent.futures.Future
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

from arena.bus.actor import Actor
from arena.bus.codec import Message


class BlockingActor:
    """Same calls as :class:`Actor`, blocking; handlers run on the background loop's thread."""

    def __init__(self, name: str, address: str, **actor_kwargs: Any) -> None:
        self.actor = Actor(name, address, **actor_kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"bus-{name}", daemon=True
        )

    def start(self, timeout: float = 10.0) -> BlockingActor:
        """Start the loop's thread and the actor; where the actor cannot start, both stop
        again before the error is raised, so a script that catches it can exit."""
        self._thread.start()
        try:
            self._run(self.actor.start(timeout), timeout + 1.0)
        except BaseException:
            self.close()
            raise
        return self

    def request(self, body: Any = None, **route: Any) -> concurrent.futures.Future[Message]:
        """Send a request; the returned future resolves to the reply message."""

        async def send() -> Message:
            return await self.actor.request(body, **route)

        return asyncio.run_coroutine_threadsafe(send(), self._loop)

    def call(self, body: Any = None, **route: Any) -> Any:
        """Send a request and block for the reply body (raises BusError / BusTimeout)."""
        return self.request(body, **route).result().body

    def send(self, mtype: str, body: Any = None, **route: Any) -> str:
        return self._call_soon(self.actor.send, mtype, body, **route)

    def publish(self, topic: str, body: Any = None, mtype: str = "control") -> str:
        return self._call_soon(self.actor.publish, topic, body, mtype)

    def close(self) -> None:
        if self._thread.is_alive():
            self._run(self.actor.close(), 5.0)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5.0)
        self._loop.close()

    def __enter__(self) -> BlockingActor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, coro: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _call_soon(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        async def call() -> Any:
            return fn(*args, **kwargs)

        return self._run(call(), 10.0)
