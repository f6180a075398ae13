"""Running the ``arena`` command as a user would, from the repository root, for tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def arena(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m arena ARGS`` in the repository root; its exit code and captured output."""
    return subprocess.run(
        [sys.executable, "-m", "arena", *args],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
