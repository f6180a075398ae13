"""OpenSpiel games as Arena text games.

Any sequential OpenSpiel game becomes a :class:`~games.text_env.TextGame`: seat ``player_i`` is
OpenSpiel player ``i``, actions are OpenSpiel's action ids, chance nodes are sampled with the
environment's seeded RNG, and rewards are the change in ``state.returns()`` at every step.

The text a seat sees is the game's ``information_state_string`` for imperfect-information games
(it includes the seat's whole history) and its ``observation_string`` otherwise; actions are
written as ``action_to_string`` spells them (matched without regard to case and spacing).

Games that cannot be converted, each with the reason :func:`unsupported_reason` gives:
simultaneous-move and mean-field games (AEC seats move one at a time), games with more than
:data:`MAX_PLAYERS` players, and games that provide no observation or information-state string
(there would be nothing to show as text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from games.optional import require
from games.text import normalize
from games.text_env import TextGame

MAX_PLAYERS = 8
PARSE_SCAN_LIMIT = 5000
"""Unlisted (illegal) action ids are looked up by name only in games with at most this many."""
STRONGEST_BOT = {"kuhn_poker": "kuhn-nash-v0", "leduc_poker": "leduc-cfr-v0"}


class UnsupportedGame(ValueError):
    """An OpenSpiel game that cannot be played as an Arena text game."""


def unsupported_reason(game_type: Any, num_players: int) -> str | None:
    """Why a game of this ``pyspiel.GameType`` cannot be converted, or None if it can."""
    dynamics = game_type.dynamics.name
    if dynamics == "SIMULTANEOUS":
        return "simultaneous-move game (seats would have to move at once)"
    if dynamics == "MEAN_FIELD":
        return "mean-field game (no finite set of seats)"
    if num_players > MAX_PLAYERS:
        return f"{num_players} players (at most {MAX_PLAYERS})"
    if not (game_type.provides_observation_string or game_type.provides_information_state_string):
        return "provides neither observation nor information-state strings"
    return None


def convertible_games() -> dict[str, str | None]:
    """Every registered OpenSpiel game by short name, mapped to why it is unsupported (or None)."""
    pyspiel = require("pyspiel", "openspiel")
    return {
        t.short_name: unsupported_reason(t, t.min_num_players) for t in pyspiel.registered_games()
    }


class OpenSpielGame(TextGame):
    """An OpenSpiel game (``pyspiel.load_game(game, params)``) with the Arena text layer."""

    def __init__(self, game: str, params: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        pyspiel = require("pyspiel", "openspiel")
        self.game = pyspiel.load_game(game, dict(params or {}))
        game_type = self.game.get_type()
        num_players = self.game.num_players()
        reason = unsupported_reason(game_type, num_players)
        if reason is not None:
            raise UnsupportedGame(f"OpenSpiel game {game!r} cannot be adapted: {reason}")
        self.game_name = game
        perfect = game_type.information.name == "PERFECT_INFORMATION"
        self._use_info_state = not perfect and game_type.provides_information_state_string
        self.metadata = {
            **TextGame.metadata,
            "name": f"openspiel_{game}",
            "seats": (num_players, num_players),
            "kind": _kind(game_type.utility.name),
            "information": "perfect" if perfect else "hidden",
            "max_turns": self.game.max_game_length(),
            "zero_sum": game_type.utility.name == "ZERO_SUM",
            "strongest_bot": STRONGEST_BOT.get(
                game, "mcts-v0" if perfect and num_players == 2 else "random-v0"
            ),
        }
        self.rules_text = (
            f"{game_type.long_name} (OpenSpiel game {game!r}), {num_players} players.\n"
            "Seat player_i is OpenSpiel player i. You see the game's own text description of "
            "what you know; write one of the legal actions exactly as it is listed."
        )
        if game_type.provides_observation_tensor:
            size = int(np.prod(self.game.observation_tensor_shape()))
        elif game_type.provides_information_state_tensor:
            size = int(np.prod(self.game.information_state_tensor_shape()))
        else:
            size = num_players  # a one-hot of the player to move
        box = spaces.Box(-np.inf, np.inf, (size,), np.float32)
        super().__init__(
            num_players, spaces.Discrete(self.game.num_distinct_actions()), box, **kwargs
        )

    def openspiel_state(self) -> Any:
        return self.state.clone()

    def _new_game(self, rng: np.random.Generator) -> None:
        self.state = self.game.new_initial_state()
        self._returns = np.zeros(self.num_players)
        self._sample_chance(rng)

    def _sample_chance(self, rng: np.random.Generator) -> None:
        while self.state.is_chance_node():
            outcomes, probs = zip(*self.state.chance_outcomes(), strict=True)
            p = np.asarray(probs, dtype=np.float64)
            self.state.apply_action(outcomes[rng.choice(len(outcomes), p=p / p.sum())])

    def _current_agent(self) -> str:
        return self.possible_agents[self.state.current_player()]

    def _legal_actions(self, agent: str) -> list[int]:
        return list(self.state.legal_actions(self.agent_index(agent)))

    def _apply(self, agent: str, action: int) -> Mapping[str, float]:
        self.state.apply_action(action)
        self._sample_chance(self._rng)
        returns = np.asarray(self.state.returns(), dtype=np.float64)
        delta, self._returns = returns - self._returns, returns
        return {a: float(r) for a, r in zip(self.possible_agents, delta, strict=True) if r}

    def _outcome(self) -> str | None:
        if not self.state.is_terminal():
            return None
        return "draw" if len(set(self.state.returns())) == 1 else "win"

    def action_to_text(self, agent: str, action: int) -> str:
        return self.state.action_to_string(self.agent_index(agent), int(action))

    def parse_action(self, agent: str, text: str) -> int | None:
        if not isinstance(text, str):
            return None
        wanted = normalize(text)
        legal = self.legal_actions(agent)
        scan = range(self.game.num_distinct_actions())
        candidates = [*legal, *(scan if len(scan) <= PARSE_SCAN_LIMIT else ())]
        for action in candidates:
            try:
                if normalize(self.action_to_text(agent, action)) == wanted:
                    return action
            except Exception:  # OpenSpiel may refuse to name an illegal action
                continue
        return None

    def _observation_array(self, agent: str) -> np.ndarray:
        player = self.agent_index(agent)
        game_type = self.game.get_type()
        if game_type.provides_observation_tensor:
            return np.asarray(self.state.observation_tensor(player), dtype=np.float32)
        if game_type.provides_information_state_tensor:
            return np.asarray(self.state.information_state_tensor(player), dtype=np.float32)
        return np.eye(self.num_players, dtype=np.float32)[self.agent_index(self.agent_selection)]

    def _describe(self, agent: str) -> str:
        player = self.agent_index(agent)
        view = (
            self.state.information_state_string(player)
            if self._use_info_state
            else self.state.observation_string(player)
        )
        return f"{self.game.get_type().long_name} (you are player {player}).\n{view}"


def _kind(utility: str) -> str:
    if utility in ("ZERO_SUM", "CONSTANT_SUM"):
        return "competitive"
    if utility == "IDENTICAL":
        return "cooperative"
    return "general-sum"
