"""A plugin-like bot that passes the bot check, then blocks on its second move of a game.

It waits on :data:`RELEASE` (a threading.Event nobody sets), as a plugin's ``act`` waiting on a
socket would, but for at most :data:`SAFETY` seconds: without the bound on a bot's move the
episode then finishes normally (and the test that expected it to fail, fails) instead of
hanging the suite. The bot check's trial game (its thread is named ``bot-trial``) is played
without blocking, as a bot that works at first and hangs on a rare position would.
"""

from __future__ import annotations

import threading
from typing import Any

from games.bots.random_bot import RandomBot
from games.text_env import TextGame

RELEASE = threading.Event()
SAFETY = 10.0


class BlockingBot(RandomBot):
    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.moves = 0

    def act(self, env: TextGame, agent: str) -> Any:
        self.moves += 1
        if self.moves == 2 and threading.current_thread().name != "bot-trial":
            RELEASE.wait(SAFETY)
        return super().act(env, agent)
