"""A Liar's Dice player that reasons from expected counts.

It expects each face to show on its own dice as rolled plus one sixth of everyone else's dice. It
calls "liar" when the standing bid exceeds that expectation by more than half a die; otherwise it
makes the lowest legal bid its expectation supports, and calls when there is none.
"""

from __future__ import annotations

from games.bots.base import Bot, unsupported
from games.liars_dice import FACES, LiarsDice
from games.text_env import TextGame


class LiarsDiceBot(Bot):
    """Bids what it expects to be on the table; challenges what it does not believe."""

    def act(self, env: TextGame, agent: str) -> int:
        if not isinstance(env, LiarsDice):
            raise unsupported(self, env, "Liar's Dice")
        own = env.dice[env.agent_index(agent)]
        unseen = env.total_dice - len(own)

        def expected(face: int) -> float:
            return own.count(face) + unseen / FACES

        legal = env.legal_actions(agent)
        if env.bids:
            quantity, face = divmod(env.bids[-1], FACES)
            if quantity + 1 > expected(face + 1) + 0.5:
                return env.liar
        for action in legal:
            if action != env.liar:
                quantity, face = divmod(action, FACES)
                if quantity + 1 <= expected(face + 1) + 0.5:
                    return action
        return env.liar if env.liar in legal else legal[0]
