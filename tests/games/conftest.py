"""Fixtures for the games tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def policy_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Solved policies go to a temporary directory, never to the user's ~/.cache/arena."""
    path = tmp_path_factory.mktemp("arena-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARENA_CACHE_DIR", str(path))
        yield path
