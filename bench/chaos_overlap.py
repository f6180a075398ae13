"""``bench/chaos.py --overlap``: faults that come together, as they do in a real deployment.

Each fault of the overlap mode is a combination injected at one instant (or one triggered by
the run's own state), and the run must recover from all of its parts at once:

- ``kill_learner+stop_broker``: the learner dies while the broker is stopped (its death notice
  has nobody to reach, and the restarted learner registers with a broker the run must restart);
- ``kill_inference+stop_rollout``: the inference actor dies while a rollout actor is stopped;
- ``stop_learner+kill_inference``: the restarted inference actor asks a hung learner for its
  weights;
- ``kill_broker+kill_learner+kill_rollout``: three deaths at once;
- ``kill_rollouts``: every rollout actor at once (no actor left to re-lease the jobs to);
- ``kill_learner@save``: the learner killed while it writes a checkpoint (the moment a
  ``.tmp-step-*`` directory is in ``checkpoints/``);
- ``kill_learner@resume``: the learner killed, and the learner restarted in its place killed
  again the moment it has resumed from its checkpoint and joined the bus (while the run rolls
  back to that checkpoint).

A part's ``kill`` is a SIGKILL of a child whose name starts with the role (drawn, seeded, among
several: ``learner`` may be a named policy's ``learner-<policy>``), detected when the launcher
logs its exit; a part's ``stop`` is a SIGSTOP for ``--stop-seconds``, detected when the run names
it hung. The fault is detected when every part is, and recovered at the first step logged after
that. After the faults, ``kill_resume``: the ``resume=`` run itself is killed the moment its
learner has resumed, and resumed again (its recovery: that second resume completing).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

OVERLAPS = (
    "kill_learner+stop_broker",
    "kill_inference+stop_rollout",
    "kill_learner@save",
    "stop_learner+kill_inference",
    "kill_learner@resume",
    "kill_broker+kill_learner+kill_rollout",
    "kill_rollouts",
)
"""The overlap mode's faults, in this order (each once before any repeats)."""

Children = Callable[[], dict[str, int]]
"""The run's children by name, read now (``bench/chaos.py``'s ``children``)."""


def resumes(run_dir: Path, learner: str = "learner") -> int:
    """How many times a ``learner`` process has come up in this run: resumed from its
    checkpoint (or started afresh, where it had none yet) and joined the bus."""
    log = run_dir / "logs" / f"{learner}.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return text.count(f"{learner} takes direct requests at ")


def kill(name: str, pid: int, record: dict[str, Any]) -> None:
    os.kill(pid, signal.SIGKILL)
    record["targets"].append(f"kill:{name}")
    record["markers"].append(f"{name} (pid {pid}) exited with code -9")


def stop(name: str, pid: int, until: float, record: dict[str, Any]) -> None:
    os.kill(pid, signal.SIGSTOP)
    record["targets"].append(f"stop:{name}")
    record["markers"].append(f"{name} (pid {pid}) is hung")
    record["stops"].append([pid, until])


def inject_overlap(
    kind: str,
    kids: Children,
    on_bus: Callable[[], list[str]],
    run_dir: Path,
    rng: random.Random,
    stop_seconds: tuple[float, float],
) -> dict[str, Any]:
    """Inject the overlap fault ``kind``; returns its record (``targets``, the ``markers`` that
    ``events.log`` must show for it to count as detected, the ``stops`` to release)."""
    record: dict[str, Any] = {"kind": kind, "targets": [], "markers": [], "stops": []}
    if kind == "kill_learner@save":
        root = run_dir / "checkpoints"
        deadline = time.time() + 120
        while time.time() < deadline:  # a save of the tiny model lasts a few ms: poll tight
            if root.is_dir() and any(p.name.startswith(".tmp-step-") for p in root.iterdir()):
                break
            time.sleep(0.002)
        found = kids()
        record["at"] = time.time()
        kill("learner", found["learner"], record)
        record["mid_save"] = root.is_dir() and any(
            p.name.startswith(".tmp-step-") for p in root.iterdir()
        )
        return record
    if kind == "kill_learner@resume":
        found = kids()
        before = resumes(run_dir)
        record["at"] = time.time()
        kill("learner", found["learner"], record)
        deadline = time.time() + 180
        while time.time() < deadline and resumes(run_dir) == before:
            time.sleep(0.01)
        again = kids().get("learner")
        if again is not None and again != found["learner"]:
            kill("learner", again, record)
        return record
    if kind == "kill_rollouts":
        found = kids()
        record["at"] = time.time()
        for name in sorted(n for n in found if n.startswith("rollout-")):
            kill(name, found[name], record)
        return record
    # parts at one instant: every target drawn before any signal (a stopped broker answers no
    # ``arena status``), then the signals back to back
    found = kids()
    parts: list[tuple[str, str]] = []
    for part in kind.split("+"):
        action, role = part.split("_", 1)
        if action == "stop" and role != "broker":
            # a hang is of an actor on the bus (one still starting has no heartbeat to miss)
            names = [n for n in on_bus() if n.startswith(role)]
        else:
            names = sorted(n for n in found if n.startswith(role))
        parts.append((action, rng.choice(names)))
    record["at"] = time.time()
    for action, name in parts:
        if action == "kill":
            kill(name, found[name], record)
        else:
            stop(name, found[name], record["at"] + rng.uniform(*stop_seconds), record)
    return record
