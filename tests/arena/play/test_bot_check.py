"""arena/play/bot_check.py: a bot is made to play one game before anything starts; what stops
it is named, the bot's fault or the game's.

Run with ``.venv/bin/python -m pytest -q tests/arena/play/test_bot_check.py``.
"""

from __future__ import annotations

from typing import Any

import games
import games.bots
from arena.play.bot_check import cannot_play
from arena.play.config import GameConfig
from games.tictactoe import TicTacToe


class Buggy(TicTacToe):
    """Tic-Tac-Toe whose own code raises on the third move: a broken plugin game."""

    def _apply(self, agent: str, action: int) -> Any:
        if self.turn >= 2:
            raise KeyError("the board has no such cell")
        return super()._apply(agent, action)


def test_a_game_that_raises_is_named_as_the_games_fault_not_the_bots() -> None:
    # It read "participant 'a' (bot random-v0) cannot play buggy-ttt-v0: KeyError: ...", the
    # bot blamed for a plugin game's bug.
    assert cannot_play(lambda: games.bots.make("random-v0"), GameConfig("tictactoe-v0")) is None
    games.registry.register("buggy-ttt-v0", Buggy)
    try:
        found = cannot_play(lambda: games.bots.make("random-v0"), GameConfig("buggy-ttt-v0"))
    finally:
        del games.registry._entries["buggy-ttt-v0"]
    assert found == "the game itself failed, not the bot: KeyError: 'the board has no such cell'"
    # a bot that cannot play is still the bot's fault
    assert cannot_play(
        lambda: games.bots.make("minimax-v0"), GameConfig("kuhn-poker-v0")
    ).startswith("TypeError: ")
