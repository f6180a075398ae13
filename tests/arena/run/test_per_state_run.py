"""``arena train`` with the per-state step, as a user runs it: both games by choice, one LoRA
adapter, advantages per exact prompt; the learner's steps report the states they moved.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_per_state_run.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.e2e
def test_a_per_state_run_moves_its_states_step_by_step(tmp_path: Path) -> None:
    overrides = [
        "games.0.act=choice",
        "games.1.act=choice",
        "learner.lora.enabled=true",
        "learner.per_state.enabled=true",
        "learner.advantage.key=[game,agent,prompt]",
        "learner.advantage.scale_by_std=false",
        "rollout.episodes_per_step=32",
        "eval.games=0",
        f"run_dir={tmp_path}",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "arena", "train", "configs/smoke.yaml", *overrides],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "per-state step (eta=0.05" in done.stdout  # the plan says how the learner steps
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        # Kuhn's states repeat within 32 episodes: some are moved, each by one batched solve
        assert m["learner/per_state/states"] >= 1
        assert m["learner/per_state/rows"] >= m["learner/per_state/states"]
        assert m["learner/optimizer_steps"] == 1.0
        assert 0 < m["learner/per_state/target_move"] <= 0.5  # max_move caps every target
    assert "per-state step:" in done.stdout
