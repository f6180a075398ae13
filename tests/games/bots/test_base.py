"""games.bots.base.legal_move: a bot's action that is not legal is named as the bot's bug.

Run with ``.venv/bin/python -m pytest -q tests/games/bots/test_base.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from games.bots.base import Bot, IllegalMove, legal_move
from games.text_env import TextGame
from games.tictactoe import TicTacToe


class Fixed(Bot):
    """Plays ``action`` whatever the position."""

    def __init__(self, action: object) -> None:
        super().__init__(seed=0)
        self.action = action

    def act(self, env: TextGame, agent: str) -> object:
        return self.action


def test_a_legal_action_is_returned_as_the_bot_gave_it() -> None:
    env = TicTacToe()
    env.reset(seed=0)
    assert legal_move(Fixed(4), env, "player_0") == 4
    assert legal_move(Fixed(np.int64(4)), env, "player_0") == 4


@pytest.mark.parametrize("action", [9, np.int64(9), None, "centre"])
def test_an_action_off_the_legal_list_names_the_bot_the_action_and_the_legal_ones(
    action: object,
) -> None:
    env = TicTacToe()
    env.reset(seed=0)
    env.step(4)  # player_0 takes the centre: player_1 may not
    with pytest.raises(IllegalMove) as err:
        legal_move(Fixed(action), env, "player_1")
    played = 9 if isinstance(action, np.integer) else action
    assert str(err.value) == (
        f"Fixed played {played!r}, not a legal action of player_1 in tictactoe_v0 (legal: "
        "0 '1', 1 '2', 2 '3', 3 '4', 5 '6', 6 '7', 7 '8', 8 '9')"
    )
    with pytest.raises(IllegalMove, match="Fixed played 4,"):
        legal_move(Fixed(4), env, "player_1")
