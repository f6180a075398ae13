"""The TextArena adapter: transcripts, legal bracketed moves, isolation of global randomness.

Run with ``.venv/bin/python -m pytest -q tests/games/adapters/test_textarena.py``.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("textarena")

from games.adapters.textarena import TextArenaGame  # noqa: E402


def test_moves_are_bracketed_and_checked_against_the_board() -> None:
    env = TextArenaGame("TicTacToe-v0-raw")
    env.reset(seed=0)
    assert env.parse_action("player_0", " [ 4 ] ") == "[4]"
    assert env.parse_action("player_0", "4") is None
    env.step_text("[4]")
    env.step_text("[4]")  # taken: Arena's policy, not TextArena's, records it
    assert env.infos["player_1"]["invalid"] and env.agent_selection == "player_1"
    assert "[Player 0] [4]" in env.observe("player_1")["text"]


def test_a_game_plays_to_the_end_with_textarena_rewards() -> None:
    env = TextArenaGame("Nim-v0-raw")
    env.reset(seed=0)
    for move in ("[0 3]", "[1 4]", "[2 5]"):
        env.step_text(move)
    assert env.termination_reason == "win"
    assert env.returns == {"player_0": 1.0, "player_1": -1.0}


def test_global_random_state_is_left_alone_and_seeds_replay() -> None:
    random.seed(123)
    expected = random.random()
    random.seed(123)
    env = TextArenaGame("KuhnPoker-v0-raw")
    env.reset(seed=7)
    cards = dict(env.inner.state.game_state["player_cards"])
    assert random.random() == expected
    env.reset(seed=7)
    assert env.inner.state.game_state["player_cards"] == cards
