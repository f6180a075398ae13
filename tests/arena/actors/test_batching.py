"""How the inference actor's batches form (arena/actors/batching.py), without a bus."""

from __future__ import annotations

import asyncio

from arena.actors.batching import BatchQueue, Pending
from arena.policies.types import Prompt, SamplingParams


def pending() -> Pending:
    future = asyncio.get_running_loop().create_future()
    return Pending(Prompt(messages=({"role": "user", "content": "hi"},)), SamplingParams(), future)


def test_a_batch_takes_up_to_max_batch_and_skips_settled_requests() -> None:
    async def scenario() -> tuple[int, int, int]:
        queue = BatchQueue(max_batch=3, max_wait_ms=1.0)
        queue.start()
        items = [pending() for _ in range(5)]
        items[1].future.cancel()  # its asker gave up
        for item in items:
            queue.put(item)
        first = await queue.next_batch()  # items 0..2, of which 1 is settled
        second = await queue.next_batch()
        return len(first), len(second), len(queue)

    assert asyncio.run(scenario()) == (2, 2, 0)


def test_no_batch_starts_while_paused_and_fail_all_settles_what_is_owed() -> None:
    async def scenario() -> tuple[bool, bool, list[str], int]:
        queue = BatchQueue(max_batch=4, max_wait_ms=1.0)
        queue.start()
        queue.pause()
        item = pending()
        queue.put(item)
        waiting = asyncio.ensure_future(queue.next_batch())
        await asyncio.sleep(0.05)
        started_while_paused = waiting.done()
        queue.resume()
        batch = await asyncio.wait_for(waiting, 5)
        other = pending()
        queue.put(other)
        queue.fail_all(RuntimeError("stopping"))  # item is in a batch, other still waits
        failed = [str(p.future.exception()) for p in (item, other)]
        return started_while_paused, batch == [item], failed, len(queue)

    assert asyncio.run(scenario()) == (False, True, ["stopping", "stopping"], 0)
