"""No silent hang: a wait that runs long says what it waits for, and on whom.

Every wait of the coordinator is bounded (a collect, a learner step, the weights reaching the
inference actors), but the bounds are long (a learner step on a CPU takes minutes). Within them,
:class:`Watchdog` reports every ``wait.report_every`` seconds (default 30) what the run is
waiting for and the state of the actors it waits on, as the broker's directory knows them::

    step 7: waiting for weights v2 for 31 s; inference-0 serves v1, last heartbeat 0 s ago
    collect 3: waiting for rollout-1's 8 episodes for 30 s; rollout-1 last heartbeat 29 s ago

A stopped or wedged actor therefore shows by name in the console and in ``events.log`` long
before the bound ends the run with an error. The waits reported and not yet over are also the
trainer's ``waiting`` status (:meth:`Watchdog.current`), which ``arena status`` prints under
the actor table, so the diagnosis of a live run is one command away.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from arena.bus import BusError

Listing = Callable[[], Awaitable[list[dict[str, Any]]]]


def diagnosis(actors: list[dict[str, Any]], names: Sequence[str]) -> str:
    """The state of ``names`` in a directory listing: the policy version an actor serves (when
    it says), how long since its last heartbeat, or that it is not registered."""
    by_name = {a.get("name"): a for a in actors}
    parts = []
    for name in names:
        actor = by_name.get(name)
        if actor is None:
            parts.append(f"{name} is not registered with the broker")
            continue
        status = actor.get("status") or {}
        serves = f" serves v{status['policy_version']}," if "policy_version" in status else ""
        parts.append(f"{name}{serves} last heartbeat {actor.get('last_heartbeat', 0):.0f} s ago")
    return "; ".join(parts)


class Watchdog:
    """Reports long waits (see the module docstring)."""

    def __init__(self, report: Callable[[str], None], listing: Listing, every: float) -> None:
        self.report = report
        self.listing = listing
        self.every = every
        self._current: dict[int, str] = {}

    def current(self) -> list[str]:
        """The latest report of every wait that has been reported and is not over yet."""
        return list(self._current.values())

    @contextlib.asynccontextmanager
    async def waiting(self, what: str, on: Sequence[str]) -> AsyncIterator[None]:
        """Report ``what`` and the state of the actors ``on`` every ``every`` seconds until the
        block ends."""
        key = id(object())
        task = asyncio.create_task(self._watch(key, what, list(on)))
        try:
            yield
        finally:
            task.cancel()  # it runs no more of its code: the next report is never written
            self._current.pop(key, None)
            try:
                await task
            except asyncio.CancelledError:
                # the reporter's own end, unless this wait was cancelled while it awaited it
                # (then the cancel went to the reporter, and swallowing it kept a cancelled run
                # waiting on a dead learner for wait.timeout: the overlap chaos run's disk_full)
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise

    async def _watch(self, key: int, what: str, on: list[str]) -> None:
        started = time.monotonic()
        while True:
            await asyncio.sleep(self.every)
            try:
                state = diagnosis(await self.listing(), on)
            except BusError as err:
                state = f"the broker does not answer ({err})"
            line = f"{what} for {time.monotonic() - started:.0f} s; {state}"
            self._current[key] = line
            self.report(line)
