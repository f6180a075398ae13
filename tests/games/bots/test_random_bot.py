"""The random-legal bot on index and free-text games.

Run with ``.venv/bin/python -m pytest -q tests/games/bots/test_random_bot.py``.
"""

from __future__ import annotations

import pytest

import games
from games.bots.random_bot import RandomBot


@pytest.mark.parametrize(
    "game_id",
    ["connect-four-v0", "leduc-holdem-v0", "liars-dice-v0", "mini-hanabi-v0", "negotiation-v0"],
)
def test_only_legal_actions_are_played(game_id: str) -> None:
    env, bot = games.make(game_id, max_retries=0), RandomBot(seed=0)
    for seed in range(20):
        env.reset(seed=seed)
        while not env.is_over:
            agent = env.agent_selection
            action = bot.act(env, agent)
            if not env.free_text:
                assert env.observe(agent)["action_mask"][action] == 1
            env.step(action)
        assert env.termination_reason != "illegal"


def test_free_text_actions_are_text_that_parses() -> None:
    env, bot = games.make("negotiation-v0"), RandomBot(seed=1)
    env.reset(seed=0)
    text = bot.act_text(env, "player_0")
    assert isinstance(text, str) and env.parse_action("player_0", text) == text


def test_a_seed_replays_the_same_choices() -> None:
    env = games.make("liars-dice-v0", num_players=3)
    env.reset(seed=0)
    first = [RandomBot(seed=5).act(env, env.agent_selection) for _ in range(3)]
    assert first == [RandomBot(seed=5).act(env, env.agent_selection) for _ in range(3)]
    bot = RandomBot(seed=5)
    picks = [bot.act(env, env.agent_selection) for _ in range(20)]
    bot.reset(5)
    assert picks == [bot.act(env, env.agent_selection) for _ in range(20)]
