"""A command whose reader stops early (``arena ratings LOG | head``) ends quietly with the
shell's status for a closed pipe (141), and one that Ctrl-C stops with 130; never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from arena.cli import EXIT_BROKEN_PIPE
from tests.cli import ENV, ROOT


def test_a_closed_stdout_ends_the_command_with_141_and_no_traceback() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes its first line
    try:
        done = subprocess.run(
            [sys.executable, "-m", "arena", "games"],
            cwd=ROOT,
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == EXIT_BROKEN_PIPE == 141, done.stderr
    assert done.stderr == ""


def test_ctrl_c_ends_a_command_with_130_and_no_traceback() -> None:
    """Ctrl-C in `arena eval` printed asyncio's KeyboardInterrupt traceback. A real SIGINT, to
    a command that waits on a pipe that never writes (`arena ratings /dev/stdin`)."""
    import signal
    import time

    child = subprocess.Popen(
        [sys.executable, "-m", "arena", "ratings", "/dev/stdin"],
        cwd=ROOT,
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    wchan = Path(f"/proc/{child.pid}/wchan")  # where it sleeps: reading the pipe, past imports
    deadline = time.monotonic() + 60
    while "pipe" not in wchan.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert err.strip() == "arena ratings: interrupted"
