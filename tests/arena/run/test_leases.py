"""Leased episode jobs, end to end: ``arena train`` with two rollout actors whose episodes wait
on a slow scripted user (``configs/smoke_tools.yaml``, 2 s a reply); one actor is killed with SIGKILL in the
middle of a collect. Its job is leased again whole (the launcher restarts the actor), the
episodes it had already sent come again under the same ids and are dropped as duplicates, and
the learner takes every episode of the run exactly once.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_leases.py`` (about a minute).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.arena.commands.test_train import (
    NO_EVAL,
    ROOT,
    metrics,
    rollout_pids,
    start,
    wait_for,
)

TOOLS = str(ROOT / "configs" / "smoke_tools.yaml")
STEPS, PER_STEP = 3, 16


@pytest.mark.e2e
def test_a_killed_rollout_actors_job_is_leased_again_and_trained_once(tmp_path: Path) -> None:
    proc = start(
        "train",
        TOOLS,
        f"output_dir={tmp_path}",
        f"steps={STEPS}",
        f"rollout.episodes_per_step={PER_STEP}",
        "rollout.transcripts_every=0",
        # each episode opens with the user's message, 2 s late; then the untrained agent
        # forfeits at once: an actor's 8 episodes of a step end in two waves, at about 2 and 4 s
        "games.0.simulators.user.kwargs.latency=2.0",
        *NO_EVAL,
    )
    try:
        wait_for(
            lambda: (tmp_path / "smoke_tools").exists(), 120, "the run never started", proc=proc
        )
        (run_dir,) = (tmp_path / "smoke_tools").iterdir()
        wait_for(lambda: len(metrics(run_dir)) >= 1, 300, "no step finished", proc=proc)
        # into step 2's collect: the first wave has been sent, the second is being played
        time.sleep(3.0)
        (victim,) = rollout_pids(run_dir, 1)
        os.kill(victim, signal.SIGKILL)
        out, _ = proc.communicate(timeout=600)
    finally:
        proc.kill()
    assert proc.returncode == 0, out[-3000:]
    rows = metrics(run_dir)
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    last = rows[-1]
    assert last["leases/re_leased"] >= 1, last
    assert last["leases/completed"] == last["leases/leased"] - last["leases/re_leased"]
    # every episode the collects reported was trained once: the learner accepted exactly the
    # run's episodes, and dropped the first holder's copies of those it had sent
    accepted = last["learner/count/episodes_accepted"]
    assert accepted == sum(r["episodes"] for r in rows) == STEPS * PER_STEP, rows
    assert last["learner/count/rejected_duplicate"] >= 1, last
    assert last["leases/duplicates_dropped"] == last["learner/count/rejected_duplicate"]
    events = (run_dir / "events.log").read_text()
    assert "did not finish job rollout-1-" in events
