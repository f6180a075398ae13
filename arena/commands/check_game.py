"""``arena check-game ID [ID ...]``: run the games conformance kit and print a pass/fail table.

Exits 0 when every check of every game passes, 1 otherwise. An ID is a registered id or, for a
game not registered yet, its ``module:Factory``. ``-p key=value`` passes a constructor argument to
every game checked (the value is read as a Python literal when it is one), e.g.
``arena check-game liars-dice-v0 -p num_players=4``.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any


def add_param_argument(parser: argparse.ArgumentParser) -> None:
    """``-p KEY=VALUE``: a constructor argument for the game (shared with ``show-game``)."""
    parser.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="constructor argument for the game (repeatable)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="*", metavar="ID", help="registered game id(s)")
    parser.add_argument("--all", action="store_true", help="check every registered game")
    add_param_argument(parser)
    parser.add_argument(
        "--playthroughs", type=int, default=4, help="random games per play-based check (default 4)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="first seed of the random games (default 0)"
    )


def target(game_id: str, params: dict[str, Any]) -> Callable[[], Any]:
    """A factory for ``game_id``: a registered id, or a ``module:Factory`` not registered yet."""
    import games
    from arena.core.registry import load_object

    if ":" in game_id:
        factory = load_object(game_id)
    else:
        games.registry.entry(game_id)  # an unknown id fails here, naming the nearest ones
        factory = functools.partial(games.make, game_id)

    def build() -> Any:
        return factory(**params)

    build.__name__ = game_id
    return build


def run(args: argparse.Namespace) -> int:
    import games
    from arena.core.config import parse_assignments
    from arena.core.errors import ConfigError
    from games.conformance import check_game

    ids = args.ids
    if args.all:
        # --all checks what this installation can build; a named id is checked regardless
        ids = []
        for game_id in games.ids():
            try:
                spec = games.spec(game_id)
            except games.GameSpecError:
                ids.append(game_id)  # checked, so that the table says what is wrong with it
                continue
            if spec.available():
                ids.append(game_id)
            else:
                print(f"skipped {game_id}: needs {spec.requires}, not installed")
    if not ids:
        print("arena check-game: name at least one game id, or --all", file=sys.stderr)
        return 2
    try:
        params = parse_assignments(args.param)
        targets = [target(game_id, params) for game_id in ids]
    except (ConfigError, ValueError, ImportError, AttributeError, games.RegistryError) as err:
        print(f"arena check-game: {err}", file=sys.stderr)
        return 2
    failed = []
    for game_id, game in zip(ids, targets, strict=True):
        report = check_game(game, playthroughs=args.playthroughs, seed=args.seed)
        print(report.table(), end="\n\n", flush=True)
        if not report.passed:
            failed.append(game_id)
    if len(ids) > 1:
        print(
            f"{len(ids) - len(failed)}/{len(ids)} games passed"
            + (f"; failed: {', '.join(failed)}" if failed else "")
        )
    return 1 if failed else 0
