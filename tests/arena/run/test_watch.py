"""arena/run/watch.py: a long wait says what it waits for and on whom.

The unit tests read a hand-written directory listing; the end-to-end test stops a rollout actor
of a real `arena train` run with SIGSTOP and checks that the run names it, with its heartbeat
age, within the reporting interval, and then completes once the actor resumes.

Run with `.venv/bin/python -m pytest -q tests/arena/run/test_watch.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from arena.bus import BusError
from arena.run.watch import Watchdog, diagnosis
from tests.arena.commands.test_train import (
    SMOKE,
    metrics,
    rollout_pids,
    run_dir_of,
    start,
    wait_for,
)

LISTING = [
    {"name": "inference-0", "status": {"policy_version": 1}, "last_heartbeat": 0.4},
    {"name": "rollout-1", "status": {}, "last_heartbeat": 29.6},
]


def test_the_diagnosis_names_versions_heartbeats_and_missing_actors() -> None:
    assert diagnosis(LISTING, ["inference-0", "rollout-1", "learner"]) == (
        "inference-0 serves v1, last heartbeat 0 s ago; rollout-1 last heartbeat 30 s ago; "
        "learner is not registered with the broker"
    )


def test_the_watchdog_reports_while_the_wait_lasts_and_stops_after() -> None:
    reports: list[str] = []

    async def listing() -> list[dict]:
        return LISTING

    async def main() -> None:
        watchdog = Watchdog(reports.append, listing, every=0.05)
        async with watchdog.waiting("step 7: waiting for weights v2", ["inference-0"]):
            await asyncio.sleep(0.18)
        await asyncio.sleep(0.15)  # no report once the block has ended

    seen: list[list[str]] = []

    async def main_watching_current() -> None:
        watchdog = Watchdog(reports.append, listing, every=0.05)
        async with watchdog.waiting("step 7: waiting for weights v2", ["inference-0"]):
            await asyncio.sleep(0.12)
            seen.append(watchdog.current())
        seen.append(watchdog.current())

    asyncio.run(main())
    assert len(reports) == 3, reports
    asyncio.run(main_watching_current())
    # while the wait lasts its latest report is current (what `arena status` shows), then not
    assert seen[0] == [reports[-1]] and seen[1] == []
    del reports[3:]
    assert reports[0].startswith("step 7: waiting for weights v2 for 0 s; inference-0 serves v1")

    async def broken() -> list[dict]:
        raise BusError("timeout", "no reply")

    async def silent_broker() -> None:
        async with Watchdog(reports.append, broken, every=0.05).waiting("step 1", ["learner"]):
            await asyncio.sleep(0.08)

    asyncio.run(silent_broker())
    assert "the broker does not answer" in reports[-1]


def test_a_stopped_rollout_actor_is_named_and_the_run_recovers(tmp_path: Path) -> None:
    proc = start(
        "train",
        SMOKE,
        f"output_dir={tmp_path}",
        "steps=3",
        "rollout.actors=1",
        "wait.report_every=2",
        "bus.heartbeat_timeout=60",
    )
    stopped: list[int] = []
    try:
        wait_for(lambda: (tmp_path / "smoke").exists(), 120, "the run never started")
        run_dir = run_dir_of(tmp_path)
        wait_for(lambda: len(metrics(run_dir)) >= 1, 300, "no step finished")
        stopped = rollout_pids(run_dir, 0)
        os.kill(stopped[0], signal.SIGSTOP)
        events = run_dir / "events.log"
        wait_for(
            lambda: events.exists() and "rollout-0 last heartbeat" in events.read_text(),
            60,
            "the stopped rollout actor was never named",
        )
        # `arena status` shows the same diagnosis for the live run. It lists what the trainer
        # said at its last heartbeat (every 0.5 s here), which may predate the report just
        # logged: ask until a heartbeat has carried it, within a bound.
        deadline = time.monotonic() + 30
        while True:
            status = subprocess.run(
                [sys.executable, "-m", "arena", "status", f"ipc://{run_dir.resolve()}/bus.sock"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if "trainer: collect" in status.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        os.kill(stopped[0], signal.SIGCONT)
        out, _ = proc.communicate(timeout=600)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert [r["step"] for r in metrics(run_dir)] == [1, 2, 3]
    assert status.returncode == 0, status.stderr
    waits = [x for x in status.stdout.splitlines() if x.startswith("trainer: collect")]
    assert waits and "waiting for rollout-0's" in waits[0] and "last heartbeat" in waits[0]
    assert "trainer: episode jobs leased " in status.stdout
    line = next(x for x in events.read_text().splitlines() if "rollout-0 last heartbeat" in x)
    assert "waiting for rollout-0's" in line
    age = int(line.rsplit("last heartbeat ", 1)[1].split()[0])
    assert age >= 1, line
