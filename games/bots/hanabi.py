"""A rule-based Mini Hanabi player, the usual baseline for Hanabi-like games.

In order of preference: play a card it knows is playable; hint the partner about a playable card
the partner does not know fully; discard a card it knows nothing about (the oldest first); give
any legal hint; play its oldest card. It reads only its own hints, the partner's hand and the
table, which is what its seat sees.
"""

from __future__ import annotations

from games.bots.base import Bot, unsupported
from games.mini_hanabi import DISCARD, HINT_COLOR, HINT_RANK, PLAY, RANKS, MiniHanabi
from games.text_env import TextGame


class HanabiRulesBot(Bot):
    """Plays safe, hints playable cards, discards unknown cards."""

    def act(self, env: TextGame, agent: str) -> int:
        if not isinstance(env, MiniHanabi):
            raise unsupported(self, env, "Mini Hanabi")
        me = env.agent_index(agent)
        legal = env.legal_actions(agent)
        for action in self._preferences(env, me):
            if action in legal:
                return action
        return self.choose(legal)

    @staticmethod
    def _preferences(env: MiniHanabi, me: int) -> list[int]:
        fireworks = env.fireworks
        known = env.knowledge[me]

        def playable(color: int | None, rank: int | None) -> bool:
            if rank is None:
                return False
            if color is None:
                return all(height == rank - 1 for height in fireworks)
            return fireworks[color] == rank - 1

        prefs = [PLAY + i for i, (c, r) in enumerate(known) if playable(c, r)]
        for (color, rank), (kc, kr) in zip(env.hands[1 - me], env.knowledge[1 - me], strict=True):
            if fireworks[color] == rank - 1 and (kc is None or kr is None):
                prefs.append(HINT_RANK + RANKS.index(rank) if kr is None else HINT_COLOR + color)
        prefs += [DISCARD + i for i, (c, r) in enumerate(known) if c is None and r is None]
        prefs += list(range(HINT_COLOR, HINT_RANK + len(RANKS)))
        prefs.append(PLAY)
        return prefs
