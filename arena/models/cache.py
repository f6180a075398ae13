"""The arena cache: where converted and saved models live, and how an entry is written so that
a crash or a concurrent process never leaves a half-written one."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The arena cache root: ``override``, ``$ARENA_CACHE_DIR``, or ``~/.cache/arena``."""
    if override is not None:
        return Path(override).expanduser()
    if env := os.environ.get("ARENA_CACHE_DIR"):
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "arena"


def build_atomically(target: Path, build: Callable[[Path], None], what: str) -> Path:
    """Run ``build(tmp)`` and rename ``tmp`` to ``target``; the first finisher wins a race."""
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"arena: {what} -> {target} (once; later loads are fast)", file=sys.stderr, flush=True)
    start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(tmp)
        try:
            tmp.rename(target)
        except OSError:
            if not target.is_dir():  # not a lost race: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"arena: done in {time.monotonic() - start:.0f}s", file=sys.stderr, flush=True)
    return target
