"""arena/play/seating.py: SeatFactory in each opponent mode, resolve_opponent and Opponent.

Self-play fills every seat with a trained seat of the served policy; ``fixed`` mode seats one
trained seat, drawn uniformly, and bots elsewhere; ``population`` mode puts the remote policy an
:class:`Opponent` names in the other seats, recorded under its label (each through its own seat's
named policy, with named policies); ``strongest`` resolves to
each game's strongest reference bot. Seats are built, not played (no model, no bus).

Run with `.venv/bin/python -m pytest -q tests/arena/play/test_seating.py`.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

import games
from arena.play.config import GameConfig, OpponentConfig, PlayConfig, PolicySpec, SamplingConfig
from arena.play.seating import Opponent, SeatFactory, resolve_opponent
from arena.play.seats import BotSeat, PolicySeat
from arena.policies.chat import ChatFormat
from arena.policies.types import SamplingParams
from games.bots.kuhn import KuhnNashBot
from games.bots.minimax import AlphaBetaBot
from games.bots.random_bot import RandomBot

AGENTS = ["player_0", "player_1"]
THREE = ["player_0", "player_1", "player_2"]


def env(game_id: str, players: int = 2) -> games.TextGame:
    if players == 2:
        return games.make(game_id)
    return games.make(game_id, num_players=players)


class Named:
    """Stands in for a policy: seating only passes policies around."""

    def __init__(self, name: str) -> None:
        self.name = name


@pytest.fixture
def chat(tiny_tokenizer) -> ChatFormat:
    return ChatFormat(tiny_tokenizer)


def factory(
    chat: ChatFormat, mode: str = "self-play", fixed: str = "random-v0", **play
) -> SeatFactory:
    config = PlayConfig(
        games=[
            GameConfig("tictactoe-v0"),
            GameConfig("kuhn-poker-v0", role_kwargs={"prefill": True}),
            GameConfig("liars-dice-v0"),
        ],
        opponents=OpponentConfig(mode=mode, fixed=fixed),
        **play,
    )
    remotes: dict[str, Named] = {}
    return SeatFactory(
        config, Named("main"), chat, lambda name: remotes.setdefault(name, Named(name))
    )


def test_self_play_fills_every_seat_with_the_trained_policy(chat: ChatFormat) -> None:
    f = factory(chat)
    seats = f.seats("tictactoe-v0", env("tictactoe-v0"), random.Random(0), seed=0)
    assert list(seats) == AGENTS
    for s in seats.values():
        assert isinstance(s, PolicySeat)
        assert s.policy is f.policy and s.trained and s.policy_name == "main"
    # Each seat has its own PolicySeat (its own conversation), not one shared object.
    assert seats["player_0"] is not seats["player_1"]
    # Three seats, three trained seats: self-play knows no opponent.
    assert len(f.seats("liars-dice-v0", env("liars-dice-v0", 3), random.Random(0), 0)) == 3


def test_fixed_mode_seats_one_trained_seat_and_bots_elsewhere(chat: ChatFormat) -> None:
    f = factory(chat, mode="fixed")
    trained = Counter()
    for seed in range(40):
        seats = f.seats("tictactoe-v0", env("tictactoe-v0"), random.Random(seed), seed)
        policy_seats = [a for a, s in seats.items() if isinstance(s, PolicySeat)]
        assert len(policy_seats) == 1
        (mine,) = policy_seats
        assert seats[mine].trained and seats[mine].policy is f.policy
        (other,) = set(AGENTS) - {mine}
        bot = seats[other]
        assert (
            isinstance(bot, BotSeat) and bot.name == "random-v0" and isinstance(bot.bot, RandomBot)
        )
        trained[mine] += 1
    # The trained seat is drawn uniformly: over 40 draws both seats occur, neither dominates
    # (a fair coin gives 20 +- 3.2; 8..32 is more than 3.5 standard deviations either side).
    assert set(trained) == set(AGENTS)
    assert 8 <= trained["player_0"] <= 32, trained
    # With three seats, still exactly one trained seat and two bots.
    seats = f.seats("liars-dice-v0", env("liars-dice-v0", 3), random.Random(1), 1)
    assert sorted(type(s).__name__ for s in seats.values()) == ["BotSeat", "BotSeat", "PolicySeat"]


def test_the_draw_follows_the_rng(chat: ChatFormat) -> None:
    f = factory(chat, mode="fixed")

    def trained_seat(seed: int) -> str:
        seats = f.seats("tictactoe-v0", env("tictactoe-v0"), random.Random(seed), seed)
        return next(a for a, s in seats.items() if isinstance(s, PolicySeat))

    # The draw is random.Random(seed).choice(agents): same seed, same seat.
    assert [trained_seat(s) for s in range(10)] == [
        random.Random(s).choice(AGENTS) for s in range(10)
    ]


def test_strongest_resolves_per_game(chat: ChatFormat) -> None:
    assert resolve_opponent("strongest", "tictactoe-v0") == "minimax-v0"
    assert resolve_opponent("strongest", "kuhn-poker-v0") == "kuhn-nash-v0"
    assert resolve_opponent("random-v0", "kuhn-poker-v0") == "random-v0"
    f = factory(chat, mode="fixed", fixed="strongest")
    for game_id, name, kind in [
        ("tictactoe-v0", "minimax-v0", AlphaBetaBot),
        ("kuhn-poker-v0", "kuhn-nash-v0", KuhnNashBot),
    ]:
        seats = f.seats(game_id, env(game_id), random.Random(0), 0)
        (bot,) = [s for s in seats.values() if isinstance(s, BotSeat)]
        assert bot.name == name and isinstance(bot.bot, kind)


def test_population_mode_seats_the_named_remote_policy(chat: ChatFormat) -> None:
    f = factory(chat, mode="population")
    opponent = Opponent(policy="pool", label="pool@step-4")
    seen = set()
    for seed in range(10):
        seats = f.seats("tictactoe-v0", env("tictactoe-v0"), random.Random(seed), seed, opponent)
        assert all(isinstance(s, PolicySeat) for s in seats.values())
        (mine,) = [a for a, s in seats.items() if s.trained]
        (other,) = [a for a, s in seats.items() if not s.trained]
        assert seats[mine].policy is f.policy and seats[mine].policy_name == "main"
        assert seats[other].policy.name == "pool" and seats[other].policy is f.remote("pool")
        assert seats[other].policy_name == "pool@step-4"
        seen.add(mine)
    assert seen == set(AGENTS)
    # The latest policy as the opponent: the same policy object, still untrained and labelled.
    seats = f.seats(
        "tictactoe-v0", env("tictactoe-v0"), random.Random(0), 0, Opponent("main", "main@7")
    )
    (other,) = [s for s in seats.values() if not s.trained]
    assert other.policy.name == "main" and other.policy_name == "main@7"
    # Without an opponent for the collect, population mode falls back to the fixed bot.
    seats = f.seats("tictactoe-v0", env("tictactoe-v0"), random.Random(0), 0)
    assert sorted(type(s).__name__ for s in seats.values()) == ["BotSeat", "PolicySeat"]


def test_policy_seats_carry_the_config(chat: ChatFormat) -> None:
    f = factory(
        chat,
        sampling=SamplingConfig(temperature=0.7, top_p=0.9, top_k=5, max_new_tokens=12),
        policy_name="hero",
        invalid_penalty=0.3,
    )
    s = f.policy_seat("kuhn-poker-v0")
    assert (s.params.temperature, s.params.top_p, s.params.top_k, s.params.max_new_tokens) == (
        0.7,
        0.9,
        5,
        12,
    )
    assert s.params.stop == ("</answer>",)  # the role's closing tag ends generation
    assert (s.policy_name, s.invalid_penalty, s.chat) == ("hero", 0.3, chat)
    assert s.role.name == "player" and s.role.prefill  # this game's role_kwargs
    assert not f.policy_seat("tictactoe-v0").role.prefill
    # Extra stop strings are kept, in order, with the role's added once.
    mine = f.policy_seat(
        "tictactoe-v0", params=SamplingParams(stop=("\n\n", "</answer>")), trained=False
    )
    assert mine.params.stop == ("\n\n", "</answer>") and not mine.trained
    with pytest.raises(KeyError):
        f.policy_seat("nim-v0")  # not in this config's game mixture


def test_each_seat_samples_with_its_policys_own_sampling(chat: ChatFormat) -> None:
    # Kuhn's second seat plays a trained model of its own at T = 0.5 with longer replies, and
    # tic-tac-toe's second seat a frozen one that samples greedily with top-k; their other
    # fields, and every other seat, take the run's sampling (T = 0.9, top-p 1, 12 tokens).
    policies = {
        "hot": PolicySpec(model="tiny", sampling={"temperature": 0.5, "max_new_tokens": 40}),
        "cold": PolicySpec(model="tiny", train=False, sampling={"temperature": 0, "top_k": 3}),
    }
    f = factory(
        chat,
        sampling=SamplingConfig(temperature=0.9, max_new_tokens=12),
        policies=policies,
        seat_policies={"kuhn-poker-v0:player_1": "hot", "tictactoe-v0:player_1": "cold"},
    )
    seats = f.seats("kuhn-poker-v0", env("kuhn-poker-v0"), random.Random(0), 0)
    seats |= {
        f"ttt_{a}": s
        for a, s in f.seats("tictactoe-v0", env("tictactoe-v0"), random.Random(0), 0).items()
    }
    got = {
        agent: (
            s.policy.name,
            s.params.temperature,
            s.params.top_p,
            s.params.top_k,
            s.params.max_new_tokens,
            s.trained,
        )
        for agent, s in seats.items()
    }
    assert got == {
        "player_0": ("main", 0.9, 1.0, 0, 12, True),
        "player_1": ("hot", 0.5, 1.0, 0, 40, True),
        "ttt_player_0": ("main", 0.9, 1.0, 0, 12, True),
        "ttt_player_1": ("cold", 0.0, 1.0, 3, 12, False),
    }
    assert seats["player_1"].params.stop == ("</answer>",)  # the role's stop still comes on top
    # an evaluation's temperature replaces the temperature alone, not the policy's length
    evaluated = f.policy_seat(
        "kuhn-poker-v0", temperature=0.0, env=env("kuhn-poker-v0"), agent="player_1"
    )
    assert (evaluated.params.temperature, evaluated.params.max_new_tokens) == (0.0, 40)
    assert f.params_of("hot").temperature == 0.5 and f.params_of(None) == f.params


def test_population_opponents_play_their_own_seats_policy_snapshot(chat: ChatFormat) -> None:
    # Two adapters on the shared base, one per Kuhn seat; "second" samples at T = 0.5. The
    # trained seat plays its own adapter on the current weights; the other seat plays *its*
    # adapter on the drawn snapshot (the pool actor), at its own sampling, untrained, labelled.
    f = factory(
        chat,
        mode="population",
        sampling=SamplingConfig(temperature=0.9),
        policies={"first": PolicySpec(), "second": PolicySpec(sampling={"temperature": 0.5})},
        seat_policies={"player_0": "first", "player_1": "second"},
    )
    pool = Opponent(policy="pool", label="pool@step-00000002")
    got = set()
    for seed in range(10):
        seats = f.seats("kuhn-poker-v0", env("kuhn-poker-v0"), random.Random(seed), seed, pool)
        got.add(
            tuple(
                (a, s.policy.name, s.policy_name, s.params.adapter, s.params.temperature, s.trained)
                for a, s in sorted(seats.items())
            )
        )
    assert got == {
        (
            ("player_0", "main", "main", "first", 0.9, True),
            ("player_1", "pool", "pool@step-00000002", "second", 0.5, False),
        ),
        (
            ("player_0", "pool", "pool@step-00000002", "first", 0.9, False),
            ("player_1", "main", "main", "second", 0.5, True),
        ),
    }
    # The current weights as the opponent: the served policy, still each seat's own adapter.
    latest = Opponent("main", "main@3")
    seats = f.seats("kuhn-poker-v0", env("kuhn-poker-v0"), random.Random(0), 0, latest)
    (other,) = [s for s in seats.values() if not s.trained]
    (mine,) = [s for s in seats.values() if s.trained]
    assert other.policy.name == "main" and other.policy_name == "main@3"
    assert {other.params.adapter, mine.params.adapter} == {"first", "second"}


@pytest.mark.parametrize("mode", ["population", "fixed"])
def test_a_frozen_model_of_its_own_is_never_the_trained_seat_nor_a_snapshot(
    chat: ChatFormat, mode: str
) -> None:
    # Liar's dice, three seats: player_2 is a frozen model of its own; the others adapters. In
    # fixed mode the bot replaces the other trained policy's seat, never the frozen one (it
    # replaced the frozen judge of configs/two_models.yaml with random-v0).
    f = factory(
        chat,
        mode=mode,
        policies={"hero": PolicySpec(), "judge": PolicySpec(model="tiny", train=False)},
        seat_policies={"player_0": "hero", "player_1": "hero", "player_2": "judge"},
    )
    pool = Opponent(policy="pool", label="pool@initial")
    trained = Counter()
    for seed in range(20):
        seats = f.seats("liars-dice-v0", env("liars-dice-v0", 3), random.Random(seed), seed, pool)
        (mine,) = [a for a, s in seats.items() if isinstance(s, PolicySeat) and s.trained]
        trained[mine] += 1
        frozen = seats["player_2"]
        assert (frozen.policy.name, frozen.policy_name, frozen.trained) == ("judge", "judge", False)
        assert frozen.params.adapter is None
        (other,) = {"player_0", "player_1"} - {mine}
        if mode == "fixed":
            assert isinstance(seats[other], BotSeat) and seats[other].name == "random-v0"
            continue
        assert (seats[other].policy.name, seats[other].params.adapter) == ("pool", "hero")
    # the trained seat is drawn from the two seats whose policy trains, never the judge's
    assert set(trained) == {"player_0", "player_1"}


def test_a_trained_model_of_its_own_plays_its_own_snapshot_of_the_draw(chat: ChatFormat) -> None:
    # Kuhn: player_1 is the responder, a trained model of its own sampling at T = 0.5 with a
    # tokenizer of its own; player_0 the shared policy. As the opponent, the responder's seat
    # plays the snapshot the collect's Opponent names under `own` (its pool actor), in its own
    # chat and sampling, untrained; the shared seat plays the shared pool's snapshot.
    config = PlayConfig(
        games=[GameConfig("kuhn-poker-v0", role_kwargs={"prefill": True})],
        opponents=OpponentConfig(mode="population"),
        sampling=SamplingConfig(temperature=0.9),
        policies={"responder": PolicySpec(model="tiny", sampling={"temperature": 0.5})},
        seat_policies={"player_1": "responder"},
    )
    own_chat = ChatFormat(chat.tokenizer)
    remotes: dict[str, Named] = {}
    f = SeatFactory(
        config,
        Named("main"),
        chat,
        lambda name: remotes.setdefault(name, Named(name)),
        lambda name: own_chat,
    )
    # as a collect order carries it (arena/run/population.py -> arena/actors/rollout.py)
    pool = Opponent(
        **{
            "policy": "pool",
            "label": "pool@step-00000002",
            "own": {
                "responder": {"policy": "pool-responder", "label": "pool-responder@step-00000001"}
            },
        }
    )
    got = set()
    for seed in range(10):
        seats = f.seats("kuhn-poker-v0", env("kuhn-poker-v0"), random.Random(seed), seed, pool)
        got.add(
            tuple(
                (
                    a,
                    s.policy.name,
                    s.policy_name,
                    s.params.temperature,
                    s.trained,
                    s.chat is own_chat,
                )
                for a, s in sorted(seats.items())
            )
        )
    assert got == {
        (
            ("player_0", "main", "main", 0.9, True, False),
            ("player_1", "pool-responder", "pool-responder@step-00000001", 0.5, False, True),
        ),
        (
            ("player_0", "pool", "pool@step-00000002", 0.9, False, False),
            ("player_1", "responder", "responder", 0.5, True, True),
        ),
    }
    # without `own` (an order from before, or a frozen model) it plays its model as served
    seats = f.seats("kuhn-poker-v0", env("kuhn-poker-v0"), random.Random(0), 0, Opponent("a", "b"))
    assert {(s.policy.name, s.policy_name) for s in seats.values()} <= {
        ("responder", "responder"),
        ("main", "main"),
        ("a", "b"),
    }


def test_strongest_names_the_game_whose_strongest_bot_is_not_registered() -> None:
    from arena.core.registry import RegistryError
    from games.tictactoe import TicTacToe

    class WrongStrongest(TicTacToe):
        metadata = {**TicTacToe.metadata, "strongest_bot": "minimax-v9"}

    assert resolve_opponent("strongest", "tictactoe-v0") == "minimax-v0"
    assert resolve_opponent("random-v0", "tictactoe-v0") == "random-v0"
    games.registry.register("wrong-strongest-v0", WrongStrongest)
    try:
        with pytest.raises(RegistryError) as err:
            resolve_opponent("strongest", "wrong-strongest-v0")
    finally:
        del games.registry._entries["wrong-strongest-v0"]
    assert str(err.value).startswith(
        "wrong-strongest-v0's strongest bot (its metadata['strongest_bot']): unknown bot "
        "'minimax-v9'; did you mean 'minimax-v0'"
    )
