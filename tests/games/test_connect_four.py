"""Connect Four wins in every direction, full columns, and agreement with OpenSpiel.

Run with ``.venv/bin/python -m pytest -q tests/games/test_connect_four.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from games.connect_four import Board, ConnectFour


def play(columns: list[int]) -> ConnectFour:
    env = ConnectFour()
    env.reset(seed=0)
    for col in columns:
        assert not env.is_over
        env.step_text(str(col))
        assert not env.infos[env.possible_agents[0]]["invalid"]
    return env


@pytest.mark.parametrize(
    ("columns", "winner"),
    [
        ([1, 2, 1, 2, 1, 2, 1], "player_0"),  # vertical in column 1
        ([1, 1, 2, 2, 3, 3, 4], "player_0"),  # horizontal on the bottom row
        ([7, 1, 2, 1, 3, 1, 4, 1], "player_1"),  # O vertical, X's row broken
        ([1, 2, 2, 3, 3, 4, 3, 4, 4, 7, 4], "player_0"),  # diagonal rising to the right
        ([7, 6, 6, 5, 5, 4, 5, 4, 4, 1, 4], "player_0"),  # diagonal rising to the left
    ],
)
def test_wins(columns: list[int], winner: str) -> None:
    env = play(columns)
    assert env.termination_reason == "win" and env.returns[winner] == 1.0
    assert sum(env.returns.values()) == 0.0


def test_no_win_before_four() -> None:
    env = play([1, 1, 2, 2, 3, 3])
    assert not env.is_over and env.board.winner is None


def test_a_full_column_is_illegal() -> None:
    env = play([3, 3, 3, 3, 3, 3])
    assert 2 not in env.legal_actions()
    env.step(2)
    assert env.infos["player_0"]["invalid_reason"] == "column 3 is full"


def test_full_board_draw() -> None:
    # columns filled in pairs, shifted so that no four ever line up
    order = [
        1,
        2,
        1,
        2,
        1,
        2,
        2,
        1,
        2,
        1,
        2,
        1,
        3,
        4,
        3,
        4,
        3,
        4,
        4,
        3,
        4,
        3,
        4,
        3,
        5,
        6,
        5,
        6,
        5,
        6,
        6,
        5,
        6,
        5,
        6,
        5,
        7,
        7,
        7,
        7,
        7,
        7,
    ]
    env = play(order)
    assert env.termination_reason == "draw" and env.turn == 42


def test_heuristic_prefers_the_side_with_more_open_lines() -> None:
    board = Board().play(3).play(0).play(3)  # X has two in the centre column, O one in a corner
    assert board.player == 1 and board.heuristic() < 0  # O to move is worse off


def test_native_game_matches_openspiel() -> None:
    pytest.importorskip("pyspiel")
    env, rng = ConnectFour(), np.random.default_rng(0)
    for seed in range(30):
        env.reset(seed=seed)
        while not env.is_over:
            state = env.openspiel_state()
            assert state.legal_actions() == env.legal_actions()
            env.step(int(rng.choice(env.legal_actions())))
        assert env.openspiel_state().returns() == [env.returns["player_0"], env.returns["player_1"]]
