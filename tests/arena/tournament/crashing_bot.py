"""A bot that raises on its second move in odd-seeded matches (forfeit tests)."""

from __future__ import annotations

from typing import Any

from games.bots.random_bot import RandomBot
from games.text_env import TextGame


class CrashingBot(RandomBot):
    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.seed = seed
        self.moves = 0

    def act(self, env: TextGame, agent: str) -> Any:
        self.moves += 1
        if self.seed is not None and self.seed % 2 == 1 and self.moves == 2:
            raise RuntimeError("the bot's process fell over")
        return super().act(env, agent)
