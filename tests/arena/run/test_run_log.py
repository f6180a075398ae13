"""The run log's console line for a learner step.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_run_log.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.run.config import load_run_config
from arena.run.run_log import RunLog, update_text

ROOT = Path(__file__).resolve().parents[3]


def test_a_step_shows_its_loss_and_entropy() -> None:
    assert update_text({"loss": -0.15649, "entropy": 0.4491, "samples": 24.0}) == (
        "loss -0.1565  entropy 0.449"
    )
    assert update_text({"loss": 0.5}) == "loss 0.5000"


def test_a_step_that_trained_nothing_says_why_instead_of_a_nan_loss() -> None:
    # A GRPO batch whose groups had no spread: every turn's advantage was 0.
    metrics = {"samples": 0.0, "filtered/zero_advantage": 64.0, "filtered/overlong": 0.0}
    assert update_text(metrics) == "no update (64 turns filtered: zero_advantage 64)"
    both = {"filtered/zero_advantage": 60.0, "filtered/stale": 4.0}
    assert update_text(both) == "no update (64 turns filtered: stale 4, zero_advantage 60)"
    assert update_text({}) == "no update"


def test_a_per_state_step_shows_its_states_move_and_entropy() -> None:
    metrics = {"per_state/states": 12.0, "per_state/target_move": 0.0523, "entropy": 0.4419}
    assert update_text(metrics) == "per-state step: 12 states, target move 0.052  entropy 0.442"
    # a step whose states were all seen once moved nothing: it says so like any other
    assert update_text({"per_state/states": 0.0}) == "no update"


def test_a_command_line_to_copy_is_printed_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The waiting message's command lines (arena/run/roster.py) once came out of a log cut at
    # 200 columns, "--keys" on one line and its directory on the next: pasted, the actor ran
    # without keys. A "[...]" in a path is no markup either.
    log = RunLog(tmp_path, load_run_config(ROOT / "configs" / "smoke.yaml"))
    line = (
        "  inference-pool serving policy:pool: arena inference --connect tcp://10.0.0.7:5555 "
        f"--config {'/shared/runs' * 12}/config.yaml --actor-name inference-pool "
        "--keys /shared/[team]/keys"
    )
    assert len(line) > 250
    capsys.readouterr()
    log.verbatim(f"waiting up to 600s for actors to join at tcp://10.0.0.7:5555:\n{line}")
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "waiting up to 600s for actors to join at tcp://10.0.0.7:5555:",
        line,
    ]
