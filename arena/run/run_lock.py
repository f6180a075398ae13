"""One ``arena train`` per run directory at a time.

Two trainers in one directory (a ``resume=RUN`` started twice, or while the run still runs)
would share its bus socket, rewrite each other's ``metrics.jsonl`` and save over each other's
checkpoints. The trainer holds an exclusive ``flock`` on ``RUN/train.lock`` for its whole life,
and a second one is refused at once, in one line naming the holder's pid, before anything
starts. The kernel drops the lock when the holder exits, however it ends (even ``kill -9``), so
a stale lock file never blocks a resume.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import IO

from arena.core.errors import CannotStart

LOCK_FILE = "train.lock"
log = logging.getLogger("arena.run")


class RunInUse(CannotStart):
    """Another ``arena train`` holds the run directory."""


def hold_run(run_dir: Path) -> IO[str]:
    """Lock ``run_dir`` for this process, or raise :class:`RunInUse`; keep the returned file
    open while the run runs (closing it, or exiting, releases the lock)."""
    handle = open(run_dir / LOCK_FILE, "a+")  # noqa: SIM115 - held open for the run's life
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise RunInUse(
            f"{run_dir} is in use by another arena train (pid {holder}): two in one run "
            "directory would write over each other's metrics and checkpoints; wait for it to "
            "end or stop it, then resume"
        ) from None
    except OSError as err:  # a file system without locks (some network mounts): run unguarded
        log.warning("cannot lock %s (%s): nothing stops a second arena train there", run_dir, err)
        return handle
    with contextlib.suppress(OSError):
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
    return handle
