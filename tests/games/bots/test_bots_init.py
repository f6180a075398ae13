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


class NoSeed(Bot):
    def __init__(self, depth: int = 3) -> None:
        super().__init__()
        self.depth = depth

    def act(self, env, agent):  # type: ignore[no-untyped-def]
        return env.legal_actions(agent)[0]


def test_a_plugin_bot_that_takes_no_seed_is_named_in_one_line() -> None:
    # every command that built it (eval, tournament, play, train) printed a traceback
    from arena.core.registry import PluginFailed

    bots.registry.register("noseed-test-v0", NoSeed, plugin="mypkg")
    try:
        with pytest.raises(PluginFailed) as err:
            bots.make("noseed-test-v0", seed=0)
        assert bots.make("noseed-test-v0").depth == 3  # no seed asked: it builds
    finally:
        del bots.registry._entries["noseed-test-v0"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'width'"):
        bots.make("random-v0", seed=0, width=2)  # an argument a bot that takes seed refuses
    assert str(err.value) == (
        f"bot 'noseed-test-v0' ({__name__}:NoSeed, plugin mypkg): its __init__ takes no seed; "
        "Arena builds every bot with seed=N: take it and pass it on, super().__init__(seed=seed)"
    )
