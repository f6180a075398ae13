"""``arena ratings MATCHES.jsonl``: Bradley-Terry ratings with 95% intervals from a match log.

Reads the ``matches.jsonl`` that ``arena tournament`` writes, or another tool's log (one JSON
object per line): the fields ``game``, ``seed``, ``seats`` (seats[0] moved first) and ``scores``
(1 win, 0.5 draw, 0 loss per seat), and the optional ``termination``, ``returns``, ``moves``,
``tokens``, ``seconds``, ``invalid``, ``turns``, ``id``, ``pair`` (the seat-swapped pair a match
belongs to) and ``forfeit`` (arena/eval/match_log.py). Two-player matches are rated with Bradley-Terry on the Elo scale plus one
first-mover term (a weak Gaussian prior, sd 1000 Elo, keeps a player who won everything finite),
anchored so that ``--anchor`` (default: the first name in sorted order) sits at
``--anchor-rating``; intervals come from a bootstrap over seat-swapped pairs. Matches with three
seats or more get OpenSkill (Plackett-Luce) ratings instead. See arena/eval/ratings.py.

Output: a ratings table sorted by rating (rating, 95% CI, games), the first-mover term, a table
per pair of participants (per game and all games, ``*``: wins/draws/losses, score with its 95%
interval, invalid-move rates, mean length, mean tokens: "n/a" where a match of the row does not
log them), and any multi-player ratings. With
``--json``, exactly one JSON object on stdout instead: ``ratings``, ``first_mover``, ``pairs``,
``anchor``, ``matches``, ``skipped``, ``multiplayer``.

A malformed line (bad JSON, a missing required field, a wrong type, a per-seat list of the wrong length, a
score other than 0, 0.5 or 1) is skipped: stderr names it (``line 7: missing field 'seed'``) and
the count, and the rest is rated. Blank lines are ignored. Warnings go to stderr in both modes.

A log of multi-player matches alone (a tournament of a game of three seats or more) gets its
OpenSkill ratings only.

Exit status: 0 when ratings were printed, even with skipped lines; 2 when the file cannot be read,
holds no valid match (of ``--game``, if given), or ``--anchor`` names no participant
(the message names the nearest).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from arena.core.errors import did_you_mean
from arena.eval.intervals import DEFAULT_RESAMPLES
from arena.eval.match_log import Skipped
from arena.eval.pair_stats import NOT_LOGGED

SHOWN_SKIPPED = 20
"""Malformed lines named one by one on stderr; the rest are only counted."""


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("matches", metavar="MATCHES.jsonl", help="the match log to rate")
    parser.add_argument(
        "--anchor", metavar="NAME", help="participant pinned at --anchor-rating (default: first)"
    )
    parser.add_argument(
        "--anchor-rating",
        type=float,
        default=1000.0,
        metavar="ELO",
        help="the anchor's rating (default 1000)",
    )
    parser.add_argument(
        "--resamples",
        type=_non_negative,
        default=DEFAULT_RESAMPLES,
        metavar="N",
        help=f"bootstrap resamples for the intervals (default {DEFAULT_RESAMPLES}; 0: none)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, metavar="N", help="bootstrap seed (default 0)"
    )
    parser.add_argument("--game", metavar="ID", help="rate only this game's matches")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout instead of tables"
    )


def run(args: argparse.Namespace) -> int:
    from arena.eval.ratings import ratings_report, read_match_log

    try:
        log = read_match_log(args.matches)
    except OSError as err:
        return _fail(f"cannot read {args.matches}: {err.strerror or err}")
    _report_skipped(args.matches, log.skipped)
    two = [m for m in log.matches if len(m.seats) == 2 and args.game in (None, m.game)]
    many = [m for m in log.matches if len(m.seats) > 2 and args.game in (None, m.game)]
    if not two and not many:
        games = sorted({m.game for m in log.matches})
        if args.game is not None and args.game not in games:
            hint = did_you_mean(args.game, games) or f" (games in the log: {', '.join(games)})"
            return _fail(f"no match of game {args.game!r} in {args.matches}{hint}")
        where = f" of game {args.game!r}" if args.game else ""
        return _fail(f"{args.matches} holds no valid match{where} to rate")
    if not two and args.anchor is not None:
        return _fail(
            f"--anchor {args.anchor}: {args.matches} holds no two-player match to anchor "
            "(its multi-player matches get OpenSkill ratings, which have no anchor)"
        )
    warnings: list[str] = []
    try:
        report = ratings_report(
            log,
            anchor=args.anchor,
            anchor_rating=args.anchor_rating,
            resamples=args.resamples,
            seed=args.seed,
            game=args.game,
            warnings=warnings,
        )
    except ValueError as err:
        return _fail(str(err))
    for warning in warnings:
        print(f"arena ratings: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(report))
        return 0
    if two:
        _print_two_player(args, report, two)
    if report["multiplayer"]:
        print(
            f"{chr(10) if two else ''}multi-player matches (OpenSkill Plackett-Luce; "
            "ordinal = mu - 3 sigma):"
        )
        rows = [["participant", "mu", "sigma", "ordinal"]]
        for name, r in report["multiplayer"].items():
            rows.append([name, f"{r['mu']:.2f}", f"{r['sigma']:.2f}", f"{r['ordinal']:.2f}"])
        print(_table(rows))
    return 0


def _print_two_player(args: argparse.Namespace, report: dict, two: list) -> None:
    """The Bradley-Terry table, the first-mover term and the per-pair table."""
    games = Counter(name for m in two for name in set(m.seats))
    print(
        f"Bradley-Terry ratings (Elo) from {len(two)} two-player matches"
        f"{f' of {args.game}' if args.game else ''}, anchor {report['anchor']} = "
        f"{args.anchor_rating:g}; 95% CI from {args.resamples} resamples"
    )
    rows = [["#", "participant", "rating", "95% CI", "games"]]
    for rank, (name, r) in enumerate(report["ratings"].items(), start=1):
        rows.append([str(rank), name, f"{r['rating']:.1f}", _ci(r["ci"]), str(games[name])])
    print(_table(rows))
    fm = report["first_mover"]
    print(f"\nfirst mover: {fm['rating']:+.1f} Elo {_ci(fm['ci'], '{:+.1f}')}")
    print("\npairs (score of a against b; game * = all games):")
    rows = [["game", "a", "b", "games", "W/D/L", "score", "95% CI", "invalid a/b", "moves"]]
    rows[0].append("tokens a/b")
    for p in report["pairs"]:
        a, b = p["a"], p["b"]
        rows.append([p["game"], a, b, str(p["games"]), f"{p['wins']}/{p['draws']}/{p['losses']}"])
        rows[-1] += [f"{p['score']:.3f}", _ci(p["ci"], "{:.3f}")]
        rows[-1].append(_per_pair(p["invalid_rate"], a, b, "{:.1%}"))
        rows[-1].append(NOT_LOGGED if p["mean_moves"] is None else f"{p['mean_moves']:.1f}")
        rows[-1].append(_per_pair(p["tokens"], a, b, "{:.0f}"))
    print(_table(rows))


def _fail(message: str) -> int:
    print(f"arena ratings: {message}", file=sys.stderr)
    return 2


def _report_skipped(path: str, skipped: list[Skipped]) -> None:
    """Name the first malformed lines on stderr and count them all."""
    if not skipped:
        return
    for skip in skipped[:SHOWN_SKIPPED]:
        print(f"line {skip.line}: {skip.reason}", file=sys.stderr)
    if len(skipped) > SHOWN_SKIPPED:
        print(f"... and {len(skipped) - SHOWN_SKIPPED} more", file=sys.stderr)
    noun = "line" if len(skipped) == 1 else "lines"
    print(f"arena ratings: skipped {len(skipped)} malformed {noun} of {path}", file=sys.stderr)


def _per_pair(values: dict[str, float] | None, a: str, b: str, fmt: str) -> str:
    """``a's/b's`` value of a per-participant column, or n/a when the log does not record it."""
    return NOT_LOGGED if values is None else f"{fmt.format(values[a])}/{fmt.format(values[b])}"


def _ci(ci: list[float | None], fmt: str = "{:.1f}") -> str:
    """``[lo, hi]``, or ``[-, -]`` when no interval was drawn (``--resamples 0``)."""
    lo, hi = ("-" if x is None else fmt.format(x) for x in ci)
    return f"[{lo}, {hi}]"


def _table(rows: list[list[str]]) -> str:
    """Aligned columns: names left, numbers right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    numeric = [all(_is_number(row[i]) for row in rows[1:]) for i in range(len(widths))]
    return "\n".join(
        "  ".join(
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(row, widths, numeric, strict=True)
        ).rstrip()
        for row in rows
    )


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
