"""The ``arena`` command line. Each subcommand lives in ``arena/commands/<name>.py``.

A command module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.
Modules are imported only when their command runs, so ``arena --help`` stays fast and a command's
heavy imports (torch, transformers) never slow the others down.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMANDS: dict[str, str] = {
    "broker": "run a message broker (ROUTER) that actors connect to",
    "ping": "send a request through a broker to its built-in echo service and print the RTT",
    "train": "self-play training from a YAML config (arena train configs/selfplay.yaml)",
    "plot": "write PNG curves (reward, win rate, invalid rate, KL, entropy) of a run directory",
    "games": "list the registered games: id, seats, kind, information, strongest bot",
    "check-game": "run the games conformance kit on a game id and print a pass/fail table",
}
"""Subcommand name to its one-line help; the module is ``arena.commands.<name with _>``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="arena",
        description="Arena: train LLM agents by multi-agent self-play over a ZeroMQ actor bus.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 0 if not argv else 2
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    module = importlib.import_module(f"arena.commands.{args.command.replace('-', '_')}")
    command_parser = argparse.ArgumentParser(prog=f"arena {args.command}", description=COMMANDS[args.command])
    module.add_arguments(command_parser)
    return int(module.run(command_parser.parse_args(rest)) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
