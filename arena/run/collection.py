"""Ordering episodes from the rollout actors (their ``rollout`` service, see
:mod:`arena.actors.rollout`) and combining their answers.

The rollout actors are the ones on the bus when a collect starts, not a count fixed in advance:
with an external broker, actors started on other hosts join a run, and each takes part from the
next collect after it registers (:mod:`arena.run.directory`). A run may start none itself.

Collects come in whole groups of ``rollout.group_size`` episodes: the groups of a collect are
split over the actors, and no group is ever split between two of them, since only the episodes
of one order share a seed (and so a group id).

Every order is a **lease** of a job (its seed, size and a lease id that names its episodes,
:mod:`arena.actors.rollout`). When the actor holding it dies, or the lease runs past
``rollout.lease_timeout`` (a straggler), the same job is leased again: to another actor on the
bus if there is one, else to the same one once it is back (restarted). The job replays the
same games under the same episode ids, so the episodes the first holder had already sent and
their new copies are the same ids: the learner trains on each once and drops the rest as
duplicates (``rejected_duplicate``). A straggler is not stopped; its late copies are dropped the
same way. Episodes that failed inside a finished order (an episode error) are ordered again as
fresh groups (a new seed), rounded up to whole groups. :class:`Leases` counts it all (metrics
``leases/*``, and ``arena status`` on the trainer).

In async mode, :class:`CollectStream` keeps every rollout actor collecting, order after order.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from arena.bus import Actor, BusError
from arena.play.stats import merge_collects
from arena.run.directory import rollout_index
from arena.run.watch import Watchdog

Discover = Callable[[], Awaitable[list[str]]]
"""Returns the names of the rollout actors on the bus now, in index order."""

RETRY_DELAY = 2.0
"""Seconds between a failed order and its retry: time for the launcher to restart the actor."""


def fixed(count: int) -> Discover:
    """A fixed set, ``rollout-0`` to ``rollout-<count-1>`` (for callers that know their actors)."""
    names = [f"rollout-{i}" for i in range(count)]

    async def discover() -> list[str]:
        return list(names)

    return discover


@dataclass
class Leases:
    """How leased jobs went, since the run started."""

    leased: int = 0
    """Orders given, re-leases included."""
    completed: int = 0
    """Orders answered."""
    re_leased: int = 0
    """Jobs given again after their holder died or overran ``rollout.lease_timeout``."""

    def as_dict(self) -> dict[str, int]:
        return {"leased": self.leased, "completed": self.completed, "re_leased": self.re_leased}


@dataclass
class Job:
    """One order's work: ``episodes`` from ``seed``, named after ``lease``, held by ``holder``."""

    seed: int
    episodes: int
    lease: str
    holder: str


