"""The coordinator finds its rollout and inference actors on the bus instead of assuming
``rollout-0`` to ``rollout-<N-1>`` (arena/run/collection.py, arena/run/weight_sync.py).

With an external broker a run may start no rollout actor at all (``rollout.actors=0``) while
actors started elsewhere join under indexes of their own, at any time. A real broker (in a
thread) and real bus actors stand in for them here; the fake rollout actors answer collect
orders without playing.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_discovery.py``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from arena.bus import Actor, Broker, Message
from arena.run.collection import Collector
from arena.run.config import load_run_config
from arena.run.directory import listing, rollout_actors, rollout_names, serving
from arena.run.stream import CollectStream
from arena.run.weight_sync import WeightSync


def fake_rollout(address: str, name: str, orders: list[tuple[str, dict[str, Any]]]) -> Actor:
    """A rollout actor that records each order and reports its episodes as played."""

    def collect(msg: Message) -> dict[str, Any]:
        orders.append((name, msg.body))
        return {
            "episodes": msg.body["episodes"],
            "failed": 0,
            "seconds": 0.0,
            "stats": {
                "reward": {},
                "invalid_rate": {},
                "generated_tokens": 0,
                "policy_turns": 0,
                "min_version": 0,
            },
            "transcript": None,
        }

    return Actor(
        name, address, kind="rollout", services={"rollout": collect}, heartbeat_interval=0.2
    )


def test_collects_are_split_over_the_rollout_actors_on_the_bus_and_late_joiners_take_part(
    broker: str,
) -> None:
    # A run that starts no rollout actor itself (rollout.actors=0, its old divisor): two
    # joined under indexes 3 and 7, a third joins between two collects.
    config = load_run_config("configs/smoke.yaml", ["rollout.actors=0", "rollout.group_size=2"])
    orders: list[tuple[str, dict[str, Any]]] = []

    async def scenario() -> None:
        trainer = Actor("trainer", broker, kind="trainer", heartbeat_interval=0.2)
        joined = [fake_rollout(broker, f"rollout-{i}", orders) for i in (7, 3)]
        for actor in (trainer, *joined):
            await actor.start()
        collector = Collector(
            trainer,
            lambda: rollout_actors(trainer),
            config.rollout.max_restarts,
            lambda _: None,
            config.rollout.group_size,
        )
        first = await collector.collect(8, seed=100)
        late = fake_rollout(broker, "rollout-12", orders)
        await late.start()
        second = await collector.collect(10, seed=200)
        for actor in (late, *joined, trainer):
            await actor.close()
        assert first["episodes"] == 8 and second["episodes"] == 10

    asyncio.run(scenario())
    summary = [(name, o["episodes"], o["seed"], o["group_size"]) for name, o in orders]
    assert sorted(summary[:2]) == [("rollout-3", 4, 103, 2), ("rollout-7", 4, 107, 2)]
    # 5 groups over 3 actors, in index order: the first ones get the extra group
    assert sorted(summary[2:]) == [
        ("rollout-12", 2, 212, 2),
        ("rollout-3", 4, 203, 2),
        ("rollout-7", 4, 207, 2),
    ]


def test_a_failed_share_goes_to_its_actor_if_back_else_to_the_others() -> None:
    collector = Collector(None, 3, 3, lambda _: None, group_size=2)  # type: ignore[arg-type]
    again = {"rollout-1": 4, "rollout-5": 6}  # rollout-5 left the bus; rollout-1 is back
    assert collector.reassign(again, ["rollout-0", "rollout-1"]) == {
        "rollout-1": 4 + 2,
        "rollout-0": 4,
    }
    assert collector.reassign({"rollout-0": 2}, ["rollout-0"]) == {"rollout-0": 2}


def test_a_collect_waits_for_a_rollout_actor_to_join(
    broker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    orders: list[tuple[str, dict[str, Any]]] = []

    async def scenario() -> None:
        trainer = Actor("trainer", broker, kind="trainer", heartbeat_interval=0.2)
        await trainer.start()
        collector = Collector(trainer, lambda: rollout_actors(trainer), 3, lambda _: None)
        collect = asyncio.create_task(collector.collect(4, seed=100))
        await asyncio.sleep(1.0)
        assert not collect.done()  # nobody to order from yet
        joiner = fake_rollout(broker, "rollout-0", orders)
        await joiner.start()
        assert (await asyncio.wait_for(collect, 10))["episodes"] == 4
        none_left = Collector(
            trainer, lambda: rollout_actors(trainer), 3, lambda _: None, wait_timeout=0.5
        )
        await joiner.close()
        await asyncio.sleep(0.3)
        with pytest.raises(RuntimeError, match="no rollout actor"):
            await none_left.collect(4, seed=200)
        await trainer.close()

    asyncio.run(scenario())
    assert orders == [
        ("rollout-0", {"op": "collect", "episodes": 4, "seed": 100, "lease": "rollout-0-100"})
    ]


def stream_of(collector: Collector, version: list[int], max_staleness: int = 2) -> CollectStream:
    async def served() -> int:
        return version[0]

    return CollectStream(
        collector,
        8,
        seed=10**7,
        version=served,
        max_staleness=max_staleness,
        on_event=lambda _: None,
    )


async def until(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_async_collection_gives_orders_to_every_actor_on_the_bus_including_late_ones(
    broker: str,
) -> None:
    orders: list[tuple[str, dict[str, Any]]] = []

    async def scenario() -> None:
        trainer = Actor("trainer", broker, kind="trainer", heartbeat_interval=0.2)
        first = fake_rollout(broker, "rollout-4", orders)
        for actor in (trainer, first):
            await actor.start()
        collector = Collector(trainer, lambda: rollout_actors(trainer), 3, lambda _: None)
        stream = stream_of(collector, [0])
        running = asyncio.create_task(stream.run(poll=0.1))
        # alone, one actor takes a whole step per order, until (2 + 1) x 8 episodes wait
        await until(lambda: len(orders) == 3)
        late = fake_rollout(broker, "rollout-9", orders)
        await late.start()
        await asyncio.sleep(1.0)
        assert len(orders) == 3 and stream.untrained == 24  # admission holds both
        assert len(stream.take()) == 3 and stream.untrained == 0  # a step takes them
        await until(lambda: stream.untrained == 24)
        await asyncio.sleep(0.5)
        stream.stop()
        await asyncio.wait_for(running, 5)
        for actor in (late, first, trainer):
            await actor.close()
        assert stream.episodes == sum(o["episodes"] for _, o in orders[3:]) == 24

    asyncio.run(scenario())
    by_actor = {
        name: [o["seed"] for n, o in orders if n == name] for name in ("rollout-4", "rollout-9")
    }
    assert by_actor["rollout-4"][:3] == [10**7 + 4 * 10**5 + r for r in range(3)]
    assert by_actor["rollout-9"][0] == 10**7 + 9 * 10**5  # the late joiner's first order
    assert [o["episodes"] for _, o in orders[:3]] == [8, 8, 8]
    assert {o["episodes"] for _, o in orders[3:]} == {4}  # two actors share each step's 8


def test_no_step_leaves_an_order_in_flight_more_than_max_staleness_behind(broker: str) -> None:
    orders: list[tuple[str, dict[str, Any]]] = []
    release = asyncio.Event()

    async def scenario() -> None:
        trainer = Actor("trainer", broker, kind="trainer", heartbeat_interval=0.2)
        fast = fake_rollout(broker, "rollout-0", orders)
        reply = fake_rollout(broker, "rollout-1", orders)._services["rollout"]

        async def held(msg: Message) -> dict[str, Any]:
            await release.wait()  # a straggler: its first order takes as long as the test says
            return reply(msg)

        slow = Actor(
            "rollout-1", broker, kind="rollout", services={"rollout": held}, heartbeat_interval=0.2
        )
        for actor in (trainer, slow):
            await actor.start()
        collector = Collector(trainer, lambda: rollout_actors(trainer), 3, lambda _: None)
        version = [0]
        stream = stream_of(collector, version, max_staleness=1)
        running = asyncio.create_task(stream.run(poll=0.1))
        await until(lambda: len(stream.in_flight) == 1)  # the straggler's order, 8 episodes
        await fast.start()
        # the slow actor's order started at version 0: steps at versions 0 (-> 1) may run,
        # the step at version 1 (-> 2) would leave it 2 versions behind
        assert stream.ready_for(0) and not stream.ready_for(1)
        version[0] = 1
        await until(lambda: stream.episodes >= 8)
        stream.take()
        assert not stream.ready_for(1)  # still held, however much the fast actor brings
        release.set()
        await until(lambda: stream.ready_for(1))
        stream.stop()
        await asyncio.wait_for(running, 5)
        for actor in (slow, fast, trainer):
            await actor.close()
        # every order started at most (1 + 1) x 8 untrained episodes
        assert stream.untrained <= 16

    asyncio.run(scenario())


def hanging_rollout(
    address: str,
    name: str,
    orders: list[tuple[str, dict[str, Any]]],
    cancels: list[tuple[str, str]],
) -> Actor:
    """A rollout actor that takes orders and never answers (dead to the collector once it is
    closed; a straggler while it is open), and notes the leases it is told to cancel."""

    async def collect(msg: Message) -> dict[str, Any]:
        if msg.body.get("op") == "cancel":
            cancels.append((name, msg.body["lease"]))
            return {"cancelled": True}
        orders.append((name, msg.body))
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return Actor(
        name, address, kind="rollout", services={"rollout": collect}, heartbeat_interval=0.2
    )


@pytest.mark.parametrize("how", ["dies", "overruns"])
def test_a_job_whose_holder_dies_or_overruns_is_leased_again_whole(broker: str, how: str) -> None:
    orders: list[tuple[str, dict[str, Any]]] = []
    cancels: list[tuple[str, str]] = []
    events: list[str] = []

    async def scenario() -> dict[str, Any]:
        trainer = Actor("trainer", broker, kind="trainer", heartbeat_interval=0.2)
        good = fake_rollout(broker, "rollout-0", orders)
        bad = hanging_rollout(broker, "rollout-1", orders, cancels)
        for actor in (trainer, good, bad):
            await actor.start()
        collector = Collector(
            trainer,
            lambda: rollout_actors(trainer),
            3,
            events.append,
            lease_timeout=60 if how == "dies" else 1.5,
        )
        collect = asyncio.create_task(collector.collect(8, seed=100))
        await until(lambda: len(orders) == 2)
        if how == "dies":
            await bad.close()
        result = await asyncio.wait_for(collect, 30)
        for actor in (good, trainer) if how == "dies" else (bad, good, trainer):
            await actor.close()
        return {"result": result, "leases": collector.leases.as_dict()}

    out = asyncio.run(scenario())
    first = {"op": "collect", "episodes": 4, "seed": 101, "lease": "rollout-1-101"}
    assert ("rollout-1", first) in orders
    # the same job (seed, size, lease: so the same episode ids) goes to the live actor
    assert orders[-1] == ("rollout-0", first)
    assert out["result"]["episodes"] == 8
    # a straggler is told to stop its job before the job goes elsewhere; a dead one is not
    overran = how == "overruns"
    assert cancels == ([("rollout-1", "rollout-1-101")] if overran else [])
    assert out["leases"] == {
        "leased": 3,
        "completed": 2,
        "re_leased": 1,
        "cancelled": int(overran),
        "duplicates_dropped": 0,
    }
    assert any("leasing it to rollout-0" in e for e in events), events


def test_weight_sync_waits_for_the_inference_actors_on_the_bus_whatever_their_names(
    broker: str,
) -> None:
    versions = {"gpu-node-a": 3, "inference-5": 2}

    def status(name: str):
        return lambda msg: {"version": versions[name]}

    async def scenario() -> None:
        trainer = Actor("trainer", broker, kind="trainer", heartbeat_interval=0.2)
        sync = WeightSync("main", lambda _: None)
        sync.attach(trainer)
        servers = [
            Actor(
                name,
                broker,
                kind="inference",
                services={"policy:main": lambda m: None, "policy:main:status": status(name)},
                heartbeat_interval=0.2,
            )
            for name in versions
        ]
        pool = Actor("inference-pool", broker, services={"policy:pool:status": lambda m: {}})
        for actor in (trainer, *servers, pool):
            await actor.start()
        actors = await listing(trainer)
        assert serving(actors, "policy:main:status") == ["gpu-node-a", "inference-5"]
        assert rollout_names(actors) == []
        await asyncio.wait_for(sync.wait_serving(2), 10)  # both serve v2 or newer
        waiting = asyncio.create_task(sync.wait_serving(3, timeout=30))
        await asyncio.sleep(1.0)
        assert not waiting.done()  # inference-5 still serves v2
        versions["inference-5"] = 3
        await asyncio.wait_for(waiting, 10)
        for actor in (pool, *servers, trainer):
            await actor.close()

    asyncio.run(scenario())


def test_weights_lost_with_a_restarted_broker_are_published_again(ipc_dir: str) -> None:
    """Weights go out through the broker: a broker killed while they were on their way loses
    them, and an inference actor that registered again before the learner did is never sent
    them again by the learner. The wait asks the learner to publish them again."""
    address = f"ipc://{ipc_dir}/bus.sock"

    def start_broker() -> tuple[Broker, threading.Thread]:
        server = Broker(address, heartbeat_interval=0.2, heartbeat_timeout=10.0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        return server, thread

    served = {"version": 1}
    published: list[int] = []

    def on_weights(msg: Message) -> None:
        served["version"] = msg.body["version"]

    async def learner_op(msg: Message) -> dict[str, int]:
        assert msg.body == {"op": "publish"}
        published.append(2)
        learner.publish("weights.main", {"version": 2}, "weights")
        return {"version": 2}

    learner = Actor("learner", address, services={"learner": learner_op}, heartbeat_interval=0.2)
    events: list[str] = []

    async def scenario() -> None:
        trainer = Actor("trainer", address, kind="trainer", heartbeat_interval=0.2)
        sync = WeightSync("main", events.append)
        sync.attach(trainer)
        inference = Actor(
            "inference-0",
            address,
            services={"policy:main:status": lambda m: dict(served)},
            heartbeat_interval=0.2,
        )
        inference.subscribe("weights.main", on_weights)
        for actor in (trainer, inference, learner):
            await actor.start()
        await asyncio.wait_for(sync.wait_serving(1), 10)
        server.stop()  # with weights v2 on their way: lost
        thread.join(timeout=5)
        restarted = start_broker()
        try:
            for actor in (trainer, inference, learner):
                while actor.broker_sessions < 2:
                    await asyncio.sleep(0.05)
            await asyncio.wait_for(sync.wait_serving(2), 10)
            await asyncio.wait_for(sync.wait_serving(2), 10)  # once per restart
        finally:
            for actor in (learner, inference, trainer):
                await actor.close()
            restarted[0].stop()
            restarted[1].join(timeout=5)

    server, thread = start_broker()
    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert served["version"] == 2
    assert published == [2]
    assert events == [
        "inference-0 does not serve weights v2 since the broker was lost; asking the learner "
        "to publish them again"
    ]


def test_rollout_names_are_the_rollout_actors_in_index_order() -> None:
    actors = [
        {"name": "rollout-10", "kind": "rollout", "services": ["rollout"]},
        {"name": "rollout-2", "kind": "rollout", "services": ["rollout"]},
        {"name": "rollout-x", "kind": "rollout", "services": ["rollout"]},
        {"name": "rollout-3", "kind": "rollout", "services": []},  # not serving (yet)
        {"name": "trainer", "kind": "trainer", "services": []},
    ]
    assert rollout_names(actors) == ["rollout-2", "rollout-10"]
