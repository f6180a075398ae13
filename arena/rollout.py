"""Rollout actors: play many episodes at once and send them to the learner.

A rollout actor is a bus actor named ``rollout-<i>`` that serves ``rollout`` requests from the
trainer (the coordinator started by ``arena train``)::

    {"op": "collect", "episodes": 16, "seed": 1234,
     "opponent": {"policy": "pool", "label": "pool@step-4"}}     # population mode only
      -> {"episodes": 16, "failed": 0, "seconds": 3.2, "stats": {...}, "transcript": {...} | None}

It samples each episode's game from the mixture, assigns seats by the opponent mode, plays up to
``rollout.concurrency`` episodes at once on asyncio (their generation requests batch together
in the inference service), and sends every finished episode to service ``learner`` as an
``episode`` message, with every turn's tokens, logprobs and policy version. An episode that
fails (its policy errored) is dropped whole and counted, never half-sent.

Seats are randomized: in ``fixed`` and ``population`` modes the trained seat is drawn uniformly,
so the policy plays first and second alike. Population opponents are served by a second
inference actor (``policy:pool``) that the trainer loads with a past checkpoint per collect. Run it as a process::

    python -m arena.rollout --address ipc:///tmp/arena.sock --config run.yaml --index 0
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import games
import games.bots
import roles
from arena.bus import Actor, Message
from arena.config import GameConfig, RunConfig, load_run_config
from arena.episode import BotSeat, EpisodeError, PolicySeat, Seat, play_episode
from arena.evaluate import resolve_opponent
from arena.models import load_tokenizer
from arena.policies.base import SamplingParams
from arena.policies.chat import ChatFormat
from arena.policies.remote import RemotePolicy
from arena.records import Episode

log = logging.getLogger("arena.rollout")


class SeatFactory:
    """Builds the seat fillers of one episode from the run config (shared by rollout and eval)."""

    def __init__(self, config: RunConfig, policy: Any, chat: ChatFormat,
                 remote: Callable[[str], Any] | None = None) -> None:  # fmt: skip
        self.config = config
        self.policy = policy
        self.chat = chat
        self.remote = remote or (lambda name: policy)
        """Builds the policy served under another name (population opponents)."""
        self.params = SamplingParams(
            temperature=config.sampling.temperature, top_p=config.sampling.top_p,
            top_k=config.sampling.top_k, max_new_tokens=config.sampling.max_new_tokens,
        )  # fmt: skip
        self._games = {g.id: g for g in config.games}

    def policy_seat(self, game_id: str, *, trained: bool = True, params: SamplingParams | None = None,
                    policy: Any = None) -> PolicySeat:  # fmt: skip
        game = self._games[game_id]
        role = roles.make(game.role, **game.role_kwargs)
        params = params or self.params
        stop = tuple(dict.fromkeys((*params.stop, *role.stop_strings())))
        return PolicySeat(
            policy=policy or self.policy, role=role, chat=self.chat,
            params=SamplingParams(**{**params.to_dict(), "stop": stop}),
            policy_name=self.config.learner.name, trained=trained,
            invalid_penalty=self.config.rollout.invalid_penalty,
        )  # fmt: skip

    def seats(self, game_id: str, agents: list[str], rng: random.Random, seed: int,
              opponent: Opponent | None = None) -> dict[str, Seat]:  # fmt: skip
        """Seat fillers for one episode. The trained seat is drawn uniformly, so the policy
        plays first and second alike; the others follow the opponent mode."""
        mode = self.config.opponents.mode
        if mode == "self-play":
            return {agent: self.policy_seat(game_id) for agent in agents}
        trained = rng.choice(agents)
        seats: dict[str, Seat] = {trained: self.policy_seat(game_id)}
        for agent in agents:
            if agent == trained:
                continue
            if mode == "population" and opponent is not None:
                seat = self.policy_seat(game_id, trained=False, policy=self.remote(opponent.policy))
                seat.policy_name = opponent.label
                seats[agent] = seat
            else:
                bot_id = resolve_opponent(self.config.opponents.fixed, game_id)
                seats[agent] = BotSeat(games.bots.make(bot_id, seed=seed), bot_id)
        return seats


@dataclass(frozen=True)
class Opponent:
    """Who fills the untrained seats of a collect in population mode."""

    policy: str
    """The served policy name (``main``: the current policy; ``pool``: a past checkpoint)."""
    label: str
    """Recorded as the seats' policy, e.g. ``main@7`` or ``pool@step-4``."""


