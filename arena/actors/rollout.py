"""The rollout actor: plays many episodes at once and sends them to the learner.

A rollout actor is a bus actor named ``rollout-<i>`` that serves ``rollout`` requests from the
coordinator of ``arena train``::

    {"op": "collect", "episodes": 16, "seed": 1234,
     "opponent": {"policy": "pool", "label": "pool@step-4"}}     # population mode only
      -> {"episodes": 16, "failed": 0, "seconds": 3.2, "stats": {...}, "transcript": {...} | None}

It samples each episode's game from the mixture, fills the seats with a
:class:`~arena.play.seating.SeatFactory`, plays up to ``concurrency`` episodes at once on
asyncio (their generation requests batch together in the inference actors), and sends every
finished episode to service ``learner`` as an ``episode`` message, with every turn's tokens,
logprobs and policy version. An episode that fails (its policy errored) is dropped whole and
counted, never half-sent. A malformed collect order gets an error reply; the actor goes on.

Seats are randomized: in ``fixed`` and ``population`` modes the trained seat is drawn uniformly,
so the policy plays first and second alike. Population opponents are served by a second
inference actor (``policy:pool``) that the coordinator loads with a past checkpoint per collect.
Run it as ``arena rollout --address ADDR --config run.yaml --index 0``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from typing import Any

import games
from arena.bus import Actor, Message
from arena.models import load_tokenizer
from arena.play.config import PlayConfig
from arena.play.episode import EpisodeError, play_episode
from arena.play.seating import Opponent, SeatFactory
from arena.play.stats import episode_stats, transcript
from arena.policies.chat import ChatFormat
from arena.policies.remote import RemotePolicy
from arena.records import Episode

log = logging.getLogger("arena.rollout")


class RolloutActor:
    """One rollout actor process: serves ``rollout`` collect orders from the coordinator."""

    def __init__(
        self,
        play: PlayConfig,
        address: str,
        index: int,
        *,
        model: str,
        concurrency: int = 16,
        heartbeat_interval: float = 1.0,
    ) -> None:
        self.play = play
        self.address = address
        self.index = index
        self.model = model
        self.concurrency = concurrency
        self.heartbeat_interval = heartbeat_interval
        self.name = f"rollout-{index}"
        self.counters: Counter[str] = Counter()
        self._mixture = [g.id for g in play.games]
        self._weights = [g.weight for g in play.games]
        self._game_kwargs = {g.id: g.kwargs for g in play.games}

    async def run(self, stop: asyncio.Event) -> None:
        """Serve collect orders until ``stop`` is set."""
        chat = ChatFormat(load_tokenizer(self.model))
        actor = Actor(
            self.name, self.address, kind="rollout", heartbeat_interval=self.heartbeat_interval
        )
        actor.serve("rollout", self._on_request)
        self.actor = actor
        remotes: dict[str, RemotePolicy] = {}

        def remote(name: str) -> RemotePolicy:
            return remotes.setdefault(name, RemotePolicy(actor, name, timeout=600.0))

        self.factory = SeatFactory(self.play, remote(self.play.policy_name), chat, remote)
        await actor.start()
        log.info("%s ready", self.name)
        try:
            await stop.wait()
        finally:
            await actor.close()

    async def _on_request(self, msg: Message) -> dict[str, Any]:
        body = msg.body
        if not isinstance(body, dict) or body.get("op") != "collect":
            raise ValueError("rollout takes {'op': 'collect', 'episodes': N, 'seed': S}")
        count, seed = int(body["episodes"]), int(body["seed"])
        opponent = body.get("opponent")
        return await self.collect(count, seed, Opponent(**opponent) if opponent else None)

    async def collect(
        self, count: int, seed: int, opponent: Opponent | None = None
    ) -> dict[str, Any]:
        """Play ``count`` episodes, send each to the learner, and summarize them."""
        rng = random.Random(seed)
        limit = asyncio.Semaphore(self.concurrency)
        started = time.monotonic()
        plans = [
            (rng.choices(self._mixture, self._weights)[0], seed * 1000 + i) for i in range(count)
        ]

        async def one(game_id: str, episode_seed: int) -> Episode | None:
            async with limit:
                env = games.make(game_id, **self._game_kwargs[game_id])
                agents = list(env.possible_agents)
                seats = self.factory.seats(
                    game_id, agents, random.Random(episode_seed), episode_seed, opponent
                )
                try:
                    episode = await play_episode(
                        env,
                        game_id,
                        seats,
                        seed=episode_seed,
                        episode_id=f"{self.name}-{episode_seed}",
                    )
                except EpisodeError as err:
                    self.counters["episodes_failed"] += 1
                    log.warning("%s dropped an episode: %s", self.name, err)
                    return None
                self.actor.send("episode", episode.to_dict(), service="learner")
                return episode

        finished = [
            e for e in await asyncio.gather(*(one(g, s) for g, s in plans)) if e is not None
        ]
        return {
            "episodes": len(finished),
            "failed": count - len(finished),
            "seconds": time.monotonic() - started,
            "stats": episode_stats(finished),
            "transcript": transcript(finished[0]) if finished else None,
        }
