"""Nim.

Seats: 2. player_0 moves first.

Rules: there are a few heaps of objects (by default three heaps of 3, 4 and 5). The players take
turns; on a turn you take one or more objects from a single heap. Whoever takes the last object
wins.

Actions: "take K from heap H", with heaps numbered from 1; for example "take 2 from heap 3".

Rewards: +1 for the winner, -1 for the loser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from games.hook_checks import whole_number
from games.position import PositionGame
from games.text_env import TextGame


@dataclass(frozen=True)
class Heaps:
    """An immutable Nim position. Move ``heap * width + (count - 1)`` takes ``count`` from ``heap``."""

    sizes: tuple[int, ...]
    width: int
    player: int = 0

    def moves(self) -> list[int]:
        return [
            h * self.width + k - 1 for h, size in enumerate(self.sizes) for k in range(1, size + 1)
        ]

    def play(self, move: int) -> Heaps:
        heap, count = divmod(move, self.width)
        sizes = list(self.sizes)
        sizes[heap] -= count + 1
        return Heaps(tuple(sizes), self.width, 1 - self.player)

    def result(self) -> tuple[float, float] | None:
        if any(self.sizes):
            return None
        # The player who just moved took the last object and wins.
        return (-1.0, 1.0) if self.player == 0 else (1.0, -1.0)

    def heuristic(self) -> float:
        return 0.0


class Nim(PositionGame):
    """Normal-play Nim on configurable heaps."""

    metadata = {
        **TextGame.metadata,
        "name": "nim_v0",
        "max_turns": 12,
        "strongest_bot": "nim-optimal-v0",
    }

    def __init__(self, heaps: Sequence[int] = (3, 4, 5), **kwargs: Any) -> None:
        if isinstance(heaps, str | bytes) or not isinstance(heaps, Sequence) or not heaps:
            raise ValueError(f"heaps must be a list of heap sizes, e.g. [3, 4, 5], got {heaps!r}")
        self.heaps = tuple(whole_number(f"heaps[{i}]", h) for i, h in enumerate(heaps))
        self.width = max(self.heaps)
        self.action_names = tuple(
            f"take {k + 1} from heap {h + 1}"
            for h in range(len(self.heaps))
            for k in range(self.width)
        )
        kwargs.setdefault("max_turns", sum(self.heaps))
        box = spaces.Box(0, self.width, (len(self.heaps),), np.float32)
        super().__init__(2, spaces.Discrete(len(self.heaps) * self.width), box, **kwargs)

    def initial_position(self) -> Heaps:
        return Heaps(self.heaps, self.width)

    def _why_illegal(self, agent: str, action: int) -> str:
        heap, count = divmod(action, self.width)
        return (
            f"heap {heap + 1} has only {self.board.sizes[heap]} object(s), cannot take {count + 1}"
        )

    def _observation_array(self, agent: str) -> np.ndarray:
        return np.array(self.board.sizes, dtype=np.float32)

    def _describe(self, agent: str) -> str:
        heaps = ", ".join(f"heap {i + 1}: {size}" for i, size in enumerate(self.board.sizes))
        return f"Nim. Heaps: {heaps}."
