"""Tic-Tac-Toe positions with known outcomes.

Run with ``.venv/bin/python -m pytest -q tests/games/test_tictactoe.py``.
"""

from __future__ import annotations

import pytest

from games.bots.minimax import AlphaBetaBot
from games.tictactoe import Board, TicTacToe


def play(cells: list[int]) -> TicTacToe:
    env = TicTacToe()
    env.reset(seed=0)
    for cell in cells:
        env.step_text(str(cell))
    return env


@pytest.mark.parametrize(
    ("moves", "winner"),
    [
        ([1, 4, 2, 5, 3], "player_0"),  # top row
        ([1, 2, 4, 3, 7], "player_0"),  # left column
        ([2, 1, 3, 5, 4, 9], "player_1"),  # O's diagonal
        ([1, 2, 5, 3, 9], "player_0"),  # X's diagonal
    ],
)
def test_wins(moves: list[int], winner: str) -> None:
    env = play(moves)
    loser = next(a for a in env.possible_agents if a != winner)
    assert env.termination_reason == "win"
    assert env.returns == {winner: 1.0, loser: -1.0}
    assert env.turn == len(moves)


def test_draw() -> None:
    env = play([1, 2, 3, 5, 4, 6, 8, 7, 9])
    assert env.termination_reason == "draw"
    assert env.returns == {"player_0": 0.0, "player_1": 0.0}


def test_minimax_blocks_and_wins() -> None:
    bot = AlphaBetaBot(seed=0)
    # X threatens 1-2-3; O to move must block at 3
    assert bot.best_moves(Board((1, 1, 0, 0, 2, 0, 0, 0, 0))) == [2]
    # X to move with two in a column takes the win at 7 rather than anything else
    assert bot.best_moves(Board((1, 2, 2, 1, 0, 0, 0, 0, 0))) == [6]
    # the empty board is a draw: every move keeps it, the bot prefers none that lose
    assert set(bot.best_moves(Board())) <= set(range(9))


def test_perfect_play_is_a_draw() -> None:
    env, bot = TicTacToe(), AlphaBetaBot(seed=1)
    env.reset(seed=0)
    while not env.is_over:
        env.step(bot.act(env, env.agent_selection))
    assert env.termination_reason == "draw"


def test_text_and_observation() -> None:
    env = play([5])
    text = env.observe("player_1")["text"]
    assert "You play O" in text and "4 | X | 6" in text and "Legal actions: 1, 2, 3, 4, 6" in text
    obs = env.observe("player_1")["observation"]
    assert obs[1, 1, 1] == 1 and obs[1, 1, 0] == 0 and obs.sum() == 1
    assert env.parse_action("player_1", " 7 ") == 6
    assert env.parse_action("player_1", "0") is None and env.parse_action("player_1", "10") is None
    assert env.parse_action("player_1", "7.") is None


def test_playing_a_taken_cell_is_invalid_with_a_reason() -> None:
    env = play([5, 5])
    assert env.infos["player_1"]["invalid_reason"] == "cell 5 is already taken"
