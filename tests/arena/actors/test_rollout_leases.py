"""arena/actors/rollout.py, leased jobs: a straggler's collect is cancelled by its lease.

The same world as tests/arena/actors/test_rollout.py (a real broker on a thread, real ipc://
sockets, a fake inference actor and learner), with the fake policy held on a gate so that a
collect is surely in the middle of its episodes when the coordinator cancels it.

Run with `.venv/bin/python -m pytest -q tests/arena/actors/test_rollout_leases.py`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from arena.bus import BusError, Message
from tests.arena.actors.test_rollout import FirstLegal, tictactoe, world


async def until(condition: Any, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def test_a_cancelled_job_sends_nothing_more_and_replays_under_its_ids(
    broker: str,  # noqa: F811
    tiny_tokenizer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = asyncio.Event()
    held: list[str] = []
    answer = FirstLegal.__call__

    async def gated(self: FirstLegal, msg: Message) -> dict[str, Any]:
        held.append(msg.id)
        await gate.wait()
        return answer(self, msg)

    monkeypatch.setattr(FirstLegal, "__call__", gated)

    async def scenario() -> None:
        async with world(broker, tiny_tokenizer, tictactoe()) as w:
            order = {"op": "collect", "episodes": 4, "seed": 7, "group_size": 2, "lease": "job-7"}
            first = asyncio.ensure_future(w.collect(order))
            await until(lambda: len(held) >= 4)  # every episode waits on its first move

            async def cancel(lease: Any) -> Any:
                body = {"op": "cancel", "lease": lease}
                return (await w.coordinator.request(body, service="rollout", timeout=10)).body

            assert await cancel("job-7") == {"cancelled": True}
            with pytest.raises(BusError) as info:
                await first
            assert info.value.code == "handler_error" and "job-7 was cancelled" in str(info.value)
            assert w.rollout.counters["jobs_cancelled"] == 1
            gate.set()  # the held moves are answered now, to nobody
            assert await w.settle(1, timeout=1.0) == []  # nothing of the cancelled job went out
            assert await cancel("job-7") == {"cancelled": False}  # none under way any more
            with pytest.raises(BusError):
                await cancel(7)  # a lease is a name

            # leased again, the job plays its episodes under the job's ids
            reply = await w.collect(order)
            assert reply["episodes"] == 4 and reply["failed"] == 0
            got = await w.settle(4)
            assert sorted(e.id for e in got) == [f"job-7-{i}" for i in range(4)]

    asyncio.run(scenario())
