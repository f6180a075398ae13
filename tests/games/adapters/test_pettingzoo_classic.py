"""The PettingZoo classic adapter: seat names, cell and move text, hidden simultaneous moves.

Run with ``.venv/bin/python -m pytest -q tests/games/adapters/test_pettingzoo_classic.py``.
"""

from __future__ import annotations

import sys

import pytest

from games.adapters.pettingzoo_classic import PettingZooClassic


def test_tictactoe_cells_are_numbered_row_by_row() -> None:
    env = PettingZooClassic("tictactoe")
    env.reset(seed=0)
    assert env.possible_agents == ["player_0", "player_1"]
    env.step_text("2")  # top middle; PettingZoo numbers it 3 (column-major)
    assert env.inner.board.squares[3] == 1
    assert "X | 2 | 3" not in env.observe("player_1")["text"]
    assert "1 | X | 3" in env.observe("player_1")["text"]
    for cell in ("4", "5", "1", "8"):  # X completes 2, 5, 8: the middle column
        env.step_text(cell)
    assert env.returns == {"player_0": 1.0, "player_1": -1.0}


def test_tictactoe_lists_the_legal_cells_in_order() -> None:
    # PettingZoo's column-major action order listed them "1, 7, 5, 8, 3, 6, 9"
    env = PettingZooClassic("tictactoe")
    env.reset(seed=0)
    env.step_text("2")
    env.step_text("4")
    assert "Legal actions: 1, 3, 5, 6, 7, 8, 9\n" in env.observe("player_0")["text"]


def test_connect_four_columns() -> None:
    env = PettingZooClassic("connect_four")
    env.reset(seed=0)
    for col in "1212121":
        env.step_text(col)
    assert env.termination_reason == "win" and env.returns["player_0"] == 1.0


def test_rps_hides_the_first_choice_until_the_round_ends() -> None:
    texts = []
    for move in ("rock", "paper"):
        env = PettingZooClassic("rps")
        env.reset(seed=0)
        env.step_text(move)
        texts.append(env.observe("player_1")["text"])
    assert texts[0] == texts[1]
    env.step_text("scissors")  # paper vs scissors
    assert env.rewards == {"player_0": -1.0, "player_1": 1.0}
    assert "player_0 PAPER, player_1 SCISSORS" in env.observe("player_0")["text"]


def test_chess_moves_in_uci() -> None:
    pytest.importorskip("chess")
    env = PettingZooClassic("chess")
    env.reset(seed=0)
    for move in ("f2f3", "e7e5", "g2g4"):
        env.step_text(move)
    assert env.parse_action("player_1", "e2e4") is None  # not a move black can make
    env.step_text("D8H4")
    assert env.termination_reason == "win"  # fool's mate
    assert env.returns == {"player_0": -1.0, "player_1": 1.0}


def test_chess_rules_state_the_turn_limit_that_ends_a_game() -> None:
    pytest.importorskip("chess")
    # the rules said "Standard rules", yet max_turns stops a game, with no winner
    env = PettingZooClassic("chess", max_turns=2)
    assert "a game still on after 2 moves in all (both sides' together) ends there" in env.rules()
    env.reset(seed=0)
    for move in ("e2e4", "e7e5"):
        env.step_text(move)
    assert env.termination_reason == "max_turns"
    assert env.returns == {"player_0": 0.0, "player_1": 0.0}


def test_pygame_is_not_needed_and_not_faked_outside() -> None:
    PettingZooClassic("tictactoe")
    assert "pygame" not in sys.modules or hasattr(sys.modules["pygame"], "__file__")


def test_unknown_games_are_refused() -> None:
    with pytest.raises(ValueError, match="tictactoe"):
        PettingZooClassic("go")
