"""Progress of long work (evaluations, tournaments, training steps), on a terminal and off it.

On a terminal it is a live bar (done/total, rate, time left). Where the output is not a terminal
(CI, ``nohup``, a log file) a bar would print nothing useful, so a plain line goes out instead
at least every ``every`` seconds, whether or not anything finished since the last one::

    matches 120/400 (30%) 1.9/s, 2m27s left

A line is also printed at the end, so a log always shows the totals.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress


def format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """``with Progress("eval", 400) as p: ... p.advance()``; thread-safe."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        completed: int = 0,
        every: float = 30.0,
        stream: TextIO | None = None,
        console: Console | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.done = completed
        self.every = every
        self.stream = stream or sys.stdout
        self.console = console
        self._first = completed
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bar: RichProgress | None = None
        self._thread: threading.Thread | None = None

    @property
    def interactive(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self) -> str:
        """``label done/total (pct) rate/s, time left``."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        new = self.done - self._first
        rate = new / elapsed
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        text = f"{self.label} {self.done}/{self.total}{pct} {rate:.2f}/s"
        if 0 < self.done < self.total and rate > 0:
            text += f", {format_seconds((self.total - self.done) / rate)} left"
        elif self.done >= self.total:
            text += f", {format_seconds(elapsed)} in all"
        return text

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            if self._bar is not None:
                self._bar.advance(self._task, n)

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        if self.interactive:
            columns = (
                TextColumn(f"[bold]{self.label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
            )
            console = self.console or Console(file=self.stream)
            self._bar = RichProgress(*columns, console=console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, completed=self.done)
        else:
            self._thread = threading.Thread(target=self._report, daemon=True, name="progress")
            self._thread.start()
        return self

    def _report(self) -> None:
        while not self._stop.wait(self.every):
            self._print(self.line())

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.stop()
        if kind is None:
            self._print(self.line())
