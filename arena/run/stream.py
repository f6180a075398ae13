"""Async collection: every rollout actor keeps collecting, order after order, while the learner
trains, with the staleness bound kept by pacing (:class:`CollectStream`). Orders are leased jobs
(:mod:`arena.run.collection`); a failed one is leased again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from arena.bus import BusError
from arena.run.collection import Collector, Job, index_of


class CollectStream:
    """Async mode: every rollout actor on the bus collects order after order until
    :meth:`stop`. An actor that joins gets orders from then on; one whose order fails is dropped
    until it is on the bus again (one reported dead: until the broker has heard from it since,
    :meth:`Collector.alive`), and its job is leased again to the next actor that looks (not to
    the same one if it merely overran its lease, unless it is the only one). Each
    order is an equal share of a step's groups among the actors collecting at that moment, at
    least one group.

    The staleness bound ``max_staleness`` (eta) holds exactly, by pacing, not by dropping:

    - **Admission** (as AReaL): an order of n episodes starts only while the episodes not yet
      trained on (in flight, plus delivered but not taken by a step) stay within
      (eta + 1) x ``episodes_per_step`` with it. With one batch trained per step this is AReaL's
      "in flight + accepted <= (eta + version + 1) x batch"; counting what the steps actually
      took keeps it from stalling when a step takes more than one batch.
    - **No step outruns a straggler**: every order remembers the oldest policy version its turns
      can have (the version the inference actors serve when it starts, :attr:`version`); the
      coordinator asks :meth:`ready_for` before each step, which holds the step that would leave
      an order in flight more than eta versions behind until that order is in.

    So every trained turn is at most eta versions old, and none is dropped or down-weighted for
    staleness; a slow actor slows the run instead. Dropping stale turns after the fact would
    discard long episodes more often than short ones, biasing training toward short episodes.
    """

    def __init__(
        self,
        collector: Collector,
        episodes_per_step: int,
        seed: int,
        version: Callable[[], Awaitable[int]],
        max_staleness: int,
        on_event: Callable[[str], None],
    ) -> None:
        self.collector = collector
        self.episodes_per_step = episodes_per_step
        self.groups = max(1, episodes_per_step // collector.group_size)
        self.seed = seed
        self.version = version
        """The oldest policy version the inference actors serve now (an order's turns are at
        least this new)."""
        self.max_staleness = max_staleness
        self.on_event = on_event
        self.replies: list[dict[str, Any]] = []
        """Collect replies not yet taken by a step (see :meth:`take`)."""
        self.in_flight: dict[int, tuple[int, int]] = {}
        """Orders on their way: order number -> (episodes, the version when it started)."""
        self.untrained = 0
        """Episodes ordered and not yet taken by a step (in flight, or reported and waiting)."""
        self._orders = 0
        self._issued: dict[str, int] = {}
        """Per actor: orders ever given (their seeds), kept across its restarts so that it never
        gets an order seed twice."""
        self._requeue: list[tuple[Job, int, str | None]] = []
        """Jobs to lease again: (job, the version it started at, an actor not to give it to)."""
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopped = asyncio.Event()
        self._changed = asyncio.Event()
        self._last_actor = time.monotonic()

    @property
    def capacity(self) -> int:
        """Most episodes that may be untrained at once: (eta + 1) x episodes_per_step."""
        return (self.max_staleness + 1) * self.episodes_per_step

    @property
    def episodes(self) -> int:
        """Episodes reported since the last :meth:`take`."""
        return sum(r["episodes"] for r in self.replies)

    def step_ready(self) -> bool:
        """Whether a step's episodes came in since the last :meth:`take`; or, with none, as
        many failed: a step with nothing to train on, which the coordinator counts
        (:mod:`arena.run.failures`) rather than waiting for episodes that may never come."""
        episodes = self.episodes
        failed = sum(r["failed"] for r in self.replies)
        return episodes >= self.episodes_per_step or (
            episodes == 0 and failed >= self.episodes_per_step
        )

    def take(self) -> list[dict[str, Any]]:
        """The replies since the last call (the learner takes every turn that reached it)."""
        taken, self.replies = self.replies, []
        self.untrained -= sum(r["episodes"] for r in taken)
        self._notify()
        return taken

    def ready_for(self, version: int) -> bool:
        """Whether a step may train at learner version ``version``: afterwards the learner is
        at ``version + 1``, so no order still in flight may have started before
        ``version + 1 - max_staleness``."""
        oldest = min((v for _, v in self.in_flight.values()), default=None)
        return oldest is None or version + 1 - oldest <= self.max_staleness

    async def run(self, poll: float = 1.0) -> None:
        """Find the rollout actors on the bus every ``poll`` seconds and keep one producer
        running per actor; fails when none has been there for the collector's wait timeout."""
        while not self._stopped.is_set():
            try:
                names = await self.collector.alive()
            except BusError as err:  # e.g. the broker is restarting
                self.on_event(f"could not list the rollout actors ({err}); retrying")
                names = []
            for name in names:
                if name not in self._tasks or self._tasks[name].done():
                    self._tasks[name] = asyncio.create_task(self._produce(name))
            if any(not t.done() for t in self._tasks.values()):
                self._last_actor = time.monotonic()
            elif time.monotonic() - self._last_actor > self.collector.wait_timeout:
                raise RuntimeError(
                    f"no rollout actor on the bus for {self.collector.wait_timeout:.0f}s"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), poll)

    def stop(self) -> None:
        self._stopped.set()
        for task in self._tasks.values():
            task.cancel()

    async def _produce(self, name: str) -> None:
        while not self._stopped.is_set():
            job, version = self._requeued(name) or await self._admit(name) or (None, 0)
            if job is None:
                return  # stopped while waiting for room
            order = self._orders
            self._orders += 1
            self.in_flight[order] = (job.episodes, version)
            try:
                reply = await self.collector.run_job(job)
            except BusError as err:
                # the job stays admitted, and keeps the version it started at: the next
                # producer to look leases it again (not its straggling holder, if it overran)
                overran = err.code == "timeout"
                self._requeue.append((job, version, name if overran else None))
                self.collector.leases.re_leased += 1
                self.on_event(f"{name} did not finish job {job.lease} ({err}); leasing it again")
                return  # run() starts it again once it is on the bus again
            finally:
                del self.in_flight[order]
                self._notify()
            # what never came is not waiting to be trained: it frees its admission room
            self.untrained -= job.episodes - reply["episodes"]
            self.replies.append(reply)

    def _requeued(self, name: str) -> tuple[Job, int] | None:
        """A job to lease again, if one waits that ``name`` may take."""
        alone = not any(n != name and not t.done() for n, t in self._tasks.items())
        for i, (job, version, not_for) in enumerate(self._requeue):
            if not_for != name or alone:
                del self._requeue[i]
                return Job(job.seed, job.episodes, job.lease, name), version
        return None

    async def _admit(self, name: str) -> tuple[Job, int] | None:
        """A new job for ``name``, once admission has room for it (None when stopped)."""
        while True:
            active = sum(not t.done() for t in self._tasks.values())
            episodes = max(1, self.groups // max(1, active)) * self.collector.group_size
            if self.untrained + episodes <= max(self.capacity, episodes):
                break
            await self._next_change(0.5)
            if self._stopped.is_set():
                return None
            if (requeued := self._requeued(name)) is not None:
                return requeued
        self.untrained += episodes
        issued = self._issued.get(name, 0)
        self._issued[name] = issued + 1
        seed = self.seed + index_of(name) * 10**5 + issued
        return Job(seed, episodes, f"{name}-{seed}", name), await self.version()

    def _notify(self) -> None:
        self._changed.set()

    async def _next_change(self, timeout: float) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)
