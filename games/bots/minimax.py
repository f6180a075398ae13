"""Alpha-beta search over a game's :class:`~games.position.Position` (Tic-Tac-Toe, Connect Four,
Nim): exact without a depth limit, heuristic beyond it.

Values are discounted by :data:`DISCOUNT` per move, so the bot prefers a quicker win and a slower
loss, and they stay a property of the position alone, which keeps the transposition table sound.
"""

from __future__ import annotations

import math
from typing import Any

from games.bots.base import Bot, unsupported
from games.position import Position
from games.text_env import TextGame

DISCOUNT = 0.99
EXACT, LOWER, UPPER = 0, 1, 2


class AlphaBetaBot(Bot):
    """Negamax with alpha-beta pruning; ``depth=None`` searches to the end of the game."""

    def __init__(self, depth: int | None = None, seed: int | None = None) -> None:
        if depth is not None and depth < 1:
            raise ValueError("depth must be >= 1 or None")
        self.depth = depth
        super().__init__(seed)

    def act(self, env: TextGame, agent: str) -> Any:
        position = getattr(env, "position", None)
        if position is None:
            raise unsupported(self, env, "a game with a searchable position()")
        return self.choose(self.best_moves(position()))

    def best_moves(self, position: Position) -> list[int]:
        """Every move of the highest value; the bot picks one of them at random."""
        table: dict[tuple[Position, int | None], tuple[float, int]] = {}
        child_depth = None if self.depth is None else self.depth - 1
        values = {
            move: -DISCOUNT
            * self._search(position.play(move), child_depth, -math.inf, math.inf, table)
            for move in position.moves()
        }
        best = max(values.values())
        return [m for m, v in values.items() if v >= best - 1e-9]

    def _search(
        self,
        pos: Position,
        depth: int | None,
        alpha: float,
        beta: float,
        table: dict[tuple[Position, int | None], tuple[float, int]],
    ) -> float:
        """The position's value for the player to move, exact when it lies in (alpha, beta)."""
        result = pos.result()
        if result is not None:
            return result[pos.player]
        if depth == 0:
            return pos.heuristic()
        key = (pos, depth)
        if key in table:
            value, bound = table[key]
            if (
                bound == EXACT
                or (bound == LOWER and value >= beta)
                or (bound == UPPER and value <= alpha)
            ):
                return value
        low, best = alpha, -math.inf
        child_depth = None if depth is None else depth - 1
        for move in pos.moves():
            # window for the child, seen from its side: v = -DISCOUNT * w
            w = self._search(
                pos.play(move), child_depth, -beta / DISCOUNT, -alpha / DISCOUNT, table
            )
            best = max(best, -DISCOUNT * w)
            alpha = max(alpha, best)
            if alpha >= beta:
                break
        bound = UPPER if best <= low else LOWER if best >= beta else EXACT
        table[key] = (best, bound)
        return best
