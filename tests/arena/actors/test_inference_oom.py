"""An inference actor whose batches fail out of memory: a lone one fails only its requests;
``inference.max_oom_batches`` in a row and the actor leaves, naming the error, for the run to
restart it (arena/actors/inference.py, arena/actors/backend_watch.py).

The actor in this process behind a real broker (a fake backend that fails batches to a script),
and ``arena inference`` in real processes under the run's :class:`Launcher`, its backend a
plugin installed as ``pip install`` leaves one (a ``dist-info`` found through ``PYTHONPATH``).

Run with ``.venv/bin/python -m pytest -q tests/arena/actors/test_inference_oom.py``.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from arena.actors.backend_watch import (
    BatchCeiling,
    OutOfMemoryStreak,
    out_of_memory,
    serve_in_halves,
)
from arena.actors.inference import InferenceActor
from arena.bus import Actor, BlockingActor, BusError
from arena.core.errors import ConfigError
from arena.policies.base import Policy
from arena.policies.config import InferenceConfig
from arena.policies.types import Generation
from arena.run.launcher import ChildDied, Launcher
from tests.arena.bus.conftest import wait_for_service

ROOT = Path(__file__).resolve().parents[3]
CHAT = {"messages": [{"role": "user", "content": "Your move?"}]}
CUDA_OOM = "CUDA out of memory. Tried to allocate 20.00 GiB"


def test_out_of_memory_is_told_from_other_failures() -> None:
    assert out_of_memory(torch.OutOfMemoryError(CUDA_OOM))
    assert out_of_memory(RuntimeError(f"{CUDA_OOM} (GPU 0; 79.15 GiB total capacity)"))
    assert out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: 8 GB"))
    assert out_of_memory(MemoryError())
    assert not out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not out_of_memory(ValueError("the engine died"))
    # In a row: a batch served, or one failing otherwise, starts the count again.
    streak = OutOfMemoryStreak(3)
    oom = torch.OutOfMemoryError(CUDA_OOM)
    assert [streak.failed(oom), streak.failed(oom)] == [False, False]
    streak.served()
    assert [streak.failed(oom), streak.failed(oom)] == [False, False]
    assert not streak.failed(RuntimeError("shapes"))
    assert [streak.failed(oom), streak.failed(oom), streak.failed(oom)] == [False, False, True]
    never = OutOfMemoryStreak(0)
    assert not any(never.failed(oom) for _ in range(10))
    with pytest.raises(ConfigError, match="inference.max_oom_batches must be >= 0, got -1"):
        InferenceConfig(max_oom_batches=-1)


class ScriptedFailures(Policy):
    """A backend that answers each batch by its script: "oom" (torch's OutOfMemoryError), "bug"
    (another error) or "ok" (a one-token generation per request)."""

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)

    def generate(self, prompts: Any, params: Any = None) -> list[Generation]:
        outcome = self.script.pop(0)
        if outcome == "oom":
            raise torch.OutOfMemoryError(CUDA_OOM)
        if outcome == "bug":
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")
        return [
            Generation(
                prompt_ids=np.asarray([1], np.int32),
                token_ids=np.asarray([2], np.int32),
                logprobs=np.asarray([-0.5], np.float32),
                text="ok",
                finish_reason="stop",
                version=0,
            )
            for _ in prompts
        ]


async def serving(
    actor: InferenceActor, stop: asyncio.Event, broker: str
) -> tuple[asyncio.Future[None], Actor]:
    """``actor`` running until ``stop`` (or until it leaves), and a client that has seen its
    service on the bus."""
    served = asyncio.ensure_future(actor.run(stop))
    client = Actor(f"client-{time.monotonic_ns()}", broker)
    await client.start()
    for _ in range(200):
        listed = (await client.request(service="broker.actors", timeout=5)).body
        if any(actor.service in a["services"] for a in listed):
            break
        await asyncio.sleep(0.05)
    return served, client


def test_a_lone_oom_batch_fails_its_requests_and_a_run_of_them_stops_the_actor(
    broker: str,
) -> None:
    # One request a batch. Out of memory, served, out of memory, another error, then three out
    # of memory in a row: only the last three make max_oom_batches (3); each failed batch fails
    # its own request alone, and the actor serves on until the third, then stops by itself.
    script = ["oom", "ok", "oom", "bug", "oom", "oom", "oom"]

    async def scenario() -> tuple[list[str], InferenceActor, bool]:
        config = InferenceConfig(name="oom", max_wait_ms=1.0, max_batch=1, max_oom_batches=3)
        actor = InferenceActor(ScriptedFailures(script), broker, config, actor_name="inference-7")
        stop = asyncio.Event()
        served, client = await serving(actor, stop, broker)
        outcomes = []
        for _ in script:
            try:
                await client.request({"prompt": CHAT}, service="policy:oom", timeout=10)
                outcomes.append("reply")
            except BusError as err:
                outcomes.append(f"{err.code}: {err.message}")
        # run() returns on its own (stop is never set), and the actor has left the bus
        await asyncio.wait_for(served, 10)
        listed = (await client.request(service="broker.actors", timeout=5)).body
        gone = not stop.is_set() and not any("policy:oom" in a["services"] for a in listed)
        await client.close()
        return outcomes, actor, gone

    outcomes, actor, gone = asyncio.run(scenario())
    oom = f"policy_error: generation failed: OutOfMemoryError('{CUDA_OOM}')"
    bug = (
        "policy_error: generation failed: RuntimeError('mat1 and mat2 shapes cannot be multiplied')"
    )
    assert outcomes == ["reply" if o == "ok" else (oom if o == "oom" else bug) for o in script]
    assert actor.gave_up == (
        "inference-7 cannot serve: 3 batches in a row failed out of memory "
        "(inference.max_oom_batches; the last, a batch of 1: "
        f"OutOfMemoryError('{CUDA_OOM}')); it exits to be restarted (a smaller "
        "inference.max_batch needs less memory)"
    )
    assert gone and actor.counters["batch_failed"] == 6 and actor.counters["batches"] == 1


def test_serve_in_halves_splits_out_of_memory_down_to_one_item() -> None:
    # fits two items at most: 8 -> 4 + 4 -> (2 + 2) + (2 + 2), results in order
    calls: list[list[int]] = []

    def serve(items: list[int]) -> list[int]:
        calls.append(items)
        if len(items) > 2:
            raise torch.OutOfMemoryError(CUDA_OOM)
        return [10 * i for i in items]

    assert serve_in_halves(serve, list(range(8))) == ([10 * i for i in range(8)], 2)
    assert [len(c) for c in calls] == [8, 4, 2, 2, 4, 2, 2]
    assert serve_in_halves(serve, [1, 2]) == ([10, 20], 2)  # fits: one call
    # one item out of memory alone fails the batch; another error is never split
    with pytest.raises(torch.OutOfMemoryError):
        serve_in_halves(lambda items: serve([0, 0, 0]), [1, 2, 3])
    calls.clear()
    with pytest.raises(RuntimeError, match="shapes"):
        serve_in_halves(lambda items: calls.append(items) or bug(), [1, 2, 3, 4])
    assert calls == [[1, 2, 3, 4]]


def bug() -> list[int]:
    raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")


def test_a_cut_batch_ceiling_doubles_back_after_full_batches_served_whole() -> None:
    ceiling = BatchCeiling(8, regrow_after=2)
    assert ceiling.served(8, 8) is None and ceiling.now == 8  # served whole at the top
    assert ceiling.served(8, 2) == (
        "a batch of 8 ran out of memory and was served in parts; at most 2 requests a batch "
        "from now on"
    )
    assert ceiling.now == 2
    assert ceiling.served(1, 1) is None  # a batch below the ceiling says nothing of it
    assert ceiling.served(2, 2) is None
    assert ceiling.served(2, 2) == (
        "2 batches of 2 served without running out of memory; at most 4 requests a batch "
        "from now on"
    )
    assert ceiling.served(4, 2) is not None and ceiling.now == 2  # still short: cut again
    for size in (2, 2, 4, 4):
        ceiling.served(size, size)
    assert ceiling.now == 8  # 2 -> 4 -> 8, never past max_batch
    assert ceiling.served(8, 8) is None and ceiling.now == 8
    stays = BatchCeiling(8, regrow_after=0)
    stays.served(8, 4)
    assert [stays.served(4, 4) for _ in range(100)] == [None] * 100 and stays.now == 4
    with pytest.raises(ConfigError, match="inference.oom_regrow_batches must be >= 0, got -1"):
        InferenceConfig(oom_regrow_batches=-1)


class FitsTwo(ScriptedFailures):
    """A backend out of memory on a batch of more than ``capacity`` (2) requests."""

    def __init__(self) -> None:
        super().__init__([])
        self.sizes: list[int] = []
        self.capacity = 2

    def generate(self, prompts: Any, params: Any = None) -> list[Generation]:
        self.sizes.append(len(prompts))
        self.script = ["oom" if len(prompts) > self.capacity else "ok"]
        return super().generate(prompts, params)


def test_a_batch_out_of_memory_is_served_in_parts_and_later_batches_are_smaller(
    broker: str,
) -> None:
    # Eight requests reach one batch; it runs out of memory and is served in halves of halves:
    # every request is answered, none fails, and the next batches are at most two requests.
    async def scenario() -> tuple[list[str], InferenceActor, FitsTwo]:
        backend = FitsTwo()
        config = InferenceConfig(name="fit", max_wait_ms=500.0, max_batch=8, max_oom_batches=1)
        actor = InferenceActor(backend, broker, config, actor_name="inference-8")
        stop = asyncio.Event()
        served, client = await serving(actor, stop, broker)

        async def ask() -> str:
            reply = await client.request({"prompt": CHAT}, service="policy:fit", timeout=10)
            return str(reply.body["text"])

        first = await asyncio.gather(*(ask() for _ in range(8)))
        second = await asyncio.gather(*(ask() for _ in range(4)))
        stop.set()
        await served
        await client.close()
        return [*first, *second], actor, backend

    replies, actor, backend = asyncio.run(scenario())
    assert replies == ["ok"] * 12
    assert backend.sizes == [8, 4, 2, 2, 4, 2, 2, 2, 2]
    assert actor.queue.max_batch == 2 and actor.gave_up is None
    assert actor.actor.status["max_batch"]() == 2  # what `arena status` reads
    assert actor.counters["oom_splits"] == 1 and actor.counters["batch_failed"] == 0


def test_batches_grow_again_once_memory_is_back(broker: str) -> None:
    # Four requests run out of memory and are served as 2 + 2; memory then comes back, two
    # full batches of two go through (oom_regrow_batches 2) and the next four are one batch.
    async def scenario() -> tuple[InferenceActor, FitsTwo]:
        backend = FitsTwo()
        config = InferenceConfig(name="fit", max_wait_ms=500.0, max_batch=4, oom_regrow_batches=2)
        actor = InferenceActor(backend, broker, config, actor_name="inference-4")
        stop = asyncio.Event()
        served, client = await serving(actor, stop, broker)

        async def ask(n: int) -> None:
            await asyncio.gather(
                *(
                    client.request({"prompt": CHAT}, service="policy:fit", timeout=10)
                    for _ in range(n)
                )
            )

        await ask(4)
        assert actor.queue.max_batch == 2
        backend.capacity = 4
        await ask(2)
        await ask(2)
        await ask(4)
        stop.set()
        await served
        await client.close()
        return actor, backend

    actor, backend = asyncio.run(scenario())
    assert backend.sizes == [4, 2, 2, 2, 2, 4]
    assert actor.queue.max_batch == 4 and actor.actor.status["max_batch"]() == 4
    assert actor.counters["oom_splits"] == 1 and actor.counters["batch_failed"] == 0


BACKEND = '''
"""A policy backend whose every batch runs out of memory."""

import torch

from arena.policies.base import Policy


class OutOfMemory(Policy):
    @classmethod
    def from_config(cls, config):
        return cls()

    def generate(self, prompts, params=None):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
'''


def install_backend(site: Path) -> None:
    """The ``oom`` policy backend as an installed distribution (entry point group
    ``arena.policies``)."""
    (site / "oom_backend.py").write_text(BACKEND)
    info = site / "oom_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: oom-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[arena.policies]\noom = oom_backend:OutOfMemory\n")


def test_arena_inference_out_of_memory_exits_is_restarted_and_stops_the_run(
    broker: str, tmp_path: Path
) -> None:
    # `arena inference` on a backend whose batches all fail out of memory, as `arena train`
    # starts it: restartable once. Each life fails 2 requests (max_oom_batches 2) and exits by
    # itself with status 1; the launcher restarts the first and, the second time, stops the run
    # with ChildDied, whose message ends with the actor's one-line reason.
    site = tmp_path / "site"
    site.mkdir()
    install_backend(site)
    pythonpath = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])
    launcher = Launcher(tmp_path / "logs", env={"PYTHONPATH": pythonpath})
    argv = ["inference", "--address", broker, "--actor-name", "inference-0", "--backend", "oom"]
    argv += ["--name", "main", "--max-oom-batches", "2", "--max-wait-ms", "1"]
    argv += ["--heartbeat-interval", "0.2"]
    child = launcher.start("inference-0", argv, restartable=True, max_restarts=1)
    reason = (
        "arena inference: inference-0 cannot serve: 2 batches in a row failed out of memory "
        "(inference.max_oom_batches; the last, a batch of 1: "
        f"OutOfMemoryError('{CUDA_OOM}')); it exits to be restarted (a smaller "
        "inference.max_batch needs less memory)"
    )
    try:
        with BlockingActor(f"oom-client-{time.monotonic_ns()}", broker) as client:
            for life in range(2):
                wait_for_service(broker, "policy:main", timeout=60)
                for _ in range(2):
                    with pytest.raises(BusError) as info:
                        client.call({"prompt": CHAT}, service="policy:main", timeout=30)
                    assert info.value.code == "policy_error", info.value
                    assert "OutOfMemoryError" in info.value.message
                assert child.process.wait(timeout=30) == 1
                if life == 0:
                    (event,) = launcher.check()
                    assert event.endswith("exited with code 1; restarting (1/1)"), event
        with pytest.raises(ChildDied) as died:
            launcher.check()
        assert "inference-0" in str(died.value) and "exited with code 1" in str(died.value)
        assert str(died.value).splitlines()[-1] == reason
    finally:
        launcher.stop_all(timeout=5)
