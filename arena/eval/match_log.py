"""The match log (``matches.jsonl``): one finished match per line, read tolerantly, and its
per-pair tables (games, wins/draws/losses, score with a 95% interval, invalid rates, tokens).

``arena tournament`` writes it and other tools may too, so a reader must survive whatever a
crashed writer or a hand edit leaves behind. Each line is a JSON object with:

- required: ``game`` (str), ``seed`` (int), ``seats`` (participant names; ``seats[0]`` moved
  first), ``scores`` (per seat: 1 win, 0.5 draw, 0 loss), ``returns`` (per seat, finite numbers),
  ``moves`` (int, game length in turns), ``termination`` (str), ``tokens`` (per seat, ints),
  ``seconds`` (finite number), ``invalid`` (per seat, ints: invalid moves);
- optional: ``id`` (str), ``pair`` (str: the id of the seat-swapped pair the match belongs to),
  ``turns`` (per seat, ints: that seat's turns, the denominator of its invalid rate; absent, it is
  ``moves / len(seats)``), ``forfeit`` (null or ``{"seat": i, "participant": name, "reason":
  str}``).

A line that is not such an object (bad JSON, bad UTF-8, a missing field, a wrong type, a per-seat
list whose length is not ``len(seats)``, fewer than two seats, a score outside {0, 0.5, 1}) is
skipped and recorded with its 1-based line number and the reason; the rest are read. Blank lines
are ignored silently. Reading never raises for the content of a line, only for an unreadable file.

Matches are grouped into *clusters* (:func:`clusters`), the unit the bootstraps resample: two
matches of one game and seed with the seats swapped are one experiment (same deal, same dice),
and resampling them apart would overstate what the log knows. A pair's score interval
(:func:`pair_stats`) is Wilson when the pair drew no game (each game then a plain success or
failure), else a percentile bootstrap over these clusters, seeded per (seed, a, b).
"""

from __future__ import annotations

import json
import math
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

SCORES = (0.0, 0.5, 1.0)
"""The only per-seat scores a match may carry: loss, draw, win."""


@dataclass(frozen=True)
class Forfeit:
    """The seat that lost by forfeit (a crash, a timeout, too many invalid moves) and why."""

    seat: int
    participant: str
    reason: str


@dataclass(frozen=True)
class Match:
    """One finished match, as one line of the log. Per-seat tuples are in seat order."""

    game: str
    seed: int
    seats: tuple[str, ...]
    scores: tuple[float, ...]
    returns: tuple[float, ...]
    moves: int
    termination: str
    tokens: tuple[int, ...]
    seconds: float
    invalid: tuple[int, ...]
    id: str | None = None
    pair: str | None = None
    turns: tuple[int, ...] | None = None
    forfeit: Forfeit | None = None

    def seat_turns(self, seat: int) -> float:
        """That seat's turns, the denominator of its invalid rate (``moves / seats`` if absent)."""
        return float(self.turns[seat]) if self.turns is not None else self.moves / len(self.seats)

    def to_dict(self) -> dict[str, Any]:
        """The JSON line this match reads back from (optional fields only when set)."""
        out = asdict(self)
        for key in ("seats", "scores", "returns", "tokens", "invalid", "turns"):
            if out[key] is not None:
                out[key] = list(out[key])
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class Skipped:
    """A line of the log that was not read, and why (``line`` counts from 1)."""

    line: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """``{"line": L, "reason": "..."}``, the form the ratings JSON reports."""
        return {"line": self.line, "reason": self.reason}


@dataclass
class MatchLog:
    """The readable matches of a log, in file order, and the lines that were skipped."""

    matches: list[Match]
    skipped: list[Skipped]
    path: str | None = None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "seed": (_is_int, "an integer"),
    "number": (_is_number, "a finite number"),
    "names": (lambda v: all(isinstance(x, str) and x for x in v), "a list of non-empty strings"),
    "numbers": (lambda v: all(_is_number(x) for x in v), "a list of finite numbers"),
    "counts": (lambda v: all(_is_int(x) and x >= 0 for x in v), "a list of non-negative integers"),
}
"""Field kind -> its check and how an error message names it (kinds ending in s are lists)."""


