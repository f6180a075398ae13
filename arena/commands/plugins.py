"""``arena plugins [GROUP ...]``: every registry of Arena, each entry with where it comes from.

The groups: ``games``, ``bots``, ``roles``, ``simulators``, ``backends`` (policy backends) and
``commands`` (``arena`` subcommands), with their entry-point groups ``arena.games``,
``arena.bots``, ``arena.roles``, ``arena.simulators``, ``arena.policies`` and
``arena.commands``. Name groups to list only those.

For each group, a table (stdout): every entry that loads, as ``id``, ``factory`` (its
``module:Factory``) and ``from`` (``arena`` for Arena's own, else the distribution whose entry
point registered it). An entry loads when its module imports and its factory is there and
callable; a game, when its spec reads as well (the check of ``arena games``); a command (its
factory is its module, with no ``:Factory``), when its module imports and has ``add_arguments``
and ``run``. An entry that
does not load never hides the others: each is named on stderr after the tables, with its group,
id, ``module:Factory``, plugin and reason, and so is a plugin's entry point that could not be
registered at all (a malformed id, an id already taken).

Exit status: 0 when every entry loads, 1 when any does not (the tables are complete either way,
so a CI job can run ``arena plugins`` as a check of an installation), 2 for an unknown group.
``--no-import`` lists the registered entries without importing any of them (exit 1 only for
entry points refused at registration).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from arena.core.errors import EXIT_REFUSED, did_you_mean
from arena.core.registry import Registry

GROUPS = ("games", "bots", "roles", "simulators", "backends", "commands")
"""The groups, in the order they are listed."""
TITLES = {"backends": "policy backends"}
"""A group's title where it is not its name."""


@dataclass(frozen=True)
class Broken:
    """An entry that does not load, or a plugin's entry point that was never registered."""

    group: str
    id: str
    target: str
    """Its ``module:Factory``."""
    plugin: str | None
    reason: str

    def line(self) -> str:
        origin = f"{self.target}, plugin {self.plugin}" if self.plugin else self.target
        return f"  {self.group} {self.id} ({origin}): {self.reason}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "groups",
        nargs="*",
        metavar="GROUP",
        help=f"list only these groups, of: {', '.join(GROUPS)} (default: all)",
    )
    parser.add_argument(
        "--no-import",
        action="store_true",
        help="list the registered entries without importing them (no load check)",
    )


def registry(group: str) -> Registry[Any]:
    """The registry of ``group`` (importing only the package that keeps it)."""
    if group == "games":
        import games

        return games.registry
    if group == "bots":
        import games.bots

        return games.bots.registry
    if group == "roles":
        import roles

        return roles.registry
    if group == "simulators":
        import simulators

        return simulators.registry
    if group == "backends":
        from arena.policies.factory import backends

        return backends
    if group == "commands":
        from arena.core.commands import commands

        return commands
    raise ValueError(f"unknown group {group!r}; the groups: {', '.join(GROUPS)}")


def load_error(group: str, entry_id: str, reg: Registry[Any]) -> str | None:
    """Why the entry does not load, or None when it does."""
    if group == "games":
        import games

        try:
            games.spec(entry_id)
        except games.GameSpecError as err:
            return err.reason
        return None
    entry = reg.entry(entry_id)
    if group == "commands":
        return command_error(entry_id)
    try:
        factory = entry.load()
    except Exception as err:  # whatever a plugin's module raises on import
        return f"cannot import it: {type(err).__name__}: {err}"
    if not callable(factory):
        return f"{entry.target} is not callable ({factory!r})"
    return reg.not_a_subclass(factory)


def command_error(name: str) -> str | None:
    """Why command ``name`` cannot run, or None when it can: the CLI's own check
    (:func:`arena.core.commands.load`)."""
    from arena.core.commands import CommandError, load

    try:
        load(name)
    except CommandError as err:
        return err.reason
    except Exception as err:  # one of Arena's own that fails to import: listed like a plugin's
        return f"cannot import it: {type(err).__name__}: {err}"
    return None


def list_group(group: str, load: bool) -> tuple[list[str], list[Broken]]:
    """The lines of ``group``'s table, and its entries that do not load."""
    reg = registry(group)
    ids = reg.ids()  # reads the entry points, which fills reg.rejected
    rows = [("id", "factory", "from")]
    broken = [
        Broken(group, bad.id, bad.target, bad.plugin, bad.reason) for bad in reg.rejected.values()
    ]
    for entry_id in ids:
        entry = reg.entry(entry_id)
        reason = load_error(group, entry_id, reg) if load else None
        if reason is not None:
            broken.append(Broken(group, entry_id, entry.target, entry.plugin, reason))
            continue
        rows.append((entry_id, entry.target, entry.plugin or "arena"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"{TITLES.get(group, group)} (entry points: {reg.entry_point_group})"]
    lines += [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return lines, broken


def run(args: argparse.Namespace) -> int:
    for group in args.groups:
        if group not in GROUPS:
            hint = did_you_mean(group, GROUPS)
            print(
                f"arena plugins: unknown group {group!r}{hint} (the groups: {', '.join(GROUPS)})",
                file=sys.stderr,
            )
            return EXIT_REFUSED
    chosen = [g for g in GROUPS if g in args.groups] or list(GROUPS)
    broken: list[Broken] = []
    for number, group in enumerate(chosen):
        lines, bad = list_group(group, load=not args.no_import)
        if number:
            print()
        print("\n".join(lines))
        broken += bad
    if not broken:
        return 0
    sys.stdout.flush()
    noun = "entry" if len(broken) == 1 else "entries"
    print(f"\narena plugins: {len(broken)} {noun} cannot be loaded:", file=sys.stderr)
    for bad in broken:
        print(bad.line(), file=sys.stderr)
    return 1
