"""The trial game of :func:`arena.play.bot_check.cannot_play`: what it says of a bot that plays
an illegal move, never answers, or of a game that never ends or whose own code raises (the
game's fault, not the bot's).

Run with ``.venv/bin/python -m pytest -q tests/arena/play/test_bot_check.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import games
import games.bots
from arena.play.bot_check import cannot_play
from arena.play.config import MAX_EPISODE_TURNS, GameConfig
from games.bots.base import Bot
from games.bots.random_bot import RandomBot
from games.text_env import TextGame
from games.tictactoe import TicTacToe
from tests.games.test_conformance import Endless


class Stuck(Bot):
    """Waits for an event nobody sets: a plugin bot that never answers."""

    released = threading.Event()

    def act(self, env: TextGame, agent: str) -> int:
        self.released.wait()
        return env.legal_actions(agent)[0]


class Cell10(Bot):
    def act(self, env: TextGame, agent: str) -> int:
        return 9


class Buggy(TicTacToe):
    """Tic-Tac-Toe whose own code raises on the third move: a broken plugin game."""

    def _apply(self, agent: str, action: int) -> Any:
        if self.turn >= 2:
            raise KeyError("the board has no such cell")
        return super()._apply(agent, action)


@pytest.fixture
def endless() -> Iterator[str]:
    games.registry.register("endless-test-v0", Endless)
    try:
        yield "endless-test-v0"
    finally:
        del games.registry._entries["endless-test-v0"]


def test_a_bot_that_plays_the_game_passes() -> None:
    assert cannot_play(lambda: RandomBot(1), GameConfig("tictactoe-v0")) is None


def test_an_illegal_move_is_named() -> None:
    failed = cannot_play(Cell10, GameConfig("tictactoe-v0"))
    assert failed is not None and failed.startswith(
        "IllegalMove: Cell10 played 9, not a legal action of player_0 in tictactoe_v0"
    )


def test_a_game_that_never_ends_stops_the_trial_at_the_episode_bound(endless: str) -> None:
    # the trial ran forever: arena eval, arena tournament and arena train --dry-run hung
    assert cannot_play(lambda: RandomBot(1), GameConfig(endless)) == (
        f"the trial game (seed 0, against random-v0) is not over after {MAX_EPISODE_TURNS} "
        "turns, the bound on one episode: a game that never ends (max_turns 1000000000)"
    )


def test_a_bot_that_never_answers_is_named_after_the_timeout() -> None:
    # a bot whose act never returned held the command forever, saying nothing
    start = time.monotonic()
    try:
        failed = cannot_play(Stuck, GameConfig("tictactoe-v0"), timeout=0.3)
    finally:
        Stuck.released.set()  # let the trial's thread finish
    assert time.monotonic() - start < 5
    assert failed == (
        "the trial game (seed 0, against random-v0) was still playing after 0.3 s: a bot that "
        "never answers? (last to move: player_0, Stuck)"
    )


def test_a_game_that_raises_is_named_as_the_games_fault_not_the_bots() -> None:
    # It read "participant 'a' (bot random-v0) cannot play buggy-ttt-v0: KeyError: ...", the
    # bot blamed for a plugin game's bug.
    games.registry.register("buggy-ttt-v0", Buggy)
    try:
        found = cannot_play(lambda: games.bots.make("random-v0"), GameConfig("buggy-ttt-v0"))
    finally:
        del games.registry._entries["buggy-ttt-v0"]
    assert found == "the game itself failed, not the bot: KeyError: 'the board has no such cell'"
    # a bot that cannot play is still the bot's fault
    failed = cannot_play(lambda: games.bots.make("minimax-v0"), GameConfig("kuhn-poker-v0"))
    assert failed is not None and failed.startswith("TypeError: ")
