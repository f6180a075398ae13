"""Connect Four.

Seats: 2. player_0 plays X and moves first; player_1 plays O.

Rules: the board has 7 columns and 6 rows and stands upright. The players take turns dropping one
of their discs into a column that is not full; it falls to the lowest empty row. The first to
line up four of their discs in a row (across, down or diagonally) wins. A full board without
such a line is a draw.

Actions: name a column by its number, 1 to 7, counted from the left.

Rewards: +1 for a win, -1 for a loss, 0 for a draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from games.openspiel_mirror import OpenSpielMirror
from games.position import PositionGame, mark_planes
from games.text_env import TextGame

ROWS, COLS = 6, 7
MARKS = (".", "X", "O")
DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


def _windows() -> tuple[tuple[int, ...], ...]:
    """Every line of four cells on the board, as cell indices ``row * COLS + col``."""
    found = []
    for r in range(ROWS):
        for c in range(COLS):
            for dr, dc in DIRECTIONS:
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= rr < ROWS and 0 <= cc < COLS for rr, cc in cells):
                    found.append(tuple(rr * COLS + cc for rr, cc in cells))
    return tuple(found)


WINDOWS = _windows()


@dataclass(frozen=True)
class Board:
    """An immutable position; row 0 is the bottom. Cells hold 0 (empty), 1 (X) or 2 (O)."""

    cells: tuple[int, ...] = (0,) * (ROWS * COLS)
    winner: int | None = None

    @property
    def player(self) -> int:
        filled = sum(1 for c in self.cells if c)
        return filled % 2

    def height(self, col: int) -> int:
        return sum(1 for r in range(ROWS) if self.cells[r * COLS + col])

    def result(self) -> tuple[float, float] | None:
        if self.winner is not None:
            return (1.0, -1.0) if self.winner == 0 else (-1.0, 1.0)
        return None if 0 in self.cells else (0.0, 0.0)

    def moves(self) -> list[int]:
        if self.result() is not None:
            return []
        return [c for c in range(COLS) if not self.cells[(ROWS - 1) * COLS + c]]

    def play(self, col: int) -> Board:
        player = self.player
        row = self.height(col)
        cells = list(self.cells)
        cells[row * COLS + col] = player + 1
        won = any(self._run(cells, row, col, dr, dc) >= 4 for dr, dc in DIRECTIONS)
        return Board(tuple(cells), player if won else None)

    @staticmethod
    def _run(cells: list[int], row: int, col: int, dr: int, dc: int) -> int:
        """Length of the line of equal discs through (row, col) along (dr, dc)."""
        mark, length = cells[row * COLS + col], 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLS and cells[r * COLS + c] == mark:
                length += 1
                r, c = r + sign * dr, c + sign * dc
        return length

    def heuristic(self) -> float:
        """Open lines of four, weighed by how full they are, for the player to move; in (-1, 1)."""
        me, score = self.player + 1, 0.0
        for window in WINDOWS:
            marks = [self.cells[i] for i in window]
            mine, theirs = marks.count(me), 4 - marks.count(0) - marks.count(me)
            if mine and not theirs:
                score += mine * mine
            elif theirs and not mine:
                score -= theirs * theirs
        return 0.9 * float(np.tanh(score / 50.0))


class ConnectFour(OpenSpielMirror, PositionGame):
    """Connect Four with OpenSpiel's action ids (the column, 0-6)."""

    metadata = {
        **TextGame.metadata,
        "name": "connect_four_v0",
        "max_turns": ROWS * COLS,
        "strongest_bot": "mcts-v0",
    }
    openspiel_game = "connect_four"
    action_names = tuple(str(c + 1) for c in range(COLS))

    def __init__(self, **kwargs: Any) -> None:
        box = spaces.Box(0, 1, (ROWS, COLS, 2), np.int8)
        super().__init__(2, spaces.Discrete(COLS), box, **kwargs)

    def initial_position(self) -> Board:
        return Board()

    def _why_illegal(self, agent: str, action: int) -> str:
        return f"column {action + 1} is full"

    def _observation_array(self, agent: str) -> np.ndarray:
        return mark_planes(self.board.cells, (ROWS, COLS), self.agent_index(agent))

    def _describe(self, agent: str) -> str:
        rows = [
            " ".join(MARKS[self.board.cells[r * COLS + c]] for c in range(COLS))
            for r in reversed(range(ROWS))
        ]
        header = " ".join(str(c + 1) for c in range(COLS))
        mark = MARKS[self.agent_index(agent) + 1]
        return f"Connect Four. You play {mark}.\n{header}\n" + "\n".join(rows)
