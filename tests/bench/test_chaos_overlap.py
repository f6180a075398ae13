"""``bench/chaos_overlap.py``'s injections on real processes (``sleep``s standing for a run's
children): each part hits the child it names, with the marker the run must log for it, and a
stopped one is listed to be released. The whole overlap run is minutes, measured in
docs/benchmarks.md#chaos; this checks its targeting in a second."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

from bench.chaos_overlap import inject_overlap


def state(pid: int) -> str:
    """The process's state, once it has taken the signals sent to it: a SIGSTOP is taken when
    the stopped process next runs, so right after ``kill`` a sleeping one may still show ``R``
    (woken, not yet run: on a loaded host, a CI run read it so)."""
    deadline = time.monotonic() + 5
    while True:
        found = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if found != "R" or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


def test_the_parts_of_an_overlap_fault_hit_their_children_at_once(tmp_path: Path) -> None:
    names = ("broker", "learner", "inference-0", "rollout-0", "rollout-1")
    procs = {n: subprocess.Popen(["sleep", "60"]) for n in names}
    kids = {n: p.pid for n, p in procs.items()}
    try:
        record = inject_overlap(
            "kill_learner+stop_broker", lambda: kids, lambda: [], tmp_path, random.Random(0),
            (8.0, 12.0),
        )  # fmt: skip
        assert procs["learner"].wait(5) == -signal.SIGKILL
        assert state(kids["broker"]) == "T"  # stopped, not dead
        assert record["targets"] == ["kill:learner", "stop:broker"]
        assert record["markers"] == [
            f"learner (pid {kids['learner']}) exited with code -9",
            f"broker (pid {kids['broker']}) is hung",
        ]
        [(pid, until)] = record["stops"]
        assert pid == kids["broker"] and 8.0 <= until - record["at"] <= 12.0
        # a stopped rollout actor is drawn among those on the bus: rollout-1 alone here
        record = inject_overlap(
            "kill_inference+stop_rollout", lambda: kids, lambda: ["inference-0", "rollout-1"],
            tmp_path, random.Random(0), (8.0, 12.0),
        )  # fmt: skip
        assert record["targets"] == ["kill:inference-0", "stop:rollout-1"]
        assert procs["inference-0"].wait(5) == -signal.SIGKILL and state(kids["rollout-1"]) == "T"
        record = inject_overlap(
            "kill_rollouts", lambda: kids, lambda: [], tmp_path, random.Random(0), (8.0, 12.0)
        )
        assert record["targets"] == ["kill:rollout-0", "kill:rollout-1"]
        assert procs["rollout-0"].wait(5) == procs["rollout-1"].wait(5) == -signal.SIGKILL
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()


def test_a_kill_at_save_waits_for_the_partial_checkpoint(tmp_path: Path) -> None:
    learner = subprocess.Popen(["sleep", "60"])
    (tmp_path / "checkpoints" / ".tmp-step-00000003-abc").mkdir(parents=True)
    try:
        record = inject_overlap(
            "kill_learner@save", lambda: {"learner": learner.pid}, lambda: [], tmp_path,
            random.Random(0), (8.0, 12.0),
        )  # fmt: skip
        assert learner.wait(5) == -signal.SIGKILL and record["mid_save"] is True
        assert record["markers"] == [f"learner (pid {learner.pid}) exited with code -9"]
    finally:
        learner.kill()
        learner.wait()