class Collector:
    """Splits collects over the rollout actors present at the time, leases each share as a job,
    and leases a job again when its holder dies or overruns."""

    def __init__(
        self,
        actor: Actor,
        actors: int | Discover,
        max_restarts: int,
        on_event: Callable[[str], None],
        group_size: int = 1,
        *,
        wait_timeout: float = 600.0,
        lease_timeout: float = 3600.0,
    ) -> None:
        self.actor = actor
        self.discover: Discover = fixed(actors) if isinstance(actors, int) else actors
        """Who to order from: asked before every collect and before every retry."""
        self.count = actors if isinstance(actors, int) else None
        """The fixed number of actors, when given one instead of a way to discover them."""
        self.max_restarts = max_restarts
        self.on_event = on_event
        self.group_size = group_size
        """Episodes per group (same game, seed, seats and opponent): every order is a multiple."""
        self.wait_timeout = wait_timeout
        self.watchdog: Watchdog | None = None
        """Reports collects that run long (set by the coordinator)."""
        """Seconds a collect waits for a rollout actor when there is none on the bus."""
        self.opponent: dict[str, str] | None = None
        """Population mode: who fills the untrained seats (sent with every order)."""
        self.lease_timeout = lease_timeout
        """Seconds an order may take before its job is leased to another actor."""
        self.leases = Leases()

    def shares(self, total: int, actors: int | None = None) -> list[int]:
        """Episodes per actor, for ``actors`` actors (default: the fixed number given):
        ``total`` rounded up to whole groups, the groups spread evenly (the first actors get
        one more where they do not divide)."""
        if actors is None:
            assert self.count is not None, "a discovering collector needs the actor count"
            actors = self.count
        size = self.group_size
        groups = -(-total // size)
        return [(groups // actors + (i < groups % actors)) * size for i in range(actors)]

    async def present(self) -> list[str]:
        """The rollout actors on the bus now; while there is none, wait for one (up to
        ``wait_timeout``), since a restarting or joining actor may be moments away."""
        deadline = time.monotonic() + self.wait_timeout
        while True:
            names = await self.discover()
            if names:
                return names
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"no rollout actor on the bus for {self.wait_timeout:.0f}s; start one with "
                    "`arena rollout --connect ADDR --config RUN_DIR/config.yaml --index I`"
                )
            await asyncio.sleep(0.5)

    async def collect(self, total: int, seed: int) -> dict[str, Any]:
        """``total`` episodes split over the rollout actors on the bus, one job each. A job
        whose holder failed is leased again (``max_restarts`` times at most); an order's failed
        episodes are ordered again as fresh groups."""
        names = await self.present()
        jobs = self.jobs(dict(zip(names, self.shares(total, len(names)), strict=True)), seed)
        replies = []
        for attempt in range(self.max_restarts + 1):
            results = await asyncio.gather(
                *(self.run_job(job) for job in jobs), return_exceptions=True
            )
            lost: list[tuple[Job, BaseException]] = []
            again: dict[str, int] = {}
            for job, result in zip(jobs, results, strict=True):
                if isinstance(result, BaseException):
                    lost.append((job, result))
                    continue
                replies.append(result)
                if result["failed"]:
                    again[job.holder] = -(-result["failed"] // self.group_size) * self.group_size
            if not (lost or again) or attempt == self.max_restarts:
                break
            await asyncio.sleep(RETRY_DELAY)
            present = await self.present()
            jobs = [self.release(job, err, present) for job, err in lost]
            # one actor never gets an order seed twice (the coordinator's seeds are 100 apart
            # per step): fresh groups take the next attempt's seeds
            jobs += self.jobs(self.reassign(again, present), seed + (attempt + 1) * 10)
        return merge_collects(replies)

    def jobs(self, shares: dict[str, int], seed: int) -> list[Job]:
        """A job per actor with a share, seeded ``seed`` + its index."""
        out = []
        for name, episodes in shares.items():
            if episodes > 0:
                job_seed = seed + _index(name)
                out.append(Job(job_seed, episodes, f"{name}-{job_seed}", name))
        return out

    def release(self, job: Job, error: BaseException, present: list[str]) -> Job:
        """Lease ``job`` again, to another actor on the bus when there is one (the holder may
        still be listed while it restarts, or be busy with the job if it merely overran), else
        to the holder, back on the bus."""
        others = [n for n in present if n != job.holder] or present
        holder = others[self.leases.re_leased % len(others)]
        self.leases.re_leased += 1
        self.on_event(
            f"{job.holder} did not finish job {job.lease} ({error}); leasing it to {holder}"
        )
        return Job(job.seed, job.episodes, job.lease, holder)

    async def run_job(self, job: Job) -> dict[str, Any]:
        """Order ``job`` from its holder; raises :class:`BusError` when the holder dies or the
        lease times out."""
        reply = await self.order(job.holder, job.episodes, job.seed, lease=job.lease)
        self.leases.completed += 1
        return reply

    def reassign(self, again: dict[str, int], present: list[str]) -> dict[str, int]:
        """Shares to order again: each stays with its actor if that one is on the bus, and
        the shares of the absent ones are split over the present ones in whole groups."""
        pending = {name: s for name, s in again.items() if name in present}
        orphaned = sum(s for name, s in again.items() if name not in present)
        if orphaned:
            for name, s in zip(present, self.shares(orphaned, len(present)), strict=True):
                pending[name] = pending.get(name, 0) + s
        return pending

    async def order(
        self, name: str, episodes: int, seed: int, lease: str | None = None
    ) -> dict[str, Any]:
        """One collect order to rollout actor ``name`` (``episodes`` a multiple of the group
        size), timed out after ``lease_timeout``; returns its reply."""
        order: dict[str, Any] = {"op": "collect", "episodes": episodes, "seed": seed}
        if lease is not None:
            order["lease"] = lease
        self.leases.leased += 1
        if self.group_size > 1:
            order["group_size"] = self.group_size
        if self.opponent is not None:
            order["opponent"] = self.opponent
        request = self.actor.request(order, dst=name, service="rollout", timeout=self.lease_timeout)
        if self.watchdog is None:
            return (await request).body
        async with self.watchdog.waiting(
            f"collect (seed {seed}): waiting for {name}'s {episodes} episodes", [name]
        ):
            return (await request).body


class CollectStream:
    """Async mode: every rollout actor on the bus collects order after order until
    :meth:`stop`. An actor that joins gets orders from then on; one whose order fails is dropped
    until it is on the bus again (restarted), and its job is leased again to the next actor that
    looks (not to the same one if it merely overran its lease). Each order is an equal share of a step's groups
    among the actors collecting at that moment, at least one group.

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
                names = await self.collector.discover()
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
        for i, (job, version, not_for) in enumerate(self._requeue):
            if not_for != name:
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
            if any(not_for != name for _, _, not_for in self._requeue):
                return self._requeued(name)
        self.untrained += episodes
        issued = self._issued.get(name, 0)
        self._issued[name] = issued + 1
        seed = self.seed + _index(name) * 10**5 + issued
        return Job(seed, episodes, f"{name}-{seed}", name), await self.version()

    def _notify(self) -> None:
        self._changed.set()

    async def _next_change(self, timeout: float) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)


def _index(name: str) -> int:
    index = rollout_index(name)
    return 0 if index is None else index
