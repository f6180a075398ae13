"""What every Arena process does the same way: stop cleanly on a signal, and die with its parent.

Every process is an ``arena`` subcommand (:mod:`arena.cli`); a long-running one hands its main
coroutine to :func:`serve`::

    def run(args):
        return serve(lambda stop: MyActor(...).run(stop))

``serve`` runs the coroutine with an ``asyncio.Event`` that SIGINT and SIGTERM set, so the
actor closes its sockets and files on the way out instead of dying mid-write.

A launcher that must leave no orphans starts its children with ``ARENA_PARENT_PID`` set to its
own pid; :func:`die_with_parent` (called by the CLI before any command runs) asks the kernel to
send the child SIGTERM when that parent dies.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import gc
import io
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import NoReturn, TypeVar

from arena.core.errors import CannotStart

T = TypeVar("T")

PARENT_ENV = "ARENA_PARENT_PID"
"""Set by a launcher to its pid: the child stops when that process dies."""

_PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

PROCESS_KINDS = ("broker", "train", "inference", "learner", "rollout")
"""Kinds of Arena process, in the order a deployment starts them: the broker first (everyone
connects to it), the coordinator (``arena train``: it writes the run's config files), the
inference actors (slow to load, need no file), then the learner and the rollout actors (they
read the files the coordinator wrote). A process's name starts with its kind."""


def kind_of(name: str, kinds: Sequence[str] = PROCESS_KINDS, known: str = "known kind") -> str:
    """The kind of a process from its name (``inference-pool`` -> ``inference``), which must be
    one of ``kinds`` (a ValueError names them, as ``known``: e.g. "kind Ray places")."""
    kind = name.split("-", 1)[0]
    if kind not in kinds:
        raise ValueError(f"process {name!r} is of no {known} ({', '.join(kinds)})")
    return kind


class Replaced(Exception):  # noqa: N818 (not an error: a command handing over its process)
    """Raised by a command to have the CLI run ``argv`` in its place, as ``exec`` would, but
    in this interpreter, with what it has imported. ``arena preload`` raises it in each process
    it forks (:mod:`arena.run.preload`)."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__(argv)
        self.argv = argv


def serve(
    main: Callable[[asyncio.Event], Awaitable[T]],
    run: Callable[[Awaitable[T]], T] = asyncio.run,  # type: ignore[assignment]
) -> T:
    """Run ``main(stop)`` on a fresh event loop; SIGINT and SIGTERM set ``stop``.

    ``run`` starts the loop (``asyncio.run``, or e.g. ``uvloop.run``).
    """

    async def guarded() -> T:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, stop.set)
        return await main(stop)

    return run(guarded())


def exit_now(code: int) -> NoReturn:
    """Leave at once, with logs and output flushed, skipping the interpreter's shutdown.

    For a process whose worker thread is stuck in a call that never returns (a wedged model
    engine): Python's exit joins every ``ThreadPoolExecutor`` thread, so it would wait for that
    call forever, and the process would outlive its launcher."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def end_fork(command: Callable[[], int | None]) -> NoReturn:
    """Run ``command`` in a process forked by ``arena preload``, then leave as Python's exit
    would (threads joined, ``atexit`` run, files flushed) but without its teardown.

    The fork shares the server's pages with it until it writes to them, and the teardown
    writes to every object torch and transformers made: a forked child that ends with it spends
    0.5-1.7 CPU-seconds copying pages only to free them, as long as a small command's whole
    run. Nothing of the child's is lost by skipping it: its files are flushed here."""
    try:
        code = command()
    except SystemExit as leaving:
        code = _exit_status(leaving.code)
    except BaseException:  # as the interpreter would print it
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what exit does first: join threads
    atexit._run_exitfuncs()
    for obj in gc.get_objects():
        # type(), not isinstance: that reads __class__, which some proxies warn on
        if type(obj) in _WRITERS and not obj.closed:
            try:
                obj.flush()
            except (OSError, ValueError):
                pass
    os._exit(code or 0)


_WRITERS = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
"""The file objects that buffer what is written to them."""


def _exit_status(code: object) -> int:
    """The exit status Python gives ``SystemExit(code)``: a message is printed, and is 1."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs: a zombie (ended, not yet reaped by its parent) does not;
    another user's process does."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:  # reaped in between
        return False
    except (OSError, IndexError):  # no /proc here: kill(0) answered
        return True


def on_stop_signal(callback: Callable[[], None]) -> None:
    """For a process without an event loop: call ``callback`` on SIGINT or SIGTERM.

    ``callback`` runs inside the signal handler, possibly again while an earlier call has not
    returned (signals can come in bursts: see :func:`die_with_parent`), so it must not take a
    lock; setting a flag is safe."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda *_: callback())


def die_with_parent() -> None:
    """If ``ARENA_PARENT_PID`` names this process's parent, get SIGTERM when it dies.

    The signal may come several times: the kernel sends it each time it reparents this process,
    once per exiting thread of a multithreaded parent (a Ray worker, for one).

    Linux only (``PR_SET_PDEATHSIG``); elsewhere a killed launcher may leave its children
    running. A child whose parent already died before this call exits at once.
    """
    expected = os.environ.pop(PARENT_ENV, None)
    if not expected:
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux
        return
    if os.getppid() != int(expected):  # the parent died before prctl took effect
        sys.exit(1)


MIN_OPEN_FILES = 64
"""Open files below which no ``arena`` process starts: the smoke run's processes work with 64,
and with 24 they hang silently (a socket that cannot be made)."""


def lift_open_file_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (at most 65536): each
    peer connection on the bus holds one, and a run with many actors outgrows a low default.
    Returns the limit now; below :data:`MIN_OPEN_FILES` even so, :class:`CannotStart` names it."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    if soft != resource.RLIM_INFINITY and soft < MIN_OPEN_FILES:
        raise CannotStart(
            f"this process may open only {soft} files (ulimit -n); Arena needs at least "
            f"{MIN_OPEN_FILES}: raise the hard limit (ulimit -Hn, limits.conf, or the scheduler's "
            "setting)"
        )
    return soft
