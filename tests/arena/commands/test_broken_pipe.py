"""A command whose reader stops early (``arena ratings LOG | head``) ends quietly with the
shell's status for a closed pipe (141), never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

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
