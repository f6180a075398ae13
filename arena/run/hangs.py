"""Hung actors: found within ``bus.heartbeat_timeout`` and replaced as dead ones are.

A process can live and not answer: stopped (SIGSTOP, a debugger, a swapped-out host), or with
its work stuck while its event loop still runs (a wedged inference engine, a batch that never
returns: past ``inference.hang_timeout`` the inference actor withholds its heartbeats,
:mod:`arena.bus.actor`). Either
way the broker stops hearing from it and, after ``bus.heartbeat_timeout``, declares it dead:
the requests pending on it fail with ``actor_dead``, the directory forgets it, and a ``control``
notice goes out on topic ``actor.dead``. :class:`HangWatch` reads those notices on the trainer.
When the dead actor is a child of this run whose process still lives (same name, same pid),
it is hung, not dead: the run names it (console and ``events.log``) and kills it with SIGKILL,
and the launcher restarts it as it restarts a crashed child (its restart budget counts it).
What it was doing is redone elsewhere: a rollout actor's job is leased again
(:mod:`arena.run.collection`), an inference actor's requests are sent again by the rollout
actors once one serves again (:mod:`arena.policies.remote`), a learner resumes from its last
checkpoint. A killed process sends nothing late, and episodes that a stopped rollout actor had
sent before are trained once, by id (the learner drops copies). The run's own broker cannot be
declared dead by itself: the run kills it when the trainer has heard nothing from it for
``bus.heartbeat_timeout`` while its process lives (:meth:`HangWatch.broker_silent`), and every
actor registers with the restarted one.

**Bad input.** A detector must not kill healthy actors. Liveness and progress are bounded
apart: the heartbeat timeout (seconds of silence; it must span three heartbeats,
:class:`~arena.run.config.BusConfig`) and the hang timeout (seconds one backend call may run,
:class:`~arena.policies.config.InferenceConfig`), so a batch slowed by a loaded host is no
hang. By default the hang timeout grows with the slowest call an actor has made (30 s, or 4 times
that call). Set to a fixed number, :meth:`HangWatch.check` names a batch over half of it
(once, in ``events.log``) and stops the run with :class:`HangTimeoutTooShort` for one past it,
naming the measured time and the keys to change.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

from arena.bus import Actor, Message
from arena.run.launcher import Launcher

log = logging.getLogger("arena.run.hangs")

DEAD_TOPIC = "actor.dead"
MARGIN = 2.0
LOOK_GAP = 3.0
"""Seconds between two looks of :meth:`HangWatch.broker_silent` that mean the trainer itself
did not run: its watch looks every 0.5 s, or 2.5 s when it also lists the directory."""
"""A healthy batch should take at most ``hang_timeout / MARGIN`` seconds."""


class HangTimeoutTooShort(RuntimeError):
    """``inference.hang_timeout`` is shorter than what the run's healthy batches take."""