class RolloutWorker:
    """One rollout actor process: serves ``rollout`` collect orders from the trainer."""

    def __init__(self, config: RunConfig, address: str, index: int) -> None:
        self.config = config
        self.address = address
        self.index = index
        self.name = f"rollout-{index}"
        self.counters: Counter[str] = Counter()
        self._mixture = [g.id for g in config.games]
        self._weights = [g.weight for g in config.games]
        self._game_configs: dict[str, GameConfig] = {g.id: g for g in config.games}

    async def run(self, stop: asyncio.Event) -> None:
        chat = ChatFormat(load_tokenizer(self.config.model))
        actor = Actor(self.name, self.address, kind="rollout", heartbeat_interval=self.config.bus.heartbeat_interval)
        actor.serve("rollout", self._on_request)
        self.actor = actor
        remotes: dict[str, RemotePolicy] = {}

        def remote(name: str) -> RemotePolicy:
            return remotes.setdefault(name, RemotePolicy(actor, name, timeout=600.0))

        self.factory = SeatFactory(self.config, remote(self.config.learner.name), chat, remote)
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

    async def collect(self, count: int, seed: int, opponent: Opponent | None = None) -> dict[str, Any]:
        """Play ``count`` episodes, send each to the learner, and summarize them."""
        rng = random.Random(seed)
        limit = asyncio.Semaphore(self.config.rollout.concurrency)
        started = time.monotonic()
        plans = [(rng.choices(self._mixture, self._weights)[0], seed * 1000 + i) for i in range(count)]

        async def one(game_id: str, episode_seed: int) -> Episode | None:
            async with limit:
                env = games.make(game_id, **self._game_configs[game_id].kwargs)
                seats = self.factory.seats(game_id, list(env.possible_agents), random.Random(episode_seed),
                                           episode_seed, opponent)  # fmt: skip
                try:
                    episode = await play_episode(env, game_id, seats, seed=episode_seed,
                                                 episode_id=f"{self.name}-{episode_seed}")  # fmt: skip
                except EpisodeError as err:
                    self.counters["episodes_failed"] += 1
                    log.warning("%s dropped an episode: %s", self.name, err)
                    return None
                self.actor.send("episode", episode.to_dict(), service="learner")
                return episode

        finished = [e for e in await asyncio.gather(*(one(g, s) for g, s in plans)) if e is not None]
        return {"episodes": len(finished), "failed": count - len(finished),
                "seconds": time.monotonic() - started, "stats": summarize(finished),
                "transcript": transcript(finished[0]) if finished else None}  # fmt: skip


def summarize(episodes: list[Episode]) -> dict[str, Any]:
    """Per (game, role) reward and invalid rate, plus token and staleness counts."""
    by_key: dict[str, list[float]] = defaultdict(list)
    invalid: Counter[str] = Counter()
    turns: Counter[str] = Counter()
    versions: list[int] = []
    tokens = 0
    for episode in episodes:
        for turn in episode.turns:
            if turn.role == "bot":
                continue
            key = f"{turn.game}/{turn.role}"
            turns[key] += 1
            invalid[key] += not turn.valid
            tokens += len(turn.response_ids)
            versions.append(turn.policy_version)
        for seat, assignment in episode.seats.items():
            if assignment.trained:
                by_key[f"{episode.game}/{assignment.role}"].append(episode.final_rewards[seat])
    return {
        "reward": {k: sum(v) / len(v) for k, v in by_key.items()},
        "invalid_rate": {k: invalid[k] / turns[k] for k in turns},
        "policy_turns": sum(turns.values()),
        "generated_tokens": tokens,
        "min_version": min(versions, default=-1),
        "max_version": max(versions, default=-1),
    }


def merge_collects(replies: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine rollout actors' collect replies into one summary."""
    def weighted(key: str) -> dict[str, float]:
        sums: dict[str, float] = {}
        weights: dict[str, int] = {}
        for r in replies:
            for k, v in r["stats"][key].items():
                w = r["episodes"]
                sums[k] = sums.get(k, 0.0) + v * w
                weights[k] = weights.get(k, 0) + w
        return {k: sums[k] / max(weights[k], 1) for k in sums}

    return {
        "episodes": sum(r["episodes"] for r in replies),
        "failed": sum(r["failed"] for r in replies),
        "seconds": max((r["seconds"] for r in replies), default=0.0),
        "generated_tokens": sum(r["stats"]["generated_tokens"] for r in replies),
        "policy_turns": sum(r["stats"]["policy_turns"] for r in replies),
        "min_version": min((r["stats"]["min_version"] for r in replies), default=-1),
        "reward": weighted("reward"),
        "invalid_rate": weighted("invalid_rate"),
        "transcript": next((r["transcript"] for r in replies if r.get("transcript")), None),
    }


def transcript(episode: Episode) -> dict[str, Any]:
    """An episode as a readable conversation (for transcripts.jsonl)."""
    return {
        "id": episode.id, "game": episode.game, "termination": episode.termination,
        "final_rewards": episode.final_rewards,
        "seats": {seat: a.policy + ("" if a.trained else " (not trained)") for seat, a in episode.seats.items()},
        "turns": [{"seat": t.seat, "role": t.role, "text": t.text, "action": t.action,
                   "valid": t.valid, "reward": round(t.reward, 4), "version": t.policy_version}
                  for t in episode.turns],
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m arena.rollout", description="Run one rollout actor.")
    parser.add_argument("--address", required=True, help="broker address")
    parser.add_argument("--config", required=True, help="resolved run config (YAML)")
    parser.add_argument("--index", type=int, default=0, help="this actor's index (its name is rollout-<i>)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = load_run_config(args.config)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await RolloutWorker(config, args.address, args.index).run(stop)

    asyncio.run(serve())


if __name__ == "__main__":
    main()
