"""A broker that stops running for longer than its heartbeat timeout (SIGSTOP, a starved CPU)
and runs again, in real processes: it declares nobody dead for the time it did not run, and an
actor that gave it up as lost takes it back at its next heartbeat, without registering again.

Run with ``.venv/bin/python -m pytest -q tests/arena/bus/test_broker_pause.py``.
"""

from __future__ import annotations

import signal
import time

from arena.bus import BlockingActor, BusError
from tests.arena.bus.conftest import spawn_broker, stop


def test_a_paused_broker_declares_nobody_dead_and_is_taken_back(ipc_dir: str) -> None:
    address = f"ipc://{ipc_dir}/bus.sock"
    broker = spawn_broker(address, "--heartbeat-timeout", "1.0")
    try:
        with BlockingActor("patient", address, heartbeat_interval=0.2) as actor:
            assert actor.call("hi", service="echo") == "hi"
            broker.send_signal(signal.SIGSTOP)
            time.sleep(3.0)  # three heartbeat timeouts: the actor gives the broker up as lost
            assert not actor.actor.broker_up
            broker.send_signal(signal.SIGCONT)
            deadline = time.monotonic() + 10
            while True:  # until the broker's next heartbeat says it is back
                try:
                    listed = actor.call(service="broker.actors", timeout=2.0)
                    break
                except BusError as err:
                    assert err.code == "broker_lost" and time.monotonic() < deadline, err
                    time.sleep(0.1)
            stats = actor.call(service="broker.stats")
            assert [a["name"] for a in listed] == ["patient"]
            assert stats["stalls"] >= 1 and stats.get("actor_dead", 0) == 0, stats
            assert stats["registered"] == 1, stats  # taken back, never registered again
            assert actor.actor.counters["broker_lost"] == 1
            assert actor.actor.counters["registered_again"] == 0
            # a second session: what went through the broker meanwhile may be lost (weights
            # on their way are published again: arena/run/weight_sync.py)
            assert actor.actor.broker_sessions == 2
    finally:
        broker.send_signal(signal.SIGCONT)
        stop(broker)
