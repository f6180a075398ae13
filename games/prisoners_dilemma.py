"""Iterated Prisoner's Dilemma.

Seats: 2.

Rules: the game lasts a fixed number of rounds (10 by default). In every round both players choose,
at the same time, to cooperate or to defect; then both choices are revealed and each player scores:

- both cooperate: 3 points each;
- both defect: 1 point each;
- one defects, one cooperates: the defector scores 5, the cooperator 0.

Moves are simultaneous: player_0 chooses first, then player_1 chooses without seeing player_0's
choice for this round. Both choices are shown once the round is complete.

Actions: "cooperate" or "defect".

Rewards: each round's points, paid when the round is complete.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from games.hook_checks import whole_number
from games.text_env import TextGame

COOPERATE, DEFECT = 0, 1
MOVES = ("cooperate", "defect")
PAYOFF = {(0, 0): (3.0, 3.0), (0, 1): (0.0, 5.0), (1, 0): (5.0, 0.0), (1, 1): (1.0, 1.0)}


class PrisonersDilemma(TextGame):
    """Simultaneous moves the AEC way: seats choose in turn; a choice stays hidden until the round ends."""

    metadata = {
        **TextGame.metadata,
        "name": "prisoners_dilemma_v0",
        "kind": "general-sum",
        "information": "hidden",
        "max_turns": 20,
        "strongest_bot": "tit-for-tat-v0",
    }
    action_names = MOVES

    def __init__(self, rounds: int = 10, **kwargs: Any) -> None:
        self.rounds = whole_number("rounds", rounds)
        kwargs.setdefault("max_turns", 2 * rounds)
        # per round, each seat's move one-hot over (cooperate, defect); the own seat first
        box = spaces.Box(0, 1, (rounds, 2, 2), np.int8)
        super().__init__(2, spaces.Discrete(2), box, **kwargs)

    def _new_game(self, rng: np.random.Generator) -> None:
        self.history: list[tuple[int, int]] = []
        self.pending: int | None = None

    def _current_agent(self) -> str:
        return self.possible_agents[0 if self.pending is None else 1]

    def _legal_actions(self, agent: str) -> list[int]:
        return [COOPERATE, DEFECT]

    def _apply(self, agent: str, action: int) -> Mapping[str, float]:
        if self.pending is None:
            self.pending = action
            return {}
        moves = (self.pending, action)
        self.history.append(moves)
        self.pending = None
        return dict(zip(self.possible_agents, PAYOFF[moves], strict=True))

    def _outcome(self) -> str | None:
        if len(self.history) < self.rounds:
            return None
        totals = [sum(PAYOFF[m][i] for m in self.history) for i in range(2)]
        return "draw" if totals[0] == totals[1] else "win"

    def private_info(self, agent: str) -> list[str]:
        """player_0's choice in an unfinished round: as its own text shows it, and as the round
        log would show it if it leaked there."""
        if self.pending is None or agent != self.possible_agents[0]:
            return []
        return [self._pending_line(), self._round_line(len(self.history), (self.pending, None))]

    def _pending_line(self) -> str:
        return f"Your choice this round: {MOVES[self.pending]}"

    @staticmethod
    def _round_line(index: int, moves: tuple[int | None, int | None]) -> str:
        shown = [MOVES[m] if m is not None else "?" for m in moves]
        return f"Round {index + 1}: player_0 {shown[0]}, player_1 {shown[1]}"

    def _observation_array(self, agent: str) -> np.ndarray:
        me = self.agent_index(agent)
        obs = np.zeros((self.rounds, 2, 2), dtype=np.int8)
        for r, moves in enumerate(self.history):
            obs[r, 0, moves[me]] = 1
            obs[r, 1, moves[1 - me]] = 1
        return obs

    def _describe(self, agent: str) -> str:
        me = self.agent_index(agent)
        totals = [sum(PAYOFF[m][i] for m in self.history) for i in range(2)]
        lines = [
            f"Iterated Prisoner's Dilemma, round {min(len(self.history) + 1, self.rounds)} "
            f"of {self.rounds}. Your score: {totals[me]:g}; opponent: {totals[1 - me]:g}."
        ]
        lines += [self._round_line(r, m) for r, m in enumerate(self.history)]
        if self.pending is not None and me == 0:
            lines.append(f"{self._pending_line()} (hidden until the round ends).")
        return "\n".join(lines)
