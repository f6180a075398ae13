"""Simulators that fail, through real `arena eval` and `arena train` processes: an episode they
end is an error of its evaluation row and a dropped episode of its training step, shown on the
console and in ``events.log``, and the run goes on (exit 0). A run in which every episode fails
stops after ``rollout.max_empty_steps`` steps in a row with nothing to train on, with one line
naming the reason (exit 1); a simulator that refuses its kwargs is a config error (exit 2).

The probe simulators are a plugin installed as a real distribution (a module plus a
``dist-info`` with ``entry_points.txt``, found by ``importlib.metadata`` through
``PYTHONPATH``), as a user's own simulator would be:

- ``probe-raises-v0`` raises on every reply;
- ``probe-nonstring-v0`` replies 42, not text;
- ``probe-flaky-v0`` raises in every second episode its process plays, else replies as the
  scripted user does.

Run with `.venv/bin/python -m pytest -q tests/arena/commands/test_simulator_errors.py`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

PROBES = """
import itertools

from simulators.base import Simulator
from simulators.scripted_user import reply

EPISODES = itertools.count()


class Raises(Simulator):
    def __init__(self, **kwargs):
        super().__init__()

    async def respond(self, view):
        raise RuntimeError("probe says no")


class NonString(Simulator):
    def __init__(self, **kwargs):
        super().__init__()

    async def respond(self, view):
        return 42


class Flaky(Simulator):
    def __init__(self, **kwargs):
        super().__init__()
        self.fails = next(EPISODES) % 2 == 1

    async def respond(self, view):
        if self.fails:
            raise RuntimeError("flaky probe failed this episode")
        return reply(view.context, view.history, view.seat)
"""

ENTRY_POINTS = """\
[arena.simulators]
probe-raises-v0 = arena_probes:Raises
probe-nonstring-v0 = arena_probes:NonString
probe-flaky-v0 = arena_probes:Flaky
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("site")
    (site / "arena_probes.py").write_text(textwrap.dedent(PROBES))
    info = site / "arena_probes-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: arena-probes\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    path = [str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def arena(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "arena", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )


@pytest.mark.e2e
def test_arena_eval_counts_a_failing_simulator_as_errors_of_its_row(env: dict[str, str]) -> None:
    for probe, reason in (
        ("probe-raises-v0", "simulator probe-raises-v0 failed: RuntimeError('probe says no')"),
        ("probe-nonstring-v0", "simulator probe-nonstring-v0 returned int, not str"),
    ):
        done = arena(
            env,
            "eval",
            "tiny",
            "--games",
            "retail-v0",
            "--n",
            "2",
            "--simulator",
            f"user={probe}",
        )
        assert done.returncode == 0, done.stderr[-3000:]
        lines = done.stdout.splitlines()
        # the user is simulated, so only the agent is evaluated, and the line says by whom
        assert f"retail-v0 agent: user = simulator {probe}" in lines
        (row,) = [line for line in lines if line.startswith("retail-v0 executor-v0 (agent)")]
        assert row.startswith("retail-v0 executor-v0 (agent): every episode failed  2 errors")
        assert reason in row


