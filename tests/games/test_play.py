"""games.play.play_game.

Run with ``.venv/bin/python -m pytest -q tests/games/test_play.py``.
"""

from __future__ import annotations

import games
from games.bots.random_bot import RandomBot
from games.play import play_game


def test_play_game_reports_the_outcome() -> None:
    env = games.make("liars-dice-v0", num_players=3)
    seats = {a: RandomBot(seed=i) for i, a in enumerate(env.possible_agents)}
    outcome = play_game(env, seats, seed=4)
    assert outcome.termination_reason == "win" and outcome.turns == env.turn
    assert sorted(outcome.returns.values()) == [-1.0, 0.5, 0.5]
    assert outcome.invalid_counts == {"player_0": 0, "player_1": 0, "player_2": 0}
    again = play_game(
        env, {a: RandomBot(seed=i) for i, a in enumerate(env.possible_agents)}, seed=4
    )
    assert again == outcome
