"""One ``arena train`` per run directory (arena/run/run_lock.py): a second one is refused in
one line naming the holder, and the lock goes with the holder.

Run with ``.venv/bin/python -m pytest -q -p no:cacheprovider tests/arena/run/test_run_lock.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.run.run_lock import LOCK_FILE, RunInUse, hold_run

ROOT = Path(__file__).resolve().parents[3]


def test_a_second_trainer_in_a_run_directory_is_refused_naming_the_first(tmp_path: Path) -> None:
    held = hold_run(tmp_path)
    with pytest.raises(RunInUse) as caught:
        hold_run(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path} is in use by another arena train (pid {os.getpid()}): two in one run "
        "directory would write over each other's metrics and checkpoints; wait for it to end "
        "or stop it, then resume"
    )
    # another process is refused too; once the holder lets go (or exits), it may take it
    assert "RunInUse" in hold_elsewhere(tmp_path)
    held.close()
    assert hold_elsewhere(tmp_path) == ""
    # the file left behind by a holder that exited blocks nothing
    assert (tmp_path / LOCK_FILE).exists()
    hold_run(tmp_path).close()


def hold_elsewhere(run_dir: Path) -> str:
    """Take the lock in another process and exit; its stderr."""
    code = f"from pathlib import Path; from arena.run.run_lock import hold_run; hold_run(Path({str(run_dir)!r}))"
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return done.stderr


def test_a_file_system_without_locks_runs_unguarded_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import fcntl

    def no_locks(*args: object) -> None:
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    handle = hold_run(tmp_path)
    handle.close()
    assert "nothing stops a second arena train there" in caplog.text
