"""A conceding negotiator for Simple Negotiation.

It aims for a share of the pool's value to itself that falls from all of it on the first turn
to half of it on the last, accepts any offer that meets its current aim (or any offer worth
something on the last turn), and otherwise offers the split that meets its aim while leaving the
opponent the most items. It reads only its own values and the offers on the table.
"""

from __future__ import annotations

import itertools

from games.bots.base import Bot, unsupported
from games.negotiation import POOL_VALUE, Negotiation, offer_text
from games.text_env import TextGame


class ConcedingNegotiator(Bot):
    """Time-dependent concession: asks a lot early, settles for half late."""

    def act(self, env: TextGame, agent: str) -> str:
        if not isinstance(env, Negotiation):
            raise unsupported(self, env, "Simple Negotiation")
        me = env.agent_index(agent)
        aim = POOL_VALUE * (1.0 - 0.5 * env.turn / max(env.max_turns - 1, 1))
        if env.offer is not None and env.offer[0] != me:
            mine = tuple(n - k for n, k in zip(env.pool, env.offer[1], strict=True))
            worth = env.worth(me, mine)
            if worth >= aim or (env.turn == env.max_turns - 1 and worth > 0):
                return "accept"
        splits = list(itertools.product(*(range(n + 1) for n in env.pool)))
        good = [k for k in splits if env.worth(me, k) >= aim] or [env.pool]
        fewest = min(sum(k) for k in good)
        return offer_text(self.choose([k for k in good if sum(k) == fewest]))
