"""The learners of named policies with models of their own, stepped beside the run's learner.

A run whose named policies include some with a ``model`` of their own (:mod:`arena.run.bases`)
has one learner per such policy that trains, besides its own. The coordinator drives the run's
learner as before; :class:`PolicyLearners` drives the others in lockstep with it:

- **Deliveries.** Every episode goes to every learner, so before a step each is waited for
  until it holds as many episodes as the collects reported (:class:`~arena.run.delivery.Deliveries`).
- **Steps.** All learners step at once; a step of the run ends when every learner has stepped
  and every inference actor of each policy serves its new version. The run's version is the
  tuple of them all: its own, then one per policy (:meth:`versions`, in ``metrics.jsonl`` as
  ``<policy>/version``, with the step's other metrics under the same prefix).
- **Restarts.** A policy's learner that restarts (killed, and restarted by the launcher from its
  own checkpoint) is noticed by its epoch (:class:`~arena.run.learner_restart.LearnerClient`):
  that policy goes back to its checkpoint, its inference actors are waited for at exactly that
  version, and the run and the other policies keep training. The episodes of the steps it missed
  are gone with it (as for the run's learner), and so are those steps: each step is asked as
  the run's (``{"op": "step", "at": N}``), so its next update is numbered as the run's next
  step, and its step, version, LR schedule and checkpoints (``step-N``, read by the run's
  step N) stay the run's. The other way round, a policy learner ahead of the run (the run's
  own learner restarted from an older checkpoint, and the run went back) takes no step until
  the run catches up, and keeps its turns for then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from arena.bus import Actor
from arena.run.bases import learner_service
from arena.run.delivery import Deliveries
from arena.run.learner_restart import LearnerClient, LearnerRestarted
from arena.run.watch import Watchdog
from arena.run.weight_sync import WeightSync


class PolicyLearner:
    """One named policy's learner: its client, its weight sync and its deliveries."""

    def __init__(self, name: str, on_event: Callable[[str], None], weights_timeout: float) -> None:
        self.name = name
        self.on_event = on_event
        self.weights = WeightSync(
            name, on_event, learner_service=learner_service(name), timeout=weights_timeout
        )
        self.version = 0
        self.step = 0
        self.trained_nothing = False
        """Whether its last :meth:`train` had nothing to train on (every episode of this policy
        rejected, or none of its turns): not when it was ahead of the run, or restarted."""

    def attach(self, actor: Actor) -> None:
        self.weights.attach(actor, own_only=True)

    def connect(self, actor: Actor, watchdog: Watchdog, timeout: float) -> None:
        self.client = LearnerClient(actor, watchdog, timeout, service=learner_service(self.name))
        self.deliveries = Deliveries(lambda: self.client("status", timeout=30), self.on_event)
        self.weights.watchdog = watchdog
        self.weights.learner_check = self.client.check_restart

    async def start(self) -> None:
        status = await self.client("status")
        self.step, self.version = int(status["step"]), int(status["version"])
        await self.weights.wait_serving(self.version)
        await self.deliveries.start()

    async def train(self, episodes: int, at: int) -> dict[str, Any] | None:
        """Wait for the step's ``episodes``, step as the run's step ``at``, and wait for the new
        version to be served; the step's metrics (None when it had nothing to train on, was
        already past ``at``, or restarted)."""
        self.trained_nothing = False
        try:
            await self.deliveries.wait(episodes)
            ahead = at <= self.step  # keeps its turns until the run catches up: not idle
            metrics = await self.client.step(self.version, at=at)
            self.trained_nothing = not ahead and (metrics is None or "step" not in metrics)
            if metrics and "version" in metrics:
                self.version, self.step = int(metrics["version"]), int(metrics["step"])
                await self.weights.wait_serving(self.version)
            return metrics
        except LearnerRestarted as restart:
            await self._rewind(restart)
            return None

    async def _rewind(self, restart: LearnerRestarted) -> None:
        while True:
            status = restart.status
            self.on_event(
                f"policy {self.name}: {restart} (it was at step {self.step}, v{self.version}); "
                "the other policies keep training"
            )
            self.step, self.version = int(status["step"]), int(status["version"])
            try:
                await self.weights.wait_serving(self.version, exact=True)
                await self.deliveries.start()
                return
            except LearnerRestarted as again:
                restart = again

    async def checkpoint(self) -> Any:
        try:
            return await self.client("checkpoint")
        except LearnerRestarted as restart:
            await self._rewind(restart)
            return await self.client("checkpoint")


class PolicyLearners:
    """Every named policy's own learner (see the module docstring); empty in most runs."""

    def __init__(
        self, names: list[str], on_event: Callable[[str], None], weights_timeout: float
    ) -> None:
        self.learners = [PolicyLearner(n, on_event, weights_timeout) for n in names]

    def attach(self, actor: Actor) -> None:
        """Listen to each policy's weight acknowledgements (before ``actor.start()``)."""
        for learner in self.learners:
            learner.attach(actor)

    def connect(self, actor: Actor, watchdog: Watchdog, timeout: float) -> None:
        for learner in self.learners:
            learner.connect(actor, watchdog, timeout)

    async def start(self) -> None:
        """Each learner's step and version; each policy's inference actors serve it."""
        await asyncio.gather(*(learner.start() for learner in self.learners))

    async def train(self, episodes: int, at: int) -> dict[str, Any]:
        """Step every learner on a step's ``episodes`` as the run's step ``at``: their metrics,
        each under its policy's name (``<policy>/loss``, ``<policy>/version``...)."""
        results = await asyncio.gather(*(learner.train(episodes, at) for learner in self.learners))
        out: dict[str, Any] = {}
        for learner, metrics in zip(self.learners, results, strict=True):
            for key, value in (metrics or {}).items():
                if isinstance(value, (int, float)):
                    out[f"{learner.name}/{key}"] = value
            out[f"{learner.name}/version"] = learner.version
        return out

    def askers(self) -> list[tuple[str, Callable[[str], Awaitable[Any]]]]:
        """Each learner's actor name (``learner-<policy>``, its log ``logs/<name>.log``) and a
        look at it that leaves its restarts to :meth:`train`
        (:meth:`~arena.run.learner_restart.LearnerClient.peek`): the run asks their rejections
        after a step that trained nothing (:class:`~arena.run.failures.Rejections`)."""
        return [(learner.client.actor_name, learner.client.peek) for learner in self.learners]

    def idle(self) -> list[str]:
        """The actor names of the learners whose last step trained nothing
        (:attr:`PolicyLearner.trained_nothing`): the run tells them
        (:class:`~arena.run.failures.Rejections`, :class:`~arena.run.failures.EmptySteps`)."""
        return [learner.client.actor_name for learner in self.learners if learner.trained_nothing]

    def versions(self) -> dict[str, int]:
        """Each policy's version, by name."""
        return {learner.name: learner.version for learner in self.learners}

    async def checkpoint(self) -> dict[str, Any]:
        """Every learner's final checkpoint, by policy."""
        paths = await asyncio.gather(*(learner.checkpoint() for learner in self.learners))
        return {learner.name: path for learner, path in zip(self.learners, paths, strict=True)}
