"""bench/studies/ttt_tabular.py: the table moves as the per-state step asks, by hand-computed
numbers, and the study runs to its JSON line.

Run with ``.venv/bin/python -m pytest -q tests/bench/test_ttt_tabular.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.studies.ttt_tabular import per_state_step, probabilities
from games.tictactoe import Board
from tests.cli import bench_line

ROOT = Path(__file__).resolve().parents[2]


def test_a_position_moves_by_its_replies_mean_advantage_gap() -> None:
    """The opening, seen three times: move 0 won and lost, move 2 won. Mean return 1/3, so the
    advantages are 2/3 and -4/3 (move 0: mean -1/3) and 2/3 (move 2); an unplayed move's mean
    is 0. dz_a = 0.1 * (mean_a - mean_0): 0.1 for move 2, 0.1/3 for every other. A position
    seen once is left alone."""
    opening, after = Board(), Board().play(4)
    turns = [(opening, 0, 1.0), (opening, 0, -1.0), (opening, 2, 1.0), (after, 3, 1.0)]
    table: dict[Board, np.ndarray] = {}
    assert per_state_step(table, turns, eta=0.1, max_move=0.5, min_visits=2) == 1
    want = np.full(9, 0.1 / 3)
    want[0], want[2] = 0.0, 0.1
    np.testing.assert_allclose(table[opening], want, atol=1e-12)
    assert after not in table
    np.testing.assert_allclose(probabilities(table, after), np.full(8, 1 / 8))
    per_state_step(table, turns, eta=10.0, max_move=0.5, min_visits=2)  # the clip
    assert table[opening][2] == pytest.approx(0.1 + 0.5)


def test_the_bench_ends_with_its_json_line() -> None:
    out = bench_line("studies/ttt_tabular.py", "--games", "4", "--steps", "8", "--eval-games", "20")
    assert out["bench"] == "ttt_tabular"
    assert [c["step"] for c in out["runs"][0]["curve"]] == [0, 8]
    assert out["budget_8_games_8_steps"] is None
