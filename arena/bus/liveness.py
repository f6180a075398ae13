"""An actor's side of liveness: its heartbeats, a broker that falls silent, registering again.

**Liveness.** The broker heartbeats every actor. An actor that hears nothing for the broker's
``heartbeat_timeout`` declares it lost: the requests pending through it fail with
``broker_lost``, it reconnects, and it registers again as soon as a broker answers (a restarted
broker tells an actor it does not know to register). A broker that still knows it (it was
stopped, or cut off for less than its own timeout) says so with its next heartbeat, and the
actor takes it back without registering again; :meth:`Liveness.broker_back` waits for either. Direct traffic keeps flowing meanwhile.
A request that reaches a restarted broker before this actor registered again (it may get there
before any heartbeat) fails with ``broker_lost``, and the actor registers again: sending it
again is the caller's choice.

**Hangs.** Heartbeats come from the event loop, so they prove the loop runs, not that the work
does: a process whose worker thread is stuck (a wedged engine, a batch that never returns)
would beat forever. An actor that can tell sets :attr:`arena.bus.actor.Actor.answering`; while
it returns false the heartbeats are withheld, the broker declares the actor dead after its
``heartbeat_timeout`` as it would a stopped process, and ``arena train`` kills and restarts it
(:mod:`arena.run.hangs`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from arena.bus.codec import encode
from arena.bus.errors import BusError

log = logging.getLogger("arena.bus")


class Owner(Protocol):
    """What :class:`Liveness` needs of its actor (:class:`arena.bus.actor.Actor`)."""

    name: str
    address: str
    counters: Counter[str]
    status: dict[str, Any]
    load: int
    heartbeat_interval: float
    heartbeat_timeout: float
    broker_last_seen: float
    broker_up: bool
    answering: Callable[[], bool] | None
    directory: Any
    _loop: asyncio.AbstractEventLoop | None

    def send_to_broker(self, frames: list[Any]) -> None: ...
    def fail_brokered(self, error: BusError) -> None: ...
    def reconnect_broker(self) -> None: ...
    async def _register(self, timeout: float) -> None: ...
    def _spawn(self, coro: Any) -> None: ...


class Liveness:
    """Heartbeats to the broker, and what the actor does when the broker is lost or forgot it."""

    def __init__(self, actor: Owner) -> None:
        self.actor = actor
        self._registering = False

    async def heartbeats(self) -> None:
        """Beat every ``heartbeat_interval`` (the actor's background task)."""
        actor = self.actor
        while True:
            await asyncio.sleep(actor.heartbeat_interval)
            try:
                if actor.answering is not None and not actor.answering():
                    # hung: let the broker declare it dead. Its silence is then this actor's
                    # doing, and reconnecting (registering again) would keep it alive.
                    actor.counters["heartbeats_withheld"] += 1
                    continue
                silent = time.monotonic() - actor.broker_last_seen
                if actor.broker_up and silent > actor.heartbeat_timeout:
                    self.broker_lost(silent)
                actor.send_to_broker(self.heartbeat_frames())
            except BusError as err:
                log.warning("%s could not send a heartbeat: %s", actor.name, err)
            except Exception:  # the heartbeats must go on, or the broker declares this dead
                actor.counters["heartbeat_error"] += 1
                log.exception("%s could not send a heartbeat", actor.name)

    def heartbeat_frames(self) -> list[Any]:
        """A heartbeat carrying the actor's load and status (a callable status value is called)."""
        actor = self.actor
        body = {"load": actor.load}
        try:
            for key, value in actor.status.items():
                body[key] = value() if callable(value) else value
            return encode("heartbeat", body, src=actor.name)[1]
        except Exception:  # a status that cannot be read or sent: beat without it
            actor.counters["status_error"] += 1
            if actor.counters["status_error"] == 1:  # then counted only: it comes every beat
                log.exception("%s cannot report its status; heartbeats go without it", actor.name)
            return encode("heartbeat", {"load": actor.load}, src=actor.name)[1]

    def broker_lost(self, silent: float) -> None:
        """No word from the broker for longer than its timeout: fail what waits on it, drop
        what is queued for it, and reconnect; its return is noticed by the heartbeats."""
        actor = self.actor
        actor.broker_up = False
        actor.counters["broker_lost"] += 1
        log.warning(
            "%s heard nothing from the broker at %s for %.1fs; reconnecting (direct traffic "
            "goes on)",
            actor.name,
            actor.address,
            silent,
        )
        actor.fail_brokered(
            BusError("broker_lost", f"the broker at {actor.address} stopped answering")
        )
        actor.reconnect_broker()

    async def broker_back(self, timeout: float) -> bool:
        """Wait until the broker answers again after it was lost (``broker_lost``): True when it
        does (its heartbeat, or registering again), False if not within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.actor.broker_up:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.1)
        return True

    def register_again(self, why: str) -> None:
        """Register with the broker again (once at a time): it restarted, or lost this actor."""
        actor = self.actor
        if self._registering or actor._loop is None:
            return
        log.warning("%s registers again: %s", actor.name, why)
        self._registering = True
        # Whatever went through the old broker will never be answered: say so now.
        actor.fail_brokered(BusError("broker_lost", "the broker restarted before answering"))

        async def register() -> None:
            try:
                await actor._register(timeout=max(actor.heartbeat_timeout, 1.0))
                actor.counters["registered_again"] += 1
                log.warning("%s registered again with the broker", actor.name)
                actor.directory.refresh()
            except BusError as err:
                log.warning("%s could not register again: %s", actor.name, err)
            finally:
                self._registering = False

        actor._spawn(register())
