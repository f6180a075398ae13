"""arena/actors/rollout.py: a RolloutActor behind a real broker, over real ipc:// sockets.

Everything runs in this process: the broker on a thread; on one asyncio loop, the rollout actor
under test, a fake inference actor serving ``policy:main`` (and ``policy:pool``) that always
names the first legal action, a fake learner that keeps every ``episode`` message sent to
service ``learner``, and a coordinator that sends collect orders to service ``rollout``.

Covers: a collect of N episodes sends N complete episodes with unique ids and a reply whose
counts and stats match them; malformed collect orders get error replies and the actor keeps
serving; a policy that fails mid-episode turns into ``failed`` counts, and no part of those
episodes reaches the learner; so does an episode past the bound on one episode (turns,
seconds), while the order's others go out; population opponents are served by the policy the order names;
groups of ``group_size`` episodes share a game, a seed, seats and a group id per seat; episode
seeds and ids stay unique in large orders; the coordinator's Collector (arena/run/collection.py)
orders whole groups and re-orders failed episodes as whole groups.

Run with `.venv/bin/python -m pytest -q tests/arena/actors/test_rollout.py`.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from arena.actors.rollout import RolloutActor
from arena.bus import Actor, BusError, Message
from arena.commands.rollout import rollout_actor
from arena.play.config import GameConfig, OpponentConfig, PlayConfig
from arena.policies.types import Generation, Prompt, SamplingParams
from arena.records import Episode
from arena.run.collection import Collector
from arena.run.config import load_run_config

MAIN_VERSION, POOL_VERSION = 5, 2
ANSWER_TOKENS = 8
"""``<answer>N</answer>`` is 7 tokens with SmolLM2's tokenizer, plus the sampled <|im_end|>."""
TICTACTOE_TURNS = 7
"""Both seats always name the first legal cell: X 1, O 2, X 3, O 4, X 5, O 6, X 7 wins (3-5-7)."""


class FirstLegal:
    """A fake inference service: reads the prompt ids, answers the first legal action.

    With ``fail_kuhn`` it fails every Kuhn request after the first bet of an episode, so each
    Kuhn episode dies half-played (one turn done, the second refused).
    """

    def __init__(self, tokenizer, version: int, fail_kuhn: bool = False) -> None:
        self.tokenizer = tokenizer
        self.version = version
        self.fail_kuhn = fail_kuhn
        self.end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.counts: Counter[str] = Counter()

    def __call__(self, msg: Message) -> dict[str, Any]:
        prompt = Prompt.from_dict(msg.body["prompt"])
        SamplingParams.from_dict(msg.body["params"])  # a well-formed request, as served for real
        text = self.tokenizer.decode(prompt.ids.tolist())
        if self.fail_kuhn and "Kuhn Poker" in text and "Betting so far: none" not in text:
            self.counts["failed"] += 1
            raise RuntimeError("the fake policy fell over")
        self.counts["answered"] += 1
        move = re.findall(r"Legal actions: ([^\n]*)", text)[-1].split(", ")[0]
        ids = [
            *self.tokenizer.encode(f"<answer>{move}</answer>", add_special_tokens=False),
            self.end_id,
        ]
        return Generation(
            prompt_ids=prompt.ids,
            token_ids=np.asarray(ids, np.int32),
            logprobs=np.full(len(ids), -0.5, np.float32),
            text=f"<answer>{move}",
            finish_reason="stop",
            version=self.version,
        ).to_dict()


