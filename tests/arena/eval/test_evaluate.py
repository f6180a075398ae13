"""Evaluation statistics and the before/after summary, against hand-computed values.

Run with ``.venv/bin/python -m pytest -q tests/arena/eval/test_evaluate.py``.
"""

from __future__ import annotations

import math

import pytest

from arena.eval.evaluate import game_score, mean_ci, wilson
from arena.eval.summary import before_after
from arena.records import Episode, SeatAssignment


def test_wilson_interval_by_hand() -> None:
    # p = 0.5, n = 100, z = 1.96: centre 0.5, half = 1.96*sqrt(0.25/100 + 1.96^2/40000)/(1+1.96^2/100)
    low, high = wilson(50, 100)
    half = 1.959964 * math.sqrt(0.0025 + 1.959964**2 / 40000) / (1 + 1.959964**2 / 100)
    assert (low, high) == pytest.approx((0.5 - half, 0.5 + half))
    assert wilson(0, 10)[0] == 0.0 and 0.0 < wilson(0, 10)[1] < 0.35
    assert wilson(0, 0) == (0.0, 1.0)


def test_mean_interval_by_hand() -> None:
    # values 0, 1, 1, 1: mean 0.75, sample sd 0.5, half = 1.96 * 0.5 / 2 = 0.49
    assert mean_ci([0.0, 1.0, 1.0, 1.0]) == pytest.approx((0.26, 1.0), abs=1e-3)
    assert mean_ci([1.0]) == (0.0, 1.0)


def _episode(rewards: dict[str, float]) -> Episode:
    seats = {s: SeatAssignment("player", "main") for s in rewards}
    return Episode(id="e", game="g", seed=0, seats=seats, final_rewards=rewards)


def test_game_score_handles_n_players_and_ties() -> None:
    assert game_score(_episode({"a": 1.0, "b": -1.0}), "a") == 1.0
    assert game_score(_episode({"a": 0.0, "b": 0.0}), "b") == 0.5
    assert game_score(_episode({"a": 2.0, "b": 2.0, "c": -4.0}), "a") == 0.5
    assert game_score(_episode({"a": -1.0, "b": 3.0, "c": -2.0}), "a") == 0.0


def test_summary_flags_changes_beyond_the_before_interval() -> None:
    def result(
        invalid: float, invalid_ci: list[float], score: float, score_ci: list[float]
    ) -> dict:
        return {
            "game": "g",
            "opponent": "random-v0",
            "games": 200,
            "invalid_rate": invalid,
            "invalid_ci": invalid_ci,
            "score": score,
            "score_ci": score_ci,
        }

    before = [result(0.6, [0.55, 0.65], 0.30, [0.25, 0.35])]
    after = [result(0.4, [0.35, 0.45], 0.34, [0.29, 0.39])]
    row = before_after(before, after)["g"]
    assert row["invalid_rate_improved"] is True  # 0.4 < 0.55
    assert row["score_improved"] is False  # 0.34 is inside [0.25, 0.35]
    assert row["games_per_eval"] == 200 and row["score_vs_random_before_ci"] == [0.25, 0.35]
