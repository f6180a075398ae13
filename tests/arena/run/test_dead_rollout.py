"""A rollout actor reported dead (``actor_dead``) gets no more jobs until it is back
(arena/run/collection.py).

A kill -9 of a rollout actor is seen at once on the direct data plane (its peer connection
drops), while the broker lists it until its heartbeats time out (10 s here). Before, the next
collect still ordered from it, so one kill cost two re-leases. A real broker (in a thread), a
real rollout actor in a process of its own (killed with SIGKILL), and a fake one in the test
stand in for a run's actors.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_dead_rollout.py``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from arena.bus import Actor
from arena.run.collection import Collector
from arena.run.directory import rollout_actors
from arena.run.stream import CollectStream
from tests.arena.run.test_discovery import fake_rollout, until
from tests.conftest import threaded_broker

HANGING = """
import asyncio, sys
from arena.bus import Actor

async def collect(msg):
    print("order", msg.body.get("lease"), flush=True)
    await asyncio.Event().wait()

async def main():
    actor = Actor(sys.argv[2], sys.argv[1], kind="rollout", services={"rollout": collect},
                  heartbeat_interval=0.2)
    await actor.start()
    print("ready", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""
"""A rollout actor that takes orders and never answers: it dies holding its job."""


def start_hanging(broker: str, name: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HANGING, broker, name], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_killed_rollout_actor_gets_no_more_jobs_while_the_broker_still_lists_it(
    broker: str,
) -> None:
    orders: list[tuple[str, dict[str, Any]]] = []
    events: list[str] = []
    victim = start_hanging(broker, "rollout-1")

    async def scenario() -> dict[str, Any]:
        trainer = Actor("trainer", broker, kind="trainer", heartbeat_interval=0.2)
        good = fake_rollout(broker, "rollout-0", orders)
        for actor in (trainer, good):
            await actor.start()
        collector = Collector(trainer, lambda: rollout_actors(trainer), 3, events.append)
        collect = asyncio.create_task(collector.collect(8, seed=100))
        assert victim.stdout is not None
        line = await asyncio.to_thread(victim.stdout.readline)
        assert line.split() == ["order", "rollout-1-101"]
        os.kill(victim.pid, signal.SIGKILL)
        first = await asyncio.wait_for(collect, 30)
        # the broker lists the dead actor for its 10 s heartbeat timeout: the next collects
        # order from the live one only
        assert "rollout-1" in await rollout_actors(trainer)
        second = await asyncio.wait_for(collector.collect(8, seed=200), 30)
        third = await asyncio.wait_for(collector.collect(8, seed=300), 30)
        for actor in (good, trainer):
            await actor.close()
        assert first["episodes"] == second["episodes"] == third["episodes"] == 8
        return collector.leases.as_dict()

    try:
        leases = asyncio.run(scenario())
    finally:
        victim.kill()
        victim.wait()
    assert [(name, o["seed"], o["episodes"]) for name, o in orders] == [
        ("rollout-0", 100, 4),
        ("rollout-0", 101, 4),  # the dead actor's job, leased again whole
        ("rollout-0", 200, 8),
        ("rollout-0", 300, 8),
    ]
    assert leases["re_leased"] == 1 and leases["leased"] == 5, leases
    assert any("rollout-1" in e and "dead" in e for e in events), events


@pytest.fixture
def quick_broker(ipc_dir: str) -> Iterator[str]:
    """A broker that declares an actor dead after 3 s without a heartbeat."""
    with threaded_broker(f"ipc://{ipc_dir}/quick.sock", heartbeat_timeout=3.0) as address:
        yield address


def test_a_killed_rollout_actor_is_dropped_from_async_collection_at_once(
    quick_broker: str,
) -> None:
    # Before, the dead actor's producer was started again while the broker still listed it:
    # its next order hung until the broker declared it dead, and was leased again then.
    broker = quick_broker
    orders: list[tuple[str, dict[str, Any]]] = []
    events: list[str] = []
    victim = start_hanging(broker, "rollout-1")

    async def served() -> int:
        return 0

    async def scenario() -> dict[str, Any]:
        trainer = Actor("trainer", broker, kind="trainer", heartbeat_interval=0.2)
        await trainer.start()
        collector = Collector(trainer, lambda: rollout_actors(trainer), 3, events.append)
        stream = CollectStream(collector, 8, 10**7, served, 2, events.append)
        running = asyncio.create_task(stream.run(poll=0.1))

        async def learner() -> None:  # takes what came in, so admission always has room
            while True:
                stream.take()
                await asyncio.sleep(0.05)

        steps = asyncio.create_task(learner())
        assert victim.stdout is not None
        line = await asyncio.to_thread(victim.stdout.readline)
        assert line.split() == ["order", f"rollout-1-{10**7 + 10**5}"]
        good = fake_rollout(broker, "rollout-0", orders)
        await good.start()
        await until(lambda: len(orders) >= 1)
        os.kill(victim.pid, signal.SIGKILL)
        await until(lambda: collector.leases.re_leased >= 1)
        assert "rollout-1" in await rollout_actors(trainer)
        # until the broker has declared it dead (past its heartbeat timeout): the event itself

        async def forgotten() -> None:
            while "rollout-1" in await rollout_actors(trainer):
                await asyncio.sleep(0.1)

        await asyncio.wait_for(forgotten(), 30)
        steps.cancel()
        stream.stop()
        await asyncio.wait_for(running, 5)
        for actor in (good, trainer):
            await actor.close()
        return collector.leases.as_dict()

    try:
        leases = asyncio.run(scenario())
    finally:
        victim.kill()
        victim.wait()
    # the dead actor's one job was leased again once, and nothing more went its way
    assert leases["re_leased"] == 1, (leases, events)
    leases_taken = [o["lease"] for _, o in orders]
    assert f"rollout-1-{10**7 + 10**5}" in leases_taken  # its job, leased to the live actor
