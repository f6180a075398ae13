"""Run: .venv/bin/python -m pytest -q tests/arena/eval/test_progress.py"""

from __future__ import annotations

import io
import re
import threading

from arena.eval.progress import Progress, format_seconds


def test_format_seconds() -> None:
    assert format_seconds(42) == "42s"
    assert format_seconds(127) == "2m07s"
    assert format_seconds(3 * 3600 + 5 * 60) == "3h05m"


def test_off_a_terminal_a_line_comes_every_interval_even_when_nothing_finishes() -> None:
    out = io.StringIO()
    ticked = threading.Event()

    class Stream(io.StringIO):
        def write(self, text: str) -> int:
            if "eval" in text:
                ticked.set()
            return out.write(text)

    with Progress("eval", 400, every=0.05, stream=Stream()) as progress:
        assert ticked.wait(5), "no progress line within 5 s of a 0.05 s interval"
        progress.advance(100)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("eval 0/400 (0%) 0.00/s")
    assert re.fullmatch(
        r"eval 100/400 \(25%\) [\d.]+/s, \d+s in all|eval 100/400 .*left", lines[-1]
    )


def test_the_line_names_done_total_rate_and_time_left() -> None:
    progress = Progress("matches", 10, completed=4, stream=io.StringIO())
    progress._started -= 10.0  # ten seconds in, two finished since the start
    progress.advance(2)
    assert progress.line() == "matches 6/10 (60%) 0.20/s, 20s left"
    progress.advance(4)
    assert progress.line() == "matches 10/10 (100%) 0.60/s, 10s in all"
