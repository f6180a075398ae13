"""An inference actor or learner the run waits for and does not start is named the moment it is
gone (it left, or the broker declared it dead), with the command that starts it again, and when
it is back (arena/run/departures.py); the run's own get no such line (its launcher restarts
them).

Before, killing a hand-started ``inference-0`` made ``arena train`` say nothing: the steps only
slowed. A real broker (in a thread, 1.5 s heartbeat timeout), the coordinator's own trainer
(connected, not training), in-process inference actors that register and close, and one in a
process of its own killed with SIGKILL.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_departures.py`` (about 4 s).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from arena.bus import Actor
from arena.run.config import load_run_config
from arena.run.coordinator import RunCoordinator
from arena.run.processes import actor_commands
from arena.run.run_dir import resolve_for_run
from tests.arena.run.test_discovery import until
from tests.conftest import threaded_broker

ROOT = Path(__file__).resolve().parents[3]

SERVING = """
import asyncio, sys
from arena.bus import Actor

async def main():
    actor = Actor(sys.argv[2], sys.argv[1], kind="inference", heartbeat_interval=0.2)
    actor.serve("policy:main", lambda msg: None)
    await actor.start()
    print("ready", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""
"""An inference actor of policy:main in a process of its own, to be killed."""


@pytest.fixture
def quick_broker(ipc_dir: str) -> Iterator[str]:
    """A broker that declares an actor dead after 1.5 s without a heartbeat."""
    with threaded_broker(f"ipc://{ipc_dir}/quick.sock", heartbeat_timeout=1.5) as address:
        yield address


def watched_run(
    config_name: str,
    overrides: list[str],
    address: str,
    run_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[RunCoordinator, Callable[[], list[str]]]:
    """A run's coordinator on the broker at ``address`` (its trainer listens as in a run; its
    launcher knows the processes the run would start) and a reader of ``events.log``'s lines,
    less their time. No keys: the printed commands carry none."""
    monkeypatch.delenv("ARENA_KEYS", raising=False)
    monkeypatch.delenv("ARENA_INSECURE", raising=False)
    config = resolve_for_run(
        load_run_config(
            ROOT / "configs" / config_name, ["cpu_threads=1", f"bus.address={address}", *overrides]
        ),
        run_dir,
    )
    coordinator = RunCoordinator(config, run_dir)
    coordinator.launcher.expect([c.name for c in actor_commands(config, run_dir)])
    events = run_dir / "events.log"

    def said() -> list[str]:
        return [line[9:] for line in events.read_text().splitlines()] if events.exists() else []

    return coordinator, said


def inference(address: str, name: str, policy: str = "main") -> Actor:
    actor = Actor(name, address, kind="inference", heartbeat_interval=0.2)
    actor.serve(f"policy:{policy}", lambda msg: None)
    actor.serve(f"policy:{policy}:status", lambda msg: None)
    return actor


def test_a_hand_started_inference_actor_that_leaves_or_dies_is_named_with_its_command(
    quick_broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = quick_broker
    # the run starts inference-0 and waits for one more, started by hand
    overrides = ["inference.actors=1", "wait.inference_actors=2"]
    coordinator, said = watched_run("smoke.yaml", overrides, address, tmp_path, monkeypatch)

    start = f"arena inference --connect {address} --config {tmp_path}/config.yaml"
    host = socket.gethostname()
    victim = subprocess.Popen(
        [sys.executable, "-c", SERVING, address, "inference-main-4242"],
        stdout=subprocess.PIPE,
        text=True,
    )

    async def scenario() -> None:
        await coordinator.connect()
        own, hand = inference(address, "inference-0"), inference(address, "inference-1")
        other = inference(address, "inference-x", policy="elsewhere")  # no policy of the run's
        for actor in (own, hand, other):
            await actor.start()
        # the run's own actor leaves (its launcher restarts it), one of another policy leaves
        await own.close()
        await other.close()
        await hand.close()  # the hand-started one: named at once, with its command
        await until(lambda: len(said()) >= 1)
        back = inference(address, "inference-1")
        await back.start()
        await until(lambda: len(said()) >= 2)
        # one started without --actor-name (its name holds its pid), killed: the broker
        # declares it dead after its heartbeat timeout, and another of its policy replaces it
        assert victim.stdout is not None
        assert (await asyncio.to_thread(victim.stdout.readline)).strip() == "ready"
        os.kill(victim.pid, signal.SIGKILL)
        await until(lambda: len(said()) >= 3)
        stand_in = inference(address, "inference-main-5151")
        await stand_in.start()
        await until(lambda: len(said()) >= 4)
        for actor in (back, stand_in, coordinator.actor):
            await actor.close()

    try:
        asyncio.run(scenario())
    finally:
        victim.kill()
        victim.wait()
    assert said() == [
        f"inference-1 (serving policy:main, pid {os.getpid()} on {host}) left the bus; this run "
        f"did not start it, so nothing restarts it: start it again with: {start} "
        "--actor-name inference-1",
        "inference-1 (serving policy:main) is back on the bus",
        f"inference-main-4242 (serving policy:main, pid {victim.pid} on {host}) was declared "
        f"dead by the broker; this run did not start it, so nothing restarts it: start it again "
        f"with: {start}",
        "inference-main-5151 joined serving policy:main, in place of inference-main-4242",
    ]
    assert coordinator.departures.gone == {}


def test_a_pool_actor_is_started_again_under_the_runs_name_for_it(tmp_path: Path) -> None:
    from arena.run.roster import inference_command

    config = load_run_config(
        ROOT / "configs" / "smoke.yaml",
        ["cpu_threads=1", "inference.actors=0", "opponents.mode=population"],
    )
    address = "tcp://127.0.0.1:5555"
    start = f"arena inference --connect {address} --config {tmp_path}/config.yaml"

    def command(name: str, service: str) -> str | None:
        return inference_command(config, tmp_path, address, name, service)

    assert command("inference-pool", "policy:pool") == f"{start} --actor-name inference-pool"
    # a pool actor under another name: the command gives it the run's name for it
    assert command("x", "policy:pool") == f"{start} --actor-name inference-pool"
    assert command("inference-3", "policy:main") == f"{start} --actor-name inference-3"
    assert command("x", "policy:main") == start
    assert command("x", "policy:elsewhere") is None


def learner(address: str, name: str, service: str) -> Actor:
    actor = Actor(name, address, kind="learner", heartbeat_interval=0.2)
    actor.serve(service, lambda msg: None)
    return actor


def test_a_hand_started_learner_that_leaves_is_named_with_its_command(
    quick_broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = quick_broker
    # start_learner=false: the run's learner and responder's (a model of its own) by hand
    coordinator, said = watched_run(
        "two_models.yaml", ["start_learner=false"], address, tmp_path, monkeypatch
    )

    async def scenario() -> None:
        await coordinator.connect()
        own = learner(address, "learner", "learner")
        responder = learner(address, "learner-responder", "learner:responder")
        for actor in (own, responder):
            await actor.start()
        await own.close()
        await until(lambda: len(said()) >= 1)
        await responder.close()
        await until(lambda: len(said()) >= 2)
        # back under another name: a learner service has one learner, so it is the one
        again = learner(address, "learner-2", "learner")
        await again.start()
        await until(lambda: len(said()) >= 3)
        for actor in (again, coordinator.actor):
            await actor.close()

    asyncio.run(scenario())
    pid, host = os.getpid(), socket.gethostname()
    start = f"arena learner --connect {address}"
    assert said() == [
        f"learner (serving learner, pid {pid} on {host}) left the bus; this run did not start "
        f"it, so nothing restarts it: start it again with: {start} --config "
        f"{tmp_path}/learner.yaml",
        f"learner-responder (serving learner:responder, pid {pid} on {host}) left the bus; this "
        f"run did not start it, so nothing restarts it: start it again with: {start} --name "
        f"learner-responder --config {tmp_path}/learner-responder.yaml",
        "learner-2 joined serving learner, in place of learner",
    ]
    assert coordinator.departures.gone == {"learner-responder": "learner:responder"}
    # the run's own learners (start_learner: true, its launcher restarts them): no line
    (tmp_path / "own").mkdir()
    own, _ = watched_run("two_models.yaml", [], address, tmp_path / "own", monkeypatch)
    departures = own.departures
    for name, service in (("learner", "learner"), ("learner-responder", "learner:responder")):
        assert not departures.left({"name": name, "services": [service]}, "left the bus")


def test_a_hand_started_rollout_actor_that_leaves_is_named_with_its_command(
    quick_broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a hand-started rollout actor that left was noticed only when an order to it
    failed: the run collected with one actor fewer, unsaid."""
    address = quick_broker
    # the run starts rollout-0 and waits for rollout-1, started by hand
    overrides = ["rollout.actors=1", "wait.rollout_actors=2"]
    coordinator, said = watched_run("smoke.yaml", overrides, address, tmp_path, monkeypatch)

    def rollout(name: str) -> Actor:
        actor = Actor(name, address, kind="rollout", heartbeat_interval=0.2)
        actor.serve("rollout", lambda msg: None)
        return actor

    async def scenario() -> None:
        await coordinator.connect()
        own, hand, stray = rollout("rollout-0"), rollout("rollout-1"), rollout("collector")
        for actor in (own, hand, stray):
            await actor.start()
        await own.close()  # the run's own: its launcher restarts it
        await stray.close()  # not rollout-<I>: no actor of the run's
        await hand.close()
        await until(lambda: len(said()) >= 1)
        # another name serving rollout is not rollout-1 back; rollout-1 itself is
        other = rollout("rollout-7")
        await other.start()
        back = rollout("rollout-1")
        await back.start()
        await until(lambda: len(said()) >= 2)
        for actor in (other, back, coordinator.actor):
            await actor.close()

    asyncio.run(scenario())
    pid, host = os.getpid(), socket.gethostname()
    assert said() == [
        f"rollout-1 (serving rollout, pid {pid} on {host}) left the bus; this run did not start "
        f"it, so nothing restarts it: start it again with: arena rollout --connect {address} "
        f"--config {tmp_path}/config.yaml --index 1",
        "rollout-1 (serving rollout) is back on the bus",
    ]
    assert coordinator.departures.gone == {}
