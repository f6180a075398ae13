"""Hung children are killed (and then restarted by the launcher), the run's own broker
included; heartbeat timeouts too short for the run are refused. The end-to-end cases (a
SIGSTOPped rollout actor, inference actor, learner or broker in a real run) are the chaos run's:
tests/bench/test_chaos.py."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from arena.core.errors import ConfigError
from arena.policies.config import InferenceConfig
from arena.run.config import BusConfig
from arena.run.hangs import HangTimeoutTooShort, HangWatch
from arena.run.launcher import Launcher


class SleepLauncher(Launcher):
    """Children that are ``sleep 60`` instead of arena subcommands."""

    def _spawn(self, child) -> None:  # type: ignore[no-untyped-def]
        import subprocess

        child.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_live_child_declared_dead_is_killed_and_then_restarted(tmp_path: Path) -> None:
    events: list[str] = []
    launcher = SleepLauncher(tmp_path)
    child = launcher.start("inference-0", [], restartable=True, max_restarts=3)
    watch = HangWatch(launcher, 5.0, events.append)
    host = socket.gethostname()
    first = child.pid
    try:
        # an earlier life (other pid), another host, someone else's actor: left alone
        assert not watch.dead({"name": "inference-0", "pid": first + 1, "host": host})
        assert not watch.dead({"name": "inference-0", "pid": first, "host": host + "x"})
        assert not watch.dead({"name": "rollout-9", "pid": first, "host": host})
        assert events == [] and child.process.poll() is None
        assert watch.dead({"name": "inference-0", "pid": first, "host": host})
        assert child.process.wait(timeout=10) == -9
        assert events == [
            f"inference-0 (pid {first}) is hung: no heartbeat for 5 s (bus.heartbeat_timeout) "
            "while its process lives; killing it (SIGKILL) to restart it"
        ]
        (restart,) = launcher.check()
        assert "inference-0" in restart and "restarting (1/3)" in restart
        assert child.pid != first and child.process.poll() is None
        # a dead process is the launcher's to restart, not a hang
        child.process.kill()
        child.process.wait()
        assert not watch.dead({"name": "inference-0", "pid": child.pid, "host": host})
    finally:
        launcher.stop_all(timeout=1)


def test_the_runs_own_broker_silent_past_the_timeout_is_killed_once_per_life(
    tmp_path: Path,
) -> None:
    events: list[str] = []
    launcher = SleepLauncher(tmp_path)
    child = launcher.start("broker", [], restartable=True, max_restarts=3)
    watch = HangWatch(launcher, 5.0, events.append)
    trainer = SimpleNamespace(broker_up=True, broker_last_seen=time.monotonic() - 60)
    first = child.pid
    try:
        assert not watch.broker_silent(trainer)  # it answers: the trainer has not lost it
        trainer.broker_up = False
        assert not watch.broker_silent(trainer)  # first seen now: its timeout starts now
        watch._broker_seen[first] -= 6.0  # as if first seen 6 s ago, heard from a minute ago
        watch._last_look -= 6.0  # ... but the trainer did not look for 6 s: it did not run
        assert not watch.broker_silent(trainer)  # so the count starts anew
        watch._broker_seen[first] -= 6.0  # now 6 s of listening to a silent broker
        assert watch.broker_silent(trainer)
        assert child.process.wait(timeout=10) == -9
        assert events[0].startswith(f"broker (pid {first}) is hung: the run heard nothing from")
        assert not watch.broker_silent(trainer)  # dead: the launcher's to restart
        (restart,) = launcher.check()
        assert "restarting (1/3)" in restart and child.pid != first
        # the restarted broker gets a timeout of its own before it can be taken for hung
        assert not watch.broker_silent(trainer) and child.process.poll() is None
        assert len(events) == 1
    finally:
        launcher.stop_all(timeout=1)


def test_a_slow_batch_is_named_and_one_past_the_hang_timeout_refused(tmp_path: Path) -> None:
    events: list[str] = []
    # the heartbeat timeout (5 s) plays no part: a batch is bounded by the hang timeout alone
    watch = HangWatch(Launcher(tmp_path), 5.0, events.append)
    healthy = {"name": "inference-0", "status": {"slowest_batch": [9.5, 16], "hang_limit": 20.0}}
    watch.check([healthy, {"name": "rollout-0", "status": {}}])  # 2 x 9.5 s is not over 20 s
    assert events == []
    # over half the hang timeout: named once, and the run goes on (a loaded host is no fault)
    slow = {"name": "inference-1", "status": {"slowest_batch": [10.2, 64], "hang_limit": 20.0}}
    watch.check([healthy, slow])
    watch.check([healthy, slow])
    assert events == [
        "inference-1 took 10.2 s for a batch of 64 requests, more than half of "
        "inference.hang_timeout=20 s: a batch past the hang timeout is taken for a hang; set "
        "inference.hang_timeout >= 20 or lower inference.max_batch"
    ]
    # each actor is held to the limit it publishes
    own = {
        "name": "inference-2",
        "status": {"slowest_batch": [10.2, 8], "hang_limit": 30.0},
    }
    watch.check([own])
    assert len(events) == 1
    # past the hang timeout itself: the detector would kill a healthy actor, so the run stops
    slower = {"name": "inference-1", "status": {"slowest_batch": [20.5, 64], "hang_limit": 20.0}}
    with pytest.raises(HangTimeoutTooShort) as err:
        watch.check([healthy, slower])
    assert str(err.value) == (
        "inference.hang_timeout=20 s is too short for this run: inference-1 took 20.5 s for a "
        "batch of 64 requests, and a batch past the hang timeout is taken for a hang; set "
        "inference.hang_timeout >= 41 or lower inference.max_batch"
    )


def test_an_actor_publishing_no_hang_limit_is_not_checked(tmp_path: Path) -> None:
    """Only inference actors publish the limit they enforce (by default 4 times their slowest
    call or more, which no batch outgrows)."""
    events: list[str] = []
    watch = HangWatch(Launcher(tmp_path), 5.0, events.append)
    watch.check([{"name": "learner", "status": {"slowest_batch": [500.0, 8]}}])
    assert events == []


def test_a_hang_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigError, match=r"inference.hang_timeout must be > 0 seconds, got 0"):
        InferenceConfig(hang_timeout=0)


def test_a_heartbeat_timeout_must_span_three_heartbeats() -> None:
    BusConfig(heartbeat_interval=0.5, heartbeat_timeout=1.5)
    with pytest.raises(ConfigError, match=r"bus.heartbeat_timeout \(1.4 s\) must span at least 3"):
        BusConfig(heartbeat_interval=0.5, heartbeat_timeout=1.4)
    with pytest.raises(ConfigError, match="bus.heartbeat_interval must be > 0"):
        BusConfig(heartbeat_interval=0.0)
