"""A plugin bot that plays an action that is not legal, and a plugin game whose observation is
not text, through real `arena play`, `arena tournament` and `arena train --dry-run` processes:
each named in one line, never a traceback.

The bot and the game are a plugin installed as a real distribution (a module plus a ``dist-info`` with
``entry_points.txt``, found through ``PYTHONPATH``), as a user's own bot would be.

Run with `.venv/bin/python -m pytest -q tests/arena/commands/test_bot_errors.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tutorials import python

BOT = """
import numpy as np

from games.bots.base import Bot
from games.tictactoe import TicTacToe


class OffBoard(Bot):
    def act(self, env, agent):
        return 9  # tic-tac-toe's cells are 0-8


class NumericBoard(TicTacToe):
    def _describe(self, agent):
        return np.zeros(9)
"""

TOURNAMENT = """
participants:
  - {name: offboard, bot: off-board-v0}
  - {name: random, bot: random-v0}
games: [{id: tictactoe-v0}]
pairs: 1
"""

WHY = (
    "OffBoard played 9, not a legal action of player_0 in tictactoe_v0 (legal: 0 '1', 1 '2', "
    "2 '3', 3 '4', 4 '5', 5 '6', 6 '7', 7 '8', ... (9 in all))"
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    (site / "offboard.py").write_text(BOT)
    info = site / "offboard-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: offboard\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[arena.bots]\noff-board-v0 = offboard:OffBoard\n"
        "[arena.games]\nnumeric-board-v0 = offboard:NumericBoard\n"
    )
    return site


def test_arena_play_refuses_the_bot_before_the_game_starts(site: Path) -> None:
    done = python(
        site, "-m", "arena", "play", "tictactoe-v0", "--against", "off-board-v0", "--seat", "1"
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "arena play: bad config: participant 'off-board-v0' (bot off-board-v0) cannot play "
        f"tictactoe-v0: IllegalMove: {WHY}\n"
    )


def test_arena_play_stops_in_one_line_on_an_observation_that_is_not_text(site: Path) -> None:
    done = python(
        site, "-m", "arena", "play", "numeric-board-v0", "--against", "random-v0", stdin="quit\n"
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        "arena play: numeric-board-v0 stopped: TypeError: NumericBoard._describe('player_0') "
        "returned ndarray, not str: a seat's observation is text\n"
    )


def test_arena_train_refuses_a_game_whose_observation_is_not_text_before_it_starts(
    site: Path,
) -> None:
    config = str(Path(__file__).resolve().parents[3] / "configs" / "smoke.yaml")
    games = "games:=[{id: numeric-board-v0}]"
    done = python(site, "-m", "arena", "train", config, games, "--dry-run")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "arena train: bad config: games[numeric-board-v0]: its first observation (after "
        "reset(seed=0)) fails: TypeError: NumericBoard._describe('player_0') returned ndarray, "
        "not str: a seat's observation is text\n"
    )


def test_arena_tournament_refuses_it_before_the_first_match(site: Path, tmp_path: Path) -> None:
    config = tmp_path / "t.yaml"
    config.write_text(TOURNAMENT)
    done = python(site, "-m", "arena", "tournament", str(config), f"out={tmp_path / 'out'}")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "arena tournament: bad config: participant 'offboard' (bot off-board-v0) cannot play "
        f"tictactoe-v0: IllegalMove: {WHY}\n"
    )


def test_arena_eval_refuses_a_simulator_for_a_player_game() -> None:
    from arena.commands.eval_checks import refuse_simulated_player_games
    from arena.core.errors import ConfigError

    refuse_simulated_player_games(["retail-v0"], ["race-v0"])  # a role game takes it
    with pytest.raises(ConfigError) as err:
        refuse_simulated_player_games(["retail-v0", "race-v0"], ["race-v0", "nim-v0"])
    assert str(err.value) == (
        "--simulator: race-v0 is a player game, evaluated against --opponents in every seat; "
        "--simulator fills seats of role games (arena play --simulator plays against one)"
    )


def test_arena_eval_refuses_an_opponent_that_cannot_play_a_game(site: Path) -> None:
    # Before: each game failed in the evaluation, which then exited 0 ("every game failed").
    done = python(
        site, "-m", "arena", "eval", "random-v0", "--opponents", "off-board-v0",
        "--games", "tictactoe-v0", "--n", "2",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"arena eval: bad config: opponent off-board-v0 cannot play tictactoe-v0: IllegalMove: {WHY}\n"  # fmt: skip
    strongest = python(
        site, "-m", "arena", "eval", "random-v0", "--opponents", "strongest",
        "--games", "tictactoe-v0", "--n", "1",
    )  # fmt: skip
    assert strongest.returncode == 0, strongest.stderr
    assert "tictactoe-v0 vs minimax-v0: score" in strongest.stdout  # played, not refused


def test_arena_train_refuses_a_fixed_or_evaluation_bot_that_cannot_play_its_game(
    site: Path,
) -> None:
    config = str(Path(__file__).resolve().parents[3] / "configs" / "smoke.yaml")
    fixed = python(
        site, "-m", "arena", "train", config, "opponents.mode=fixed",
        "opponents.fixed=off-board-v0", "--dry-run",
    )  # fmt: skip
    assert fixed.returncode == 2, fixed.stderr
    assert fixed.stderr == (
        f"arena train: bad config: games[tictactoe-v0]: bot off-board-v0 cannot play it: "
        f"IllegalMove: {WHY}\n"
    )
    poker = python(site, "-m", "arena", "train", config, "eval.opponents=[minimax-v0]", "--dry-run")
    assert poker.returncode == 2, poker.stderr
    assert poker.stderr == (
        "arena train: bad config: games[kuhn-poker-v0]: bot minimax-v0 cannot play it: "
        "TypeError: AlphaBetaBot cannot play kuhn_poker_v0: it needs a game with a searchable "
        "position()\n"
    )
