"""Two-player, perfect-information games played on an immutable position.

A position knows whose turn it is, its legal moves, the position after a move, and the returns
once the game is over. :class:`PositionGame` turns any such position type into a
:class:`~games.text_env.TextGame`, and the minimax bot searches the same positions, so the rules
are written once and shared by the environment and its reference bot.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Protocol

import numpy as np

from games.text_env import TextGame


class Position(Hashable, Protocol):
    """An immutable, hashable game position for a two-player game."""

    @property
    def player(self) -> int:
        """Index of the player to move."""
        ...

    def moves(self) -> list[int]:
        """Legal moves (action indices); empty once the game is over."""
        ...

    def play(self, move: int) -> Position: ...

    def result(self) -> tuple[float, ...] | None:
        """Returns per player once the game is over, else None."""
        ...

    def heuristic(self) -> float:
        """Estimated value in (-1, 1) for the player to move; used by depth-limited search."""
        ...


def mark_planes(cells: tuple[int, ...], shape: tuple[int, int], player: int) -> np.ndarray:
    """Two int8 planes over the board: ``player``'s marks, then the opponent's.

    Cells hold 0 for empty and ``i + 1`` for player ``i``.
    """
    grid = np.array(cells, dtype=np.int8).reshape(shape)
    mine = grid == player + 1
    return np.stack([mine, (grid != 0) & ~mine], axis=-1).astype(np.int8)


class PositionGame(TextGame):
    """A :class:`TextGame` whose state is one :class:`Position` plus the move history."""

    board: Position
    history: list[int]

    def initial_position(self) -> Position:
        raise NotImplementedError

    def position(self) -> Position:
        """The current position, for search-based bots."""
        return self.board

    def _new_game(self, rng: np.random.Generator) -> None:
        self.board = self.initial_position()
        self.history = []

    def _current_agent(self) -> str:
        return self.possible_agents[self.board.player]

    def _legal_actions(self, agent: str) -> list[int]:
        return self.board.moves()

    def _apply(self, agent: str, action: Any) -> Mapping[str, float]:
        self.board = self.board.play(action)
        self.history.append(action)
        result = self.board.result()
        return dict(zip(self.possible_agents, result, strict=True)) if result else {}

    def _outcome(self) -> str | None:
        result = self.board.result()
        if result is None:
            return None
        return "draw" if len(set(result)) == 1 else "win"
