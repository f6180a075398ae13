"""OpenSpiel's MCTS bot on the native Connect Four and on an adapted game.

Run with ``.venv/bin/python -m pytest -q tests/games/bots/test_mcts_bot.py``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspiel")

import games  # noqa: E402
from games.bots.mcts import MCTSBot  # noqa: E402
from games.bots.random_bot import RandomBot  # noqa: E402
from games.play import play_game  # noqa: E402


def test_mcts_beats_random_at_connect_four() -> None:
    env, wins, games_played = games.make("connect-four-v0"), 0, 50
    for seed in range(games_played):
        mcts, rand = MCTSBot(simulations=50, seed=seed), RandomBot(seed=10_000 + seed)
        mine = f"player_{seed % 2}"  # alternate who moves first
        seats = {mine: mcts, f"player_{1 - seed % 2}": rand}
        wins += play_game(env, seats, seed=seed).returns[mine] > 0
    assert wins >= 0.9 * games_played


def test_mcts_plays_adapted_games_and_takes_a_win() -> None:
    env = games.make("openspiel-tic_tac_toe-v0")
    env.reset(seed=0)
    for cell in (0, 3, 1, 4):  # x has 0 and 1, o has 3 and 4
        env.step(cell)
    assert MCTSBot(simulations=100, seed=0).act(env, "player_0") == 2


def test_mcts_refuses_hidden_information() -> None:
    env = games.make("kuhn-poker-v0")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="perfect-information"):
        MCTSBot(seed=0).act(env, "player_0")
