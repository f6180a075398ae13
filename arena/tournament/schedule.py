"""The schedule: every match of a tournament, with a stable id, decided before any is played.

Two-player games are played in seat-swapped pairs: match ``k`` of pairing (a, b) is played twice
with seed ``seed + k``, a in seat 0 once and b in seat 0 once, so a deal or an opening that
favours one seat favours both participants equally. An N-player game (as its ``kwargs`` build
it, e.g. ``num_players: 3``) seats every table of N participants in each of its N rotations. A
match's id names the game, the seed and the seats, so the same config always yields the same
ids: resuming skips the ids already in the log.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import games
from arena.core.errors import ConfigError
from arena.play.config import GameConfig


@dataclass(frozen=True)
class ScheduledMatch:
    """One match to play."""

    game: str
    seed: int
    seats: tuple[str, ...]
    """Participant names, seat 0 first."""
    pair: str
    """The id shared by the matches of one seat-swapped pair (or one rotation set)."""

    @property
    def id(self) -> str:
        return f"{self.game}/{self.seed}/{'|'.join(self.seats)}"


def schedule(
    names: Sequence[str],
    game_configs: Sequence[GameConfig],
    *,
    kind: str = "round-robin",
    reference: str | None = None,
    pairs: int = 10,
    seed: int = 0,
) -> list[ScheduledMatch]:
    """Every match, in playing order (game by game, pairing by pairing, pair by pair)."""
    if kind == "gauntlet":
        if reference is None:
            raise ConfigError(
                "schedule gauntlet needs `reference`: the participant all others play"
            )
        if reference not in names:
            raise ConfigError(f"reference {reference!r} is not a participant; have {list(names)}")
    matches: list[ScheduledMatch] = []
    for game in game_configs:
        size = len(games.make(game.id, **game.kwargs).possible_agents)
        if size > len(names):
            raise ConfigError(
                f"{game.id} seats {size}; the tournament has {len(names)} participants"
            )
        for table in _tables(names, size, kind, reference):
            for k in range(pairs):
                match_seed = seed + k
                pair = f"{game.id}/{match_seed}/{'+'.join(sorted(table))}"
                for shift in range(size):
                    seats = tuple(table[(i + shift) % size] for i in range(size))
                    matches.append(ScheduledMatch(game.id, match_seed, seats, pair))
    return matches


def _tables(
    names: Sequence[str], size: int, kind: str, reference: str | None
) -> list[tuple[str, ...]]:
    if kind == "gauntlet":
        others = [n for n in names if n != reference]
        return [
            (reference, *rest)  # type: ignore[misc]
            for rest in itertools.combinations(others, size - 1)
        ]
    return list(itertools.combinations(names, size))
