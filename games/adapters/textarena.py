"""TextArena games as Arena text games (optional: ``pip install textarena``).

TextArena games are text-native: a seat reads the messages the game sent it and answers with a
bracketed move such as ``[4]``. This adapter keeps each seat's transcript as its observation text,
uses a ``Text`` action space, and checks moves against the legal moves it reads off the game's
state, so Arena's invalid-action policy (not TextArena's) handles a bad move. Samples that work
offline and without an LLM: TicTacToe, Nim and KuhnPoker (two players each).

TextArena draws its randomness from Python's global ``random`` module; every call into it runs
with this environment's own saved ``random`` state, so two environments seeded alike stay alike
however their steps interleave.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from games.optional import require
from games.text import CHARSET, normalize
from games.text_env import TextGame

_MOVE = re.compile(r"\[([^\[\]]+)\]")


def _ttt_legal(env: Any, player: int) -> list[str]:
    board = env.state.game_state["board"]
    return [f"[{r * 3 + c}]" for r in range(3) for c in range(3) if board[r][c] == ""]


def _nim_legal(env: Any, player: int) -> list[str]:
    piles = env.state.game_state["piles"]
    return [f"[{i} {q}]" for i, size in enumerate(piles) for q in range(1, size + 1)]


def _kuhn_legal(env: Any, player: int) -> list[str]:
    tree = env.state.game_state["current_legal_action_tree"]
    return [f"[{move}]" for move in tree] if isinstance(tree, dict) else []


def _kuhn_private(env: Any, player: int) -> list[str]:
    # the round number keeps an earlier round's own card from matching the opponent's card now
    game = env.state.game_state
    card = "JQK"[game["player_cards"][player]]
    return [
        f"Starting round {game['current_round']} out of {env.max_rounds} rounds. "
        f"Your card is: '{card}'"
    ]


@dataclass(frozen=True)
class TextArenaSpec:
    """What the adapter must know about one TextArena game beyond TextArena's own API: its legal
    moves and private strings, read off the TextArena env for a player id."""

    legal: Callable[[Any, int], list[str]]
    metadata: Mapping[str, Any]
    private: Callable[[Any, int], list[str]] | None = None


SPECS: dict[str, TextArenaSpec] = {
    "TicTacToe-v0-raw": TextArenaSpec(_ttt_legal, {"max_turns": 9}),
    "Nim-v0-raw": TextArenaSpec(_nim_legal, {"max_turns": 12}),
    "KuhnPoker-v0-raw": TextArenaSpec(
        _kuhn_legal, {"information": "hidden", "max_turns": 9}, _kuhn_private
    ),
}


class TextArenaGame(TextGame):
    """One of :data:`SPECS`, made with ``textarena.make(env_id)``."""

    def __init__(self, env_id: str, **kwargs: Any) -> None:
        if env_id not in SPECS:
            raise ValueError(f"no TextArena adapter spec for {env_id!r}; one of {sorted(SPECS)}")
        textarena = require("textarena", "textarena")
        self.spec = SPECS[env_id]
        self.env_id = env_id
        self._textarena = textarena
        self._random_state = random.Random(0).getstate()
        self.metadata = {**TextGame.metadata, "name": f"textarena_{env_id}", **self.spec.metadata}
        self.rules_text = (
            f"TextArena game {env_id}, 2 players; seat player_i is TextArena's Player i. The game "
            "explains its rules in its first message to you. Answer with one bracketed move, "
            "such as [4]."
        )
        box = spaces.Box(0, 1, (2,), np.int8)  # whose turn it is, from this seat's view
        super().__init__(2, spaces.Text(200, min_length=1, charset=CHARSET), box, **kwargs)

    @contextmanager
    def _own_random(self) -> Iterator[None]:
        outer = random.getstate()
        random.setstate(self._random_state)
        try:
            yield
        finally:
            self._random_state = random.getstate()
            random.setstate(outer)

    def _new_game(self, rng: np.random.Generator) -> None:
        seed = int(rng.integers(2**31))
        self._random_state = random.Random(seed).getstate()
        self.transcripts: list[list[str]] = [[] for _ in range(self.num_players)]
        with self._own_random():
            # a fresh env each game: TextArena envs carry state across resets (Kuhn's deck order)
            self.inner = self._textarena.make(self.env_id)
            self.inner.reset(num_players=self.num_players, seed=seed)
        self._collect()

    def _collect(self) -> None:
        """Move TextArena's undelivered messages into each seat's transcript."""
        pending = self.inner.state.observations
        for player, transcript in enumerate(self.transcripts):
            for sender, message, _ in pending[player]:
                who = "GAME" if sender < 0 else f"Player {sender}"
                transcript.append(f"[{who}] {message}")
            pending[player] = []

    def _current_agent(self) -> str:
        return self.possible_agents[self.inner.state.current_player_id]

    def _legal_actions(self, agent: str) -> list[str]:
        return self.spec.legal(self.inner, self.agent_index(agent))

    def parse_action(self, agent: str, text: str) -> str | None:
        if not isinstance(text, str):
            return None
        match = _MOVE.fullmatch(normalize(text))
        return f"[{' '.join(match.group(1).split())}]" if match else None

    def _apply(self, agent: str, action: str) -> Mapping[str, float]:
        with self._own_random():
            done, _ = self.inner.step(action)
        self._collect()
        if not done:
            return {}
        rewards = self.inner.state.rewards or {}
        return {a: float(rewards.get(i, 0.0)) for i, a in enumerate(self.possible_agents)}

    def _outcome(self) -> str | None:
        if not self.inner.state.done:
            return None
        return "draw" if len(set(self.returns.values())) == 1 else "win"

    def private_info(self, agent: str) -> list[str]:
        if self.spec.private is None:
            return []
        return self.spec.private(self.inner, self.agent_index(agent))

    def _observation_array(self, agent: str) -> np.ndarray:
        obs = np.zeros(2, dtype=np.int8)
        if not self.is_over:
            obs[int(agent != self.agent_selection)] = 1
        return obs

    def _describe(self, agent: str) -> str:
        return "\n".join(self.transcripts[self.agent_index(agent)])
