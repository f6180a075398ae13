"""Waiting until the learner holds the episodes a step is to train on.

Rollout actors send each finished episode to the learner as a fire-and-forget ``episode``
message, and answer the coordinator's collect order afterwards. Through one broker those two
kept their order; peer to peer they travel on different connections (and an episode goes
through the broker while its sender's connection to the learner is not up yet), so a collect's
reply can overtake its episodes, and a ``step`` asked at once would find nothing to train on.
So before each step the coordinator waits until the learner has received (accepted, or dropped
as a duplicate or a bad record) at least as many episodes as the collects reported, read from
the counters of its ``status``; after ``timeout`` seconds it steps on what arrived.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

RECEIVED = (
    "episodes_accepted",
    "rejected_duplicate",
    "rejected_bad_record",
    "discarded_newer_version",
)
"""The learner's counters (``trainers/inbox.py``, ``trainers/learner_actor.py``) that together
count the episodes it got."""


class Deliveries:
    """Episodes reported by collects against episodes the learner received."""

    def __init__(
        self,
        status: Callable[[], Awaitable[dict[str, Any]]],
        on_event: Callable[[str], None],
        timeout: float = 60.0,
    ) -> None:
        self.status = status
        """The learner's ``status`` reply (with its ``counters``)."""
        self.on_event = on_event
        self.timeout = timeout
        self.reported = 0
        """Episodes the collects reported since :meth:`start`."""
        self._base = 0

    async def received(self) -> int:
        counters = (await self.status()).get("counters") or {}
        return sum(int(counters.get(key, 0)) for key in RECEIVED)

    async def start(self) -> None:
        """Count from here (the counters are the learner's whole life, resumed ones too)."""
        self._base = await self.received()
        self.reported = 0

    async def wait(self, episodes: int) -> None:
        """Add ``episodes`` just reported, then wait until the learner has them all."""
        self.reported += episodes
        deadline = time.monotonic() + self.timeout
        while (got := await self.received() - self._base) < self.reported:
            if time.monotonic() > deadline:
                self.on_event(
                    f"the learner received {got} of {self.reported} reported episodes in "
                    f"{self.timeout:g}s; stepping on what it has"
                )
                self._base -= self.reported - got  # lost: do not wait for them again
                return
            await asyncio.sleep(0.05)
