"""A bot that raises on its second move whenever it sits in seat 1 (forfeit tests).

Seat 0 never crashes, so the tournament's up-front check (the bot in seat 0 against the random
bot) passes, and in seat-swapped pairs exactly one match of each pair is forfeited.
"""

from __future__ import annotations

from typing import Any

from games.bots.random_bot import RandomBot
from games.text_env import TextGame


class CrashingBot(RandomBot):
    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.moves = 0

    def act(self, env: TextGame, agent: str) -> Any:
        self.moves += 1
        if env.agent_index(agent) == 1 and self.moves == 2:
            raise RuntimeError("the bot's process fell over")
        return super().act(env, agent)
