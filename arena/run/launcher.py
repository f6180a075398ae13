"""Start, watch and stop the local processes of a run.

Every child is an ``arena`` subcommand (``python -m arena inference ...``), the same program a
multi-host deployment starts by hand. Each is started with ``ARENA_PARENT_PID`` set, so it asks
the kernel for SIGTERM when the launcher dies (:func:`arena.core.process.die_with_parent`): a
killed launcher leaves no orphans. Each child's output goes to ``<run_dir>/logs/<name>.log``.
Learners and inference actors are forked by the launcher's ``arena preload`` server, which has
imported torch and transformers once for all of them (:mod:`arena.run.preload`; its log is
``preload.log``), or by the shared one ``$ARENA_PRELOAD`` names; ``preload=False`` starts them
as fresh processes too.

:meth:`Launcher.check` is called periodically: a dead child marked ``restartable`` (the run's
own broker, the learner, rollout actors: :mod:`arena.run.processes`) is started again with the
same command line, up to its restart budget, and the event is logged; any other death is a
:class:`ChildDied` that names the child, its exit code and the end of its log. A child that
exits with :data:`~arena.core.errors.EXIT_REFUSED` refused its config or its environment (a
learner without disk space for a checkpoint): it is never restarted, since it would fail the
same way again.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from arena.core.errors import EXIT_REFUSED
from arena.core.process import PARENT_ENV
from arena.run.preload import (
    PRELOAD_ENV,
    PRELOADED_KINDS,
    ForkedProcess,
    Preloader,
    PreloadUnavailable,
)

log = logging.getLogger("arena.run.launcher")


class ChildDied(RuntimeError):
    """A child process that must not die did (or a restartable one died too often)."""


@dataclass
class Child:
    """One supervised process."""

    name: str
    argv: list[str]
    """The ``arena`` command line, without ``arena`` (e.g. ``["broker", "--bind", ...]``)."""
    restartable: bool = False
    max_restarts: int = 0
    env: dict[str, str] = field(default_factory=dict)
    """Added to the launcher's environment for this child."""
    restarts: int = 0
    exit_code: int | None = None
    """The exit status of its last process, once that has ended (None: running, or unknown)."""
    process: subprocess.Popen | ForkedProcess | None = None
    events: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None


class Launcher:
    """Owns the children of one run. A launcher that starts them elsewhere
    (:class:`~arena.run.ray_launcher.RayLauncher`) overrides ``child_type``, :meth:`_spawn`,
    :meth:`_ended` and :meth:`stop_all`; restarts and :class:`ChildDied` stay the same."""

    child_type: type[Child] = Child
    """The record of one child (a launcher may keep more about each)."""

    def __init__(
        self, log_dir: Path, env: dict[str, str] | None = None, preload: bool = True
    ) -> None:
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        shared = self.env.get(PRELOAD_ENV) or None
        self.preloader = (
            Preloader(log_dir / "preload.log", self.env, address=shared) if preload else None
        )
        """Forks the learners, inference and rollout actors, through the shared server that
        ``$ARENA_PRELOAD`` names or else the launcher's own (None: each starts as a fresh
        process)."""
        self.children: dict[str, Child] = {}
        self.expected: list[str] = []
        """The names of every process the run will start (:meth:`expect`), started or not."""

    def expect(self, names: list[str]) -> None:
        """Say up front which processes the run will start (they start one at a time): a
        launcher that places them on a cluster judges the whole request at the first."""
        self.expected = list(names)

    def start(
        self,
        name: str,
        argv: list[str],
        *,
        restartable: bool = False,
        max_restarts: int = 0,
        env: dict[str, str] | None = None,
    ) -> Child:
        """Start ``arena argv`` as child ``name``, with ``env`` added to the launcher's."""
        child = self.child_type(name, list(argv), restartable, max_restarts, dict(env or {}))
        self.children[name] = child
        self._spawn(child)
        return child

    def _spawn(self, child: Child) -> None:
        with open(self.log_dir / f"{child.name}.log", "ab") as out:
            if self.preloader is not None and child.name.split("-")[0] in PRELOADED_KINDS:
                try:
                    child.process = self.preloader.spawn(child.argv, {**self.env, **child.env}, out)
                    log.info("started %s (forked by the preload server)", child.name)
                    return
                except PreloadUnavailable as err:
                    log.warning("%s; starting %s as a fresh process", err, child.name)
            child.process = subprocess.Popen(
                [sys.executable, "-m", "arena", *child.argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**self.env, **child.env, PARENT_ENV: str(os.getpid())},
            )
        log.info("started %s (pid %d)", child.name, child.process.pid)

    def check(self) -> list[str]:
        """Restart dead restartable children; raise :class:`ChildDied` for the others.

        Returns the events (restarts) that happened since the last call.
        """
        events = []
        for child in self.children.values():
            ended = self._ended(child)
            if ended is None:
                continue
            if child.exit_code == EXIT_REFUSED:
                ended += " (it refused its config or environment: not restarted)"
            elif child.restartable and child.restarts < child.max_restarts:
                child.restarts += 1
                event = (
                    f"{child.name} (pid {child.pid}) {ended}; restarting "
                    f"({child.restarts}/{child.max_restarts})"
                )
                log.warning(event)
                child.events.append(event)
                events.append(event)
                self._spawn(child)
                continue
            raise ChildDied(
                f"{child.name} (pid {child.pid}) {ended}; "
                f"end of {self.log_dir / (child.name + '.log')}:\n{self.tail(child.name)}"
            )
        return events

    def _ended(self, child: Child) -> str | None:
        """How ``child`` ended (``exited with code N``), or None while it runs."""
        code = child.process.poll() if child.process is not None else None
        child.exit_code = code
        return None if code is None else f"exited with code {code}"

    def tail(self, name: str, lines: int = 15) -> str:
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop_all(self, timeout: float = 15.0) -> None:
        """SIGTERM every child (newest first), then SIGKILL what is left after ``timeout``."""
        if self.preloader is not None:  # a child not forked yet cannot be signalled
            self.preloader.drop_unforked()
        alive = [
            c.process
            for c in reversed(list(self.children.values()))
            if c.process is not None and c.process.poll() is None
        ]
        for proc in alive:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in alive:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("pid %d ignored SIGTERM; killing it", proc.pid)
                proc.kill()
                proc.wait()
        if self.preloader is not None:
            self.preloader.stop(timeout)