class HangWatch:
    """Kills this run's children that the broker declared dead while their process lives."""

    def __init__(
        self,
        launcher: Launcher,
        heartbeat_timeout: float,
        on_event: Callable[[str], None],
    ) -> None:
        self.launcher = launcher
        self.heartbeat_timeout = heartbeat_timeout
        self.on_event = on_event
        self.host = socket.gethostname()
        self.warned: set[str] = set()
        """Inference actors already named for a batch over half their hang timeout."""
        self.killed: list[tuple[str, int]] = []
        """(child name, pid) of every hung process killed, oldest first."""
        self._broker_seen: dict[int, float] = {}
        """When :meth:`broker_silent` began listening to each pid of the run's own broker."""
        self._last_look = time.monotonic()
        self.listeners: list[Callable[[dict[str, Any]], object]] = []
        """Also told of every death notice, after this: :mod:`arena.run.departures` names the
        actors the run does not start (an actor takes one handler per topic)."""

    def attach(self, actor: Actor) -> None:
        """Listen to the broker's death notices (call before the actor starts)."""
        actor.subscribe(DEAD_TOPIC, self.on_dead)

    def on_dead(self, msg: Message) -> None:
        body = msg.body
        if isinstance(body, dict):
            self.dead(body)
            for listener in self.listeners:
                listener(body)

    def dead(self, info: dict[str, Any]) -> bool:
        """The broker declared ``info`` (its public entry) dead: kill the process if it is a
        live child of this run. True if it was killed."""
        name, pid = info.get("name"), info.get("pid")
        child = self.launcher.children.get(str(name))
        process = getattr(child, "process", None)
        if child is None or process is None or process.pid != pid or info.get("host") != self.host:
            return False  # not ours, or an earlier life of a restarted child
        if process.poll() is not None:
            return False  # it died: the launcher restarts it
        self.on_event(
            f"{name} (pid {pid}) is hung: no heartbeat for {self.heartbeat_timeout:g} s "
            "(bus.heartbeat_timeout) while its process lives; killing it (SIGKILL) to restart it"
        )
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        self.killed.append((str(name), pid))
        return True

    def broker_silent(self, actor: Actor) -> bool:
        """The run's own broker, as ``actor`` (the trainer) hears it: lost and silent for over
        ``heartbeat_timeout`` while its process lives, it is hung (stopped, or its loop stuck)
        and is killed to be restarted; the actors register with the new one. True if killed.
        Only time the trainer listened counts: called every 0.5 s, a gap of over
        :data:`LOOK_GAP` means the trainer was stopped or starved, and starts the count anew."""
        child = self.launcher.children.get("broker")
        process = getattr(child, "process", None)
        if process is None or process.poll() is not None or ("broker", process.pid) in self.killed:
            return False  # not the run's own, or dead already: the launcher restarts it
        now = time.monotonic()
        if now - self._last_look > LOOK_GAP:
            # the trainer itself did not run: its silence says nothing of the broker, which
            # gets a whole timeout again (as a restarted one does) to be heard from
            self._broker_seen[process.pid] = now
        self._last_look = now
        since = max(actor.broker_last_seen, self._broker_seen.setdefault(process.pid, now))
        silent = now - since
        if actor.broker_up or silent <= self.heartbeat_timeout:
            return False
        self.on_event(
            f"broker (pid {process.pid}) is hung: the run heard nothing from it for {silent:.0f} s "
            "(bus.heartbeat_timeout) while its process lives; killing it (SIGKILL) to restart it"
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        self.killed.append(("broker", process.pid))
        return True

    def check(self, actors: list[dict[str, Any]]) -> None:
        """Look at the slowest batch each inference actor in the directory listing ``actors``
        measured. Past half its hang timeout, the run is told once per actor (a slower batch
        would be taken for a hang); past the whole timeout, :class:`HangTimeoutTooShort`: that
        actor was spared only because its batch ended before the broker's next look, and the
        detector must not go on killing healthy actors."""
        for actor in actors:
            status = actor.get("status") or {}
            seconds, requests = status.get("slowest_batch") or (0.0, 0)
            limit = status.get("hang_limit")  # what the inference actor itself enforces
            if limit is None:
                continue  # not an inference actor
            name = str(actor.get("name"))
            advice = (
                f"set inference.hang_timeout >= {seconds * MARGIN:.0f} or lower inference.max_batch"
            )
            if seconds > limit:
                raise HangTimeoutTooShort(
                    f"inference.hang_timeout={limit:g} s is too short for this run: {name} took "
                    f"{seconds:.1f} s for a batch of {requests} requests, and a batch past the "
                    f"hang timeout is taken for a hang; {advice}"
                )
            if seconds * MARGIN > limit and name not in self.warned:
                self.warned.add(name)
                self.on_event(
                    f"{name} took {seconds:.1f} s for a batch of {requests} requests, more than "
                    f"half of inference.hang_timeout={limit:g} s: a batch past the hang timeout "
                    f"is taken for a hang; {advice}"
                )
