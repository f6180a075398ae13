"""The OpenSpiel adapter: conversion rules, chance sampling, text actions, rewards.

Run with ``.venv/bin/python -m pytest -q tests/games/adapters/test_openspiel.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyspiel")

from games.adapters.openspiel import OpenSpielGame, UnsupportedGame, convertible_games  # noqa: E402


@pytest.mark.parametrize(
    ("game", "reason"),
    [
        ("goofspiel", "simultaneous"),
        ("matrix_pd", "simultaneous"),
        ("mfg_crowd_modelling", "mean-field"),
    ],
)
def test_unconvertible_games_say_why(game: str, reason: str) -> None:
    assert reason in convertible_games()[game]
    with pytest.raises(UnsupportedGame, match=reason):
        OpenSpielGame(game)


def test_most_sequential_games_convert() -> None:
    table = convertible_games()
    assert table["chess"] is None and table["kuhn_poker"] is None and table["hex"] is None
    assert sum(reason is None for reason in table.values()) > 60


def test_metadata_follows_the_game_type() -> None:
    assert OpenSpielGame("tic_tac_toe").metadata["information"] == "perfect"
    kuhn = OpenSpielGame("kuhn_poker")
    assert (kuhn.kind, kuhn.information, kuhn.zero_sum) == ("competitive", "hidden", True)
    assert kuhn.metadata["strongest_bot"] == "kuhn-nash-v0"
    assert OpenSpielGame("kuhn_poker", {"players": 3}).num_players == 3


def test_chance_is_sampled_from_the_seed() -> None:
    env = OpenSpielGame("kuhn_poker")
    deals = set()
    for seed in range(30):
        env.reset(seed=seed)
        deals.add(tuple(env.openspiel_state().history()[:2]))
        env.reset(seed=seed)
        assert tuple(env.openspiel_state().history()[:2]) in deals
    assert len(deals) == 6  # every deal of two of three cards turns up


def test_actions_read_as_openspiel_spells_them() -> None:
    env = OpenSpielGame("tic_tac_toe")
    env.reset(seed=0)
    assert env.action_to_text("player_0", 4) == "x(1,1)"
    assert env.parse_action("player_0", " X(1,1) ") == 4
    env.step(4)
    assert env.parse_action("player_1", "o(1,1)") == 4  # well-formed, now illegal
    env.step_text("o(1,1)")
    assert env.infos["player_1"]["invalid"]
    assert env.parse_action("player_1", "o(3,3)") is None


def test_rewards_are_the_change_in_returns() -> None:
    env = OpenSpielGame("kuhn_poker")
    env.reset(seed=0)
    env.step_text("Bet")
    assert env.rewards == {"player_0": 0.0, "player_1": 0.0}
    env.step_text("Pass")  # player_1 folds
    assert env.returns == {"player_0": 1.0, "player_1": -1.0}


def test_text_is_the_seats_information_state() -> None:
    env = OpenSpielGame("leduc_poker")
    env.reset(seed=0)
    state = env.openspiel_state()
    for player in (0, 1):
        assert state.information_state_string(player) in env.observe(f"player_{player}")["text"]
    obs = env.observe("player_0")["observation"]
    assert obs.dtype == np.float32 and obs.shape == (env.game.observation_tensor_size(),)
