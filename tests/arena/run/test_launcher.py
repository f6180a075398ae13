"""The local launcher's restart rule: a crashed restartable child is started again, one that
refused its command line, config or environment (exit status 2) is not.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_launcher.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

from arena.core.errors import EXIT_REFUSED
from arena.run.launcher import ChildDied, Launcher


def _died(launcher: Launcher, timeout: float = 60.0) -> str:
    """Check until the launcher gives up on a child; the message it gives up with."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            launcher.check()
        except ChildDied as err:
            return str(err)
        time.sleep(0.05)
    raise AssertionError("no child died")


def test_a_refused_child_is_not_restarted(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path)
    try:
        # a real `arena learner` whose command line argparse refuses (exit status 2)
        child = launcher.start(
            "learner", ["learner", "--no-such-flag"], restartable=True, max_restarts=3
        )
        message = _died(launcher)
        assert child.exit_code == EXIT_REFUSED and child.restarts == 0
        assert "exited with code 2 (it refused its config or environment: not restarted)" in message
        assert "(see arena learner --help)" in message  # the end of its log
    finally:
        launcher.stop_all()


def test_a_crashed_child_is_restarted_up_to_its_budget(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path)
    try:
        # a real `arena broker` that crashes (exit status 1): its socket's directory is missing
        bind = f"ipc://{tmp_path}/missing/bus.sock"
        child = launcher.start(
            "broker", ["broker", "--bind", bind], restartable=True, max_restarts=2
        )
        message = _died(launcher)
        assert child.exit_code == 1 and child.restarts == 2
        assert "exited with code 1;" in message and "ZMQError" in message
    finally:
        launcher.stop_all()
