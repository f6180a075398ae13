"""The ``arena`` command line: every Arena process is one of its subcommands.

Each subcommand lives in ``arena/commands/<name>.py`` and is registered in
:data:`arena.core.commands.commands` with its one-line help (the same registry pattern as games
and backends; plugins add commands through the entry-point group ``arena.commands``). A command
module's docstring is its ``--help`` text; it defines ``add_arguments(parser)`` and ``run(args) -> int``. Modules are
imported only when their command runs, so ``arena --help`` stays fast and a command's heavy
imports (torch, transformers) never slow the others down.

Options and positional arguments may come in any order (``arena train CFG --dry-run steps=3``).
A config error (malformed YAML: its file, line and column) or an unknown id ends the command
with exit code 2 and one line naming the key or the nearest id, never a traceback. So does an
unknown command (``arena: unknown command 'trian'; did you mean 'train'?``), a plugin's
command that cannot run (its module fails to import, or lacks ``add_arguments`` or ``run``),
and a command line its parser refuses (``arena train: unrecognized arguments: --dryrun; did
you mean '--dry-run'? (see arena train --help)``).
``arena --help`` shows a plugin command's first docstring line as its summary; plugin command
modules are imported for that listing only, never to run another command. A process started
by a launcher with ``ARENA_PARENT_PID`` set dies with its parent
(:func:`arena.core.process.die_with_parent`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import NoReturn

from arena.core.commands import commands, load, summary
from arena.core.errors import EXIT_REFUSED, CannotStart, ConfigError, did_you_mean
from arena.core.process import Replaced, die_with_parent, end_fork, lift_open_file_limit
from arena.core.registry import RegistryError

EXIT_INTERRUPTED = 130
"""What a shell reports for a process that SIGINT (Ctrl-C) ended (128 + 2)."""
EXIT_BROKEN_PIPE = 141
"""What a shell reports for a process that SIGPIPE ended (128 + 13): Python ignores SIGPIPE, so a
command whose reader closed the pipe (`| head`) exits with it instead of a traceback."""


class CommandParser(argparse.ArgumentParser):
    """A command's parser whose refusal of its command line is one line, as a config error's
    is, naming the nearest flag for a mistyped one (``--dryrun``: ``did you mean
    '--dry-run'?``) and pointing to ``--help``, instead of the whole usage; exit status 2."""

    def error(self, message: str) -> NoReturn:
        unknown = message.partition("unrecognized arguments: ")[2].split()
        flags = [flag for flag in self._option_string_actions if flag.startswith("--")]
        hints = [did_you_mean(word.split("=")[0], flags) for word in unknown if word[:1] == "-"]
        hint = next((h for h in hints if h), "")
        self.exit(EXIT_REFUSED, f"{self.prog}: {message}{hint} (see {self.prog} --help)\n")


def build_parser(summaries: bool = False) -> argparse.ArgumentParser:
    """The top-level parser. ``summaries``: give each plugin command its docstring's first line
    (imports those modules: only when the command list is printed)."""
    parser = argparse.ArgumentParser(
        prog="arena",
        description="Arena: train LLM agents by multi-agent self-play over a ZeroMQ actor bus.",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands.ids():
        help_text = summary(name) if summaries else commands.entry(name).metadata.get("help", "")
        sub.add_parser(name, help=help_text, description=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    try:
        lift_open_file_limit()
    except CannotStart as err:
        print(f"arena: cannot start: {err}", file=sys.stderr)
        return EXIT_REFUSED
    argv = list(sys.argv[1:] if argv is None else argv)
    named = next((arg for arg in argv if not arg.startswith("-")), None)
    if named is not None and named not in commands:
        try:
            commands.entry(named)  # raises: did you mean, or why a plugin's name was refused
        except RegistryError as err:
            print(f"arena: {err}", file=sys.stderr)
            return EXIT_REFUSED
    parser = build_parser(summaries=named is None)
    args, rest = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 0 if not argv else 2
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    entry = commands.entry(args.command)
    prog = f"arena {args.command}"
    try:
        module = load(args.command)
    except RegistryError as err:  # a plugin's command that cannot run
        print(f"{prog}: {err}", file=sys.stderr)
        return EXIT_REFUSED
    command_parser = CommandParser(
        prog=prog,
        description=(module.__doc__ or entry.metadata.get("help", "")).replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(command_parser)  # type: ignore[attr-defined]
    parsed = None
    try:
        parsed = command_parser.parse_intermixed_args(rest)
        code = int(module.run(parsed) or 0)  # type: ignore[attr-defined]
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        return code
    except Replaced as replaced:  # a process forked by `arena preload`: now its own command
        handover = replaced.argv
    except ConfigError as err:
        print(f"{prog}: bad config: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except RegistryError as err:  # an unknown id on the command line; names the nearest
        print(f"{prog}: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except CannotStart as err:
        print(f"{prog}: cannot start: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:  # Ctrl-C in a command that does not handle it: no traceback
        print(f"\n{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `arena ratings ... | head`: the reader has what it wanted
        # stdout is gone: point it at /dev/null so that Python's exit, flushing it, raises nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as err:
        # an actor started before its broker (`arena rollout --connect ADDR` with nothing at
        # ADDR): one line, exit 1 (not refused: a launcher may start it again once the broker
        # is up). BusError is looked up, not imported: the bus imports zmq, which a command
        # that never touched it must not pay for, and it cannot have raised one then (nor
        # connected without loading its security module, whose hint says keys may be why).
        errors = sys.modules.get("arena.bus.errors")
        if errors is None or not isinstance(err, errors.BusError) or err.code != "no_broker":
            raise
        security = sys.modules.get("arena.bus.security")
        address = getattr(parsed, "address", None) or ""
        hint = security.keys_hint(address) if security is not None else ""
        print(
            f"{prog}: {err.message}: start the broker first (arena broker){hint}", file=sys.stderr
        )
        return 1
    # outside the handler: the child's own errors are not shown as raised while handling it
    end_fork(lambda: main(handover))


if __name__ == "__main__":
    raise SystemExit(main())
