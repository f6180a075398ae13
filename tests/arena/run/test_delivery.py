"""The coordinator waits until the learner holds a collect's episodes before it asks for a step
(arena/run/delivery.py): peer to peer, a collect's reply can overtake its episodes.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_delivery.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from arena.run.delivery import Deliveries


def test_a_step_waits_for_the_reported_episodes_and_gives_up_on_lost_ones() -> None:
    counters = {"episodes_accepted": 40, "rejected_duplicate": 2}  # a resumed learner's life
    events: list[str] = []

    async def status() -> dict[str, Any]:
        return {"counters": dict(counters)}

    async def arrive(n: int) -> None:
        for _ in range(n):
            await asyncio.sleep(0.02)
            counters["episodes_accepted"] += 1

    async def scenario() -> None:
        deliveries = Deliveries(status, events.append, timeout=2.0)
        await deliveries.start()
        arriving = asyncio.create_task(arrive(8))
        await deliveries.wait(8)  # the reply came first; the episodes trickle in
        assert counters["episodes_accepted"] == 48 and arriving.done()
        counters["rejected_bad_record"] = 1  # a dropped episode was still delivered
        await asyncio.create_task(arrive(7))
        await asyncio.wait_for(deliveries.wait(8), 1.0)
        short = Deliveries(status, events.append, timeout=0.2)
        await short.start()
        await short.wait(3)  # never arrive: step on what there is, and say so
        await asyncio.wait_for(short.wait(0), 0.5)  # the lost ones are not waited for again

    asyncio.run(scenario())
    assert events == [
        "the learner received 0 of 3 reported episodes in 0.2s; stepping on what it has"
    ]
