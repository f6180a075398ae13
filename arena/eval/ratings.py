"""Ratings from a match log: Bradley-Terry on the Elo scale, OpenSkill for more seats, the JSON.

Everything here is a pure function of the matches (numpy, plus openskill for multi-player games),
so the tournament, ``arena ratings`` and the report writers compute the same numbers. Reading the
log (:mod:`arena.eval.match_log`), the per-pair tables (:mod:`arena.eval.pair_stats`) and the
intervals (:mod:`arena.eval.intervals`) live apart and are re-exported here.

**Bradley-Terry** (two-player matches only). On the Elo scale, with ``f`` the first-mover term
shared by every game::

    P(seat 0 wins) = 1 / (1 + 10 ** (-(r[seat 0] - r[seat 1] + f) / 400))

A draw counts as half a win each way: a match adds ``s log p + (1 - s) log(1 - p)`` to the
log-likelihood, with ``s`` seat 0's score (``(score0 - score1 + 1) / 2``: ``[1, 0]`` is 1,
``[0.5, 0.5]`` 0.5, ``[1, 0.5]`` 0.75, and a log that scores a double loss ``[0, 0]`` reads it
as a draw). The matches enter only through sums per (seat 0, seat 1) order, so their order in
the log does not matter. The fit is Newton's method with a backtracking line
search on the log-posterior, over the distinct (seat 0, seat 1) orders, so its cost does not grow
with the number of matches.

**The prior.** A participant that won (or lost) every game has an infinite maximum-likelihood
rating, so every rating and ``f`` get an independent Gaussian prior with mean 0 and standard
deviation :data:`PRIOR_SD` = 1000 Elo. The likelihood only sees differences, so the posterior
mode has ratings summing to 0: the prior pulls each rating toward the mean of all of them. It is
weak: it moves a 200-Elo gap measured over a hundred games by under 0.2 Elo (76 wins in 100,
50 games in each seat: 200.1 instead of 400 log10(76/24) = 200.2), yet a player with 100 wins in
100 such games lands about 1200 Elo above its opponent rather than at infinity. By hand, with
lam = (400 / (1000 ln 10))^2 = 0.0301778 the prior's precision in natural log-odds units: a
wins one match in each seat against b, so f = 0 and the ratings are +-c with
2 / (1 + e^(2c)) = lam c, c = 1.7917, a gap of 2c * 400 / ln 10 = 622.5 Elo. Seat 0 wins both
matches instead (a first, then b first): the ratings are equal and f = x * 400 / ln 10 with
2 / (1 + e^x) = lam x, x = 3.0363, f = +527.5 Elo. Ratings are then
shifted so that the anchor sits at ``anchor_rating`` (the first participant in sorted name order
unless one is named).

**Intervals.** 95% percentile bootstrap: the log's clusters (a match and its seat-swapped twin,
see :func:`arena.eval.match_log.clusters`) are drawn with replacement ``resamples`` times, with a
seeded ``numpy.random.Generator``, and the model is refitted on each draw. A participant absent
from a draw is left out of that draw's percentiles (all of them if the anchor is absent).
``resamples=0`` skips the bootstrap: the intervals are then NaN (``null`` in the JSON), the
first mover's included. The anchor's interval is always its pinned rating, ``[anchor_rating,
anchor_rating]`` (``[1000.0, 1000.0]``), with or without the bootstrap: every draw is measured
from it.

**Multi-player matches** (three seats or more) are rated with OpenSkill's Plackett-Luce model
with its defaults (a participant starts at mu = 25, sigma = 25/3, beta = 25/6, and sigma grows by
tau = 25/300 in quadrature before each match), one match at a time in log order, so unlike
Bradley-Terry the result depends on the order of the log. Seats are ranked by score, then by
return (equal both: one shared rank); the matches do not enter Bradley-Terry. By hand, three
fresh participants finishing 1st, 2nd, 3rd: sigma^2 = 625/9 + (25/300)^2 = 69.4514,
c = sqrt(3 (sigma^2 + beta^2)) = 16.1381, and each mu moves by sigma^2 / c * omega with
omega = (2/3, 1/6, -5/6): 27.869, 25.717, 21.414.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arena.core.errors import did_you_mean
from arena.eval.intervals import (
    DEFAULT_RESAMPLES,
    Z95,
    cluster_draws,
    json_round,
    percentile_ci,
    wilson,
)
from arena.eval.match_log import Match, MatchLog, Skipped, clusters, parse_match, read_match_log
from arena.eval.pair_stats import PairStats, pair_stats

__all__ = [
    "DEFAULT_RESAMPLES",
    "PRIOR_SD",
    "Z95",
    "Match",
    "MatchLog",
    "MultiplayerRating",
    "PairStats",
    "Ratings",
    "Skipped",
    "fit_bradley_terry",
    "pair_stats",
    "parse_match",
    "rate_multiplayer",
    "ratings_report",
    "read_match_log",
    "wilson",
]

PRIOR_SD = 1000.0
"""Standard deviation, in Elo, of the Gaussian prior on every rating and on the first-mover term."""
_NATURAL = math.log(10) / 400
"""Natural-log odds per Elo point."""


# -- Bradley-Terry -----------------------------------------------------------------------------


@dataclass
class Ratings:
    """Anchored Bradley-Terry ratings (Elo) with 95% bootstrap intervals."""

    ratings: dict[str, float]
    """Participant -> rating, highest first."""
    ci: dict[str, tuple[float, float]]
    first_mover: float
    """Elo added to seat 0's rating difference (positive: moving first helps)."""
    first_mover_ci: tuple[float, float]
    anchor: str
    anchor_rating: float
    games: dict[str, int]
    """Participant -> two-player matches played."""
    matches: int
    resamples: int
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ``ratings``, ``first_mover`` and ``anchor`` keys of the ratings JSON (0.1 Elo;
        a value that rounds to zero is 0.0, never -0.0)."""
        return {
            "ratings": {
                name: {
                    "rating": round(rating, 1) + 0.0,
                    "ci": [json_round(self.ci[name][0], 1), json_round(self.ci[name][1], 1)],
                }
                for name, rating in self.ratings.items()
            },
            "first_mover": {
                "rating": round(self.first_mover, 1) + 0.0,
                "ci": [
                    json_round(self.first_mover_ci[0], 1),
                    json_round(self.first_mover_ci[1], 1),
                ],
            },
            "anchor": self.anchor,
        }


def _design(i: np.ndarray, j: np.ndarray, k: int) -> np.ndarray:
    """Rows ``e_i - e_j + e_f``: the log-odds of each (seat 0, seat 1) order as a linear map."""
    design = np.zeros((len(i), k + 1))
    rows = np.arange(len(i))
    np.add.at(design, (rows, i), 1.0)
    np.add.at(design, (rows, j), -1.0)
    design[:, k] = 1.0
    return design


def _fit(design: np.ndarray, n: np.ndarray, s: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Posterior mode (natural log-odds units) by Newton's method with a backtracking search.

    ``n`` and ``s`` are the games and seat-0 score summed per row of ``design``.
    """
    precision = 1 / (PRIOR_SD * _NATURAL) ** 2

    def objective(params: np.ndarray) -> float:
        x = design @ params
        loglik = -(s * np.logaddexp(0, -x) + (n - s) * np.logaddexp(0, x)).sum()
        return float(loglik - 0.5 * precision * params @ params)

    params, value = start.copy(), objective(start)
    for _ in range(100):
        p = np.exp(-np.logaddexp(0, -(design @ params)))
        grad = design.T @ (s - n * p) - precision * params
        hess = design.T @ (design * (n * p * (1 - p))[:, None])
        hess[np.diag_indices_from(hess)] += precision
        step = np.linalg.solve(hess, grad)
        scale = 1.0
        while True:
            trial = params + scale * step
            trial_value = objective(trial)
            if trial_value >= value - 1e-12 * abs(value):
                break
            scale /= 2
            if scale < 1e-6:  # no ascent left along the Newton direction: at the optimum
                return params
        params, value = trial, trial_value
        if np.abs(scale * step).max() < 1e-9:
            break
    return params


