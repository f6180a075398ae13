"""The player role: plays a game seat, answering each turn with ``<answer>MOVE</answer>``."""

from __future__ import annotations

from dataclasses import dataclass

from roles.base import Role


@dataclass
class Player(Role):
    """A seat of a board or card game; the game's rules say what a move looks like."""

    name: str = "player"
    what: str = "exactly one of the legal actions"
