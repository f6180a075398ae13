"""Seat fillers and the helpers of their turns (arena/play/seats.py): seeds, actions as plain
values, and what an episode records of each kind of seat."""

from __future__ import annotations

import hashlib

import numpy as np

import games.bots
import simulators
from arena.play.seats import (
    BotSeat,
    SimulatorSeat,
    plain_action,
    request_seed,
    seat_assignment,
    seat_seed,
)


def test_a_request_seed_is_the_first_63_bits_of_blake2b_of_episode_and_turn() -> None:
    digest = hashlib.blake2b(b"ep-1:3", digest_size=8).digest()
    assert request_seed("ep-1", 3) == int.from_bytes(digest, "little") >> 1
    assert 0 <= request_seed("ep-1", 3) < 2**63
    assert request_seed("ep-1", 3) != request_seed("ep-1", 4) != request_seed("ep-2", 4)


def test_seat_seeds_repeat_per_seat_and_differ_between_seats() -> None:
    assert seat_seed(7, 0) == seat_seed(7, 0) == 2083679832
    assert seat_seed(7, 1) == 369571992


def test_actions_become_msgpack_friendly_values() -> None:
    assert plain_action(np.int64(4)) == 4 and type(plain_action(np.int64(4))) is int
    assert plain_action(None) is None
    assert plain_action("bet") == "bet"
    assert plain_action((1, 2)) == "(1, 2)"


def test_bots_and_simulators_are_recorded_untrained_under_their_names() -> None:
    bot = seat_assignment(BotSeat(games.bots.make("random-v0", seed=0), "random-v0"))
    assert (bot.role, bot.policy, bot.trained, bot.adapter) == ("bot", "random-v0", False, None)
    user = simulators.make("scripted-user-v0")
    simulated = seat_assignment(SimulatorSeat(user, "scripted-user-v0"))
    assert (simulated.role, simulated.policy, simulated.trained) == (
        user.role,
        "scripted-user-v0",
        False,
    )
