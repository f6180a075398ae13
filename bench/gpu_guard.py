"""What keeps bench/gpu_check.py inside its budget on a GPU host, whatever a part does: the
JSON line kept whole and printed once (:class:`Report`), a part cut off past its share
(:class:`CutOff`, by SIGALRM), and the check's subprocesses, each the leader of a session of
its own, stopped with it (an ``arena train`` left behind would hold the GPU into the next
command, and the host's outer ``timeout`` signals its own process group only).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

CHILDREN: set[subprocess.Popen] = set()
"""The check's running subprocesses, each the leader of its own process group: stopped with
the check (an ``arena train`` left behind would hold the GPU into the next command)."""


SUBPROCESS_GRACE = 25.0
"""Seconds a part that runs a subprocess keeps, after that subprocess's own limit, to stop it
(SIGTERM, 20 s, SIGKILL: ``arena train`` stops its actors) and read what it wrote."""
WATCHDOG_GRACE = 10.0
"""Seconds past ``--budget`` (at most a tenth of it) after which the watchdog ends the check,
whatever runs."""


class CutOff(BaseException):
    """A part ran past its share of the budget (raised by the SIGALRM handler). Not an
    Exception: the parts' own ``except Exception`` (a failed graph capture falls back to eager
    steps) must not swallow it."""


def stop_children(grace: float = 5.0) -> None:
    """SIGTERM every child's process group, then SIGKILL whatever is left after ``grace``."""
    for child in list(CHILDREN):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in list(CHILDREN):
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        CHILDREN.discard(child)


class Report:
    """The one JSON line, built part by part: saved to ``path`` after each part (atomically),
    printed once (:meth:`finish`), whichever of the end, the watchdog or SIGTERM comes first."""

    def __init__(self, result: dict[str, Any], path: Path | None) -> None:
        self.result = result
        self.path = path
        self.started = time.perf_counter()
        self.running = ""
        """The part now running."""
        self._lock = threading.Lock()
        self._done = False

    def save(self) -> None:
        if self.path is None:
            return
        with contextlib.suppress(OSError):
            partial = self.path.with_name(self.path.name + ".partial")
            partial.write_text(json.dumps(self.result) + "\n")
            os.replace(partial, self.path)

    def finish(self, cut_off: str | None = None) -> bool:
        """Print the line (and save it); False if it was printed already."""
        with self._lock:
            if self._done:
                return False
            self._done = True
            if cut_off:
                self.result["cut_off"] = cut_off
            self.result["seconds"] = round(time.perf_counter() - self.started, 1)
            self.save()
            print(json.dumps(self.result), flush=True)
            return True

    def stop(self, why: str) -> None:
        """End the check now: stop the children, print what there is, exit 0 (the line is the
        result; an exit status would only hide it behind the caller's error handling)."""
        if self.finish(f"{self.running or 'the check'} {why}"):
            sys.stderr.write(f"gpu_check: {self.running} {why}: the JSON so far printed\n")
        stop_children(grace=3.0)
        sys.stdout.flush()
        os._exit(0)


def keep_log(log: Path, name: str) -> None:
    """Copy ``log`` to ``$OUT/<name>`` where $OUT is set (a GPU host sends that folder back)."""
    out = os.environ.get("OUT")
    if out and log.exists():
        with contextlib.suppress(OSError):
            shutil.copyfile(log, Path(out) / name)


def run_bounded(argv: list[str], log: Path, timeout: float) -> int | None:
    """Run ``argv`` with its output in ``log``; past ``timeout``, stop its whole process group
    and return None. ``arena train`` starts actors of its own: killing it alone would leave
    them on the GPU (and holding any pipe of ours open), so it gets a session of its own."""
    with open(log, "w") as out:
        process = subprocess.Popen(
            argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        CHILDREN.add(process)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # SIGTERM first: arena train stops its actors (within SUBPROCESS_GRACE)
            stop_children_of(process, grace=20)
            return None
        except BaseException:  # cut off (CutOff), or the check is ending: never leave it
            stop_children_of(process, grace=5)
            raise
        finally:
            CHILDREN.discard(process)


def stop_children_of(process: subprocess.Popen, grace: float) -> None:
    """SIGTERM ``process``'s group, SIGKILL it after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
