"""Nim: rules, the exact nim-sum bot, and alpha-beta agreeing with it.

Run with ``.venv/bin/python -m pytest -q tests/games/test_nim.py``.
"""

from __future__ import annotations

from functools import reduce
from itertools import product
from operator import xor

import pytest

from games.bots.minimax import AlphaBetaBot
from games.bots.nim import NimSumBot, optimal_move
from games.nim import Heaps, Nim


def test_taking_the_last_object_wins() -> None:
    env = Nim(heaps=(1, 2))
    env.reset(seed=0)
    env.step_text("take 2 from heap 2")
    assert not env.is_over
    env.step_text("Take 1 From Heap 1")
    assert env.returns == {"player_0": -1.0, "player_1": 1.0}


def test_action_text() -> None:
    env = Nim()
    env.reset(seed=0)
    assert env.action_to_text("player_0", 5 * 2 + 2) == "take 3 from heap 3"
    assert env.parse_action("player_0", "take 5 from heap 1") == 4  # well-formed, illegal
    assert env.parse_action("player_0", "take 6 from heap 1") is None  # no heap is that big
    assert env.parse_action("player_0", "take 0 from heap 1") is None
    assert env.parse_action("player_0", "take 1 from heap 4") is None
    env.step(4)
    assert env.infos["player_0"]["invalid_reason"] == "heap 1 has only 3 object(s), cannot take 5"


def test_optimal_move_restores_zero_nim_sum() -> None:
    # 3 ^ 4 ^ 5 = 2: the only winning move takes 2 from the heap of 3
    assert optimal_move(Heaps((3, 4, 5), 5)) == 0 * 5 + 2 - 1
    for sizes in product(range(5), repeat=3):
        if reduce(xor, sizes) == 0:
            continue
        after = Heaps(sizes, 4).play(optimal_move(Heaps(sizes, 4)))
        assert reduce(xor, after.sizes) == 0, sizes


def test_nim_sum_bot_wins_every_winnable_game() -> None:
    env = Nim(heaps=(3, 4, 5))
    bot, random_seat = NimSumBot(), AlphaBetaBot(depth=1, seed=0)
    for seed in range(10):
        env.reset(seed=seed)
        while not env.is_over:
            agent = env.agent_selection
            player = bot if agent == "player_0" else random_seat
            env.step(player.act(env, agent))
        assert env.returns["player_0"] == 1.0  # 3^4^5 != 0: the first player wins


def test_alpha_beta_finds_the_same_wins() -> None:
    search = AlphaBetaBot(seed=0)
    for sizes in product(range(4), repeat=3):
        heaps = Heaps(sizes, 3)
        if not any(sizes):
            continue
        best = search.best_moves(heaps)
        winning = reduce(xor, sizes) != 0
        leaves_zero = [reduce(xor, heaps.play(m).sizes) == 0 for m in best]
        assert all(leaves_zero) if winning else not any(leaves_zero), sizes


@pytest.mark.parametrize(
    ("heaps", "said"),
    [
        (5, "heaps must be a list of heap sizes, e.g. [3, 4, 5], got 5"),
        ("345", "heaps must be a list of heap sizes, e.g. [3, 4, 5], got '345'"),
        ([], "heaps must be a list of heap sizes, e.g. [3, 4, 5], got []"),
        ([3, 2.5], "heaps[1] must be a whole number >= 1, got 2.5"),
        ([3, 0], "heaps[1] must be a whole number >= 1, got 0"),
        ([3, "x"], "heaps[1] must be a whole number >= 1, got 'x'"),
    ],
)
def test_heaps_that_are_not_whole_sizes_are_refused_naming_them(heaps: object, said: str) -> None:
    # --game-arg heaps=5 said "'int' object is not iterable"; heaps=[2.5, 3] played heap 2
    with pytest.raises(ValueError) as err:
        Nim(heaps=heaps)
    assert str(err.value) == said
