"""The bot registry and the strongest bot of every game.

Run with ``.venv/bin/python -m pytest -q tests/games/bots/test_bots_init.py``.
"""

from __future__ import annotations

import pytest

import games
from games import bots
from games.bots.base import Bot
from games.bots.random_bot import RandomBot
from games.play import play_game


def test_registered_bot_ids() -> None:
    assert set(bots.registry.ids()) >= {
        "random-v0",
        "minimax-v0",
        "minimax-depth4-v0",
        "nim-optimal-v0",
        "mcts-v0",
        "kuhn-nash-v0",
        "leduc-cfr-v0",
        "tit-for-tat-v0",
        "hanabi-rules-v0",
        "liars-dice-heuristic-v0",
    }
    bot = bots.make("minimax-depth4-v0", seed=3)
    assert isinstance(bot, Bot) and bot.depth == 4


@pytest.mark.parametrize("game_id", games.ids())
def test_the_strongest_bot_plays_its_game(game_id: str) -> None:
    spec = games.spec(game_id)
    if not spec.available():
        pytest.skip(f"{game_id} needs {spec.requires}")
    if spec.strongest_bot in ("mcts-v0", "kuhn-nash-v0", "leduc-cfr-v0"):
        pytest.importorskip("pyspiel")
    env = games.make(game_id)
    kwargs = {"iterations": 100} if spec.strongest_bot == "leduc-cfr-v0" else {}
    best = bots.strongest(game_id, seed=0, **kwargs)
    seats = {a: RandomBot(seed=i) for i, a in enumerate(env.possible_agents)}
    # the first seat a policy would play: a simulated user's seat is left to the random mover
    seat = next(a for a in env.possible_agents if not env.simulatable(a))
    seats[seat] = best
    outcome = play_game(env, seats, seed=0)
    assert outcome.invalid_counts[seat] == 0
    assert outcome.termination_reason != "illegal"


def test_act_text_is_the_action_as_text() -> None:
    env = games.make("tictactoe-v0")
    env.reset(seed=0)
    text = bots.make("minimax-v0", seed=0).act_text(env, "player_0")
    assert env.parse_action("player_0", text) in env.legal_actions()