def _field(obj: dict[str, Any], key: str, kind: str) -> Any:
    """``obj[key]`` checked against ``kind`` (a tuple for list kinds); else a ValueError."""
    if key not in obj:
        raise ValueError(f"missing field {key!r}")
    value, (check, wanted) = obj[key], _KINDS[kind]
    listed = kind.endswith("s")
    if (listed and not isinstance(value, list)) or not check(value):
        raise ValueError(f"field {key!r} must be {wanted}, not {json.dumps(value)[:60]}")
    return tuple(value) if listed else value


def parse_match(obj: object) -> Match:
    """One decoded JSON line as a :class:`Match`; ``ValueError`` says what is wrong with it."""
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object but {type(obj).__name__}")
    seats = _field(obj, "seats", "names")
    if len(seats) < 2:
        raise ValueError(f"'seats' needs at least two participants, has {len(seats)}")
    per_seat = {
        key: _field(obj, key, kind)
        for key, kind in (
            ("scores", "numbers"),
            ("returns", "numbers"),
            ("tokens", "counts"),
            ("invalid", "counts"),
        )
    }
    turns = None
    if obj.get("turns") is not None:
        turns = _field(obj, "turns", "counts")
        per_seat["turns"] = turns
    for key, values in per_seat.items():
        if len(values) != len(seats):
            raise ValueError(f"{key!r} has {len(values)} entries for {len(seats)} seats")
    bad = [s for s in per_seat["scores"] if s not in SCORES]
    if bad:
        raise ValueError(f"score {bad[0]} is not one of 0, 0.5, 1")
    optional = {}
    for key in ("id", "pair"):
        if obj.get(key) is not None:
            optional[key] = _field(obj, key, "str")
    return Match(
        game=_field(obj, "game", "str"),
        seed=_field(obj, "seed", "seed"),
        seats=seats,
        scores=tuple(float(s) for s in per_seat["scores"]),
        returns=tuple(float(r) for r in per_seat["returns"]),
        moves=_field(obj, "moves", "int"),
        termination=_field(obj, "termination", "str"),
        tokens=per_seat["tokens"],
        seconds=float(_field(obj, "seconds", "number")),
        invalid=per_seat["invalid"],
        turns=turns,
        forfeit=_parse_forfeit(obj.get("forfeit"), seats),
        **optional,
    )


def _parse_forfeit(value: object, seats: Sequence[str]) -> Forfeit | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("field 'forfeit' must be null or an object")
    seat = value.get("seat")
    if not _is_int(seat) or not 0 <= seat < len(seats):
        raise ValueError(f"forfeit seat {json.dumps(seat)} is not a seat of this match")
    participant = value.get("participant", seats[seat])
    reason = value.get("reason", "")
    if not isinstance(participant, str) or not isinstance(reason, str):
        raise ValueError("forfeit 'participant' and 'reason' must be strings")
    return Forfeit(seat=seat, participant=participant, reason=reason)


