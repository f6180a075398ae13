"""The rollout actor: plays many episodes at once and sends them to the learner.

A rollout actor is a bus actor named ``rollout-<i>`` that serves ``rollout`` requests from the
coordinator of ``arena train``::

    {"op": "collect", "episodes": 16, "seed": 1234, "group_size": 4,   # group_size: default 1
     "lease": "rollout-3-1234",                                  # optional: the job's id
     "opponent": {"policy": "pool", "label": "pool@step-4",     # population mode only
                  "own": {"responder": {"policy": "pool-responder",  # trained models of
                                        "label": "pool-responder@step-4"}}}}  # their own only
      -> {"episodes": 16, "failed": 0, "error": "", "seconds": 3.2, "stats": {...},
          "transcript": {...} | None}

It plays the order as ``episodes / group_size`` groups (``episodes`` must be a multiple of
``group_size``). The order's seed draws each group's game from the mixture and its episode seed;
the ``group_size`` episodes of a group share both, so they start from the same deal or board
with the same seats (the trained seat and the bots follow from the episode seed) and the same
opponent, and differ only by what the policy samples. Their turns share a group id per seat
(arena/play/episode.py), which the ``group`` and ``broadcast`` advantage modes normalize over.
A group's finished episodes go to the learner in one ``episode`` message once the whole group
is played, and the learner queues them as one unit, so no learner step (async mode steps while
rollouts play) trains on part of a group. Episode ids are
``<lease>-<index>``, the lease defaulting to ``rollout-<i>-<order seed>``: unique for any order
size, as long as the coordinator never gives one actor the same order seed twice. An order is
a job: given again (the same seed, size and lease) to any rollout actor, it plays the same
games under the same episode ids, so the learner trains on whichever copy of an episode comes
first and drops the others as duplicates (:mod:`arena.run.collection` re-leases the jobs of
an actor that died or overran its lease). The coordinator stops a straggler's job before it
leases it again::

    {"op": "cancel", "lease": "rollout-3-1234"} -> {"cancelled": true}   # false: none under way

The groups it already sent stay sent (a group goes out whole, never half); the rest are not
played, and the cancelled collect answers with an error that nobody waits for any more.

It fills the seats with a :class:`~arena.play.seating.SeatFactory`, plays up to ``concurrency``
episodes at once on asyncio (their generation requests batch together in the inference actors),
and sends every finished episode to service ``learner`` as an ``episode`` message, with every
turn's tokens, logprobs and policy version. An episode that fails (its policy, a bot, a
simulator or the game itself errored, a bot took longer than its bound on one move, or it ran
past the run's bound on one episode: ``max_episode_turns`` turns or ``episode_timeout``
seconds, :func:`~arena.play.episode.play_episode`) is dropped whole and counted, never half-sent; the
rest of its group still goes out. The reply's ``failed`` counts them and ``error`` gives the
first one's reason (empty when none failed), which ``arena train`` shows on the step line and in
``events.log``. A malformed collect order gets an error reply; the actor goes on.

Seats are randomized: in ``fixed`` and ``population`` modes the trained seat is drawn from the
episode seed (uniformly over seeds, the same within a group; among the seats whose policy
trains, with named policies), so the policy plays first and second alike. Population opponents are served by a second inference actor (``policy:pool``)
that the coordinator loads with a past checkpoint per collect (and, for each trained policy with a
model of its own, by ``policy:pool-<policy>`` loaded with that policy's checkpoint, ``own``).
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
from arena.models import chat_tokenizer
from arena.play.config import PlayConfig
from arena.play.episode import play_episode
from arena.play.seating import Opponent, SeatFactory
from arena.play.seats import EpisodeError
from arena.play.stats import episode_stats, transcript
from arena.policies.chat import ChatFormat
from arena.policies.remote import RemotePolicy
from arena.records import Episode

log = logging.getLogger("arena.rollout")
ERROR_CHARS = 500
"""The first failed episode's reason is cut to this many characters in a collect's reply: a
simulator's exception may carry a whole traceback or payload."""


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
        policy_timeout: float,
        learners: tuple[str, ...] = ("learner",),
        max_episode_turns: int | None = None,
        episode_timeout: float | None = None,
    ) -> None:
        self.play = play
        self.max_episode_turns = max_episode_turns
        self.episode_timeout = episode_timeout
        """The run's bounds on one episode (``rollout.max_episode_turns``,
        ``rollout.episode_timeout``; None: none): past either, that episode fails."""
        self.learners = learners
        """The services every finished group goes to: the run's learner, and the learner of
        each named policy with a model of its own, which keep their own policy's turns
        (:mod:`arena.run.bases`)."""
        self.address = address
        self.index = index
        self.model = model
        self.concurrency = concurrency
        self.heartbeat_interval = heartbeat_interval
        self.policy_timeout = policy_timeout
        """Seconds one policy request may wait for its reply (the run's ``inference.timeout``);
        past it that episode fails, and the rest play on."""
        self.name = f"rollout-{index}"
        self.counters: Counter[str] = Counter()
        self._running: dict[str, asyncio.Task[dict[str, Any]]] = {}
        """Collects under way, by lease: what a ``cancel`` order can stop."""
        self._mixture = [g.id for g in play.games]
        self._weights = [g.weight for g in play.games]
        self._game_kwargs = {g.id: g.kwargs for g in play.games}

    async def run(self, stop: asyncio.Event) -> None:
        """Serve collect orders until ``stop`` is set."""
        chat = ChatFormat(chat_tokenizer(self.model))
        actor = Actor(
            self.name, self.address, kind="rollout", heartbeat_interval=self.heartbeat_interval
        )
        actor.serve("rollout", self._on_request)
        self.actor = actor
        self.factory = self.seat_factory(actor, chat)
        await actor.start()
        log.info("%s ready", self.name)
        try:
            await stop.wait()
        finally:
            await actor.close()

    def seat_factory(self, actor: Actor, chat: ChatFormat) -> SeatFactory:
        """The seats of this actor's episodes (:func:`served_seats`), each policy request
        bounded by :attr:`policy_timeout`."""
        return served_seats(actor, self.play, chat, self.policy_timeout)

    async def _on_request(self, msg: Message) -> dict[str, Any]:
        body = msg.body
        if isinstance(body, dict) and body.get("op") == "cancel":
            return {"cancelled": self.cancel(body.get("lease"))}
        if not isinstance(body, dict) or body.get("op") != "collect":
            raise ValueError("rollout takes {'op': 'collect', 'episodes': N, 'seed': S}")
        count, seed = int(body["episodes"]), int(body["seed"])
        group_size = int(body.get("group_size", 1))
        opponent = body.get("opponent")
        lease = body.get("lease")
        if lease is not None and not isinstance(lease, str):
            raise ValueError(f"lease must be a string, got {lease!r}")
        key = lease or f"{self.name}-{seed}"
        task = asyncio.ensure_future(
            self.collect(
                count,
                seed,
                Opponent(**opponent) if opponent else None,
                group_size=group_size,
                lease=key,
            )
        )
        self._running[key] = task
        try:
            # awaiting the task directly: a cancelled request cancels the collect with it
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and not current.cancelling():  # a cancel order, not ours
                raise ValueError(f"job {key} was cancelled (its lease ran out)") from None
            raise
        finally:
            if self._running.get(key) is task:
                del self._running[key]

    def cancel(self, lease: Any) -> bool:
        """Stop the collect of ``lease`` (a straggler whose job was leased again): the groups
        it already sent stay sent, the others are not played. False if none is under way."""
        if not isinstance(lease, str):
            raise ValueError(f"cancel needs a lease name, got {lease!r}")
        task = self._running.get(lease)
        if task is None or task.done():
            return False
        task.cancel()
        self.counters["jobs_cancelled"] += 1
        log.info("%s: cancelled job %s", self.name, lease)
        return True

    def plan(self, count: int, seed: int, group_size: int = 1) -> list[tuple[str, int]]:
        """(game, episode seed) of each episode of an order, group by group: the order's seed
        draws a game and a seed per group, and every episode of the group shares them.

        Episode seeds are drawn (48 bits) rather than counted from the order's seed, so that
        no two orders of a run share a start by construction (``seed * 1000 + i`` did once an
        order held 1000 episodes); a chance repeat is harmless, as the same (game, seed, seat)
        is the same start."""
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        if count < 0 or count % group_size:
            raise ValueError(f"episodes ({count}) must be a multiple of group_size ({group_size})")
        rng = random.Random(seed)
        plans = []
        for _ in range(count // group_size):
            game_id = rng.choices(self._mixture, self._weights)[0]
            plans += [(game_id, rng.getrandbits(48))] * group_size
        return plans

    async def collect(
        self,
        count: int,
        seed: int,
        opponent: Opponent | None = None,
        *,
        group_size: int = 1,
        lease: str | None = None,
    ) -> dict[str, Any]:
        """Play ``count`` episodes in groups of ``group_size``, send each group's to the
        learner once the group is done, and summarize them. Episodes are named
        ``<lease>-<index>`` (default lease: ``<actor name>-<seed>``)."""
        plans = self.plan(count, seed, group_size)
        lease = lease or f"{self.name}-{seed}"
        limit = asyncio.Semaphore(self.concurrency)
        started = time.monotonic()
        errors: list[str] = []

        async def one(index: int, game_id: str, episode_seed: int) -> Episode | None:
            async with limit:
                env = games.make(game_id, **self._game_kwargs[game_id])
                try:
                    seats = self.factory.seats(
                        game_id, env, random.Random(episode_seed), episode_seed, opponent
                    )
                    return await play_episode(
                        env,
                        game_id,
                        seats,
                        seed=episode_seed,
                        episode_id=f"{lease}-{index}",
                        max_turns=self.max_episode_turns,
                        timeout=self.episode_timeout,
                    )
                except EpisodeError as err:
                    self.counters["episodes_failed"] += 1
                    errors.append(str(err))
                    log.warning("%s dropped an episode: %s", self.name, err)
                    return None

        async def group(first: int) -> list[Episode]:
            members = range(first, first + group_size)
            played = await asyncio.gather(*(one(i, *plans[i]) for i in members))
            finished = [e for e in played if e is not None]
            if finished:  # in one message: the learner queues a group whole (learner_actor.py)
                body = [e.to_dict() for e in finished]
                for service in self.learners:
                    self.actor.send("episode", body, service=service)
            return finished

        groups = await asyncio.gather(*(group(i) for i in range(0, count, group_size)))
        finished = [e for g in groups for e in g]
        return {
            "episodes": len(finished),
            "failed": count - len(finished),
            "error": errors[0][:ERROR_CHARS] if errors else "",
            "seconds": time.monotonic() - started,
            "stats": episode_stats(finished),
            "transcript": transcript(finished[0]) if finished else None,
        }


def served_seats(actor: Actor, play: PlayConfig, chat: ChatFormat, timeout: float) -> SeatFactory:
    """Seats on the policies the run's inference actors serve: the trained policy and every
    named one are :class:`RemotePolicy` clients (bounded by ``timeout`` per request), and a named
    policy with a model of its own speaks that model's chat template."""
    remotes: dict[str, RemotePolicy] = {}
    chats = {play.policy_name: chat}

    def remote(name: str) -> RemotePolicy:
        return remotes.setdefault(name, RemotePolicy(actor, name, timeout=timeout))

    def chat_of(name: str) -> ChatFormat:
        if name not in chats:
            chats[name] = ChatFormat(chat_tokenizer(str(play.policies[name].model)))
        return chats[name]

    return SeatFactory(play, remote(play.policy_name), chat, remote, chat_of)
