"""``arena status``'s table and what it says of a run (the trainer's leases and long waits).

The command itself runs here against no broker at all (``--timeout`` bounds the whole wait),
and against live runs in tests/arena/run/test_watch.py (a stopped rollout actor is named) and
tests/arena/bus/test_direct.py.

Run with ``.venv/bin/python -m pytest -q tests/arena/commands/test_status.py``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.commands.status import format_table, run_state

TRAINER = {
    "name": "trainer",
    "kind": "trainer",
    "host": "node-a",
    "pid": 7,
    "services": [],
    "last_heartbeat": 0.4,
    "status": {
        "load": 0,
        "leases": {"leased": 9, "completed": 7, "re_leased": 2},
        "waiting": ["collect (seed 101): waiting for rollout-1's 8 episodes for 31 s; x"],
    },
}
ROLLOUT = {
    "name": "rollout-1",
    "kind": "rollout",
    "host": "node-b",
    "pid": 9,
    "services": ["rollout"],
    "endpoint": "tcp://node-b:4000",
    "last_heartbeat": 29.6,
    "status": {"load": 3},
}


def test_the_trainer_says_how_its_leases_went_and_what_it_waits_for() -> None:
    assert run_state([ROLLOUT, TRAINER]) == [
        "trainer: episode jobs leased 9, completed 7, re-leased 2",
        "trainer: collect (seed 101): waiting for rollout-1's 8 episodes for 31 s; x",
    ]
    assert run_state([ROLLOUT]) == []


def test_an_inference_actor_that_ran_out_of_memory_says_how_small_it_batches() -> None:
    inference = {**ROLLOUT, "name": "inference-0", "kind": "inference"}
    inference["status"] = {"max_batch": 16, "settings": {"max_batch": 64}}
    assert run_state([inference]) == [
        "inference-0: batches of at most 16 requests, not max_batch 64: out of memory at more"
    ]
    inference["status"] = {"max_batch": 64, "settings": {"max_batch": 64}}
    assert run_state([inference]) == []


def test_the_table_lists_every_actor_then_the_run() -> None:
    lines = format_table([TRAINER, ROLLOUT]).splitlines()
    assert " ".join(lines[0].split()) == "name kind host services endpoint version load heartbeat"
    assert lines[1].split()[:3] == ["rollout-1", "rollout", "node-b:9"]
    assert lines[1].split()[-3:] == ["3", "29.6s", "ago"]
    assert lines[2].split()[:2] == ["trainer", "trainer"]
    assert lines[3] == "2 actors"
    assert lines[4].startswith("trainer: episode jobs leased 9")
    counted = format_table([ROLLOUT], {"schema": 2, "registered": 5, "actor_dead": 1})
    assert counted.splitlines()[-1] == "broker: registered 5, actor_dead 1, schema 2"


def test_the_timeout_bounds_the_wait_for_a_broker_that_never_answers(tmp_path: Path) -> None:
    # Before, --timeout bounded only the listing request: the connect waited its own 10 s. The
    # bound is taken past the command's own start-up, timed here, so a loaded host cannot fail it.
    def timed(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "arena", "status", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return time.monotonic() - started, done

    startup, _ = timed("--help")
    elapsed, down = timed(f"ipc://{tmp_path}/nobody.sock", "--timeout", "1")
    assert down.returncode == 1 and "no broker" in down.stderr, down.stderr
    assert elapsed - startup < 5.0, f"arena status --timeout 1 took {elapsed:.1f} s"


def test_a_run_directory_names_its_broker(tmp_path: Path) -> None:
    """`arena status RUN`: the run's own broker (ipc://RUN/bus.sock); it was refused as 'names
    no ZeroMQ transport', and said nothing of the run when it had stopped."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("name: run\n")
    from arena.run.addresses import local_address

    address = local_address(run_dir)  # ipc://RUN/bus.sock, or a temp one for a deep RUN

    def status(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "arena", "status", str(run_dir), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    stopped = status("--timeout", "1")
    assert stopped.returncode == 1, stopped.stderr
    assert stopped.stderr.startswith(
        f"arena status: no broker at {address} (the broker of run "
        f"{run_dir}, which is not running now): "
    ), stopped.stderr
    broker = subprocess.Popen(
        [sys.executable, "-m", "arena", "broker", "--bind", address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # `status RUN` says at once that a run with no socket has ended, so it is asked only once
        # the broker has bound its socket (a loaded machine starts the broker slower than status).
        socket = Path(address.removeprefix("ipc://"))
        deadline = time.monotonic() + 60
        while not socket.exists() and broker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert socket.exists(), f"the broker bound no socket at {address}"
        running = status("--timeout", "20")
    finally:
        broker.terminate()
        broker.wait(timeout=30)
    assert running.returncode == 0, running.stderr
    assert running.stdout.split()[:3] == ["name", "kind", "host"], running.stdout


def test_a_run_directory_whose_config_is_malformed_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `arena status RUN` reads RUN/config.yaml for its bus address: a file cut short is named
    # with its line and column, as every command names malformed YAML.
    from arena.cli import main

    (tmp_path / "config.yaml").write_text("name: run\nbus: {address: [\n")
    assert main(["status", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"arena status: bad config: {tmp_path}/config.yaml:3:1: malformed YAML")
    assert err.count("\n") == 1
