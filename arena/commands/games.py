"""``arena games``: list every registered game with its seats, kind and information."""

from __future__ import annotations

import argparse

HELP = "list the registered games"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ids", action="store_true", help="print only the ids, one per line")


def run(args: argparse.Namespace) -> int:
    import games

    if args.ids:
        print("\n".join(games.ids()))
        return 0
    rows = [("id", "seats", "kind", "information", "strongest bot")]
    for game_id in games.ids():
        meta = games.info(game_id)
        low, high = meta["seats"]
        seats = str(low) if low == high else f"{low}-{high}"
        rows.append((game_id, seats, meta["kind"], meta["information"], meta["strongest_bot"]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0
