"""Simple Negotiation.

Seats: 2. player_0 speaks first.

Rules: a pool holds books, hats and balls (1 to 4 of each kind). Each player has private values
for the three kinds: whole numbers, chosen so that the whole pool is worth exactly 10 points to
that player. The players take turns; on your turn you write exactly one of:

- "offer books=B hats=H balls=L": you propose to keep B books, H hats and L balls and leave the
  rest to your opponent. Every split of the pool is a valid offer, at any time; it replaces the
  offer on the table.
- "accept": accept your opponent's offer on the table; the game ends with that split.
- "reject": refuse your opponent's offer on the table; the game ends with no deal.

"accept" and "reject" need an offer from your opponent on the table. Without agreement after 10
turns (by default) there is no deal.

Action text is read strictly apart from case and spacing: an offer names each kind exactly once,
in any order, with a whole number no larger than the pool holds.

Rewards: with a deal, the value of the items you get divided by 10 (between 0 and 1); with no
deal, 0 for both.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from games.text import CHARSET, normalize
from games.text_env import TextGame

ITEMS = ("books", "hats", "balls")
POOL_VALUE = 10
MAX_COUNT = 4
_OFFER = re.compile(r"offer\s*:?((?:\s*,?\s*[a-z]+\s*=\s*\d+){3})")
_PAIR = re.compile(r"([a-z]+)\s*=\s*(\d+)")


def offer_text(keep: tuple[int, ...]) -> str:
    return "offer " + " ".join(f"{item}={n}" for item, n in zip(ITEMS, keep, strict=True))


def values_text(values: tuple[int, ...]) -> str:
    return " ".join(f"{item[:-1]}={v}" for item, v in zip(ITEMS, values, strict=True))


class Negotiation(TextGame):
    """Split a pool of items by free-text offers; values are private (a hidden goal)."""

    metadata = {
        **TextGame.metadata,
        "name": "negotiation_v0",
        "kind": "general-sum",
        "information": "hidden",
        "max_turns": 10,
        "strongest_bot": "negotiation-conceder-v0",
    }

    def __init__(self, **kwargs: Any) -> None:
        box = spaces.Box(0, POOL_VALUE, (11,), np.float32)
        action_space = spaces.Text(200, min_length=1, charset=CHARSET)
        super().__init__(2, action_space, box, **kwargs)

    def _new_game(self, rng: np.random.Generator) -> None:
        choices: list[tuple[int, ...]] = []
        # some pools (e.g. 4-4-4) cannot be worth exactly POOL_VALUE; and the players' values
        # must differ, or there would be nothing to negotiate about
        while len(choices) < self.num_players:
            self.pool = tuple(int(n) for n in rng.integers(1, MAX_COUNT + 1, size=len(ITEMS)))
            choices = [
                v
                for v in itertools.product(range(POOL_VALUE + 1), repeat=len(ITEMS))
                if sum(n * x for n, x in zip(self.pool, v, strict=True)) == POOL_VALUE
            ]
        picks = rng.choice(len(choices), size=self.num_players, replace=False)
        self.values = [choices[i] for i in picks]
        self.offer: tuple[int, tuple[int, ...]] | None = None  # (proposer index, items kept)
        self.log: list[str] = []
        self.deal: bool | None = None

    def _current_agent(self) -> str:
        return self.possible_agents[self.turn % 2]

    def _legal_actions(self, agent: str) -> list[str]:
        offers = [offer_text(k) for k in itertools.product(*(range(n + 1) for n in self.pool))]
        if self.offer is not None and self.offer[0] != self.agent_index(agent):
            offers += ["accept", "reject"]
        return offers

    def _is_legal(self, agent: str, action: str) -> bool:
        # parse_action has already checked that an offer fits the pool
        return action.startswith("offer") or action in self._legal_actions(agent)

    def _why_illegal(self, agent: str, action: str) -> str:
        return f"there is no offer from your opponent to {action}"

    def parse_action(self, agent: str, text: str) -> str | None:
        if not isinstance(text, str):
            return None
        text = normalize(text)
        if text in ("accept", "reject"):
            return text
        match = _OFFER.fullmatch(text)
        if match is None:
            return None
        pairs = _PAIR.findall(match.group(1))
        counts = {item: int(n) for item, n in pairs}
        if len(counts) != len(pairs) or set(counts) != set(ITEMS):
            return None
        keep = tuple(counts[item] for item in ITEMS)
        if any(k > n for k, n in zip(keep, self.pool, strict=True)):
            return None
        return offer_text(keep)

    def _apply(self, agent: str, action: str) -> Mapping[str, float]:
        me = self.agent_index(agent)
        self.log.append(f"{agent}: {action}")
        if action == "reject":
            self.deal = False
            return {}
        if action.startswith("offer"):
            keep = tuple(int(n) for _, n in _PAIR.findall(action))
            self.offer = (me, keep)
            return {}
        self.deal = True
        proposer, keep = self.offer
        shares = {proposer: keep, me: tuple(n - k for n, k in zip(self.pool, keep, strict=True))}
        return {
            self.possible_agents[i]: self.worth(i, items) / POOL_VALUE
            for i, items in shares.items()
        }

    def worth(self, player: int, items: tuple[int, ...]) -> float:
        """Value of ``items`` to ``player``."""
        return float(sum(n * v for n, v in zip(items, self.values[player], strict=True)))

    def _outcome(self) -> str | None:
        if self.deal is None:
            return None
        return "agreement" if self.deal else "no_deal"

    def private_info(self, agent: str) -> list[str]:
        return [values_text(self.values[self.agent_index(agent)])]

    def _observation_array(self, agent: str) -> np.ndarray:
        me = self.agent_index(agent)
        offered = np.zeros(3, dtype=np.float32)
        if self.offer is not None and self.offer[0] != me:
            offered = np.subtract(self.pool, self.offer[1], dtype=np.float32)
        has_offer = float(self.offer is not None and self.offer[0] != me)
        turns_left = (self.max_turns - self.turn) / self.max_turns
        return np.array(
            [*self.pool, *self.values[me], *offered, has_offer, turns_left], dtype=np.float32
        )

    def _describe(self, agent: str) -> str:
        me = self.agent_index(agent)
        pool = ", ".join(f"{n} {item}" for n, item in zip(self.pool, ITEMS, strict=True))
        lines = [
            f"Simple Negotiation, turn {min(self.turn + 1, self.max_turns)} of {self.max_turns}.",
            f"Pool: {pool}. Your private values: {values_text(self.values[me])} "
            f"(the pool is worth {POOL_VALUE} to you).",
            *self.log,
        ]
        if self.offer is not None and not self.is_over:
            proposer, keep = self.offer
            rest = tuple(n - k for n, k in zip(self.pool, keep, strict=True))
            if proposer == me:
                lines.append(f"Your offer is on the table (you keep {offer_text(keep)[6:]}).")
            else:
                lines.append(
                    f"Offer on the table from player_{proposer}: you would get "
                    f"{offer_text(rest)[6:]}, worth {self.worth(me, rest):g} to you."
                )
        if not self.is_over:
            lines.append('Write one of: "offer books=B hats=H balls=L", "accept", "reject".')
        return "\n".join(lines)
