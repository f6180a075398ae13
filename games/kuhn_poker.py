"""Kuhn Poker.

Seats: 2. player_0 acts first.

Rules: the deck has three cards, J < Q < K. Each player puts 1 chip into the pot (the ante) and is
dealt one card that only they can see; the third card stays hidden. There is one round of
betting, one chip at a time and at most one bet:

- player_0 may pass (check) or bet 1 chip.
- If player_0 passed, player_1 may pass (showdown) or bet. If player_1 bet, player_0 may fold
  or call.
- If player_0 bet, player_1 may fold or call.

A fold gives the pot to the other player. At a showdown the higher card takes the pot.

Actions: "pass" or "bet" when no bet is open, "fold" or "call" facing a bet. OpenSpiel's names
are accepted facing a bet too: "pass" folds and "bet" calls.

Rewards: the chips won or lost: +1 or -1 after a fold or an unraised showdown, +2 or -2 after a
called bet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from games.openspiel_mirror import OpenSpielMirror
from games.text import normalize
from games.text_env import TextGame

CARDS = "JQK"
MOVES = ("pass", "bet")
"""OpenSpiel's action names, one per action id; accepted as replies in every state."""
OPENING = ("pass", "bet")
FACING_BET = ("fold", "call")
"""The names a seat reads and replies with: one pair per decision, so that a bet and a call
(OpenSpiel's one ``bet``) are different words. A policy that scores its replies (``act: choice``)
would otherwise move both whenever it moves one."""
TERMINAL = ("pp", "bp", "pbp", "bb", "pbb")


def card_text(card: int) -> str:
    return f"[{CARDS[card]}]"


class KuhnPoker(OpenSpielMirror, TextGame):
    """Kuhn poker with OpenSpiel's action ids (0 pass, 1 bet) and deal order."""

    metadata = {
        **TextGame.metadata,
        "name": "kuhn_poker_v0",
        "information": "hidden",
        "max_turns": 3,
        "strongest_bot": "kuhn-nash-v0",
    }
    openspiel_game = "kuhn_poker"
    action_names = MOVES

    def __init__(self, **kwargs: Any) -> None:
        # own card (3) + up to three betting moves, each one-hot over pass/bet (6)
        super().__init__(2, spaces.Discrete(2), spaces.Box(0, 1, (9,), np.int8), **kwargs)

    def _new_game(self, rng: np.random.Generator) -> None:
        deck = rng.permutation(3)
        self.cards = (int(deck[0]), int(deck[1]))
        self.bets = ""
        self.history = list(self.cards)

    def _current_agent(self) -> str:
        return self.possible_agents[len(self.bets) % 2]

    def _legal_actions(self, agent: str) -> list[int]:
        return [0, 1]

    def _apply(self, agent: str, action: int) -> Mapping[str, float]:
        self.bets += "pb"[action]
        self.history.append(action)
        if self.bets not in TERMINAL:
            return {}
        if self.bets in ("bp", "pbp"):
            winner = 0 if self.bets == "bp" else 1
            stake = 1.0
        else:
            winner = 0 if self.cards[0] > self.cards[1] else 1
            stake = 2.0 if self.bets.endswith("b") else 1.0
        return {self.possible_agents[winner]: stake, self.possible_agents[1 - winner]: -stake}

    def _outcome(self) -> str | None:
        return "win" if self.bets in TERMINAL else None

    def action_to_text(self, agent: str, action: Any) -> str:
        return self._names(self.bets)[int(action)]

    def parse_action(self, agent: str, text: str) -> Any | None:
        if not isinstance(text, str):
            return None
        word = normalize(text)
        names = self._names(self.bets)
        if word in names:
            return names.index(word)
        return MOVES.index(word) if word in MOVES else None

    @staticmethod
    def _names(bets: str) -> tuple[str, str]:
        """The action names of the decision after ``bets``."""
        return FACING_BET if "b" in bets else OPENING

    def private_info(self, agent: str) -> list[str]:
        return [card_text(self.cards[self.agent_index(agent)])]

    def _observation_array(self, agent: str) -> np.ndarray:
        obs = np.zeros(9, dtype=np.int8)
        obs[self.cards[self.agent_index(agent)]] = 1
        for i, move in enumerate(self.bets):
            obs[3 + 2 * i + "pb".index(move)] = 1
        return obs

    def _describe(self, agent: str) -> str:
        me = self.agent_index(agent)
        put_in = [1, 1]
        for i, move in enumerate(self.bets):
            put_in[i % 2] += move == "b"
        log = ", ".join(
            f"player_{i % 2} {self._names(self.bets[:i])['pb'.index(m)]}"
            for i, m in enumerate(self.bets)
        )
        lines = [
            f"Kuhn Poker. Your card: {card_text(self.cards[me])}.",
            f"Pot: {sum(put_in)} chips (you put in {put_in[me]}, your opponent {put_in[1 - me]}).",
            f"Betting so far: {log or 'none'}.",
        ]
        if self.bets in TERMINAL and self.bets not in ("bp", "pbp"):
            shown = ", ".join(f"player_{i} {card_text(c)}" for i, c in enumerate(self.cards))
            lines.append(f"Showdown: {shown}.")
        return "\n".join(lines)
