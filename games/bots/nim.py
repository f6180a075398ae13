"""The exact Nim bot: move to a position whose nim-sum (XOR of the heap sizes) is zero.

In normal-play Nim a position is lost for the player to move exactly when its nim-sum is zero
(Bouton, 1901), so this bot wins every game it can win. From a lost position it takes one object
from the largest heap, to make the game last and give the opponent room to err.
"""

from __future__ import annotations

from functools import reduce
from operator import xor

from games.bots.base import Bot, unsupported
from games.nim import Heaps
from games.text_env import TextGame


def optimal_move(heaps: Heaps) -> int:
    """A winning move if there is one, else one object from the largest heap."""
    total = reduce(xor, heaps.sizes, 0)
    for h, size in enumerate(heaps.sizes):
        target = size ^ total
        if total and target < size:
            return h * heaps.width + (size - target) - 1
    largest = max(range(len(heaps.sizes)), key=lambda h: heaps.sizes[h])
    return largest * heaps.width


class NimSumBot(Bot):
    """Plays Nim perfectly."""

    def act(self, env: TextGame, agent: str) -> int:
        position = env.position() if hasattr(env, "position") else None
        if not isinstance(position, Heaps):
            raise unsupported(self, env, "a Nim game")
        return optimal_move(position)