def read_match_log(path: str | Path) -> MatchLog:
    """Every readable match of a ``matches.jsonl`` file, and each skipped line with its reason.

    Only an unreadable file raises (``OSError``: missing, a directory, no permission); a bad line
    is skipped and counted, so one torn write at the end of a crashed tournament costs one match.
    """
    matches: list[Match] = []
    skipped: list[Skipped] = []
    with open(path, "rb") as file:
        for number, raw in enumerate(file, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                skipped.append(Skipped(number, f"not UTF-8 ({err.reason} at byte {err.start})"))
                continue
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as err:
                skipped.append(Skipped(number, f"bad JSON: {err.msg} (column {err.colno})"))
                continue
            try:
                matches.append(parse_match(obj))
            except ValueError as err:
                skipped.append(Skipped(number, str(err)))
    return MatchLog(matches=matches, skipped=skipped, path=str(path))


def clusters(matches: Sequence[Match]) -> list[int]:
    """The cluster index of each match (0, 1, ... in order of first appearance).

    Matches that name the same ``pair`` (within a game) form one cluster. A match without
    ``pair`` joins the earliest open cluster of matches with its game, seed and set of
    participants that does not hold its seat order yet; a cluster is full once it holds as many
    seat orders as there are seats (two for a seat-swapped pair). A match with no partner is its
    own cluster.
    """
    index: list[int] = []
    by_pair: dict[tuple[str, str], int] = {}
    open_clusters: dict[tuple[Any, ...], list[tuple[int, set[tuple[str, ...]]]]] = {}
    count = 0
    for match in matches:
        if match.pair is not None:
            key = (match.game, match.pair)
            if key not in by_pair:
                by_pair[key] = count
                count += 1
            index.append(by_pair[key])
            continue
        candidates = open_clusters.setdefault((match.game, match.seed, frozenset(match.seats)), [])
        for position, (cluster, orders) in enumerate(candidates):
            if match.seats not in orders:
                orders.add(match.seats)
                if len(orders) >= len(match.seats):
                    del candidates[position]
                index.append(cluster)
                break
        else:
            candidates.append((count, {match.seats}))
            index.append(count)
            count += 1
    return index


# -- per pair ----------------------------------------------------------------------------------

Z95 = 1.959964
"""The two-sided 95% normal quantile."""
DEFAULT_RESAMPLES = 1000
"""Bootstrap draws: a 10-participant, 2000-match log is rated in about a second."""


def wilson(successes: int, n: int) -> tuple[float, float]:
    """Wilson score interval for a proportion (well-behaved at 0 and 1, unlike the normal one)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def json_round(value: float, digits: int) -> float | None:
    """``round`` that turns NaN (no interval could be drawn) into JSON ``null``."""
    return round(value, digits) if math.isfinite(value) else None


def percentile_ci(samples: np.ndarray) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the finite samples (NaN, NaN when there are none)."""
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return (math.nan, math.nan)
    low, high = np.percentile(samples, [2.5, 97.5])
    return (float(low), float(high))


def _rng(seed: int, key: str) -> np.random.Generator:
    """A generator per (seed, key): a pair's interval does not depend on which pairs precede it."""
    return np.random.default_rng([seed, zlib.crc32(key.encode())])


def cluster_draws(n_clusters: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each cluster is drawn in each resample: shape (resamples, n_clusters)."""
    return rng.multinomial(n_clusters, np.full(n_clusters, 1 / n_clusters), size=resamples)


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
    invalid_rate: dict[str, float]
    """Invalid moves over turns, per participant (0 when it played no turn)."""
    mean_moves: float
    tokens: dict[str, float]
    """Mean tokens per game, per participant."""

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
            "invalid_rate": {k: round(v, 6) for k, v in self.invalid_rate.items()},
            "mean_moves": round(self.mean_moves, 2),
            "tokens": {k: round(v, 1) for k, v in self.tokens.items()},
        }


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
        counts = cluster_draws(len(sums), resamples, _rng(seed, f"{a}\0{b}"))
        ci = percentile_ci(counts @ sums / (counts @ sizes))
    invalid, tokens = {}, {}
    for name in (a, b):
        seats = [m.seats.index(name) for m in played]
        turns_played = sum(m.seat_turns(s) for m, s in zip(played, seats, strict=True))
        wrong = sum(m.invalid[s] for m, s in zip(played, seats, strict=True))
        invalid[name] = wrong / turns_played if turns_played else 0.0
        tokens[name] = sum(m.tokens[s] for m, s in zip(played, seats, strict=True)) / len(played)
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
        invalid_rate=invalid,
        mean_moves=sum(m.moves for m in played) / len(played),
        tokens=tokens,
    )
