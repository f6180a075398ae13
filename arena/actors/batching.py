"""The inference actor's queue: the requests waiting for a batch, and how a batch forms.

A batch starts with the oldest waiting request and takes whatever else arrives within
``max_wait_ms`` of it, up to ``max_batch`` requests; while the queue is paused no batch starts
and requests wait. A request whose future is already settled (its asker gave up) is dropped
from its batch. The queue keeps every request it took until its future is settled, so that a
closing actor can fail those still waiting and those in the batch being generated alike.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from arena.policies.types import Prompt, SamplingParams


@dataclass
class Pending:
    """One queued request and the future its reply waits on."""

    prompt: Prompt
    params: SamplingParams
    future: asyncio.Future[Any]
    continuations: list[np.ndarray] | None = None
    """Set for a scoring request (its result is a :class:`Scoring`, not a generation)."""


class BatchQueue:
    """Requests waiting for a batch; :meth:`next_batch` forms the next one."""

    def __init__(self, max_batch: int, max_wait_ms: float) -> None:
        self.max_batch = max_batch
        self.max_wait_ms = max_wait_ms
        self._queue: deque[Pending] = deque()
        self._wakeup: asyncio.Event | None = None
        self._resumed: asyncio.Event | None = None
        self.paused = False
        self._owed: set[asyncio.Future[Any]] = set()
        """The futures of the requests taken and not yet settled (waiting or in a batch)."""

    def __len__(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        """Make the queue's events (on the running loop)."""
        self._wakeup, self._resumed = asyncio.Event(), asyncio.Event()
        self._resumed.set()

    def put(self, pending: Pending) -> None:
        assert self._wakeup is not None
        self._owed.add(pending.future)
        pending.future.add_done_callback(self._owed.discard)
        self._queue.append(pending)
        self._wakeup.set()

    def pause(self) -> None:
        assert self._resumed is not None
        self.paused = True
        self._resumed.clear()

    def resume(self) -> None:
        assert self._resumed is not None
        self.paused = False
        self._resumed.set()

    async def next_batch(self) -> list[Pending]:
        """Wait for the next batch (empty when a pause came while it was forming)."""
        assert self._wakeup is not None and self._resumed is not None
        loop = asyncio.get_running_loop()
        while True:
            await self._resumed.wait()
            if self._queue:
                break
            self._wakeup.clear()
            await self._wakeup.wait()
        # Give concurrent requesters max_wait_ms to join the first request's batch.
        deadline = loop.time() + self.max_wait_ms / 1000
        while len(self._queue) < self.max_batch and loop.time() < deadline:
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), deadline - loop.time())
            except TimeoutError:
                break
        if not self._resumed.is_set():
            return []
        batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
        return [p for p in batch if not p.future.done()]

    def fail_all(self, error: BaseException) -> None:
        """Settle with ``error`` every request taken and not answered (those waiting and those
        in the batch being generated), and empty the queue."""
        for future in list(self._owed):
            if not future.done():
                future.set_exception(error)
        self._queue.clear()
