"""Mini Hanabi.

Seats: 2, playing together against the game.

Rules: the deck has 12 cards in two colors, red (R) and green (G), with ranks 1 (three copies
each), 2 (two copies) and 3 (one copy). Each player holds 2 cards facing away from themselves:
you see your partner's cards but never your own. The team builds one firework per color by
playing that color's cards in order 1, 2, 3. The team shares 3 hint tokens and 2 lives.

On your turn, do one of:

- "play N": play the card in your slot N. If it is the next card of its color's firework it is
  added (completing a firework with its 3 also gives back a hint token); otherwise it is
  discarded and the team loses a life.
- "discard N": discard the card in your slot N and regain a hint token (not allowed while all 3
  tokens are available).
- "hint COLOR" (red, green) or "hint RANK" (1, 2, 3): spend a hint token to tell your partner
  which of their cards have that color or rank. A hint must point at one card at least.

After playing or discarding you draw a new card into your last slot while the deck lasts. The
game ends when both fireworks are complete, when the last life is lost (the score is then 0), or
one round after the deck runs out.

Rewards: the same for both players: the score (cards in the fireworks) divided by 6.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from games.text_env import TextGame

COLORS = ("red", "green")
RANKS = (1, 2, 3)
COPIES = {1: 3, 2: 2, 3: 1}
HAND, MAX_TOKENS, LIVES = 2, 3, 2
MAX_SCORE = len(COLORS) * len(RANKS)
DECK_SIZE = len(COLORS) * sum(COPIES.values())
PLAY, DISCARD, HINT_COLOR, HINT_RANK = 0, HAND, 2 * HAND, 2 * HAND + len(COLORS)
NUM_ACTIONS = HINT_RANK + len(RANKS)
OBS_SIZE = HAND * MAX_SCORE + HAND * (len(COLORS) + len(RANKS)) + len(COLORS) + 3


def card_text(card: tuple[int, int]) -> str:
    color, rank = card
    return f"[{COLORS[color][0].upper()}{rank}]"


class MiniHanabi(TextGame):
    """A two-player, two-color Hanabi: cooperative play under hidden information."""

    metadata = {
        **TextGame.metadata,
        "name": "mini_hanabi_v0",
        "kind": "cooperative",
        "information": "hidden",
        "max_turns": 50,
        "strongest_bot": "hanabi-rules-v0",
    }
    action_names = (
        *(f"play {i + 1}" for i in range(HAND)),
        *(f"discard {i + 1}" for i in range(HAND)),
        *(f"hint {c}" for c in COLORS),
        *(f"hint {r}" for r in RANKS),
    )

    def __init__(self, **kwargs: Any) -> None:
        box = spaces.Box(0, 1, (OBS_SIZE,), np.float32)
        super().__init__(2, spaces.Discrete(NUM_ACTIONS), box, **kwargs)

    def _new_game(self, rng: np.random.Generator) -> None:
        cards = [(c, r) for c in range(len(COLORS)) for r in RANKS for _ in range(COPIES[r])]
        self.deck = [cards[i] for i in rng.permutation(len(cards))]
        self.hands = [[self.deck.pop() for _ in range(HAND)] for _ in range(2)]
        # what each player has been told about each of their own slots: (color, rank) or None
        self.knowledge: list[list[list[int | None]]] = [
            [[None, None] for _ in range(HAND)] for _ in range(2)
        ]
        self.fireworks = [0] * len(COLORS)
        self.tokens, self.lives = MAX_TOKENS, LIVES
        self.discards: list[tuple[int, int]] = []
        self.final_turns: int | None = None
        self.log: list[str] = []
        self._to_move = 0

    def _current_agent(self) -> str:
        return self.possible_agents[self._to_move]

    def _legal_actions(self, agent: str) -> list[int]:
        me = self.agent_index(agent)
        held = len(self.hands[me])
        partner = self.hands[1 - me]
        legal = [PLAY + i for i in range(held)]
        if self.tokens < MAX_TOKENS:
            legal += [DISCARD + i for i in range(held)]
        if self.tokens > 0:
            legal += [HINT_COLOR + c for c in range(len(COLORS)) if any(k[0] == c for k in partner)]
            legal += [HINT_RANK + i for i, r in enumerate(RANKS) if any(k[1] == r for k in partner)]
        return legal

    def _why_illegal(self, agent: str, action: int) -> str:
        if action < HINT_COLOR and action % HAND >= len(self.hands[self.agent_index(agent)]):
            return "that slot is empty"
        if DISCARD <= action < HINT_COLOR:
            return "discarding is not allowed while all hint tokens are available"
        if self.tokens == 0:
            return "no hint tokens are left"
        return "a hint must point at one of your partner's cards at least"

    def _apply(self, agent: str, action: int) -> Mapping[str, float]:
        me = self.agent_index(agent)
        if action < HINT_COLOR:
            self._play_or_discard(me, action % HAND, discard=action >= DISCARD)
        else:
            self._hint(me, action)
        self._to_move = 1 - me
        if self.final_turns is not None:
            self.final_turns -= 1
        elif not self.deck:
            self.final_turns = 2  # the deck just ran out: one more turn each
        if self._outcome() is None:
            return {}
        score = sum(self.fireworks) if self.lives > 0 else 0
        return dict.fromkeys(self.possible_agents, score / MAX_SCORE)

    def _play_or_discard(self, me: int, slot: int, discard: bool) -> None:
        card = self.hands[me].pop(slot)
        self.knowledge[me].pop(slot)
        color, rank = card
        if discard:
            self.discards.append(card)
            self.tokens += 1
            self.log.append(f"player_{me} discarded {card_text(card)}")
        elif self.fireworks[color] == rank - 1:
            self.fireworks[color] = rank
            if rank == RANKS[-1] and self.tokens < MAX_TOKENS:
                self.tokens += 1
            self.log.append(f"player_{me} played {card_text(card)}")
        else:
            self.discards.append(card)
            self.lives -= 1
            self.log.append(f"player_{me} misplayed {card_text(card)} and lost a life")
        if self.deck:
            self.hands[me].append(self.deck.pop())
            self.knowledge[me].append([None, None])

    def _hint(self, me: int, action: int) -> None:
        self.tokens -= 1
        partner = 1 - me
        field, value = (
            (0, action - HINT_COLOR) if action < HINT_RANK else (1, RANKS[action - HINT_RANK])
        )
        slots = [i for i, card in enumerate(self.hands[partner]) if card[field] == value]
        for i in slots:
            self.knowledge[partner][i][field] = value
        told = COLORS[value] if field == 0 else str(value)
        shown = ", ".join(str(i + 1) for i in slots)
        self.log.append(f"player_{me} hinted {told} to player_{partner}: slot(s) {shown}")

    def _outcome(self) -> str | None:
        if self.lives == 0:
            return "out_of_lives"
        if sum(self.fireworks) == MAX_SCORE:
            return "fireworks_complete"
        if self.final_turns == 0:
            return "deck_exhausted"
        return None

    def hidden_from(self, agent: str) -> list[str]:
        """A player's own hand, as its partner sees it."""
        return [self._hand_line(self.agent_index(agent))]

    def _hand_line(self, player: int) -> str:
        return f"player_{player}'s hand: " + " ".join(card_text(c) for c in self.hands[player])

    def _observation_array(self, agent: str) -> np.ndarray:
        me = self.agent_index(agent)
        obs = np.zeros(OBS_SIZE, dtype=np.float32)
        for i, (color, rank) in enumerate(self.hands[1 - me]):
            obs[i * MAX_SCORE + color * len(RANKS) + rank - 1] = 1
        base = HAND * MAX_SCORE
        width = len(COLORS) + len(RANKS)
        for i, (color, rank) in enumerate(self.knowledge[me]):
            if color is not None:
                obs[base + i * width + color] = 1
            if rank is not None:
                obs[base + i * width + len(COLORS) + rank - 1] = 1
        base += HAND * width
        obs[base : base + len(COLORS)] = np.array(self.fireworks) / len(RANKS)
        obs[-3:] = self.tokens / MAX_TOKENS, self.lives / LIVES, len(self.deck) / DECK_SIZE
        return obs

    def _describe(self, agent: str) -> str:
        me = self.agent_index(agent)
        fireworks = ", ".join(f"{c} {n}" for c, n in zip(COLORS, self.fireworks, strict=True))
        known = ", ".join(
            f"slot {i + 1}: {COLORS[c] if c is not None else '?'} {r if r is not None else '?'}"
            for i, (c, r) in enumerate(self.knowledge[me])
        )
        discards = " ".join(card_text(c) for c in self.discards) or "none"
        return "\n".join(
            [
                f"Mini Hanabi. Fireworks: {fireworks}. Hint tokens: {self.tokens}/{MAX_TOKENS}. "
                f"Lives: {self.lives}. Cards left in the deck: {len(self.deck)}.",
                f"Discarded: {discards}.",
                self._hand_line(1 - me),
                f"Your hand (what you have been told): {known or 'empty'}.",
                *self.log[-6:],
            ]
        )
