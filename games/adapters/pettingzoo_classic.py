"""PettingZoo's classic games as Arena text games: tictactoe, connect_four, rps and chess.

The PettingZoo environment (its ``raw_env``, without the wrappers that end the game on an illegal
move) keeps the rules; this adapter adds the text layer and Arena's invalid-action policy. Seats
are renamed ``player_0``, ``player_1`` in PettingZoo's own order. Tic-tac-toe cells and Connect Four
columns are named as in the native games (cells 1-9 row by row, columns 1-7); rock-paper-scissors
moves by name; chess moves in UCI notation (``e2e4``, ``e7e8q``).

PettingZoo imports pygame at module level only to draw pixels. Where pygame is not installed these
modules are imported with a stand-in for it: text play works, pixel rendering does not.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from games.text import normalize
from games.text_env import TextGame

MARKS = (".", "X", "O")


class _NoPygame(types.ModuleType):
    """Stand-in for pygame: every attribute and call yields another inert stand-in."""

    def __getattr__(self, name: str) -> _NoPygame:
        if name.startswith("__"):
            raise AttributeError(name)
        return _NoPygame(f"{self.__name__}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> _NoPygame:
        return _NoPygame(f"{self.__name__}()")


def import_classic(module: str) -> types.ModuleType:
    """Import a ``pettingzoo.classic`` module, standing in for pygame if it is missing."""
    if importlib.util.find_spec("pygame") is not None or "pygame" in sys.modules:
        return importlib.import_module(module)
    sys.modules["pygame"] = _NoPygame("pygame")
    try:
        return importlib.import_module(module)
    finally:
        # keep the stand-in private to PettingZoo: later `import pygame` elsewhere still fails
        del sys.modules["pygame"]


# -- per-game text ---------------------------------------------------------------------------------
def _ttt_cell(action: int) -> int:
    """PettingZoo numbers tic-tac-toe cells column by column; Arena row by row."""
    row, col = action % 3, action // 3
    return 3 * row + col


def _ttt_describe(game: PettingZooClassic, player: int) -> str:
    squares = game.inner.board.squares
    shown = [""] * 9
    for action, mark in enumerate(squares):
        cell = _ttt_cell(action)
        shown[cell] = MARKS[mark] if mark else str(cell + 1)
    grid = "\n---------\n".join(" | ".join(shown[r * 3 : r * 3 + 3]) for r in range(3))
    return f"Tic-Tac-Toe. You play {MARKS[player + 1]}.\n{grid}"


def _c4_describe(game: PettingZooClassic, player: int) -> str:
    board = game.inner.board  # row 0 is the top
    rows = [" ".join(MARKS[board[r * 7 + c]] for c in range(7)) for r in range(6)]
    return (
        f"Connect Four. You play {MARKS[player + 1]}.\n"
        + " ".join(map(str, range(1, 8)))
        + "\n"
        + "\n".join(rows)
    )


def _rps_describe(game: PettingZooClassic, player: int) -> str:
    inner = game.inner
    rounds = [(inner.history[i], inner.history[i + 1]) for i in range(0, 10, 2)]
    done = [r for r in reversed(rounds[: inner.num_moves]) if r[0] >= 0]
    lines = [
        f"Rock-Paper-Scissors, round {min(inner.num_moves + 1, inner.max_cycles)} of "
        f"{inner.max_cycles}. Your total: {game.returns[f'player_{player}']:+g}."
    ]
    lines += [
        f"Earlier round: player_0 {inner._moves[a]}, player_1 {inner._moves[b]}" for a, b in done
    ]
    return "\n".join(lines)


def _chess_describe(game: PettingZooClassic, player: int) -> str:
    board = game.inner.board
    return (
        f"Chess. You play {('white', 'black')[player]} (uppercase pieces are white).\n"
        f"{board}\nFEN: {board.fen()}"
    )


def _chess_name(game: PettingZooClassic, player: int, action: int) -> str:
    chess_utils = importlib.import_module("pettingzoo.classic.chess.chess_utils")
    return chess_utils.action_to_move(game.inner.board, action, player).uci()


@dataclass(frozen=True)
class ClassicSpec:
    """How one PettingZoo classic game reads as text."""

    module: str
    rules: str
    """Rules shown to every seat; ``{max_turns}`` stands for the game's turn limit."""
    describe: Callable[[PettingZooClassic, int], str]
    name: Callable[[PettingZooClassic, int, int], str]
    metadata: Mapping[str, Any]
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    order: Callable[[int], int] | None = None
    """Sort key of the legal actions, so that a seat reads them in the order of their names
    (tic-tac-toe's cells 1-9, which PettingZoo numbers column by column); None keeps PettingZoo's."""


