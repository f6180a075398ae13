"""`arena train` on the role-game configs: each passes ``--dry-run`` and trains 2 steps with the
tiny model, through real processes, as a user would run it.

The overrides shrink each shipped config to the tiny model and a handful of episodes; the game,
its seats, roles, simulators and advantage settings stay those of the config.

Run with `.venv/bin/python -m pytest -q tests/arena/commands/test_train_role_games.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import arena

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ["mae", "ssp", "user_tool_use", "planner_executor"]
TINY = [
    "model=tiny",
    "steps=2",
    "checkpoint_every=1",
    "inference.dtype=float32",
    "inference.max_wait_ms=10",
    "rollout.actors=1",
    "rollout.concurrency=8",
    "rollout.episodes_per_step=4",
    "sampling.max_new_tokens=8",
    "eval.games=2",
    "eval.concurrency=8",
    "learner.batch.filter_zero_advantage=false",
    "learner.batch.filter_overlong=false",
    "learner.batch.micro_batch_tokens=4096",
    "learner.optim.lr=1e-4",
    "bus.heartbeat_interval=0.5",
]


@pytest.mark.parametrize("name", CONFIGS)
def test_the_config_passes_dry_run(name: str) -> None:
    done = arena("train", f"configs/{name}.yaml", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"run {name!r}" in done.stdout


@pytest.mark.e2e
@pytest.mark.parametrize("name", CONFIGS)
def test_the_config_trains_two_steps_with_the_tiny_model(tmp_path: Path, name: str) -> None:
    done = arena("train", f"configs/{name}.yaml", f"output_dir={tmp_path}", *TINY)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / name).iterdir()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all("learner/loss" in r for r in rows)
    evals = [json.loads(line) for line in (run_dir / "evals.jsonl").read_text().splitlines()]
    role_rows = [row for e in evals if "roles" in e for row in e["roles"]]
    assert role_rows, "every role of the role game is evaluated before and after"
    assert {r["label"] for r in evals if "roles" in r} >= {"before", "after"}