def fit_bradley_terry(
    matches: Sequence[Match],
    anchor: str | None = None,
    anchor_rating: float = 1000.0,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Ratings:
    """Bradley-Terry ratings with a first-mover term from the two-player matches (see module).

    Raises ``ValueError`` when there is no two-player match, or when ``anchor`` names no
    participant (the message names the nearest). ``resamples=0`` skips the bootstrap (intervals
    are NaN, but the anchor's, which is ``(anchor_rating, anchor_rating)`` either way).
    """
    two = [m for m in matches if len(m.seats) == 2]
    if not two:
        raise ValueError("no two-player match to rate")
    names = sorted({name for m in two for name in m.seats})
    if anchor is None:
        anchor = names[0]
    elif anchor not in names:
        listed = f" (participants: {', '.join(names[:10])}{', ...' if len(names) > 10 else ''})"
        hint = did_you_mean(anchor, names) or listed
        raise ValueError(f"anchor {anchor!r} is not a participant of a two-player match{hint}")
    position = {name: index for index, name in enumerate(names)}
    k = len(names)
    orders = {}  # (seat 0, seat 1) -> row of the design
    row = np.array([orders.setdefault((m.seats[0], m.seats[1]), len(orders)) for m in two])
    i = np.array([position[first] for first, _ in orders])
    j = np.array([position[second] for _, second in orders])
    design = _design(i, j, k)
    score = np.array([(m.scores[0] - m.scores[1] + 1) / 2 for m in two])
    n_rows, s_rows = np.bincount(row, minlength=len(orders)), np.bincount(row, weights=score)
    params = _fit(design, n_rows.astype(float), s_rows, np.zeros(k + 1))
    games = Counter(name for m in two for name in set(m.seats))
    a = position[anchor]
    point = (params[:k] - params[a]) / _NATURAL + anchor_rating
    samples = _bootstrap(design, i, j, row, score, clusters(two), params, a, resamples, seed)
    samples[:, :k] += anchor_rating
    ci = {name: percentile_ci(samples[:, position[name]]) for name in names}
    ci[anchor] = (anchor_rating, anchor_rating)
    order = sorted(names, key=lambda name: (-point[position[name]], name))
    return Ratings(
        ratings={name: float(point[position[name]]) for name in order},
        ci={name: ci[name] for name in order},
        first_mover=float(params[k] / _NATURAL),
        first_mover_ci=percentile_ci(samples[:, k]),
        anchor=anchor,
        anchor_rating=anchor_rating,
        games={name: games[name] for name in order},
        matches=len(two),
        resamples=max(resamples, 0),
        warnings=_disconnected(names, i, j, anchor),
    )


def _bootstrap(
    design: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
    row: np.ndarray,
    score: np.ndarray,
    cluster_of: list[int],
    params: np.ndarray,
    anchor: int,
    resamples: int,
    seed: int,
) -> np.ndarray:
    """Refits on cluster resamples: shape (resamples, k + 1), ratings relative to the anchor
    then the first-mover term, in Elo; NaN for a participant absent from a draw.

    ``row`` is each match's row of ``design`` and ``score`` its seat-0 score.
    """
    k, n_orders = design.shape[1] - 1, design.shape[0]
    samples = np.full((max(resamples, 0), k + 1), math.nan)
    if resamples <= 0:
        return samples
    _, cluster = np.unique(cluster_of, return_inverse=True)
    # a cell per (cluster, order) holding its games and seat-0 score: a draw weighs the cells
    cells, cell_index = np.unique(cluster * n_orders + row, return_inverse=True)
    cell_n, cell_s = np.bincount(cell_index), np.bincount(cell_index, weights=score)
    to_rows = np.zeros((len(cells), n_orders))
    to_rows[np.arange(len(cells)), cells % n_orders] = 1.0
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, 100):  # chunks bound the memory of large logs
        counts = cluster_draws(int(cluster.max()) + 1, min(100, resamples - start), rng)
        weight = counts[:, cells // n_orders]
        n_draws, s_draws = (weight * cell_n) @ to_rows, (weight * cell_s) @ to_rows
        for b, (n_b, s_b) in enumerate(zip(n_draws, s_draws, strict=True)):
            fitted = _fit(design, n_b, s_b, params)
            seen = (np.bincount(i, weights=n_b, minlength=k) > 0) | (
                np.bincount(j, weights=n_b, minlength=k) > 0
            )
            rated = (fitted[:k] - fitted[anchor]) / _NATURAL
            rated[~seen | ~seen[anchor]] = math.nan
            samples[start + b, :k], samples[start + b, k] = rated, fitted[k] / _NATURAL
    return samples


def _disconnected(names: list[str], i: np.ndarray, j: np.ndarray, anchor: str) -> list[str]:
    """A warning naming the participants no chain of matches links to the anchor."""
    parent = list(range(len(names)))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for first, second in zip(i.tolist(), j.tolist(), strict=True):
        parent[root(first)] = root(second)
    anchor_root = root(names.index(anchor))
    apart = [name for index, name in enumerate(names) if root(index) != anchor_root]
    if not apart:
        return []
    return [
        f"no chain of matches links {', '.join(apart)} to the anchor {anchor}: "
        "their ratings relative to it rest on the prior alone"
    ]


# -- more than two seats -----------------------------------------------------------------------


@dataclass
class MultiplayerRating:
    """OpenSkill Plackett-Luce rating: ``ordinal`` (mu - 3 sigma) is the conservative one, 0 for
    a participant yet to play (mu 25, sigma 25/3)."""

    mu: float
    sigma: float
    ordinal: float
    games: int

    def to_dict(self) -> dict[str, float]:
        """``{"mu", "sigma", "ordinal"}`` for the ratings JSON ``multiplayer`` key."""
        return {
            "mu": round(self.mu, 3),
            "sigma": round(self.sigma, 3),
            "ordinal": round(self.ordinal, 3),
        }


def rate_multiplayer(matches: Sequence[Match]) -> dict[str, MultiplayerRating]:
    """OpenSkill ratings from the matches with three seats or more, highest ordinal first.

    Seats are ranked by score, ties broken by return where the log has returns (equal both, or
    no returns: a tie). Matches in which a
    participant holds two seats are left out: one rating cannot finish in two places.
    """
    from openskill.models import PlackettLuce

    model = PlackettLuce()
    current: dict[str, Any] = {}
    games: dict[str, int] = defaultdict(int)
    for match in matches:
        if len(match.seats) < 3 or len(set(match.seats)) < len(match.seats):
            continue
        returns = match.returns or (0.0,) * len(match.seats)
        keys = [(-score, -ret) for score, ret in zip(match.scores, returns, strict=True)]
        ranks = [sorted(keys).index(key) + 1 for key in keys]
        teams = [[current.get(name) or model.rating(name=name)] for name in match.seats]
        for name, (rated,) in zip(match.seats, model.rate(teams, ranks=ranks), strict=True):
            current[name] = rated
            games[name] += 1
    result = {
        name: MultiplayerRating(r.mu, r.sigma, float(r.ordinal()), games[name])
        for name, r in current.items()
    }
    return dict(sorted(result.items(), key=lambda item: (-item[1].ordinal, item[0])))


# -- the JSON contract -------------------------------------------------------------------------


def ratings_report(
    log: MatchLog,
    anchor: str | None = None,
    anchor_rating: float = 1000.0,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    game: str | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The ratings JSON of a log: ``ratings``, ``first_mover``, ``pairs``, ``anchor``,
    ``matches`` (matches rated), ``skipped`` (lines not read) and ``multiplayer``.

    ``game`` keeps only that game's matches. Without a two-player match the ratings are empty and
    ``first_mover`` and ``anchor`` are null (a tournament of multi-player games still gets its
    report); an ``anchor`` that names no participant raises ``ValueError`` naming the nearest.
    ``warnings``, when given, receives :attr:`Ratings.warnings` (the JSON has no room for them).
    """
    matches = [m for m in log.matches if game is None or m.game == game]
    head: dict[str, Any] = {
        "ratings": {},
        "first_mover": {"rating": None, "ci": [None, None]},
        "anchor": None,
    }
    if any(len(m.seats) == 2 for m in matches):
        fitted = fit_bradley_terry(matches, anchor, anchor_rating, resamples, seed)
        head = fitted.to_dict()
        if warnings is not None:
            warnings.extend(fitted.warnings)
    return {
        "ratings": head["ratings"],
        "first_mover": head["first_mover"],
        "pairs": [row.to_dict() for row in pair_stats(matches, resamples, seed)],
        "anchor": head["anchor"],
        "matches": len(matches),
        "skipped": [skip.to_dict() for skip in log.skipped],
        "multiplayer": {name: r.to_dict() for name, r in rate_multiplayer(matches).items()},
    }