@dataclass
class World:
    rollout: RolloutActor
    coordinator: Actor
    main: FirstLegal
    episodes: list[Episode] = field(default_factory=list)
    messages: list[list[Episode]] = field(default_factory=list)
    """The episodes of each ``episode`` message, as the learner received them."""

    def receive(self, body: Any) -> None:
        batch = [Episode.from_dict(e) for e in (body if isinstance(body, list) else [body])]
        self.messages.append(batch)
        self.episodes.extend(batch)

    async def collect(self, body: Any) -> dict[str, Any]:
        reply = await self.coordinator.request(body, service="rollout", timeout=120)
        return reply.body

    async def settle(self, count: int, timeout: float = 10.0) -> list[Episode]:
        """The episodes received once ``count`` have arrived, and a little after (so that an
        extra one would be seen too)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.episodes) < count and loop.time() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        return list(self.episodes)


@asynccontextmanager
async def world(
    address: str, tokenizer, play: PlayConfig, *, fail_kuhn: bool = False, **bounds: Any
) -> AsyncIterator[World]:
    main = FirstLegal(tokenizer, MAIN_VERSION, fail_kuhn)
    inference = Actor(
        "fake-inference",
        address,
        heartbeat_interval=0.2,
        services={"policy:main": main, "policy:pool": FirstLegal(tokenizer, POOL_VERSION)},
    )
    learner = Actor(
        "fake-learner", address, heartbeat_interval=0.2, services={"learner": lambda m: None}
    )
    coordinator = Actor("coordinator", address, heartbeat_interval=0.2)
    rollout = RolloutActor(
        play,
        address,
        0,
        model="tiny",
        concurrency=4,
        heartbeat_interval=0.2,
        policy_timeout=60,
        **bounds,
    )
    w = World(rollout, coordinator, main)
    learner.on("episode", lambda m: w.receive(m.body))
    for actor in (inference, learner, coordinator):
        await actor.start()
    stop = asyncio.Event()
    task = asyncio.get_running_loop().create_task(rollout.run(stop))
    try:
        for _ in range(500):  # the rollout actor loads its tokenizer, then registers
            actors = (await coordinator.request(service="broker.actors", timeout=5)).body
            if any("rollout" in a["services"] for a in actors):
                break
            assert not task.done(), task.exception()
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the rollout actor never registered")
        yield w
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        for actor in (coordinator, learner, inference):
            await actor.close()


def tictactoe() -> PlayConfig:
    return PlayConfig(games=[GameConfig("tictactoe-v0")])


def assert_complete_tictactoe(ep: Episode) -> None:
    """A whole self-play game of the first-legal policy, as the learner must receive it."""
    assert ep.game == "tictactoe-v0" and ep.termination == "win"
    assert [t.index for t in ep.turns] == list(range(TICTACTOE_TURNS))
    assert [t.action for t in ep.turns] == list(range(TICTACTOE_TURNS))
    assert ep.final_rewards == {"player_0": 1.0, "player_1": -1.0}
    assert [t.reward for t in ep.turns][-2:] == [-1.0, 1.0]
    for t in ep.turns:
        assert t.trained and t.valid and t.policy_version == MAIN_VERSION
        assert t.prompt_ids.dtype == np.int32 and len(t.prompt_ids) > 0
        assert len(t.response_ids) == len(t.response_logprobs) == ANSWER_TOKENS


def test_a_collect_sends_each_episode_once_and_reports_it(broker: str, tiny_tokenizer) -> None:
    async def scenario() -> None:
        async with world(broker, tiny_tokenizer, tictactoe()) as w:
            reply = await w.collect({"op": "collect", "episodes": 6, "seed": 3})
            got = await w.settle(6)
            assert reply["episodes"] == 6 and reply["failed"] == 0 and reply["seconds"] > 0
            assert len(got) == 6
            ids = [e.id for e in got]
            assert len(set(ids)) == 6
            # The id names the actor, the order's seed and the index; the order's seed draws
            # each episode's seed (groups of one here: six different starts).
            assert sorted(ids) == [f"rollout-0-3-{i}" for i in range(6)]
            planned = w.rollout.plan(6, 3)
            assert sorted(e.seed for e in got) == sorted(s for _, s in planned)
            assert len({e.seed for e in got}) == 6
            for ep in got:
                assert_complete_tictactoe(ep)
            # Self-play: both seats trained, +1 and -1 -> mean reward 0; 6 x 7 turns of 8 tokens.
            stats = reply["stats"]
            assert stats["reward"] == {"tictactoe-v0/player": 0.0}
            assert stats["invalid_rate"] == {"tictactoe-v0/player": 0.0}
            assert stats["policy_turns"] == 6 * TICTACTOE_TURNS == w.main.counts["answered"]
            assert stats["generated_tokens"] == 6 * TICTACTOE_TURNS * ANSWER_TOKENS
            assert stats["min_version"] == stats["max_version"] == MAIN_VERSION
            assert (
                reply["transcript"]["id"] in ids
                and len(reply["transcript"]["turns"]) == TICTACTOE_TURNS
            )
            # A second order with another seed: new ids, none repeated across the two.
            reply = await w.collect({"op": "collect", "episodes": 3, "seed": 4})
            got = await w.settle(9)
            assert reply["episodes"] == 3 and len(got) == 9
            assert len({e.id for e in got}) == 9

    asyncio.run(scenario())


MALFORMED = [
    None,  # no body
    ["collect", 2],  # not a map
    {"op": "train", "episodes": 2, "seed": 1},  # unknown op
    {"op": "collect", "seed": 1},  # no count
    {"op": "collect", "episodes": "many", "seed": 1},  # a count that is no number
    {"op": "collect", "episodes": 2, "seed": 1, "opponent": {"policy": "pool"}},  # no label
    {"op": "collect", "episodes": 6, "seed": 1, "group_size": 4},  # not whole groups
    {"op": "collect", "episodes": 2, "seed": 1, "group_size": 0},  # no group
    {"op": "collect", "episodes": 2, "seed": 1, "lease": 7},  # a lease that is no name
]


def test_malformed_orders_get_errors_and_the_actor_keeps_serving(
    broker: str, tiny_tokenizer
) -> None:
    async def scenario() -> None:
        async with world(broker, tiny_tokenizer, tictactoe()) as w:
            for n, order in enumerate(MALFORMED, 1):
                with pytest.raises(BusError) as info:
                    await w.collect(order)
                assert info.value.code == "handler_error", order
                assert w.rollout.actor.counters["handler_error"] == n
            reply = await w.collect({"op": "collect", "episodes": 2, "seed": 5})
            got = await w.settle(2)
            assert reply["episodes"] == 2 and reply["failed"] == 0
            # Nothing was played for the refused orders.
            assert sorted(e.id for e in got) == ["rollout-0-5-0", "rollout-0-5-1"]
            # a job leased again names its episodes after its lease, whoever plays it
            again = {"op": "collect", "episodes": 2, "seed": 5, "lease": "rollout-3-5"}
            assert (await w.collect(again))["episodes"] == 2
            replayed = [e for e in await w.settle(4) if e not in got]
            assert sorted(e.id for e in replayed) == ["rollout-3-5-0", "rollout-3-5-1"]
            assert [e.game for e in replayed] == [e.game for e in got]

    asyncio.run(scenario())


def test_failed_episodes_are_counted_and_never_half_sent(broker: str, tiny_tokenizer) -> None:
    # Tic-Tac-Toe and Kuhn in equal measure; every Kuhn episode fails on its second request.
    play = PlayConfig(games=[GameConfig("tictactoe-v0"), GameConfig("kuhn-poker-v0")])

    async def scenario() -> None:
        async with world(broker, tiny_tokenizer, play, fail_kuhn=True) as w:
            reply = await w.collect({"op": "collect", "episodes": 12, "seed": 2})
            got = await w.settle(reply["episodes"])
            failed = reply["failed"]
            assert failed >= 1 and reply["episodes"] >= 1, reply  # this seed draws both games
            assert reply["episodes"] + failed == 12
            # Each failed episode had played its first turn and died on its second request.
            assert w.main.counts["failed"] == failed
            assert w.rollout.counters["episodes_failed"] == failed
            # Only the finished episodes reached the learner, each whole; nothing of Kuhn.
            assert len(got) == reply["episodes"]
            for ep in got:
                assert_complete_tictactoe(ep)
            assert reply["stats"]["policy_turns"] == len(got) * TICTACTOE_TURNS
            assert list(reply["stats"]["reward"]) == ["tictactoe-v0/player"]

    asyncio.run(scenario())


def test_an_episode_past_the_runs_bound_fails_alone(broker: str, tiny_tokenizer) -> None:
    # Tic-Tac-Toe (7 turns here) and a Prisoner's Dilemma of a million rounds, a game that for
    # a run never ends: under a 20-turn bound each dilemma fails with the reason, is counted and
    # never sent, and the Tic-Tac-Toe episodes of the same order go out whole. Without the
    # bound the order would play on until its lease ran out, then be leased again to loop.
    endless = GameConfig("prisoners-dilemma-v0", kwargs={"rounds": 1_000_000})
    play = PlayConfig(games=[GameConfig("tictactoe-v0"), endless])

    async def scenario() -> None:
        async with world(broker, tiny_tokenizer, play, max_episode_turns=20) as w:
            reply = await w.collect({"op": "collect", "episodes": 8, "seed": 2})
            got = await w.settle(reply["episodes"])
            plans = w.rollout.plan(8, 2)
            endless_ones = [i for i, (game, _) in enumerate(plans) if game != "tictactoe-v0"]
            assert 1 <= len(endless_ones) < 8, plans  # this seed draws both games
            assert reply["failed"] == len(endless_ones) == w.rollout.counters["episodes_failed"]
            assert reply["episodes"] == len(got) == 8 - len(endless_ones)
            for ep in got:
                assert_complete_tictactoe(ep)
            first = endless_ones[0]
            assert reply["error"] == (
                f"prisoners-dilemma-v0 episode rollout-0-2-{first}: not over after 20 turns, the "
                "bound on one episode (rollout.max_episode_turns); the game did not end it"
            )
            # The same by the clock: one second for an order of dilemmas alone.
            w.rollout.max_episode_turns, w.rollout.episode_timeout = None, 1.0
            w.rollout._mixture, w.rollout._weights = [endless.id], [1.0]  # dilemmas alone
            started = asyncio.get_running_loop().time()
            reply = await w.collect({"op": "collect", "episodes": 2, "seed": 3})
            assert 1.0 <= asyncio.get_running_loop().time() - started < 10.0
            assert reply["episodes"] == 0 and reply["failed"] == 2
            assert re.fullmatch(
                r"prisoners-dilemma-v0 episode rollout-0-3-[01]: not over after 1 s, the "
                r"bound on one episode \(rollout\.episode_timeout\)",
                reply["error"],
            ), reply["error"]
            assert len(await w.settle(len(got))) == len(got)  # nothing more reached the learner

    asyncio.run(scenario())


def test_the_rollout_command_passes_the_runs_bounds() -> None:
    config = load_run_config(None, ["rollout.max_episode_turns=7"])
    actor = rollout_actor(config, "ipc:///nowhere", 0)
    assert (actor.max_episode_turns, actor.episode_timeout) == (7, 1800.0)


def test_population_opponents_play_the_policy_the_order_names(broker: str, tiny_tokenizer) -> None:
    play = PlayConfig(
        games=[GameConfig("tictactoe-v0")], opponents=OpponentConfig(mode="population")
    )
    order = {
        "op": "collect",
        "episodes": 8,
        "seed": 1,
        "opponent": {"policy": "pool", "label": "pool@step-2"},
    }

    async def scenario() -> None:
        async with world(broker, tiny_tokenizer, play) as w:
            reply = await w.collect(order)
            got = await w.settle(8)
            assert reply["episodes"] == 8 and len(got) == 8
            trained_seats = Counter()
            for ep in got:
                (mine,) = [s for s, a in ep.seats.items() if a.trained]
                (other,) = [s for s, a in ep.seats.items() if not a.trained]
                assert ep.seats[mine].policy == "main" and ep.seats[other].policy == "pool@step-2"
                for t in ep.turns:
                    expected = (True, MAIN_VERSION) if t.seat == mine else (False, POOL_VERSION)
                    assert (t.trained, t.policy_version) == expected
                trained_seats[mine] += 1
            assert set(trained_seats) == {"player_0", "player_1"}  # the trained seat is drawn
            # Only the trained seats' outcomes count in the reward.
            wins = sum(ep.final_rewards[s] for ep in got for s, a in ep.seats.items() if a.trained)
            assert reply["stats"]["reward"]["tictactoe-v0/player"] == pytest.approx(wins / 8)

    asyncio.run(scenario())


def test_groups_share_game_seed_seats_and_group_id(broker: str, tiny_tokenizer) -> None:
    # Fixed mode against the random bot, over two games: 12 episodes in groups of 4 are 3
    # groups, each 4 attempts of one game from one seed, with one trained seat and one bot.
    play = PlayConfig(
        games=[GameConfig("tictactoe-v0"), GameConfig("kuhn-poker-v0")],
        opponents=OpponentConfig(mode="fixed", fixed="random-v0"),
    )

    async def scenario() -> None:
        async with world(broker, tiny_tokenizer, play) as w:
            order = {"op": "collect", "episodes": 12, "seed": 9, "group_size": 4}
            reply = await w.collect(order)
            got = await w.settle(12)
            assert reply["episodes"] == 12 and reply["failed"] == 0 and len(got) == 12
            assert len({e.id for e in got}) == 12
            by_start: dict[tuple[str, int], list[Episode]] = {}
            for ep in got:
                by_start.setdefault((ep.game, ep.seed), []).append(ep)
            assert sorted(len(g) for g in by_start.values()) == [4, 4, 4]
            assert sorted(by_start) == sorted(set(w.rollout.plan(12, 9, 4)))
            for (game, seed), group in by_start.items():
                # The same trained seat and bot in every attempt, and one group id per seat.
                assert all(e.seats == group[0].seats for e in group)
                (trained,) = [s for s, a in group[0].seats.items() if a.trained]
                ids = {t.group for e in group for t in e.turns if t.seat == trained}
                assert ids == {f"{game}:{seed}:{trained}"}
            # Each group reaches the learner whole, in one message, which it queues as one unit.
            assert sorted((b[0].game, b[0].seed, len(b)) for b in w.messages) == sorted(
                (game, seed, 4) for game, seed in by_start
            )

    asyncio.run(scenario())


def test_episode_seeds_and_ids_do_not_collide_in_large_orders() -> None:
    # seed * 1000 + i made episode 1000 of order 3 the same as episode 0 of order 4.
    actor = RolloutActor(tictactoe(), "ipc:///nowhere", 0, model="tiny", policy_timeout=60)
    first, second = actor.plan(1500, 3), actor.plan(1500, 4)
    assert len({s for _, s in first} | {s for _, s in second}) == 3000
    grouped = actor.plan(1500, 3, group_size=5)
    assert len({s for _, s in grouped}) == 300
    assert all(grouped[i] == grouped[i - i % 5] for i in range(1500))
    with pytest.raises(ValueError, match="multiple of group_size"):
        actor.plan(7, 3, group_size=2)


def test_the_collector_orders_whole_groups_and_reorders_failed_ones_as_groups() -> None:
    # The coordinator's side of a collect: 12 episodes in groups of 4 over 2 actors are 3
    # groups, never one split between actors; rollout-1 drops one episode of its first order,
    # so it gets a whole new group (a fresh seed) rather than a lone episode.
    orders: list[tuple[str, dict[str, Any]]] = []

    class Bus:
        async def request(self, body: dict[str, Any], *, dst: str, **_: Any) -> SimpleNamespace:
            orders.append((dst, body))
            failed = 1 if dst == "rollout-1" and len(orders) <= 2 else 0
            stats = {
                "reward": {},
                "invalid_rate": {},
                "generated_tokens": 0,
                "policy_turns": 0,
                "min_version": 0,
            }
            return SimpleNamespace(
                body={
                    "episodes": body["episodes"] - failed,
                    "failed": failed,
                    "seconds": 0.0,
                    "stats": stats,
                    "transcript": None,
                }
            )

    bus: Any = Bus()
    collector = Collector(bus, 2, max_restarts=3, on_event=lambda _: None, group_size=4)
    assert collector.shares(12) == [8, 4] and collector.shares(8) == [4, 4]
    assert collector.shares(6) == [4, 4]  # rounded up to whole groups
    assert Collector(bus, 3, 3, lambda _: None, group_size=4).shares(8) == [4, 4, 0]
    merged = asyncio.run(collector.collect(12, seed=100))
    assert [(dst, o["episodes"], o["seed"], o["group_size"]) for dst, o in orders] == [
        ("rollout-0", 8, 100, 4),
        ("rollout-1", 4, 101, 4),
        ("rollout-1", 4, 111, 4),  # the retry: a new order seed, a whole group
    ]
    assert merged["episodes"] == 15 and merged["failed"] == 1
