"""Where a learner's checkpoints lie: one ``step-NNNNNNNN`` directory per saved step, complete
once its ``state.json`` is there (:mod:`trainers.checkpoint` writes and reads them).

No torch: the trainer finds checkpoints to evaluate and resume from at every start, and reads
their weights only when it evaluates them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

STEP_DIR = re.compile(r"^step-(\d+)$")
ADAPTERS_DIR = "adapters"
"""A checkpoint's named LoRA adapters (and a shared adapter served unmerged), one peft
directory each, beside its ``model/``."""


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def step_dirs(root: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """Every ``step-*`` directory under ``root``, complete or not, as (step, path), oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(
        (int(match.group(1)), path)
        for path in root.iterdir()
        if (match := STEP_DIR.match(path.name))
    )


def list_checkpoints(root: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``root`` as (step, path), oldest first."""
    return [(step, path) for step, path in step_dirs(root) if (path / "state.json").is_file()]


def latest_checkpoint(root: str | os.PathLike[str]) -> Path | None:
    found = list_checkpoints(root)
    return found[-1][1] if found else None


def incomplete_after(root: str | os.PathLike[str], step: int) -> list[Path]:
    """``step-*`` directories under ``root`` newer than ``step`` that lack their ``state.json``:
    a save never leaves one (it renames a complete directory into place), so they were cut
    short or damaged by hand. Resuming passes them by; the run should say so."""
    return [
        path
        for found, path in step_dirs(root)
        if found > step and not (path / "state.json").is_file()
    ]
