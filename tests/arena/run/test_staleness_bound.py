"""The staleness bound kept by pacing, and a long wait named, end to end: an async ``arena
train`` run with two rollout actors, one of them stopped (SIGSTOP) mid-run, a straggler.

- The run waits for it instead of training ahead, so no trained turn is more than
  ``max_staleness`` versions old and none is dropped for staleness (before the pacing, the fast
  actor's episodes carried the learner on and the straggler's arrived too old, to be dropped).
- The wait is named (``arena/run/watch.py``): ``events.log`` and ``arena status`` say what the
  run waits for and on whom, with the straggler's heartbeat age; the run completes once the
  actor resumes. The straggler is resumed as soon as both have said so: no fixed sleep.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_staleness_bound.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.run.addresses import local_address
from tests.arena.commands.test_train import (
    NO_EVAL,
    SMOKE,
    metrics,
    rollout_pids,
    run_dir_of,
    start,
    wait_for,
)

MAX_STALENESS = 1
STEPS = 6


def live_status(run_dir: Path, bound: float = 30.0) -> subprocess.CompletedProcess[str]:
    """``arena status`` of the live run, once it shows the trainer's wait. It lists what the
    trainer said at its last heartbeat (every 0.5 s here), which may predate the report just
    logged: ask until a heartbeat has carried it, within ``bound`` seconds."""
    deadline = time.monotonic() + bound
    while True:
        status = subprocess.run(
            [sys.executable, "-m", "arena", "status", local_address(run_dir)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if "trainer: collect" in status.stdout or time.monotonic() > deadline:
            return status
        time.sleep(0.5)


@pytest.mark.e2e
def test_a_straggler_is_named_waited_for_and_no_turn_is_too_stale(tmp_path: Path) -> None:
    proc = start(
        "train",
        SMOKE,
        f"output_dir={tmp_path}",
        "mode=async",
        f"steps={STEPS}",
        "checkpoint_every=100",
        "rollout.actors=2",
        f"learner.batch.max_staleness={MAX_STALENESS}",
        "learner.batch.filter_zero_advantage=false",
        "wait.report_every=2",
        "bus.heartbeat_timeout=60",  # a stopped actor is slow, not dead
        *NO_EVAL,
    )
    stopped: list[int] = []
    try:
        wait_for(lambda: (tmp_path / "smoke").exists(), 120, "the run never started", proc=proc)
        run_dir = run_dir_of(tmp_path)
        wait_for(lambda: len(metrics(run_dir)) >= 1, 300, "no step finished", proc=proc)
        stopped = rollout_pids(run_dir, 1)
        os.kill(stopped[0], signal.SIGSTOP)
        events = run_dir / "events.log"
        wait_for(
            lambda: events.exists() and "rollout-1 last heartbeat" in events.read_text(),
            60,
            "the stopped rollout actor was never named",
            proc=proc,
        )
        status = live_status(run_dir)
        os.kill(stopped[0], signal.SIGCONT)
        out, _ = proc.communicate(timeout=600)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        proc.kill()
    assert proc.returncode == 0, out[-3000:]
    rows = metrics(run_dir)
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    for row in rows:
        assert row["learner/staleness_max"] <= MAX_STALENESS, row
        assert row.get("learner/filtered/stale_rejected", 0.0) == 0.0, row
    (summary,) = [json.loads(x) for x in (run_dir / "run_summary.jsonl").read_text().splitlines()]
    assert summary["staleness_max"] <= MAX_STALENESS and summary["stale_rejected"] == 0.0
    assert "staleness of the trained turns: p50" in out
    # the wait was reported, naming the straggler and its heartbeat's age, in the log and live
    line = next(x for x in events.read_text().splitlines() if "rollout-1 last heartbeat" in x)
    assert "waiting for rollout-1's" in line
    age = int(line.rsplit("last heartbeat ", 1)[1].split()[0])
    assert age >= 1, line
    assert status.returncode == 0, status.stderr
    waits = [x for x in status.stdout.splitlines() if x.startswith("trainer: collect")]
    assert waits and "waiting for rollout-1's" in waits[0] and "last heartbeat" in waits[0]
    assert "trainer: episode jobs leased " in status.stdout


def test_the_run_summary_aggregates_the_steps_staleness(tmp_path: Path) -> None:
    from arena.run.config import load_run_config
    from arena.run.run_log import RunLog

    log = RunLog(tmp_path, load_run_config(SMOKE, []))
    assert log.staleness() == {}
    rows = [
        {"step": 1, "learner/staleness_p50": 0.0, "learner/staleness_max": 1.0},
        {
            "step": 2,
            "learner/staleness_p50": 1.0,
            "learner/staleness_max": 3.0,
            "learner/filtered/stale_rejected": 2.0,
        },
        {
            "step": 3,
            "learner/staleness_p50": 2.0,
            "learner/staleness_max": 2.0,
            "learner/filtered/stale_downweighted": 1.0,
        },
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert log.staleness() == {
        "staleness_p50": 1.0,
        "staleness_max": 3.0,
        "stale_rejected": 2.0,
        "stale_downweighted": 1.0,
    }


def test_no_order_starts_on_an_inference_actor_too_far_behind() -> None:
    """A restarted inference actor that missed the learner's weights (lost with a broker)
    serves v0: turns sampled from it would all be rejected as stale, so admission waits for it
    to serve the learner's version (the chaos run once trained a step on nothing but those)."""
    import asyncio

    from arena.run.weight_sync import WeightSync

    class Behind(WeightSync):
        def __init__(self, served: int, events: list[str]) -> None:
            super().__init__("main", events.append)
            self.served, self.waited = served, []

        async def served_version(self) -> int:
            return self.served

        async def wait_serving(self, version: int, timeout=None, exact=False) -> None:
            self.waited.append(version)
            self.served = version

    events: list[str] = []
    behind = Behind(0, events)
    assert asyncio.run(behind.admission_version(7, max_staleness=4)) == 7
    assert behind.waited == [7]
    assert events == [
        "an inference actor serves v0, too old for the learner's v7 "
        "(learner.batch.max_staleness); no order starts until it serves v7"
    ]
    within = Behind(3, events)  # 4 behind: within the bound, and the order says so
    assert asyncio.run(within.admission_version(7, max_staleness=4)) == 3
    assert within.waited == [] and len(events) == 1


