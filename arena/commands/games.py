"""``arena games``: list every registered game with its seats, kind and information.

The table (stdout) has one row per game, from its ``games.spec(id)``. A game whose spec
cannot be read never hides the others: a plugin whose factory is not a ``games.TextGame``, whose
``metadata`` lacks a field, whose module fails to import, or whose entry point was refused (a
malformed id, an id already taken). Every good game is listed, and then stderr names each broken
one: its id, its ``module:Factory``, the plugin that registered it, and the reason.

Exit status: 0 when every registered game is listed, 1 when any is broken. The table is complete
either way, so a reader loses nothing; the status lets a script or a CI job that runs ``arena
games`` as a check of an installation notice a broken plugin, which otherwise surfaces only when a
run names that game. ``--ids`` prints the registered ids without reading any spec (exit 0).
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ids",
        action="store_true",
        help="print only the registered ids, one per line (reads no game module)",
    )


def run(args: argparse.Namespace) -> int:
    import games

    if args.ids:
        print("\n".join(games.ids()))
        return 0
    rows = [("id", "seats", "kind", "information", "strongest bot")]
    broken: list[tuple[str, str, str | None, str]] = []  # id, module:Factory, plugin, reason
    for game_id in games.ids():
        try:
            spec = games.spec(game_id)
        except games.GameSpecError as err:
            broken.append((game_id, err.target, err.plugin, err.reason))
            continue
        low, high = spec.seats
        seats = str(low) if low == high else f"{low}-{high}"
        rows.append((game_id, seats, spec.kind, spec.information, spec.strongest_bot))
    broken += [
        (bad.id, bad.target, bad.plugin, bad.reason) for bad in games.registry.rejected.values()
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    if not broken:
        return 0
    sys.stdout.flush()
    noun = "game" if len(broken) == 1 else "games"
    print(f"\narena games: {len(broken)} {noun} cannot be listed:", file=sys.stderr)
    for game_id, target, plugin, reason in sorted(broken, key=lambda bad: bad[0]):
        origin = f"{target}, plugin {plugin}" if plugin else target
        print(f"  {game_id} ({origin}): {reason}", file=sys.stderr)
    return 1
