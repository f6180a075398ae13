"""Noticing that the learner restarted from its checkpoint, so that the run continues from there.

A learner process that dies (``kill -9``, out of memory, a lost host) is started again by
whatever started it: ``arena train``'s launcher (``learner_max_restarts``), an operator, or a
cluster engine. The new process resumes from its last checkpoint, so its step and version go
back to that checkpoint's, and everything the dead one held in memory is gone: pending turns,
and any update newer than the checkpoint (arena/commands/learner.py, trainers/learner_actor.py).

Every learner process has an ``epoch`` (its start time) in its ``status`` reply. The trainer
asks the learner through :class:`LearnerClient`, which remembers the first epoch it sees and
raises :class:`LearnerRestarted`, carrying the new learner's status, when

- a ``status`` reply names another epoch (the learner restarted between two requests), or
- a request to the learner fails (it died while answering, or none is on the bus), and a learner
  then answers ``status`` under another epoch within ``timeout`` seconds (``wait.timeout``;
  past ``wait.report_every`` the wait is reported, and shown by ``arena status``, like any
  other: :mod:`arena.run.watch`). One that answers under the same epoch did not restart: the
  request's own error is raised. One that does not answer in time leaves the run with that
  error too: no wait is unbounded, or
- a wait for weights finds the learner restarted (:meth:`LearnerClient.check_restart`, every
  few seconds while an inference actor lacks the awaited version, which then never comes).

A ``step`` whose reply is lost while the same learner lives on (its connection dropped, e.g. a
machine thrashing under memory pressure starves the sockets' heartbeats) is not an error of the
run: :meth:`LearnerClient.step` asks the learner what became of it. A learner past the version
the step started from ran it, and its ``status`` carries the step's metrics; one with turns
pending and no step under way never got the request, which is sent again; one still training is
waited for (within the step's own timeout).

The coordinator (arena/run/coordinator.py) catches it at the step it was in, and goes back to
the new learner's step: its metrics rows past it are dropped, the inference actors must serve
exactly the checkpoint's version (the restarted learner published it at start, and they roll
back to it), and the step runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, NoReturn

from arena.bus import Actor, BusError
from arena.core.limits import LEARNER_REQUEST
from arena.run.watch import Watchdog

LOST_REPLY = frozenset({"actor_dead", "broker_lost", "unreachable", "timeout"})
"""Error codes of a request whose reply may have been lost on the way (the bus's, not the
learner's own errors): the learner may have done what was asked."""


class LearnerRestarted(Exception):
    """The learner answering now is not the one the run was talking to."""

    def __init__(self, status: dict[str, Any]) -> None:
        self.status = status
        """The new learner's ``status`` reply (``step``, ``version``, ``epoch``, ...)."""
        super().__init__(
            f"the learner restarted (epoch {status.get('epoch')}) from its checkpoint at "
            f"step {status.get('step')}"
        )


class LearnerClient:
    """The trainer's requests to service ``learner`` (see the module docstring)."""

    def __init__(
        self,
        actor: Actor,
        watchdog: Watchdog,
        timeout: float,
        poll: float = 1.0,
        service: str = "learner",
    ) -> None:
        self.actor = actor
        self.service = service
        """The learner's service: ``learner``, or ``learner:<policy>`` for a named policy's
        own (arena/run/bases.py)."""
        self.actor_name = service.replace(":", "-")
        """The learner's actor name as the run starts it (``learner``, ``learner-<policy>``)."""
        self.watchdog = watchdog
        """Reports a request, or the wait for the learner to come back, that runs long."""
        self.timeout = timeout
        """Seconds to wait for a learner to answer after a failed request."""
        self.poll = poll
        self.epoch: int | None = None
        """The epoch of the learner the run talks to (None until a status named one)."""
        self.restarts = 0

    async def __call__(self, op: str, timeout: float = LEARNER_REQUEST) -> Any:
        """The learner's reply to ``op``; :class:`LearnerRestarted` when the learner that
        answers is not the one before. A request the broker could not route
        (``unknown_service``: a restarted broker that the learner has not registered with yet)
        never reached a learner, so once the same learner answers again it is asked again."""
        try:
            body = await self._request(op, timeout)
        except BusError as err:
            if err.code != "unknown_service":
                await self._after_error(err, f"the learner's {op}")
            await self._wait_for(err, f"the learner's {op}")
            return await self(op, timeout)
        return self._check(body) if op == "status" else body

    async def step(
        self, version: int, timeout: float = LEARNER_REQUEST, at: int | None = None
    ) -> Any:
        """The learner's reply to ``step``, asked of a learner at ``version``: its metrics, or
        None when it had nothing to train on. ``at``: the run's step this is, for a named
        policy's learner (its step count follows the run's, arena/run/policy_learners.py).
        :class:`LearnerRestarted` when a new learner answers; a reply lost on the way is
        recovered (see the module docstring)."""
        deadline = time.monotonic() + timeout
        try:
            if at is None:
                return await self._request("step", timeout)
            return await self._request("step", timeout, at)
        except BusError as err:
            if err.code not in LOST_REPLY | {"unknown_service"}:  # it answered, with an error
                await self._after_error(err, "the learner's step")
            return await self._recover_step(err, version, deadline, at)

    async def _recover_step(
        self, err: BusError, version: int, deadline: float, at: int | None = None
    ) -> Any:
        what = f"the learner's step failed ({err}); asking the learner what became of it"
        async with self.watchdog.waiting(what, [self.actor_name]):
            while True:
                status = await self._answered(err)  # LearnerRestarted for a new learner
                if not status.get("training"):
                    if int(status["step"]) > version:  # it ran; the reply was lost
                        return status.get("metrics")
                    if status.get("pending"):  # the request never reached it
                        left = max(deadline - time.monotonic(), 1.0)
                        return await self.step(version, left, at)
                    return None  # it ran with nothing to train on
                if time.monotonic() > deadline:
                    raise err
                await asyncio.sleep(self.poll)

    async def check_restart(self) -> None:
        """:class:`LearnerRestarted` if the learner answering now is a new one (nothing when
        none answers: the wait that asks goes on, within its own bound)."""
        with contextlib.suppress(BusError):
            self._check(await self._request("status", 10))

    async def peek(self, op: str, timeout: float = 10) -> Any:
        """The learner's reply to ``op``, asked once and its epoch not checked: a look that
        leaves a restart to the code that handles it (a named policy's learner, whose own
        ``step`` notices it); :class:`BusError` when it does not answer."""
        return await self._request(op, timeout)

    async def final_checkpoint(self, step: int) -> Any:
        """The checkpoint after the run's last ``step``; asked again of a learner that restarted
        meanwhile from that step's checkpoint. One that restarted from an earlier checkpoint
        (it died saving this one, and lost the steps since the last) raises
        :class:`LearnerRestarted`: the run goes back to its step and trains them again."""
        try:
            return await self("checkpoint")
        except LearnerRestarted as restart:
            if int(restart.status["step"]) < step:
                raise
            return await self("checkpoint")

    def _check(self, status: dict[str, Any]) -> dict[str, Any]:
        """``status`` itself when it is the known learner's (or the first seen); else
        :class:`LearnerRestarted`, and the new epoch becomes the known one."""
        epoch = status.get("epoch")
        if self.epoch is None or epoch == self.epoch:
            self.epoch = epoch
            return status
        self.epoch = epoch
        self.restarts += 1
        raise LearnerRestarted(status)

    async def _request(self, op: str, timeout: float, at: int | None = None) -> Any:
        body = {"op": op} if at is None else {"op": op, "at": at}
        request = self.actor.request(body, service=self.service, timeout=timeout)
        if op == "status":
            return (await request).body
        async with self.watchdog.waiting(
            f"waiting for the {self.service}'s {op}", [self.actor_name]
        ):
            return (await request).body

    async def _after_error(self, err: BusError, what: str) -> NoReturn:
        """A request to the learner (``what``) failed with ``err``: wait until a learner
        answers ``status``, then raise :class:`LearnerRestarted` if it is a new one, else
        ``err``; ``err`` too when none answers within :attr:`timeout`."""
        await self._wait_for(err, what)
        raise err

    async def _wait_for(self, err: BusError, what: str) -> None:
        """Wait until a learner answers ``status`` after ``what`` failed with ``err``:
        :class:`LearnerRestarted` if it is a new one, ``err`` when none answers in time."""
        waiting = f"{what} failed ({err}); waiting for the learner to answer again"
        async with self.watchdog.waiting(waiting, [self.actor_name]):
            await self._answered(err)

    async def _answered(self, err: BusError) -> dict[str, Any]:
        """The status of the learner, once one answers after ``err`` (checked: a new one
        raises :class:`LearnerRestarted`); ``err``, extended, when none answers within
        :attr:`timeout`."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self._check(await self._request("status", 30))
            except BusError as again:
                if time.monotonic() > deadline:
                    raise BusError(
                        err.code,
                        f"{err.message}; and no learner answered for {self.timeout:g}s "
                        f"since ({again})",
                    ) from err
                await asyncio.sleep(self.poll)
