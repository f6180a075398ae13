"""The match log (``matches.jsonl``): one finished match per line, read tolerantly, and the
clusters its bootstraps resample. The per-pair tables are :mod:`arena.eval.pair_stats`, the
intervals :mod:`arena.eval.intervals`.

``arena tournament`` writes it and other tools may too, so a reader must survive whatever a
crashed writer or a hand edit leaves behind. Each line is a JSON object with:

- required: ``game`` (str), ``seed`` (int), ``seats`` (participant names; ``seats[0]`` moved
  first), ``scores`` (per seat: 1 win, 0.5 draw, 0 loss): all the ratings need;
- optional, each checked when present: ``termination`` (str), ``returns`` (per seat, finite
  numbers: they break ties between seats of a multi-player match), ``moves`` (int, game length
  in turns), ``tokens`` (per seat, ints), ``seconds`` (finite number), ``invalid`` (per seat,
  ints: invalid moves), ``turns`` (per seat, ints: that seat's turns, the denominator of its
  invalid rate; absent, it is ``moves / len(seats)``), ``id`` (str), ``pair`` (str: the id of the
  seat-swapped pair the match belongs to), ``forfeit`` (null or ``{"seat": i, "participant":
  name, "reason": str}``). A table that needs a field some match lacks says "n/a".

A line that is not such an object (bad JSON, bad UTF-8, a missing required field, a wrong type, a
per-seat list whose length is not ``len(seats)``, fewer than two seats, a score outside {0, 0.5,
1}) is skipped and recorded with its 1-based line number and the reason; the rest are read. Blank
lines are ignored silently. Reading never raises for the content of a line, only for an
unreadable file.

Matches are grouped into *clusters* (:func:`clusters`), the unit the bootstraps resample: two
matches of one game and seed with the seats swapped are one experiment (same deal, same dice),
and resampling them apart would overstate what the log knows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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
    termination: str | None = None
    returns: tuple[float, ...] | None = None
    moves: int | None = None
    tokens: tuple[int, ...] | None = None
    seconds: float | None = None
    invalid: tuple[int, ...] | None = None
    id: str | None = None
    pair: str | None = None
    turns: tuple[int, ...] | None = None
    forfeit: Forfeit | None = None

    def seat_turns(self, seat: int) -> float | None:
        """That seat's turns, the denominator of its invalid rate (``moves / seats`` if absent;
        None when the log records neither)."""
        if self.turns is not None:
            return float(self.turns[seat])
        return None if self.moves is None else self.moves / len(self.seats)

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


_OPTIONAL = {
    "termination": "str",
    "returns": "numbers",
    "moves": "int",
    "tokens": "counts",
    "seconds": "number",
    "invalid": "counts",
    "turns": "counts",
    "id": "str",
    "pair": "str",
}
"""The optional fields and their kinds; missing and null are the same."""


def parse_match(obj: object) -> Match:
    """One decoded JSON line as a :class:`Match`; ``ValueError`` says what is wrong with it."""
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object but {type(obj).__name__}")
    seats = _field(obj, "seats", "names")
    if len(seats) < 2:
        raise ValueError(f"'seats' needs at least two participants, has {len(seats)}")
    fields = {"scores": _field(obj, "scores", "numbers")}
    fields |= {k: _field(obj, k, kind) for k, kind in _OPTIONAL.items() if obj.get(k) is not None}
    for key, values in fields.items():
        if isinstance(values, tuple) and len(values) != len(seats):
            raise ValueError(f"{key!r} has {len(values)} entries for {len(seats)} seats")
    bad = [s for s in fields["scores"] if s not in SCORES]
    if bad:
        raise ValueError(f"score {bad[0]} is not one of 0, 0.5, 1")
    for key in ("scores", "returns"):  # JSON writes 1 for 1.0: read every score as a float
        if key in fields:
            fields[key] = tuple(float(x) for x in fields[key])
    if "seconds" in fields:
        fields["seconds"] = float(fields["seconds"])
    return Match(
        game=_field(obj, "game", "str"),
        seed=_field(obj, "seed", "seed"),
        seats=seats,
        forfeit=_parse_forfeit(obj.get("forfeit"), seats),
        **fields,
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
