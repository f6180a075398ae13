"""Run: .venv/bin/python -m pytest -q tests/arena/tournament/test_schedule.py"""

from __future__ import annotations

from collections import Counter

import pytest

from arena.core.errors import ConfigError
from arena.play.config import GameConfig
from arena.tournament.schedule import schedule


def test_round_robin_plays_every_pairing_in_seat_swapped_pairs() -> None:
    matches = schedule(["a", "b", "c"], [GameConfig("tictactoe-v0")], pairs=3, seed=100)
    assert len(matches) == 3 * 3 * 2  # pairings x pairs x two seatings
    assert len({m.id for m in matches}) == len(matches)
    by_pair: dict[str, list] = {}
    for match in matches:
        by_pair.setdefault(match.pair, []).append(match)
    assert len(by_pair) == 9
    for pair in by_pair.values():
        first, second = pair
        assert first.seed == second.seed
        assert first.seats == tuple(reversed(second.seats))
    firsts = Counter(m.seats[0] for m in matches)
    assert firsts == {"a": 6, "b": 6, "c": 6}  # everyone moves first equally often
    assert sorted({m.seed for m in matches}) == [100, 101, 102]


def test_gauntlet_plays_only_against_the_reference() -> None:
    matches = schedule(
        ["ref", "x", "y"],
        [GameConfig("tictactoe-v0"), GameConfig("kuhn-poker-v0")],
        kind="gauntlet",
        reference="ref",
        pairs=2,
    )
    assert len(matches) == 2 * 2 * 2 * 2  # games x opponents x pairs x seatings
    assert all("ref" in m.seats for m in matches)
    assert {m.game for m in matches} == {"tictactoe-v0", "kuhn-poker-v0"}


def test_gauntlet_without_a_known_reference_is_refused() -> None:
    with pytest.raises(ConfigError, match="reference"):
        schedule(["a", "b"], [GameConfig()], kind="gauntlet")
    with pytest.raises(ConfigError, match="not a participant"):
        schedule(["a", "b"], [GameConfig()], kind="gauntlet", reference="zed")


def test_the_same_config_gives_the_same_ids() -> None:
    one = schedule(["a", "b", "c"], [GameConfig()], pairs=4, seed=7)
    two = schedule(["a", "b", "c"], [GameConfig()], pairs=4, seed=7)
    assert [m.id for m in one] == [m.id for m in two]


def test_n_player_tables_rotate_the_seats() -> None:
    game = GameConfig("liars-dice-v0", kwargs={"num_players": 3})
    matches = schedule(["a", "b", "c", "d"], [game], pairs=2)
    assert len(matches) == 4 * 2 * 3  # tables of three x repetitions x rotations
    table = [m for m in matches if set(m.seats) == {"a", "b", "c"} and m.seed == 0]
    assert [m.seats for m in table] == [("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b")]
    assert len({m.pair for m in table}) == 1
