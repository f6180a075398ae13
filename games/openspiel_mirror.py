"""Native games whose every state OpenSpiel can rebuild, so OpenSpiel's bots can play them.

A mirrored game uses OpenSpiel's action ids as its own action indices and records every action,
chance outcomes included, in ``self.history``, in the order OpenSpiel would apply them. Replaying
that history on a fresh OpenSpiel state then reproduces the game exactly: the MCTS and poker
reference bots read their decisions off that state.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from games.optional import require


@functools.cache
def _load_game(name: str) -> Any:
    return require("pyspiel", "openspiel").load_game(name)


class OpenSpielMirror:
    """Mixin: ``openspiel_state()`` for a game that keeps OpenSpiel-compatible ``history``."""

    openspiel_game: ClassVar[str]
    history: list[int]

    def openspiel_state(self) -> Any:
        """A fresh ``pyspiel.State`` equal to this game's current state."""
        state = _load_game(self.openspiel_game).new_initial_state()
        for action in self.history:
            state.apply_action(action)
        return state
