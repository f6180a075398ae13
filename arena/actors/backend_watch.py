"""How long an inference actor's backend has been in its current call, and when that is a hang.

Generation and weight updates run on one worker thread (:mod:`arena.actors.inference`), so the
event loop keeps answering while the backend works: its heartbeats then prove only that the
loop runs. :class:`BackendWatch` times every backend call, so that the actor can withhold its
heartbeats while one call has run past the hang limit (the run then finds it hung as it finds a
stopped one, :mod:`arena.run.hangs`), and can tell at close whether a call never returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

HANG_FLOOR = 30.0
"""Seconds a backend call may always run before the actor takes itself for hung (by default)."""
HANG_MARGIN = 4.0
"""By default a call may also run this many times the slowest one before it."""


class BackendWatch:
    """The backend call in progress (:attr:`since`) and the slowest so far."""

    def __init__(self, hang_timeout: float | None = None) -> None:
        """``hang_timeout``: ``inference.hang_timeout`` (None: see :attr:`limit`)."""
        self.hang_timeout = hang_timeout
        self.since: float | None = None
        """When the backend call in progress began (``time.monotonic``); None between calls."""
        self.slowest = 0.0
        """Seconds of the slowest backend call so far (a batch or a weight update)."""

    @property
    def limit(self) -> float:
        """Seconds one backend call may run before the actor takes itself for hung:
        ``hang_timeout``, or by default :data:`HANG_FLOOR` or :data:`HANG_MARGIN` times the
        slowest call so far, whichever is longer."""
        if self.hang_timeout is not None:
            return self.hang_timeout
        return max(HANG_FLOOR, HANG_MARGIN * self.slowest)

    def overdue(self) -> float | None:
        """Seconds the call in progress has run, when that is past :attr:`limit`; else None."""
        since = self.since
        if since is None or time.monotonic() - since <= self.limit:
            return None
        return time.monotonic() - since

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` (on the backend's thread), noting when it entered the backend."""
        self.since = start = time.monotonic()
        try:
            return fn(*args)
        finally:
            self.slowest = max(self.slowest, time.monotonic() - start)
            self.since = None
