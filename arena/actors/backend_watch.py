"""How long an inference actor's backend has been in its current call, and when that is a hang.

Generation and weight updates run on one worker thread (:mod:`arena.actors.inference`), so the
event loop keeps answering while the backend works: its heartbeats then prove only that the
loop runs. :class:`BackendWatch` times every backend call, so that the actor can withhold its
heartbeats while one call has run past the hang limit (the run then finds it hung as it finds a
stopped one, :mod:`arena.run.hangs`), and can tell at close whether a call never returned.

A batch that runs out of memory is served in halves (:func:`serve_in_halves`), down to one
request, and the actor serves smaller batches until enough of them went through to try larger
ones again (:class:`BatchCeiling`). A backend that fails out of memory
even so cannot serve: :class:`OutOfMemoryStreak` counts such batches in a row, so that the
actor leaves at ``inference.max_oom_batches`` of them (for the run to restart it) instead of
failing every request it is sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

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


OOM_MARKERS = ("out of memory", "can't allocate memory")
"""What a backend's error says when memory ran out: torch's CUDA, HIP and MPS errors and the
engines' RuntimeErrors ("CUDA out of memory"), the CPU allocator's ("can't allocate memory")."""


def out_of_memory(err: BaseException) -> bool:
    """Whether a backend's exception says memory ran out (``torch.OutOfMemoryError``, a
    ``MemoryError``, or a message with one of :data:`OOM_MARKERS`)."""
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
        return True
    said = str(err).lower()
    return any(marker in said for marker in OOM_MARKERS)


class OutOfMemoryStreak:
    """Batches in a row that failed out of memory, against ``limit`` (0: no limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_a_row = 0

    def served(self) -> None:
        """A batch succeeded."""
        self.in_a_row = 0

    def failed(self, err: BaseException) -> bool:
        """A batch failed with ``err``: whether that makes ``limit`` in a row out of memory
        (another error breaks the run of them)."""
        self.in_a_row = self.in_a_row + 1 if out_of_memory(err) else 0
        return bool(self.limit) and self.in_a_row >= self.limit


class BatchCeiling:
    """The most requests an actor puts in one batch (:attr:`now`): ``configured``
    (``inference.max_batch``), cut to the largest part served whole when a batch ran out of
    memory, and doubled back towards ``configured`` after ``regrow_after`` batches in a row
    filled the cut ceiling without running out (0: a cut stays). A shortage that passes
    (another process's memory, fragmentation) then costs throughput for a while, not for the
    actor's life; one that stays costs a split every ``regrow_after`` full batches."""

    def __init__(self, configured: int, regrow_after: int) -> None:
        self.configured = configured
        self.regrow_after = regrow_after
        self.now = configured
        self._full = 0
        """Batches in a row that filled a cut ceiling and were served whole."""

    def served(self, size: int, fits: int) -> str | None:
        """A batch of ``size`` was served, its largest part served whole of ``fits`` requests
        (``size`` where it did not run out of memory). Returns a line to log where that moved
        the ceiling; a batch smaller than the ceiling says nothing of it and is not counted."""
        if fits < size:
            self._full, self.now = 0, fits
            return (
                f"a batch of {size} ran out of memory and was served in parts; at most {fits} "
                "requests a batch from now on"
            )
        if self.now >= self.configured or size < self.now or not self.regrow_after:
            return None
        self._full += 1
        if self._full < self.regrow_after:
            return None
        self._full, was = 0, self.now
        self.now = min(self.configured, 2 * was)
        return (
            f"{self.regrow_after} batches of {was} served without running out of memory; at "
            f"most {self.now} requests a batch from now on"
        )


def serve_in_halves(serve: Callable[[list[T]], list[R]], batch: list[T]) -> tuple[list[R], int]:
    """``serve(batch)``; where that runs out of memory with more than one item, each half is
    served the same way, after the failed call's memory is given back (its error, which holds
    the call's tensors, is dropped first; CUDA's cached blocks are released). Returns the
    results in ``batch``'s order and the size of the largest part served whole. One item that
    runs out of memory alone raises that error, failing the batch."""
    try:
        return serve(batch), len(batch)
    except Exception as err:
        if len(batch) < 2 or not out_of_memory(err):
            raise
    release_cached_memory()
    half = (len(batch) + 1) // 2
    first, first_fits = serve_in_halves(serve, batch[:half])
    second, second_fits = serve_in_halves(serve, batch[half:])
    return first + second, max(first_fits, second_fits)


def release_cached_memory() -> None:
    """Give CUDA's cached blocks back, so that a retry after running out of memory finds them."""
    import torch  # the watch itself needs no torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
