"""Timing the inference backend's calls and the hang limit (arena/actors/backend_watch.py)."""

from __future__ import annotations

import time

from arena.actors.backend_watch import BackendWatch


def test_the_default_hang_limit_grows_with_the_slowest_call() -> None:
    """Unset, the hang timeout is 30 s or 4 times the slowest backend call so far; set, fixed."""
    watch = BackendWatch()
    assert watch.limit == 30.0
    assert watch.call(time.sleep, 0.05) is None and watch.since is None
    assert 0.05 <= watch.slowest < 1.0 and watch.limit == 30.0
    watch.slowest = 12.5  # a slow batch on a loaded host
    assert watch.limit == 50.0
    fixed = BackendWatch(hang_timeout=5)
    fixed.slowest = 12.5
    assert fixed.limit == 5.0


def test_a_call_is_overdue_only_past_the_limit() -> None:
    watch = BackendWatch(hang_timeout=2.0)
    assert watch.overdue() is None  # no call in progress
    watch.since = time.monotonic() - 1.0
    assert watch.overdue() is None
    watch.since = time.monotonic() - 3.0
    overdue = watch.overdue()
    assert overdue is not None and 3.0 <= overdue < 4.0
