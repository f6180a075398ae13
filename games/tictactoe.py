"""Tic-Tac-Toe.

Seats: 2. player_0 plays X and moves first; player_1 plays O.

Rules: the players take turns writing their mark in an empty cell of a 3x3 grid. The first to
have three marks in a row (across, down or diagonally) wins. A full grid without such a line is a
draw.

Actions: name an empty cell by its number, 1 to 9, counted left to right and top to bottom:

    1 | 2 | 3
    4 | 5 | 6
    7 | 8 | 9

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

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
MARKS = ("X", "O")


@dataclass(frozen=True)
class Board:
    """An immutable position; cells hold 0 (empty), 1 (X) or 2 (O). Also a minimax position."""

    cells: tuple[int, ...] = (0,) * 9

    @property
    def player(self) -> int:
        """Index of the player to move: X whenever an odd number of cells is empty."""
        return 0 if self.cells.count(0) % 2 == 1 else 1

    def winner(self) -> int | None:
        for a, b, c in LINES:
            if self.cells[a] and self.cells[a] == self.cells[b] == self.cells[c]:
                return self.cells[a] - 1
        return None

    def result(self) -> tuple[float, float] | None:
        """Returns of (player_0, player_1) once the game is over, else None."""
        winner = self.winner()
        if winner is not None:
            return (1.0, -1.0) if winner == 0 else (-1.0, 1.0)
        return None if 0 in self.cells else (0.0, 0.0)

    def moves(self) -> list[int]:
        return [] if self.result() is not None else [i for i, c in enumerate(self.cells) if c == 0]

    def play(self, move: int) -> Board:
        cells = list(self.cells)
        cells[move] = self.player + 1
        return Board(tuple(cells))

    def heuristic(self) -> float:
        return 0.0


class TicTacToe(OpenSpielMirror, PositionGame):
    """Tic-Tac-Toe with OpenSpiel's action ids (cell ``3 * row + col``)."""

    metadata = {
        **TextGame.metadata,
        "name": "tictactoe_v0",
        "max_turns": 9,
        "strongest_bot": "minimax-v0",
    }
    openspiel_game = "tic_tac_toe"
    action_names = tuple(str(i + 1) for i in range(9))

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(2, spaces.Discrete(9), spaces.Box(0, 1, (3, 3, 2), np.int8), **kwargs)

    def initial_position(self) -> Board:
        return Board()

    def _why_illegal(self, agent: str, action: int) -> str:
        return f"cell {action + 1} is already taken"

    def _observation_array(self, agent: str) -> np.ndarray:
        return mark_planes(self.board.cells, (3, 3), self.agent_index(agent))

    def _describe(self, agent: str) -> str:
        shown = [MARKS[c - 1] if c else str(i + 1) for i, c in enumerate(self.board.cells)]
        rows = [" | ".join(shown[r * 3 : r * 3 + 3]) for r in range(3)]
        grid = "\n---------\n".join(rows)
        return f"Tic-Tac-Toe. You play {MARKS[self.agent_index(agent)]}.\n{grid}"
