"""An actor's side of liveness (arena/bus/liveness.py), without sockets; broker restarts end to
end are tests/arena/bus/test_restart.py."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from arena.bus.codec import decode
from arena.bus.errors import BusError
from arena.bus.liveness import Liveness


class Stub:
    """The parts of an actor that :class:`Liveness` uses, recording what it is asked to do."""

    def __init__(self) -> None:
        self.name, self.address, self.load = "a", "ipc:///tmp/x", 3
        self.counters: Counter[str] = Counter()
        self.status: dict[str, Any] = {}
        self.heartbeat_interval, self.heartbeat_timeout = 0.01, 5.0
        self.broker_last_seen, self.broker_up = 0.0, True
        self.answering = None
        self.failed: list[str] = []
        self.reconnects = 0
        self.registered = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.directory = self
        self.refreshed = 0

    def refresh(self) -> None:  # the directory's: resolve again what it had resolved
        self.refreshed += 1

    def fail_brokered(self, error: BusError) -> None:
        self.failed.append(error.code)

    def reconnect_broker(self) -> None:
        self.reconnects += 1

    async def _register(self, timeout: float) -> None:
        self.registered += 1

    def _spawn(self, coro: Any) -> None:
        asyncio.get_running_loop().create_task(coro)


def test_heartbeats_carry_the_status_and_beat_on_without_a_broken_one() -> None:
    actor = Stub()
    actor.status = {"policy_version": lambda: 7, "queued": 2}
    liveness = Liveness(actor)  # type: ignore[arg-type]
    assert decode(liveness.heartbeat_frames()).body == {"load": 3, "policy_version": 7, "queued": 2}
    actor.status["broken"] = lambda: 1 / 0
    assert decode(liveness.heartbeat_frames()).body == {"load": 3}
    assert actor.counters["status_error"] == 1


def test_a_lost_broker_fails_what_went_through_it_and_reconnects() -> None:
    actor = Stub()
    Liveness(actor).broker_lost(6.0)  # type: ignore[arg-type]
    assert (actor.broker_up, actor.failed, actor.reconnects) == (False, ["broker_lost"], 1)


def test_registering_again_happens_once_at_a_time() -> None:
    async def scenario() -> Stub:
        actor = Stub()
        actor._loop = asyncio.get_running_loop()
        liveness = Liveness(actor)  # type: ignore[arg-type]
        liveness.register_again("the broker asked")
        liveness.register_again("the broker asked again")  # already under way: ignored
        await asyncio.sleep(0.01)
        liveness.register_again("later")
        await asyncio.sleep(0.01)
        return actor

    actor = asyncio.run(scenario())
    assert actor.registered == actor.refreshed == actor.counters["registered_again"] == 2
    assert actor.failed == ["broker_lost", "broker_lost"]
