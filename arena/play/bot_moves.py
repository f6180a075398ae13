"""A bot's move played off the event loop, bounded, so that a bot that blocks fails its episode.

Bots are synchronous (:meth:`games.bots.base.Bot.act`). Called on the event loop, a plugin's
``act`` that never returns (waiting on a socket, a deadlock, an endless loop on a rare position)
froze the whole process: a rollout actor stopped heart-beating and was restarted by the hang
watch, its job leased again with the same seed to block the same way, until the run failed
naming a rollout actor; an evaluation or a tournament hung. Here every bot move of the process
goes to one worker thread, first come first served, and the episode awaits it for at most the
seat's bound (:data:`~arena.play.config.BOT_MOVE_TIMEOUT`, 120 s, counted from when the move
starts) and the episode's own clock; past it the episode fails, naming the bot, its seat, the
game and the bound.

One worker, in order: bot moves run one at a time, as they did on the loop, so a bot never
meets another episode's bot concurrently (bots with shared caches need no locks), and the order
in which a bots-only evaluation or tournament finishes its games is the same on every run (each
move's completion decides which episode goes on next; a tournament's ratings are read in the
order its matches were logged). A move that runs past :data:`SLOW` (2 s) no longer holds up the
moves queued behind it: they go to a fresh worker while it goes on, to its bound; only then may
the order depend on timing.

A thread stuck in a plugin's ``act`` cannot be killed (Python has no way to stop a thread): when
a move runs past its bound (or its episode gives up on it), its worker is abandoned, left behind
blocked as a daemon thread holding its bot and its game (it never stops the process from
exiting, and exits by itself should the move ever return), and a fresh worker takes the moves
queued behind it.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from typing import Any


class MoveTimeout(TimeoutError):
    """A move still not back after its bound (seconds, its argument)."""


class _Job:
    __slots__ = ("fn", "args", "future", "loop", "started", "finished", "skip", "worker")

    def __init__(
        self, fn: Callable[..., Any], args: tuple[Any, ...], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.fn = fn
        self.args = args
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.started: float | None = None
        """When a worker began it (``time.monotonic``): the bound counts from there."""
        self.finished = False
        self.skip = False
        self.worker: _Worker | None = None


class _Worker(threading.Thread):
    def __init__(self, number: int) -> None:
        super().__init__(name=f"bot-moves-{number}", daemon=True)
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.abandoned = False

    def run(self) -> None:
        while True:
            job = self.jobs.get()
            if self.abandoned:  # came back from a stuck move: hand the rest on and stop
                _POOL.submit(job)
                return
            if job.skip:
                continue
            job.worker = self
            job.started = time.monotonic()
            try:
                outcome: tuple[Any, BaseException | None] = (job.fn(*job.args), None)
            except BaseException as err:  # the bot's error, raised in its episode
                outcome = (None, err)
            job.finished = True
            try:
                job.loop.call_soon_threadsafe(_settle, job.future, *outcome)
            except RuntimeError:  # the loop is closed: a move that came back too late
                pass
            if self.abandoned:  # a fresh worker has taken over the queue meanwhile
                return


class _Pool:
    """The process's bot-move worker, replaced when one is stuck."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: _Worker | None = None
        self._made = 0

    @property
    def current(self) -> _Worker | None:
        return self._current

    def submit(self, job: _Job) -> None:
        with self._lock:
            if self._current is None:
                self._current = self._start()
            self._current.jobs.put(job)

    def abandon(self, worker: _Worker) -> None:
        """Leave ``worker`` behind (slow or stuck in a move: it stops once the move returns)
        and give its queued moves to a new one."""
        with self._lock:
            if worker is not self._current:
                return
            worker.abandoned = True
            fresh = self._start()
            while True:
                try:
                    fresh.jobs.put(worker.jobs.get_nowait())
                except queue.Empty:
                    break
            self._current = fresh

    def _start(self) -> _Worker:
        self._made += 1
        worker = _Worker(self._made)
        worker.start()
        return worker


_POOL = _Pool()
SLOW = 2.0
"""Seconds a move may run before the moves queued behind it go to a fresh worker: a shipped
bot moves in milliseconds, so below it the order is kept; a slower move (or a stuck one) holds
up no one for longer."""


class BotMoves:
    """One episode's bot moves (:meth:`call`), and who is moving, for the episode's error."""

    def __init__(self) -> None:
        self.moving: str | None = None
        """Who is moving (``bot X (seat Y)``) while a move is awaited, for the episode's error
        when its own clock runs out meanwhile; set by the caller."""

    async def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None) -> Any:
        """``fn(*args)`` on the worker; :class:`MoveTimeout` once it has run ``timeout`` seconds
        (None: no bound), leaving the worker blocked in ``fn`` (see the module docstring)."""
        job = _Job(fn, args, asyncio.get_running_loop())
        _POOL.submit(job)
        try:
            if timeout is None:
                return await job.future
            while True:
                started = job.started
                left = timeout if started is None else started + timeout - time.monotonic()
                if started is None or job.worker is _POOL.current:  # not yet slow: look again
                    left = min(left, SLOW if started is None else started + SLOW - time.monotonic())
                await asyncio.wait((job.future,), timeout=max(left, 0.0))
                if job.future.done():
                    return job.future.result()
                started = job.started
                if started is None:
                    continue  # still queued behind other moves
                running = time.monotonic() - started
                if running >= timeout:
                    raise MoveTimeout(timeout)
                if running >= SLOW and job.worker is not None:
                    _POOL.abandon(job.worker)  # slow: the moves behind it go on without it
        finally:
            if not job.finished:  # given up on: past its bound, or its episode's clock
                job.skip = True
                if job.worker is not None:  # it is running, stuck: leave its worker behind
                    _POOL.abandon(job.worker)
                job.future.cancel()


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # given up on (timed out, or the episode was cancelled)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
