"""Iterated Prisoner's Dilemma: payoffs per round, and simultaneous moves the AEC way.

Run with ``.venv/bin/python -m pytest -q tests/games/test_prisoners_dilemma.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from games.prisoners_dilemma import PrisonersDilemma


def test_payoffs_are_paid_when_the_round_completes() -> None:
    env = PrisonersDilemma(rounds=3)
    env.reset(seed=0)
    env.step_text("defect")
    assert env.rewards == {"player_0": 0.0, "player_1": 0.0}
    env.step_text("cooperate")
    assert env.rewards == {"player_0": 5.0, "player_1": 0.0}
    for move in ("cooperate", "cooperate", "defect", "defect"):
        env.step_text(move)
    assert env.returns == {"player_0": 9.0, "player_1": 4.0}
    assert env.termination_reason == "win" and env.turn == 6


def test_the_second_seat_cannot_see_the_first_seats_choice() -> None:
    views = []
    for first in ("cooperate", "defect"):
        env = PrisonersDilemma(rounds=2)
        env.reset(seed=0)
        env.step_text(first)
        views.append(env.observe("player_1"))
        assert f"Your choice this round: {first}" in env.observe("player_0")["text"]
    assert views[0]["text"] == views[1]["text"]
    assert np.array_equal(views[0]["observation"], views[1]["observation"])


def test_both_choices_are_shown_after_the_round() -> None:
    env = PrisonersDilemma(rounds=2)
    env.reset(seed=0)
    env.step_text("defect")
    env.step_text("cooperate")
    assert "Round 1: player_0 defect, player_1 cooperate" in env.observe("player_1")["text"]


@pytest.mark.parametrize("rounds", [0, 2.5, "x"])
def test_rounds_that_are_not_a_positive_whole_number_are_refused_naming_them(
    rounds: object,
) -> None:
    # 2.5 failed inside gymnasium's Box, "x" with "'<' not supported between str and int"
    with pytest.raises(ValueError) as err:
        PrisonersDilemma(rounds=rounds)
    assert str(err.value) == f"rounds must be a whole number >= 1, got {rounds!r}"
