"""Liar's Dice.

Seats: 2 to 6 (2 by default), every player for themselves.

Rules: every player rolls a few six-sided dice (2 by default) and keeps them hidden from the
others. The players then take turns in order, starting with player_0. On your turn, either:

- "bid Q Fs" (for example "bid 3 5s"): claim that at least Q of all the dice on the table show
  face F. A bid must be higher than the previous one: a larger Q, or the same Q with a larger F.
- "liar": challenge the previous bid (not possible on the first turn).

After a challenge all dice are shown. If at least Q dice show face F, the bid stands and the
challenger loses; otherwise the bidder loses. Ones are not wild. The game ends after that one
challenge; when the highest possible bid has been made, the next player must challenge.

Rewards: the loser gets -1, and every other player gets 1/(N-1), so rewards sum to zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from games.hook_checks import whole_number
from games.text_env import TextGame

FACES = 6


def dice_text(dice: list[int]) -> str:
    return "[" + " ".join(str(d) for d in sorted(dice)) + "]"


class LiarsDice(TextGame):
    """N-player Liar's Dice; bid ``(q, f)`` is action ``(q - 1) * 6 + (f - 1)``, and the last
    action is "liar"."""

    metadata = {
        **TextGame.metadata,
        "name": "liars_dice_v0",
        "seats": (2, 6),
        "information": "hidden",
        "max_turns": 25,
        "strongest_bot": "liars-dice-heuristic-v0",
    }

    def __init__(self, num_players: int = 2, dice_per_player: int = 2, **kwargs: Any) -> None:
        num_players = whole_number("num_players", num_players, minimum=2)
        if not 1 <= whole_number("dice_per_player", dice_per_player) <= 5:
            raise ValueError(f"dice_per_player must be between 1 and 5, got {dice_per_player!r}")
        self.dice_per_player = int(dice_per_player)
        self.total_dice = num_players * dice_per_player
        self.liar = self.total_dice * FACES
        self.action_names = (
            *(f"bid {q} {f}s" for q in range(1, self.total_dice + 1) for f in range(1, FACES + 1)),
            "liar",
        )
        kwargs.setdefault("max_turns", self.liar + 1)
        # own dice per face (6), the standing bid's quantity (1) and face one-hot (6), and who bid
        # it, counted from this seat (num_players)
        box = spaces.Box(0, 1, (2 * FACES + 1 + num_players,), np.float32)
        super().__init__(num_players, spaces.Discrete(self.liar + 1), box, **kwargs)

    def _new_game(self, rng: np.random.Generator) -> None:
        rolls = rng.integers(1, FACES + 1, size=(self.num_players, self.dice_per_player))
        self.dice = [[int(d) for d in row] for row in rolls]
        self.bids: list[int] = []
        self.loser: int | None = None

    def _current_agent(self) -> str:
        return self.possible_agents[len(self.bids) % self.num_players]

    def _legal_actions(self, agent: str) -> list[int]:
        first = self.bids[-1] + 1 if self.bids else 0
        return list(range(first, self.liar)) + ([self.liar] if self.bids else [])

    def _why_illegal(self, agent: str, action: int) -> str:
        if action == self.liar:
            return "there is no bid to challenge yet"
        return f"a bid must be higher than {self.action_names[self.bids[-1]]}"

    def _apply(self, agent: str, action: int) -> Mapping[str, float]:
        if action != self.liar:
            self.bids.append(action)
            return {}
        me = self.agent_index(agent)
        quantity, face = divmod(self.bids[-1], FACES)
        count = sum(row.count(face + 1) for row in self.dice)
        bidder = (len(self.bids) - 1) % self.num_players
        self.loser = me if count >= quantity + 1 else bidder
        share = 1.0 / (self.num_players - 1)
        return {a: -1.0 if i == self.loser else share for i, a in enumerate(self.possible_agents)}

    def _outcome(self) -> str | None:
        return None if self.loser is None else "win"

    def private_info(self, agent: str) -> list[str]:
        return [dice_text(self.dice[self.agent_index(agent)])]

    def _observation_array(self, agent: str) -> np.ndarray:
        me = self.agent_index(agent)
        obs = np.zeros(2 * FACES + 1 + self.num_players, dtype=np.float32)
        for d in self.dice[me]:
            obs[d - 1] += 1 / self.dice_per_player
        if self.bids:
            quantity, face = divmod(self.bids[-1], FACES)
            obs[FACES] = (quantity + 1) / self.total_dice
            obs[FACES + 1 + face] = 1
            bidder = (len(self.bids) - 1) % self.num_players
            obs[2 * FACES + 1 + (bidder - me) % self.num_players] = 1
        return obs

    def _describe(self, agent: str) -> str:
        me = self.agent_index(agent)
        lines = [
            f"Liar's Dice with {self.num_players} players and {self.total_dice} dice in all.",
            f"Your dice: {dice_text(self.dice[me])}.",
        ]
        lines += [
            f"player_{i % self.num_players}: {self.action_names[b]}"
            for i, b in enumerate(self.bids)
        ]
        if self.loser is not None:
            challenger = len(self.bids) % self.num_players
            lines.append(f"player_{challenger}: liar")
            lines += [f"player_{i} had {dice_text(d)}" for i, d in enumerate(self.dice)]
            lines.append(f"player_{self.loser} loses.")
        return "\n".join(lines)
