"""The random-legal bot: any game, uniformly over the legal actions (well-formed text included)."""

from __future__ import annotations

from typing import Any

from games.bots.base import Bot
from games.text_env import TextGame


class RandomBot(Bot):
    """Plays a uniformly random legal action; honours the action mask of index games."""

    def act(self, env: TextGame, agent: str) -> Any:
        return self.choose(env.legal_actions(agent))