def test_an_empty_directory_is_waited_out_not_read_as_an_actor_serving_v0() -> None:
    """Just after the run's broker restarted, before the inference actors registered again, the
    directory lists none of them: admission waits for one instead of reading the empty listing
    as v0 (the overlap chaos run's ``kill_broker+kill_learner+kill_rollout`` named "an inference
    actor serves v0" while inference-0 served v10, and started the order as if its turns could be
    v0)."""
    import asyncio

    from arena.run.weight_sync import WeightSync

    actor = {"name": "inference-0", "services": ["policy:main", "policy:main:status"]}

    class Restarting(WeightSync):
        def __init__(self, events: list[str]) -> None:
            super().__init__("main", events.append, timeout=5.0)
            self.actor = object()  # type: ignore[assignment]  # only _listing reads the bus
            self.listings = [[], [], [actor]]  # registered again at the third look
            self.serving = {"inference-0": 10}  # its announcement before the broker died
            self.waited: list[int] = []

        async def _listing(self) -> list[dict]:
            return self.listings.pop(0) if len(self.listings) > 1 else self.listings[0]

        async def wait_serving(self, version: int, timeout=None, exact=False) -> None:
            self.waited.append(version)

    events: list[str] = []
    sync = Restarting(events)
    assert asyncio.run(sync.admission_version(10, max_staleness=1)) == 10
    assert events == [] and sync.waited == [] and sync.listings == [[actor]]
