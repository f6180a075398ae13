"""Fixtures shared by the weight tests."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def shm_dir() -> Iterator[Path]:
    """A private directory on /dev/shm (tests never touch other processes' files)."""
    folder = Path("/dev/shm") / f"arena-test-{os.getpid()}-{time.monotonic_ns()}"
    folder.mkdir()
    yield folder
    for item in folder.iterdir():
        item.unlink()
    folder.rmdir()
