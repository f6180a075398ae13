"""Knowing which weights each inference actor serves.

Inference actors announce every update's outcome on topic ``weights_ack.<name>``
(:mod:`arena.actors.inference`). :class:`WeightSync` listens to those announcements and asks
the actors' status service, so the coordinator can wait until every actor serves a version
(sync mode) or until the pool actor has loaded a checkpoint (population mode).

"Every actor" means every one on the bus that serves the policy's status service when the wait
starts, found in the broker's directory (:mod:`arena.run.directory`): inference actors started
elsewhere join a run under names of their own, and one that joins later gets the current weights
re-sent by the learner and is waited for from the next version on.

Weights travel through the broker (topic ``weights.<policy>``), so a broker that dies or stops
while they are on their way loses them, and nothing else would send that version again: the
learner re-sends its weights when an inference actor (re)joins, but only if the learner itself
had registered again with the new broker first, and a stopped broker taken back is joined by
nobody. So a wait that finds an actor behind, after this actor registered again with a
restarted broker or took a lost one back, asks the learner to publish again (once per such
session, once the learner and the actor are both in the broker's directory).

A learner that restarts from its checkpoint rolls the inference actors back to that checkpoint's
version (its buckets carry a newer epoch, :mod:`arena.weights.assembler`); the coordinator then
waits for that version exactly (``exact=True``), since a version newer than it is the dead
learner's.

Every wait here is bounded by the run's ``wait.weights_timeout``: past it the wait is abandoned
with :class:`WeightSyncTimeout`, named in the run's event log first, never a silent hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from arena.bus import Actor, BusError, BusTimeout, Message
from arena.run.config import WaitConfig
from arena.run.directory import listing, serving
from arena.run.watch import Watchdog
from arena.weights import NOT_NEWER

LEARNER_CHECK_EVERY = 2.0
"""Seconds between two looks at the learner while a wait for weights lasts."""


class WeightSyncTimeout(TimeoutError):
    """A wait for weights outlasted ``wait.weights_timeout``: the actor named in the message
    never served (or loaded) the awaited version, or the learner never answered a re-publish."""


class WeightsRefused(WeightSyncTimeout):
    """An actor refused the very version a wait is for (a checkpoint it cannot load): waiting
    longer would not change it."""


class WeightSync:
    """The versions the inference actors last applied, and ways to wait for one."""

    def __init__(
        self,
        policy_name: str,
        on_event: Callable[[str], None],
        learner_service: str = "learner",
        timeout: float = WaitConfig.weights_timeout,
    ) -> None:
        self.policy_name = policy_name
        self.timeout = timeout
        """Seconds each wait for weights may take, unless the call names its own bound (the
        run's ``wait.weights_timeout``)."""
        self.learner_service = learner_service
        """Who publishes the policy's weights (asked to publish again after a broker restart)."""
        self.on_event = on_event
        """Called with a line for the run's event log (a refused update)."""
        self.acks: dict[str, int] = {}
        """The version each inference actor last acknowledged applying."""
        self.refusals: dict[str, tuple[int, str]] = {}
        """The version each inference actor last refused since :meth:`expect`, and why."""
        self.serving: dict[str, int] = {}
        """The version each inference actor of this policy said it serves, at its last
        announcement (applied or refused): see :meth:`served_version`."""
        self._applied = asyncio.Event()
        self.actor: Actor | None = None
        self.watchdog: Watchdog | None = None
        """Reports a wait for weights that runs long (set by the coordinator)."""
        self.inspect: Callable[[list[dict[str, Any]]], None] | None = None
        """Called with each listing of the broker's directory this takes (set by the
        coordinator: the check of the inference actors' settings,
        arena/run/inference_settings.py)."""
        self.learner_check: Callable[[], Awaitable[None]] | None = None
        """Called every :data:`LEARNER_CHECK_EVERY` seconds while an actor does not serve the
        awaited version yet; raises when the learner restarted meanwhile, since that version
        then never comes (set by the coordinator: arena/run/learner_restart.py)."""
        self._sessions = 1  # its first
        """The actor's broker sessions when the learner was last asked to publish again: more
        since means a broker restarted or lost (and taken back) that may have lost weights on
        their way. (Such a request
        may be one too many, when nothing was lost: a publish of served weights is refused as
        not newer, at the cost of one export per broker restart.)"""

    def attach(self, actor: Actor, own_only: bool = False) -> None:
        """Listen to every policy's acknowledgements, or (``own_only``) to this policy's alone,
        which then reach this one and no other (call before ``actor.start()``)."""
        actor.subscribe(
            f"weights_ack.{self.policy_name}" if own_only else "weights_ack.", self._on_ack
        )
        self.actor = actor

    async def served_version(self) -> int:
        """The oldest version an inference actor of this policy on the bus now serves, as far
        as their announcements tell (one that has announced nothing yet serves the initial
        weights: 0). Turns sampled from now on are at least this new.

        While none is on the bus (a restarted broker before they registered again, or every
        one restarting) this waits for one: an empty directory says nothing of the version
        that will serve (it read as v0 once, and the run named an actor serving v0 that served
        the learner's latest; the chaos run's ``kill_broker+kill_learner+kill_rollout``)."""
        assert self.actor is not None
        service = f"policy:{self.policy_name}:status"
        if not (names := serving(await self._listing(), service)):
            deadline = time.monotonic() + self.timeout
            what = f"waiting for an inference actor serving policy:{self.policy_name}"
            async with (
                self.watchdog.waiting(what, []) if self.watchdog else contextlib.nullcontext()
            ):
                while not (names := serving(await self._listing(), service)):
                    if time.monotonic() > deadline:
                        self._expired(
                            f"no inference actor serving policy:{self.policy_name} joined the "
                            f"bus in {self.timeout:g}s"
                        )
                    await asyncio.sleep(0.25)
        return min(self.serving.get(name, 0) for name in names)

    async def admission_version(self, learner_version: int, max_staleness: int) -> int:
        """The oldest version a turn of an order starting now can have: what the inference
        actors serve, never newer than the learner's ``learner_version``. An actor more than
        ``max_staleness`` versions behind (restarted, or the weights it missed were lost with a
        broker) would sample turns that no step may train on: the order waits until it serves
        ``learner_version``, the learner asked to publish again where a broker lost them."""
        served = await self.served_version()
        if served < learner_version - max_staleness:
            self.on_event(
                f"an inference actor serves v{served}, too old for the learner's "
                f"v{learner_version} (learner.batch.max_staleness); no order starts until it "
                f"serves v{learner_version}"
            )
            await self.wait_serving(learner_version)
            served = await self.served_version()
        return min(learner_version, served)

    def _on_ack(self, msg: Message) -> None:
        body = msg.body
        if msg.topic == f"weights_ack.{self.policy_name}" and "serving" in body:
            self.serving[str(body.get("actor"))] = int(body["serving"])
        if body.get("applied"):
            self.acks[body["actor"]] = int(body["version"])
            self._applied.set()
        elif NOT_NEWER not in str(body.get("reason")):  # a re-publish of served weights is no news
            with contextlib.suppress(TypeError, ValueError):
                self.refusals[str(body.get("actor"))] = (int(body["version"]), str(body["reason"]))
            self._applied.set()
            self.on_event(
                f"{body.get('actor')} refused weights v{body.get('version')}: {body.get('reason')}"
            )

    async def wait_serving(
        self, version: int, timeout: float | None = None, exact: bool = False
    ) -> None:
        """Until every inference actor of the policy on the bus serves ``version`` (or newer,
        unless ``exact``), asking each its status. One that leaves the bus meanwhile is no
        longer waited for. :class:`WeightSyncTimeout` past ``timeout`` (None: :attr:`timeout`)."""
        assert self.actor is not None
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        service = f"policy:{self.policy_name}:status"
        names = serving(await self._listing(), service)
        if self.watchdog is None:
            await self._wait_each(names, version, deadline, timeout, exact)
            return
        async with self.watchdog.waiting(f"waiting for weights v{version}", names):
            await self._wait_each(names, version, deadline, timeout, exact)

    async def _listing(self) -> list[dict[str, Any]]:
        """The broker's directory, shown to :attr:`inspect`."""
        assert self.actor is not None
        actors = await listing(self.actor)
        if self.inspect is not None:
            self.inspect(actors)
        return actors

    async def _wait_each(
        self, names: list[str], version: int, deadline: float, timeout: float, exact: bool
    ) -> None:
        assert self.actor is not None
        service = f"policy:{self.policy_name}:status"
        checked = time.monotonic()
        for name in names:
            while True:
                try:
                    status = await self.actor.request(service=service, dst=name, timeout=30)
                    served = self.serving[name] = int(status.body["version"])
                    if served == version or (served > version and not exact):
                        break
                    if served < version:
                        await self._publish_again_after_restart(name, version)
                except BusError:
                    if name not in serving(await listing(self.actor), service):
                        break  # it left (or died): nothing to wait for
                    # else lost on the way (a restarting broker): ask again
                if time.monotonic() > deadline:
                    self._expired(f"{name} did not apply weights v{version} in {timeout:g}s")
                if (
                    self.learner_check is not None
                    and time.monotonic() - checked > LEARNER_CHECK_EVERY
                ):
                    checked = time.monotonic()
                    await self.learner_check()
                await self._next_ack(0.5)

    async def _publish_again_after_restart(self, name: str, version: int) -> None:
        """``name`` serves an older version than ``version``: if the broker restarted or was
        lost since weights last arrived, they may have died with it, so ask the learner to send
        them again, once the learner and ``name`` are both in its directory (else the publish
        would be lost too; the next call looks again)."""
        assert self.actor is not None
        sessions = self.actor.broker_sessions
        if sessions <= self._sessions:
            return
        actors = await listing(self.actor)
        if name not in (a["name"] for a in actors) or not serving(actors, self.learner_service):
            return
        self.on_event(
            f"{name} does not serve weights v{version} since the broker was lost; asking the "
            "learner to publish them again"
        )
        try:
            await self.actor.request(
                {"op": "publish"}, service=self.learner_service, timeout=self.timeout
            )
        except BusTimeout:
            self._expired(f"the learner did not publish weights again in {self.timeout:g}s")
        self._sessions = sessions

    def expect(self, actor: str) -> None:
        """Forget what ``actor`` acknowledged so far: call it just before sending the load that
        :meth:`wait_applied` then waits for, with no await between the two, so that an earlier
        acknowledgement cannot satisfy the wait and the new one, however soon it comes, is kept
        (several loads may be sent before any is waited for)."""
        self.acks.pop(actor, None)
        self.refusals.pop(actor, None)

    async def wait_applied(
        self, actor: str, version: int, exact: bool, timeout: float | None = None
    ) -> None:
        """Until ``actor`` acknowledges applying ``version`` (exactly, or it or a newer one)
        since :meth:`expect`; :class:`WeightSyncTimeout` past ``timeout`` (None:
        :attr:`timeout`), :class:`WeightsRefused` at once when ``actor`` refuses ``version``."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while self.acks.get(actor) != version if exact else self.acks.get(actor, -1) < version:
            refused, reason = self.refusals.get(actor, (None, ""))
            if refused == version:
                raise WeightsRefused(f"{actor} refused weights v{version}: {reason}")
            if time.monotonic() > deadline:
                self._expired(f"{actor} did not load weights v{version} in {timeout:g}s")
            await self._next_ack(1.0)

    def _expired(self, what: str) -> NoReturn:
        """Abandon a wait for weights: name it in the run's event log, then raise."""
        self.on_event(f"weight sync abandoned: {what} (wait.weights_timeout)")
        raise WeightSyncTimeout(what)

    async def _next_ack(self, timeout: float) -> None:
        self._applied.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._applied.wait(), timeout)
