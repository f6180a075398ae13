"""Leduc Hold'em.

Seats: 2. player_0 acts first in both betting rounds.

Rules: the deck has six cards, two suits (s, h) of J < Q < K. Each player puts 1 chip into the
pot (the ante) and is dealt one private card. There are two betting rounds. In each round a raise
costs a fixed amount more than the current bet (2 chips in round 1, 4 chips in round 2) and at
most two raises are allowed. On your turn you may:

- "call": match the opponent's chips in the pot (a check when nothing is owed);
- "raise": match and raise by the round's fixed amount (while fewer than two raises were made);
- "fold": give up the pot (only when you owe chips).

A round ends when a player calls after the first action of the round. After round 1, one public
card is dealt face up. At the showdown after round 2, a player whose private card pairs the public
card wins; otherwise the higher private card wins; equal ranks split the pot.

Rewards: the chips won or lost (the opponent's chips in the pot, or minus your own).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from games.openspiel_mirror import OpenSpielMirror
from games.text_env import TextGame

RANKS, SUITS = "JQK", "sh"
FOLD, CALL, RAISE = 0, 1, 2
MOVES = ("fold", "call", "raise")
RAISE_SIZE = (2, 4)
MAX_RAISES = 2
MAX_CHIPS = 1 + MAX_RAISES * sum(RAISE_SIZE)
SLOTS = 4  # the most actions one round can hold: call, raise, raise, call


def card_text(card: int) -> str:
    """OpenSpiel's card ids: rank ``card // 2``, suit ``card % 2``."""
    return f"[{RANKS[card // 2]}{SUITS[card % 2]}]"


class LeducHoldem(OpenSpielMirror, TextGame):
    """Leduc hold'em with OpenSpiel's action ids (0 fold, 1 call, 2 raise) and deal order."""

    metadata = {
        **TextGame.metadata,
        "name": "leduc_holdem_v0",
        "information": "hidden",
        "max_turns": 2 * SLOTS,
        "strongest_bot": "leduc-cfr-v0",
    }
    openspiel_game = "leduc_poker"
    action_names = MOVES

    def __init__(self, **kwargs: Any) -> None:
        # own card (6) + public card (6) + two rounds of up to 4 one-hot moves (24) + chips (2)
        box = spaces.Box(0, 1, (38,), np.float32)
        super().__init__(2, spaces.Discrete(3), box, **kwargs)

    def _new_game(self, rng: np.random.Generator) -> None:
        deck = [int(c) for c in rng.permutation(6)]
        self.cards = (deck[0], deck[1])
        self._next_public = deck[2]
        self.public: int | None = None
        self.rounds: list[list[int]] = [[]]
        self.chips = [1, 1]
        self.folded: int | None = None
        self.history = list(self.cards)

    def _current_agent(self) -> str:
        return self.possible_agents[len(self.rounds[-1]) % 2]

    def _legal_actions(self, agent: str) -> list[int]:
        me = self.agent_index(agent)
        legal = [FOLD] if self.chips[me] < self.chips[1 - me] else []
        legal.append(CALL)
        if self.rounds[-1].count(RAISE) < MAX_RAISES:
            legal.append(RAISE)
        return legal

    def _why_illegal(self, agent: str, action: int) -> str:
        if action == FOLD:
            return "you owe nothing, so there is nothing to fold; call to check"
        return f"at most {MAX_RAISES} raises are allowed per round"

    def _apply(self, agent: str, action: int) -> Mapping[str, float]:
        me = self.agent_index(agent)
        moves = self.rounds[-1]
        self.history.append(action)
        if action == FOLD:
            self.folded = me
            return self._pay(winner=1 - me)
        round_over = action == CALL and len(moves) > 0
        self.chips[me] = self.chips[1 - me] + (
            RAISE_SIZE[len(self.rounds) - 1] if action == RAISE else 0
        )
        moves.append(action)
        if not round_over:
            return {}
        if len(self.rounds) == 1:
            self.public = self._next_public
            self.history.append(self.public)
            self.rounds.append([])
            return {}
        return self._pay(winner=self._showdown())

    def _showdown(self) -> int | None:
        ranks = [c // 2 for c in self.cards]
        public = self.public // 2
        pairs = [r == public for r in ranks]
        if pairs[0] != pairs[1]:
            return 0 if pairs[0] else 1
        if ranks[0] == ranks[1]:
            return None
        return 0 if ranks[0] > ranks[1] else 1

    def _pay(self, winner: int | None) -> Mapping[str, float]:
        if winner is None:
            return {}
        won = float(self.chips[1 - winner])
        return {self.possible_agents[winner]: won, self.possible_agents[1 - winner]: -won}

    def _showdown_reached(self) -> bool:
        """Whether round 2's betting ended with a call, so that both cards were shown."""
        return len(self.rounds) == 2 and len(self.rounds[1]) >= 2 and self.rounds[1][-1] == CALL

    def _outcome(self) -> str | None:
        if self.folded is not None:
            return "win"
        if self._showdown_reached():
            return "win" if self._showdown() is not None else "draw"
        return None

    def private_info(self, agent: str) -> list[str]:
        return [card_text(self.cards[self.agent_index(agent)])]

    def _observation_array(self, agent: str) -> np.ndarray:
        me = self.agent_index(agent)
        obs = np.zeros(38, dtype=np.float32)
        obs[self.cards[me]] = 1
        if self.public is not None:
            obs[6 + self.public] = 1
        for r, moves in enumerate(self.rounds):
            for i, move in enumerate(moves):
                obs[12 + r * 3 * SLOTS + 3 * i + move] = 1
        obs[36:] = self.chips[me] / MAX_CHIPS, self.chips[1 - me] / MAX_CHIPS
        return obs

    def _describe(self, agent: str) -> str:
        me = self.agent_index(agent)
        public = card_text(self.public) if self.public is not None else "not dealt yet"
        lines = [
            f"Leduc Hold'em. Your card: {card_text(self.cards[me])}. Public card: {public}.",
            f"Round {len(self.rounds)} of 2. Pot: {sum(self.chips)} chips (you put in "
            f"{self.chips[me]}, your opponent {self.chips[1 - me]}).",
        ]
        for r, moves in enumerate(self.rounds):
            log = ", ".join(f"player_{i % 2} {MOVES[m]}" for i, m in enumerate(moves))
            lines.append(f"Round {r + 1} betting: {log or 'none'}.")
        if self.folded is not None:
            lines.append(f"player_{self.folded} folded.")
        elif self._showdown_reached():  # not after a forfeit: no cards are shown then
            shown = ", ".join(f"player_{i} {card_text(c)}" for i, c in enumerate(self.cards))
            lines.append(f"Showdown: {shown}.")
        return "\n".join(lines)
