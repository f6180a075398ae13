"""``arena check-game ID [ID ...]``: run the games conformance kit and print a pass/fail table.

Exits 0 when every check of every game passes, 1 otherwise. ``-p key=value`` passes a
constructor argument to the game (the value is read as a Python literal when it is one), e.g.
``arena check-game liars-dice-v0 -p num_players=4``.
"""

from __future__ import annotations

import argparse
import ast
import sys
from typing import Any

HELP = "check that a game follows Arena's game contract"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="*", metavar="ID", help="registered game id(s)")
    parser.add_argument("--all", action="store_true", help="check every registered game")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                        help="constructor argument for the game (repeatable)")
    parser.add_argument("--playthroughs", type=int, default=4,
                        help="random games per play-based check")
    parser.add_argument("--seed", type=int, default=0, help="first seed of the random games")


def parse_params(pairs: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        try:
            params[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            params[key] = value
    return params


def run(args: argparse.Namespace) -> int:
    import games
    from games.conformance import check_game

    ids = games.ids() if args.all else args.ids
    if not ids:
        print("arena check-game: name at least one game id, or --all", file=sys.stderr)
        return 2
    try:
        params = parse_params(args.param)
        for game_id in ids:
            games.registry.spec(game_id)  # an unknown id fails here, naming the nearest ones
    except (ValueError, games.RegistryError) as err:
        print(f"arena check-game: {err}", file=sys.stderr)
        return 2
    failed = []
    for game_id in ids:
        report = check_game(game_id, playthroughs=args.playthroughs, seed=args.seed, **params)
        print(report.table(), end="\n\n", flush=True)
        if not report.passed:
            failed.append(game_id)
    if len(ids) > 1:
        print(f"{len(ids) - len(failed)}/{len(ids)} games passed"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
