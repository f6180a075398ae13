"""``arena preload``: import torch and transformers once, then fork learners, inference and rollout
actors from this process.

A learner or an inference actor spends most of its start importing torch and transformers'
model code. A launcher (``arena train``, the servers of ``arena tournament`` and ``arena eval``)
starts this server with ``--fd N``, on the socket it passes as file descriptor N, and asks it
for each such child: the child is the same ``arena`` command, as its own process, with the
imports already made (:mod:`arena.run.preload`). That server stops when its launcher closes the
socket or dies; its children die with it.

``--listen PATH`` starts a shared server instead, for a host that runs many short runs one
after another (a sweep, a test suite): every launcher whose environment has
``ARENA_PRELOAD=PATH`` forks its children through it, and none of them waits for the imports.
It runs until SIGTERM or Ctrl-C and only this user can connect. A launcher's children end
when it closes its connection or dies, and all of them end with the server.

A ``--modules`` entry ``module:function`` is called once imported: the default reads SmolLM2's
tokenizer where the cache holds it, so that no child reads it again. A child ends as Python's
exit would (threads joined, ``atexit`` run, files flushed) but without the interpreter's
teardown, which would copy the server's pages only to free them
(:func:`arena.core.process.end_fork`); the finalizers of the server's objects stay the server's.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import logging
import os
import signal
import socket
import stat
import sys
from pathlib import Path

log = logging.getLogger("arena.commands.preload")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from arena.run.preload import PRELOADED

    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--fd", type=int, help="the launcher's socket (a SOCK_SEQPACKET Unix socket)"
    )
    where.add_argument(
        "--listen",
        type=Path,
        metavar="PATH",
        help="serve every launcher with ARENA_PRELOAD=PATH in its environment, from a socket "
        "at PATH, until stopped",
    )
    parser.add_argument(
        "--modules",
        default=",".join(PRELOADED),
        help="comma-separated modules to import before forking, or module:function to call "
        "(default: %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    from arena.core.errors import CannotStart
    from arena.run.preload_server import listen

    listener = None
    if args.listen is not None:
        try:  # before the imports: a launcher can connect at once, and waits for its children
            listener = listen(args.listen)
        except OSError as err:
            raise CannotStart(str(err)) from err
        connections = []
        print(
            f"arena preload: listening on {args.listen} (ARENA_PRELOAD={args.listen})", flush=True
        )
    else:
        try:
            is_socket = stat.S_ISSOCK(os.fstat(args.fd).st_mode)
        except OSError:
            is_socket = False
        if not is_socket:
            raise CannotStart(
                f"file descriptor {args.fd} is no socket: this command is started by a run's "
                "launcher, which passes it one (arena/run/preload.py); `--listen PATH` starts "
                "a shared server"
            )
        connections = [socket.socket(fileno=args.fd)]

    server = os.getpid()
    if listener is not None:  # stopped while still importing: leave, and take the socket away
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: sys.exit(0))
    try:
        _import_and_serve(args.modules, connections, listener)
    finally:
        if listener is not None and os.getpid() == server:  # not in a forked child
            with contextlib.suppress(OSError):
                os.unlink(args.listen)
    return 0


def _import_and_serve(
    modules: str, connections: list[socket.socket], listener: socket.socket | None
) -> None:
    from arena.run.preload_server import serve

    for entry in filter(None, modules.split(",")):
        module, _, function = entry.partition(":")
        try:
            loaded = importlib.import_module(module)
            if function:
                getattr(loaded, function)()
        except Exception as err:  # an optional backend missing: its children import it late
            log.warning("not preloaded: %s (%s: %s)", entry, type(err).__name__, err)
    # what the imports made stays put: the children's collections skip it (and leave its
    # pages shared with this process instead of touching every one)
    gc.freeze()
    serve(connections, listener)  # in each forked child, raises Replaced: the CLI runs its command
