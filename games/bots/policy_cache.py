"""Where solved policies are kept: JSON files under ``$ARENA_CACHE_DIR`` (default
``~/.cache/arena``), written atomically so a reader never sees half a file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

CACHE_ENV = "ARENA_CACHE_DIR"


def cache_dir() -> Path:
    """``$ARENA_CACHE_DIR`` if set, else ``~/.cache/arena``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "arena"


def load_json(path: Path) -> Any | None:
    """The file's content, or None when it is missing or unreadable (then it is recomputed)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def save_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
