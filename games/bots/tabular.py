"""Bots that play a fixed tabular policy: OpenSpiel information-state string -> action probabilities.

The poker bots are tables like this. The seat's information state comes from the game's OpenSpiel
state (the OpenSpiel adapter, or a native game that mirrors OpenSpiel), so the bot sees exactly
what its seat knows and nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from games.bots.base import Bot, unsupported
from games.optional import require
from games.text_env import TextGame

PolicyTable = Mapping[str, Sequence[float]]
"""Information-state string -> probability of each action id (zero for illegal actions)."""


class TabularPolicyBot(Bot):
    """Samples the action from ``table[information_state]`` over the legal actions."""

    game: str
    """The OpenSpiel game the table is for."""

    def __init__(self, table: PolicyTable, seed: int | None = None) -> None:
        self.table = table
        super().__init__(seed)

    def act(self, env: TextGame, agent: str) -> Any:
        openspiel_game = getattr(env, "openspiel_game", getattr(env, "game_name", None))
        if openspiel_game != self.game or not hasattr(env, "openspiel_state"):
            raise unsupported(self, env, f"OpenSpiel's {self.game}")
        player = env.agent_index(agent)
        key = env.openspiel_state().information_state_string(player)
        legal = env.legal_actions(agent)
        probs = [self.table[key][a] for a in legal]
        if sum(probs) <= 0:  # a state the table never reaches with positive probability
            probs = None
        return self.choose(legal, probs)


def to_openspiel_policy(table: PolicyTable) -> Any:
    """The table as a ``pyspiel.TabularPolicy`` (for ``pyspiel.exploitability``)."""
    pyspiel = require("pyspiel", "openspiel")
    return pyspiel.TabularPolicy({k: list(enumerate(map(float, v))) for k, v in table.items()})


def exploitability(game: str, table: PolicyTable) -> float:
    """Mean gain a best responder makes against the table (0 at a Nash equilibrium)."""
    pyspiel = require("pyspiel", "openspiel")
    return float(pyspiel.exploitability(pyspiel.load_game(game), to_openspiel_policy(table)))
