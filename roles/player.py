"""The player role: plays a game seat, answering each turn with ``<answer>MOVE</answer>``."""

from __future__ import annotations

from dataclasses import dataclass

from roles.base import Role


@dataclass
class Player(Role):
    name: str = "player"
    what: str = "exactly one of the legal actions"
