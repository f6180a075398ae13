"""Alpha-beta: exact on Tic-Tac-Toe, depth-limited on Connect Four.

Run with ``.venv/bin/python -m pytest -q tests/games/bots/test_minimax_bot.py``.
"""

from __future__ import annotations

import pytest

from games.bots.minimax import AlphaBetaBot
from games.bots.random_bot import RandomBot
from games.connect_four import Board as C4Board
from games.connect_four import ConnectFour
from games.play import play_game
from games.tictactoe import TicTacToe


def c4(columns: list[int]) -> C4Board:
    board = C4Board()
    for col in columns:
        board = board.play(col - 1)
    return board


def test_depth_limited_search_takes_a_win_and_blocks_a_loss() -> None:
    bot = AlphaBetaBot(depth=4, seed=0)
    assert bot.best_moves(c4([1, 2, 1, 2, 1, 3])) == [0]  # X wins on column 1
    assert bot.best_moves(c4([1, 7, 2, 7, 3])) == [3]  # O must block column 4
    # X has 3 and 4 on the bottom row with 2 and 5 open: X to move makes the open three
    assert set(bot.best_moves(c4([3, 3, 4, 4]))) <= {1, 4}


def test_exact_search_never_loses_tictactoe() -> None:
    env = TicTacToe()
    for seed in range(10):
        search, rand = AlphaBetaBot(seed=seed), RandomBot(seed=seed)
        seats = (
            {"player_0": search, "player_1": rand}
            if seed % 2
            else {"player_0": rand, "player_1": search}
        )
        outcome = play_game(env, seats, seed=seed)
        mine = "player_0" if seed % 2 else "player_1"
        assert outcome.returns[mine] >= 0


def test_depth_limited_search_beats_random_at_connect_four() -> None:
    env = ConnectFour()
    wins = 0
    for seed in range(4):
        seats = {"player_0": AlphaBetaBot(depth=2, seed=seed), "player_1": RandomBot(seed=seed)}
        wins += play_game(env, seats, seed=seed).returns["player_0"] > 0
    assert wins == 4


def test_games_without_a_position_are_refused() -> None:
    from games.kuhn_poker import KuhnPoker

    env = KuhnPoker()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="position"):
        AlphaBetaBot().act(env, "player_0")