SPECS: dict[str, ClassicSpec] = {
    "tictactoe": ClassicSpec(
        "pettingzoo.classic.tictactoe.tictactoe",
        "Tic-Tac-Toe (PettingZoo tictactoe_v3), 2 players; player_0 plays X and moves first. "
        "Take turns marking an empty cell of a 3x3 grid; three in a row wins, a full grid is a "
        "draw. Name a cell 1-9, counted left to right and top to bottom.",
        _ttt_describe,
        lambda game, player, action: str(_ttt_cell(action) + 1),
        {"max_turns": 9, "strongest_bot": "random-v0"},
        order=_ttt_cell,
    ),
    "connect_four": ClassicSpec(
        "pettingzoo.classic.connect_four.connect_four",
        "Connect Four (PettingZoo connect_four_v3), 2 players; player_0 plays X and moves first. "
        "Drop a disc into a column 1-7 that is not full; four in a row (across, down or "
        "diagonally) wins, a full board is a draw.",
        _c4_describe,
        lambda game, player, action: str(action + 1),
        {"max_turns": 42, "strongest_bot": "random-v0"},
    ),
    "rps": ClassicSpec(
        "pettingzoo.classic.rps.rps",
        "Rock-Paper-Scissors (PettingZoo rps_v2), 2 players, several rounds. Each round both "
        "choose ROCK, PAPER or SCISSORS; player_1 does not see player_0's choice until the round "
        "ends. Rock beats scissors, scissors beat paper, paper beats rock: +1 to the winner and "
        "-1 to the loser of each round.",
        _rps_describe,
        lambda game, player, action: game.inner._moves[action],
        {"information": "hidden", "max_turns": 30, "strongest_bot": "random-v0"},
        {"max_cycles": 15},
    ),
    "chess": ClassicSpec(
        "pettingzoo.classic.chess.chess",
        "Chess (PettingZoo chess_v6), 2 players; player_0 plays white. Standard rules; a draw "
        "is claimed whenever possible, and a game still on after {max_turns} moves in all (both "
        "sides' together) ends there with no winner. Write moves in UCI notation: from-square "
        "then to-square, plus the piece letter for a promotion (e2e4, e7e8q).",
        _chess_describe,
        _chess_name,
        {"max_turns": 200, "strongest_bot": "random-v0"},
    ),
}


class PettingZooClassic(TextGame):
    """One of :data:`SPECS`, played through its PettingZoo ``raw_env``."""

    def __init__(
        self, env: str, env_kwargs: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if env not in SPECS:
            raise ValueError(f"unknown PettingZoo classic game {env!r}; one of {sorted(SPECS)}")
        self.spec = SPECS[env]
        module = import_classic(self.spec.module)
        self.inner = module.raw_env(**{**self.spec.env_kwargs, **(env_kwargs or {})})
        self._inner_agents = list(self.inner.possible_agents)
        self.metadata = {**TextGame.metadata, "name": f"pettingzoo_{env}", **self.spec.metadata}
        first = self._inner_agents[0]
        self._obs_space = self.inner.observation_space(first)
        if isinstance(self._obs_space, spaces.Dict):
            box = self._obs_space["observation"]
        else:  # a Discrete observation (rps: the opponent's last move) becomes a one-hot
            box = spaces.Box(0, 1, (self._obs_space.n,), np.int8)
        super().__init__(len(self._inner_agents), self.inner.action_space(first), box, **kwargs)
        # a rules text may state the turn limit, which a game argument can change
        self.rules_text = self.spec.rules.replace("{max_turns}", str(self.max_turns))
        self._obs_cache: tuple[tuple[int, str] | None, Any] = (None, None)
        self._names_cache: tuple[tuple[int, str] | None, dict[str, int]] = (None, {})

    def _inner(self, agent: str) -> str:
        return self._inner_agents[self.agent_index(agent)]

    def _new_game(self, rng: np.random.Generator) -> None:
        self.inner.reset(seed=int(rng.integers(2**31)))
        self._obs_cache = (None, None)
        self._names_cache = (None, {})

    def _current_agent(self) -> str:
        return self.possible_agents[self._inner_agents.index(self.inner.agent_selection)]

    def _observe_inner(self, agent: str) -> Any:
        # PettingZoo computes a whole observation (chess: planes and legal moves) per call, and
        # one Arena observation needs it up to three times; the state only changes with a move
        key = (self.turn, agent)
        if self._obs_cache[0] != key:
            self._obs_cache = (key, self.inner.observe(self._inner(agent)))
        return self._obs_cache[1]

    def _legal_actions(self, agent: str) -> list[int]:
        obs = self._observe_inner(agent)
        if isinstance(obs, dict) and "action_mask" in obs:
            legal = [int(a) for a in np.flatnonzero(obs["action_mask"])]
        else:
            legal = list(range(self.action_space(agent).n))
        return legal if self.spec.order is None else sorted(legal, key=self.spec.order)

    def _apply(self, agent: str, action: int) -> Mapping[str, float]:
        self.inner.step(action)
        return {
            ours: float(self.inner.rewards.get(inner, 0.0))
            for ours, inner in zip(self.possible_agents, self._inner_agents, strict=True)
        }

    def _outcome(self) -> str | None:
        ended = [
            self.inner.terminations[a] or self.inner.truncations[a] for a in self._inner_agents
        ]
        if not all(ended):
            return None
        return "draw" if len(set(self.returns.values())) == 1 else "win"

    def action_to_text(self, agent: str, action: int) -> str:
        return self.spec.name(self, self.agent_index(agent), int(action))

    def parse_action(self, agent: str, text: str) -> int | None:
        if not isinstance(text, str):
            return None
        key = (self.turn, agent)
        if self._names_cache[0] != key:
            n = self.action_space(agent).n
            # small action sets are named whole (an illegal move still parses); chess legally only
            candidates = range(n) if n <= 64 else self.legal_actions(agent)
            names = {normalize(self.action_to_text(agent, a)): a for a in reversed(candidates)}
            self._names_cache = (key, names)
        return self._names_cache[1].get(normalize(text))

    def _observation_array(self, agent: str) -> np.ndarray:
        obs = self._observe_inner(agent)
        if isinstance(obs, dict):
            return np.asarray(obs["observation"])
        return np.eye(self._obs_space.n, dtype=np.int8)[int(obs)]

    def _describe(self, agent: str) -> str:
        return self.spec.describe(self, self.agent_index(agent))
