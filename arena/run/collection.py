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
duplicates (``rejected_duplicate``). A straggler's job is cancelled on it (``cancel`` op)
before it is leased again; what it sent meanwhile is dropped the same way. Episodes that
failed inside a finished order (an episode error) are ordered again as fresh groups (a new
seed), rounded up to whole groups. :class:`Leases` counts it all (metrics
``leases/*``, and ``arena status`` on the trainer).

An actor whose order fails with ``actor_dead`` (its connection dropped: killed, or its host
gone) is marked dead at once and gets no order until the broker has heard from it since
(restarted under the same name, or its connection back): the broker lists a killed actor until
its heartbeats time out (``bus.heartbeat_timeout``), and without the mark every collect until
then would order from it and lease that job again too.

In async mode, :class:`arena.run.stream.CollectStream` keeps every rollout actor collecting,
order after order, paced by the staleness bound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arena.bus import Actor, BusError
from arena.play.stats import merge_collects
from arena.run.config import RolloutConfig, WaitConfig
from arena.run.directory import rollout_index
from arena.run.watch import Watchdog

Discover = Callable[[], Awaitable[Sequence[str] | Mapping[str, float]]]
"""Returns the rollout actors on the bus now, in index order: their names, or each name with
the seconds since the broker last heard from it (:func:`arena.run.directory.rollout_actors`).
Only the second lets an actor reported dead be skipped until it is back; a plain list of names
counts every actor as heard from just now."""

RETRY_DELAY = 2.0
"""Seconds between a failed order and its retry: time for the launcher to restart the actor."""

HEARD_MARGIN = 0.5
"""Seconds after an actor was reported dead that the broker must have heard from it to count it
back: its last heartbeat before it died may reach the broker a moment after the death is seen."""


def fixed(count: int) -> Discover:
    """A fixed set, ``rollout-0`` to ``rollout-<count-1>`` (for callers that know their actors)."""
    names = [f"rollout-{i}" for i in range(count)]

    async def discover() -> list[str]:
        return list(names)

    return discover


def sync_order_seed(run_seed: int, step: int, again: int = 0) -> int:
    """The seed of a sync step's collect (the first rollout actor's order; the others and the
    orders given again add their index and 10 x the attempt, below 100). Seeds (and so episode
    ids) follow the step: unique within a run, and a resumed run replays exactly the steps its
    checkpoint lacks. A step collected ``again`` (nothing to train on, or a non-finite loss)
    gets seeds of its own, apart from every first collect's (each a multiple of 100 above
    10**6 x (run_seed + 1)): the same seeds would replay the same episodes, which the learner
    drops as duplicates, and another actor's seeds its episodes' starts."""
    first = (run_seed + 1) * 10**6 + step * 100
    return first if not again else first * 1000 + (again % 1000) * 100


@dataclass
class Leases:
    """How leased jobs went, since the run started."""

    leased: int = 0
    """Orders given, re-leases included."""
    completed: int = 0
    """Orders answered."""
    re_leased: int = 0
    """Jobs given again after their holder died or overran ``rollout.lease_timeout``."""
    cancelled: int = 0
    """Stragglers' jobs stopped on their holder (past ``rollout.lease_timeout``)."""
    duplicates_dropped: int = 0
    """Episodes the learner dropped as copies of one it had (as of its last step)."""

    def as_dict(self) -> dict[str, int]:
        return {
            "leased": self.leased,
            "completed": self.completed,
            "re_leased": self.re_leased,
            "cancelled": self.cancelled,
            "duplicates_dropped": self.duplicates_dropped,
        }

    def after_step(self, learner: dict[str, Any] | None) -> dict[str, int]:
        """Take the learner's duplicate count from its step metrics; the counters so far."""
        if learner and "count/rejected_duplicate" in learner:
            self.duplicates_dropped = int(learner["count/rejected_duplicate"])
        return self.as_dict()


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
        wait_timeout: float = WaitConfig.timeout,
        lease_timeout: float = RolloutConfig.lease_timeout,
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
        self.opponent: dict[str, Any] | None = None
        """Population mode: who fills the untrained seats (sent with every order)."""
        self.lease_timeout = lease_timeout
        """Seconds an order may take before its job is leased to another actor."""
        self.leases = Leases()
        self.dead: dict[str, float] = {}
        """Actors whose order failed with ``actor_dead``: name -> when (``time.monotonic``).
        None gets an order until the broker has heard from it since (see :meth:`alive`)."""

    async def alive(self) -> list[str]:
        """The rollout actors on the bus now, in index order, less those reported dead that the
        broker has not heard from since (a killed actor stays listed until its heartbeats time
        out; a restarted one registers again under the same name and counts at once)."""
        found = await self.discover()
        heard = found if isinstance(found, Mapping) else dict.fromkeys(found, 0.0)
        now = time.monotonic()
        for name, died in list(self.dead.items()):
            if name not in heard or now - heard[name] > died + HEARD_MARGIN:
                del self.dead[name]
        return [name for name in heard if name not in self.dead]

    def mark_dead(self, name: str, error: BusError) -> None:
        """``name`` failed an order with ``actor_dead``: no order goes to it until it is back."""
        if name not in self.dead:
            self.on_event(f"{name} is dead ({error}); no job goes to it until it is back")
        self.dead[name] = time.monotonic()

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
        """The rollout actors on the bus now and not reported dead (:meth:`alive`); while
        there is none, wait for one (up to ``wait_timeout``), since a restarting or joining
        actor may be moments away."""
        deadline = time.monotonic() + self.wait_timeout
        while True:
            names = await self.alive()
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
                job_seed = seed + index_of(name)
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
        try:
            reply = await self.order(job.holder, job.episodes, job.seed, lease=job.lease)
        except BusError as err:
            if err.code == "timeout":
                await self.cancel(job)
            elif err.code == "actor_dead":
                self.mark_dead(job.holder, err)
            raise
        self.leases.completed += 1
        return reply

    async def cancel(self, job: Job) -> None:
        """Stop a straggler's job before it is leased again (so that it plays no more of it,
        and a re-lease to the same actor is not mistaken for it); an actor that does not
        answer is dead or wedged, and its late copies would be dropped as duplicates anyway."""
        order = {"op": "cancel", "lease": job.lease}
        try:
            reply = await self.actor.request(order, dst=job.holder, service="rollout", timeout=10)
        except BusError as err:
            self.on_event(f"could not cancel job {job.lease} on {job.holder} ({err})")
            return
        if reply.body.get("cancelled"):
            self.leases.cancelled += 1

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


def index_of(name: str) -> int:
    """A rollout actor's index (0 for a name without one)."""
    index = rollout_index(name)
    return 0 if index is None else index
