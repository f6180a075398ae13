"""Ordering episodes from the rollout actors (their ``rollout`` service, see
:mod:`arena.actors.rollout`) and combining their answers.

Collects come in whole groups of ``rollout.group_size`` episodes: the groups of a collect are
split over the actors, and no group is ever split between two of them, since only the episodes
of one order share a seed (and so a group id). A dead actor's share, or an actor's failed
episodes, is ordered again as fresh groups (a new seed), rounded up to whole groups: the
partial groups already sent still compare their surviving attempts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from arena.bus import Actor
from arena.play.stats import merge_collects


class Collector:
    """Splits collects over ``actors`` rollout actors and retries a dead actor's share."""

    def __init__(
        self,
        actor: Actor,
        actors: int,
        max_restarts: int,
        on_event: Callable[[str], None],
        group_size: int = 1,
    ) -> None:
        self.actor = actor
        self.actors = actors
        self.max_restarts = max_restarts
        self.on_event = on_event
        self.group_size = group_size
        """Episodes per group (same game, seed, seats and opponent): every order is a multiple."""
        self.opponent: dict[str, str] | None = None
        """Population mode: who fills the untrained seats (sent with every order)."""

    def shares(self, total: int) -> list[int]:
        """Episodes per actor: ``total`` rounded up to whole groups, the groups spread evenly."""
        n, size = self.actors, self.group_size
        groups = -(-total // size)
        return [(groups // n + (i < groups % n)) * size for i in range(n)]

    async def collect(self, total: int, seed: int) -> dict[str, Any]:
        """``total`` episodes split over the rollout actors; a dead actor's share is retried
        (the launcher restarts it meanwhile), ``max_restarts`` times at most."""
        n, size = self.actors, self.group_size
        shares = self.shares(total)
        replies = []
        for attempt in range(self.max_restarts + 1):
            orders = [(i, s) for i, s in enumerate(shares) if s > 0]
            results = await asyncio.gather(
                # One actor never gets an order seed twice (the coordinator's seeds are 100
                # apart per step), and episode ids name the actor and the order seed.
                *(self.order(i, s, seed + attempt * 10 + i) for i, s in orders),
                return_exceptions=True,
            )
            shares = [0] * n
            for (i, s), result in zip(orders, results, strict=True):
                if isinstance(result, BaseException):
                    self.on_event(
                        f"rollout-{i} failed its collect ({result}); re-queueing {s} episodes"
                    )
                    shares[i] = s
                else:
                    replies.append(result)
                    shares[i] = -(-result["failed"] // size) * size
            if not any(shares):
                break
            await asyncio.sleep(2.0)  # give the launcher time to restart the actor
        return merge_collects(replies)

    async def order(self, index: int, episodes: int, seed: int) -> dict[str, Any]:
        """One collect order to ``rollout-<index>`` (``episodes`` a multiple of the group
        size); returns its reply."""
        order: dict[str, Any] = {"op": "collect", "episodes": episodes, "seed": seed}
        if self.group_size > 1:
            order["group_size"] = self.group_size
        if self.opponent is not None:
            order["opponent"] = self.opponent
        reply = await self.actor.request(
            order, dst=f"rollout-{index}", service="rollout", timeout=3600
        )
        return reply.body
