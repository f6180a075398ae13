"""The per-pair tables of a match log: games, wins/draws/losses, score with a 95% interval,
invalid-move rates, mean length and tokens, per game and over all games.

A pair's score interval is Wilson when the pair drew no game (each game then a plain success or
failure: ``wilson(wins, games)``), else a percentile bootstrap over the log's clusters, seeded per
(seed, a, b): each of ``resamples`` draws takes as many clusters as the row has, with
replacement, and scores ``a``'s summed score over the drawn clusters divided by their games; the
interval is the 2.5th and 97.5th percentiles of those draws (NaN with ``resamples`` 0). A pair
whose clusters all score alike (every game drawn) gets a zero-width interval, ``[0.5, 0.5]``:
the resamples cannot vary, so read it with the row's number of games. The
invalid rate, mean length and tokens need fields a log may leave out (``invalid``, ``moves`` or
``turns``, ``tokens``): a row gives each only when every match in it records what it needs, and
``None`` (JSON ``null``, "n/a" in the tables) otherwise, so no figure describes fewer games than
the row's wins and losses.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from arena.eval.intervals import (
    DEFAULT_RESAMPLES,
    cluster_draws,
    json_round,
    keyed_rng,
    percentile_ci,
    wilson,
)
from arena.eval.match_log import Match, clusters

NOT_LOGGED = "n/a"
"""What a table prints for a figure that is None: a field the log does not record."""


@dataclass
class PairStats:
    """Participant ``a`` against ``b`` (``a < b``) in one game, or in all games (``game='*'``)."""

    game: str
    a: str
    b: str
    games: int
    wins: int
    draws: int
    losses: int
    score: float
    """``a``'s mean score (1 win, 0.5 draw, 0 loss)."""
    ci: tuple[float, float]
    invalid_rate: dict[str, float] | None
    """Invalid moves over turns, per participant (0 when it played no turn); None: not logged."""
    mean_moves: float | None
    """None: not logged."""
    tokens: dict[str, float] | None
    """Mean tokens per game, per participant; None: not logged."""

    def to_dict(self) -> dict[str, Any]:
        """The row of the ratings JSON ``pairs`` list."""
        return {
            "game": self.game,
            "a": self.a,
            "b": self.b,
            "games": self.games,
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "score": round(self.score, 4),
            "ci": [json_round(self.ci[0], 4), json_round(self.ci[1], 4)],
            "invalid_rate": _rounded(self.invalid_rate, 6),
            "mean_moves": None if self.mean_moves is None else round(self.mean_moves, 2),
            "tokens": _rounded(self.tokens, 1),
        }


def _rounded(values: dict[str, float] | None, digits: int) -> dict[str, float] | None:
    return None if values is None else {k: round(v, digits) for k, v in values.items()}


def pair_stats(
    matches: Sequence[Match], resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> list[PairStats]:
    """One row per (game, a, b) and one ``game='*'`` row per (a, b), two-player matches only.

    Rows come sorted by ``a``, ``b`` and game, the ``'*'`` row last. Matches of a participant
    against itself have no ``a < b`` and are left out.
    """
    cluster_of = clusters(matches)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, match in enumerate(matches):
        if len(match.seats) == 2 and match.seats[0] != match.seats[1]:
            groups[tuple(sorted(match.seats))].append(index)  # type: ignore[index]
    rows = []
    for (a, b), indices in sorted(groups.items()):
        by_game: dict[str, list[int]] = defaultdict(list)
        for index in indices:
            by_game[matches[index].game].append(index)
        for game, chosen in [*sorted(by_game.items()), ("*", indices)]:
            played = [matches[i] for i in chosen]
            clustered = [cluster_of[i] for i in chosen]
            rows.append(_pair_row(game, a, b, played, clustered, resamples, seed))
    return rows


def _pair_row(
    game: str,
    a: str,
    b: str,
    played: list[Match],
    cluster_of: list[int],
    resamples: int,
    seed: int,
) -> PairStats:
    mine = np.array([m.scores[m.seats.index(a)] for m in played])
    wins, draws = int((mine == 1).sum()), int((mine == 0.5).sum())
    if draws == 0:
        ci = wilson(wins, len(played))
    elif resamples <= 0:
        ci = (math.nan, math.nan)
    else:
        _, cluster = np.unique(cluster_of, return_inverse=True)
        sums = np.bincount(cluster, weights=mine)
        sizes = np.bincount(cluster).astype(float)
        counts = cluster_draws(len(sums), resamples, keyed_rng(seed, f"{a}\0{b}"))
        ci = percentile_ci(counts @ sums / (counts @ sizes))
    has_moves = all(m.moves is not None for m in played)
    return PairStats(
        game=game,
        a=a,
        b=b,
        games=len(played),
        wins=wins,
        draws=draws,
        losses=len(played) - wins - draws,
        score=float(mine.mean()),
        ci=ci,
        invalid_rate=_invalid_rates(played, (a, b)),
        mean_moves=sum(m.moves or 0 for m in played) / len(played) if has_moves else None,
        tokens=_mean_tokens(played, (a, b)),
    )


def _invalid_rates(played: list[Match], names: tuple[str, str]) -> dict[str, float] | None:
    """Each participant's invalid moves over its turns, or None unless every match logs both."""
    if any(m.invalid is None or m.seat_turns(0) is None for m in played):
        return None
    rates = {}
    for name in names:
        seats = [m.seats.index(name) for m in played]
        turns = sum(m.seat_turns(s) for m, s in zip(played, seats, strict=True))
        wrong = sum(m.invalid[s] for m, s in zip(played, seats, strict=True))
        rates[name] = wrong / turns if turns else 0.0
    return rates


def _mean_tokens(played: list[Match], names: tuple[str, str]) -> dict[str, float] | None:
    """Each participant's mean tokens per game, or None unless every match logs them."""
    if any(m.tokens is None for m in played):
        return None
    return {
        name: sum(m.tokens[m.seats.index(name)] for m in played) / len(played) for name in names
    }
