"""How every Arena process stops and dies with its launcher (arena/core/process.py).

Run with ``.venv/bin/python -m pytest -q tests/arena/core/test_process.py``. Real processes:
a child started with ``ARENA_PARENT_PID`` must go when its parent is SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SERVE = """
import asyncio, sys
from arena.core.process import serve

async def main(stop):
    print("ready", flush=True)
    await stop.wait()
    print("stopped cleanly", flush=True)
    return 7

sys.exit(serve(main))
"""

PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]],
                         env={**os.environ, "ARENA_PARENT_PID": str(os.getpid())})
print(child.pid, flush=True)
time.sleep(600)
"""

CHILD = """
import time
from arena.core.process import die_with_parent
die_with_parent()
time.sleep(600)
"""


def test_serve_stops_on_sigterm_and_returns_the_result() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 7
    assert proc.stdout.read().strip() == "stopped cleanly"


def test_a_child_dies_with_its_killed_parent() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    time.sleep(1.0)  # let the child reach die_with_parent
    assert _alive(child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the child outlived its SIGKILLed parent"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (dead, not yet reaped by init) counts as gone
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"