@pytest.mark.e2e
def test_arena_eval_on_retail_without_simulators_uses_the_games_reference_user(
    env: dict[str, str], tmp_path: Path
) -> None:
    # the command of the issue, which crashed: the agent bot was asked to play the user
    out = tmp_path / "retail.json"
    done = arena(
        env,
        "eval",
        "tiny",
        "--games",
        "retail-v0",
        "--n",
        "2",
        "--tries",
        "2",
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    # no simulator named: both seats are evaluated; the agent against the game's reference
    # user, the user against the game's strongest bot (the scripted agent)
    assert "retail-v0 agent: user = simulator scripted-user-v0" in lines
    assert "retail-v0 user: agent = bot retail-agent-v0" in lines
    rows = json.loads(out.read_text())
    assert {(r["seat"], r["errors"]) for r in rows} == {("agent", 0), ("user", 0)}
    success = [r for r in rows if r["metric"] == "success"]
    assert [(r["seat"], r["episodes"], sorted(r["pass_k"])) for r in success] == [
        ("user", 4, ["1", "2"]),  # JSON keys
        ("agent", 4, ["1", "2"]),
    ]
    refused = arena(env, "eval", "tiny", "--games", "retail-v0", "--simulator", "agent=x")
    assert refused.returncode == 2
    assert "seat 'agent' of retail-v0 cannot be simulated; its simulatable seats: ['user']" in (
        refused.stderr
    )


@pytest.mark.e2e
def test_arena_train_shows_dropped_episodes_and_evaluates_the_roles(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = arena(
        env,
        "train",
        "configs/smoke_tools.yaml",
        f"output_dir={tmp_path}",
        "steps=1",
        "rollout.actors=1",
        "rollout.episodes_per_step=8",
        "eval.games=2",
        "games.0.simulators.user.id=probe-flaky-v0",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "smoke_tools").iterdir()
    (step,) = [line for line in done.stdout.splitlines() if line.startswith("step 1/1")]
    row = json.loads((run_dir / "metrics.jsonl").read_text())
    failed = row["episodes_failed"]
    # every second one at least, shown as failed of the step's episodes
    assert failed >= 4 and step.endswith(f"failed {failed}/{failed + row['episodes']}")
    events = (run_dir / "events.log").read_text()
    assert f"step 1: {failed} episodes failed and were dropped; the first: " in events
    assert "simulator probe-flaky-v0 failed: RuntimeError('flaky probe failed" in events
    # the evaluation before and after: the agent's metrics, its failed episodes counted
    assert "eval before: retail-v0 agent: user = simulator probe-flaky-v0" in done.stdout
    summary = json.loads((run_dir / "eval_summary.json").read_text())
    entries = summary["retail-v0"]["roles"]
    assert {e["seat"] for e in entries} == {"agent"}
    success = next(e for e in entries if e["metric"] == "success")
    assert success["errors_before"] + success["episodes_before"] == 2
    assert success["errors_before"] >= 1
    table = (run_dir / "eval_summary.md").read_text()
    assert "| retail-v0 | executor-v0 (agent) | success |" in table
    assert "eval before 0/0" not in done.stdout


@pytest.mark.e2e
def test_arena_train_stops_in_one_line_when_every_episode_fails(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = arena(
        env,
        "train",
        "configs/smoke_tools.yaml",
        f"output_dir={tmp_path}",
        "steps=5",
        "rollout.actors=1",
        "rollout.episodes_per_step=2",
        "rollout.max_restarts=0",  # no second order of the failed episodes within a step
        "rollout.max_empty_steps=2",
        "eval.games=0",
        "eval.exploitability=false",
        "games.0.simulators.user.id=probe-raises-v0",
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert "Traceback" not in output
    (run_dir,) = (tmp_path / "smoke_tools").iterdir()
    reason = "simulator probe-raises-v0 failed: RuntimeError('probe says no')"
    (line,) = [x for x in done.stderr.splitlines() if x.strip()]
    assert line.startswith(
        "arena train: stopped after 2 steps in a row with no turn to train on: every episode "
        "failed (2/2); the first: retail-v0 episode "
    )
    assert reason in line and f"read {run_dir / 'events.log'}" in line
    # each empty step is shown like a step, with its reason on the console and in events.log
    steps = [x for x in done.stdout.splitlines() if x.startswith("step 1/5")]
    assert steps == ["step 1/5  no update: no turn to train on  failed 2/2"] * 2
    events = (run_dir / "events.log").read_text()
    assert events.count(reason) == 2
    assert "step 1: no turn to train on (2 in a row; the run stops after 2" in events
    # the step collected again plays fresh episodes: the same seeds replayed the same ones,
    # which the learner drops as duplicates, so no retry could ever train
    firsts = re.findall(r"the first: retail-v0 episode (\S+):", " ".join(events.split()))
    assert len(firsts) == 2 and firsts[0] != firsts[1], firsts
    assert reason in " ".join(done.stdout.split())  # the console wraps long lines
    assert not (run_dir / "metrics.jsonl").exists()  # no step was trained


def test_arena_train_refuses_a_simulator_that_refuses_its_kwargs(env: dict[str, str]) -> None:
    done = arena(
        env,
        "train",
        "configs/smoke_tools.yaml",
        "--dry-run",
        "games.0.simulators.user.kwargs.bogus=1",
    )
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = [x for x in done.stderr.splitlines() if x.strip()]
    assert line.startswith(
        "arena train: bad config: games[retail-v0].simulators.user: scripted-user-v0 refuses "
        "kwargs {'latency': 0.5, 'bogus': 1}: "
    )
