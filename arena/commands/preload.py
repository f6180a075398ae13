"""``arena preload --fd N``: import torch and transformers once, then fork the run's learner and
inference actors from this process (started by a run's launcher, never by hand).

A learner or an inference actor spends most of its start importing torch and transformers'
model code. A launcher (``arena train``, the servers of ``arena tournament`` and ``arena eval``)
starts this server once, on the socket it passes as file descriptor N, and asks it for each
such child: the child is the same ``arena`` command, as its own process, with the imports
already made (:mod:`arena.run.preload`). The server stops when its launcher closes the socket
or dies; its children die with it.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import stat

log = logging.getLogger("arena.commands.preload")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from arena.run.preload import PRELOADED

    parser.add_argument(
        "--fd", type=int, required=True, help="the launcher's socket (a SOCK_SEQPACKET Unix socket)"
    )
    parser.add_argument(
        "--modules",
        default=",".join(PRELOADED),
        help="comma-separated modules to import before forking (default: %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    from arena.core.errors import CannotStart
    from arena.run.preload import serve

    try:
        is_socket = stat.S_ISSOCK(os.fstat(args.fd).st_mode)
    except OSError:
        is_socket = False
    if not is_socket:
        raise CannotStart(
            f"file descriptor {args.fd} is no socket: this command is started by a run's "
            "launcher, which passes it one (arena/run/preload.py)"
        )

    for module in filter(None, args.modules.split(",")):
        try:
            importlib.import_module(module)
        except Exception as err:  # an optional backend missing: its children import it late
            log.warning("not preloaded: %s (%s: %s)", module, type(err).__name__, err)
    # what the imports made stays put: the children's collections skip it (and leave its
    # pages shared with this process instead of touching every one)
    gc.freeze()
    serve(args.fd)  # in each forked child, raises Replaced: the CLI runs the child's command
    return 0
