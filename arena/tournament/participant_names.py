"""The names participants get from their paths, and the order of a glob's matches.

A participant without a ``name`` is named after what it plays (:func:`default_name`:
``learning-s0@step-12`` for a checkpoint, ``P@step-8`` for a named policy's); each match of a
checkpoint or adapter glob gets the shortest suffix that tells it apart from the others
(:func:`match_names`, :func:`adapter_match_names`), the matches taken in step order
(:func:`step_order`, :func:`adapter_order`). Used by :mod:`arena.tournament.participants`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from arena.tournament.checkpoint_paths import POLICIES, newest_checkpoint, run_and_policy

_STEP = re.compile(r"^step-0*(\d+)$")


def adapter_match_names(paths: Sequence[str]) -> list[str]:
    """What tells each match of an adapter glob apart: the step of the checkpoint it was saved
    in (``.../step-N/adapters/<policy>``, named as :func:`match_names` names checkpoints), with
    the policy's name too where one step holds several (``step-8/solver``); else its directory,
    as :func:`match_names` names any other path."""
    items = [Path(p) for p in paths]
    if not all(in_checkpoint(p) for p in items):
        return match_names(paths)
    checkpoints = list(dict.fromkeys(str(p.parent.parent) for p in items))
    named = dict(zip(checkpoints, match_names(checkpoints), strict=True))
    steps = [named[str(p.parent.parent)] for p in items]
    if len(set(steps)) == len(steps):
        return steps
    return [f"{step}/{p.name}" for step, p in zip(steps, items, strict=True)]


def in_checkpoint(path: Path) -> bool:
    """A checkpoint's adapter: ``<checkpoint>/adapters/<policy>``."""
    return path.parent.name == "adapters" and _STEP.match(path.parent.parent.name) is not None


def adapter_label(path: Path) -> str:
    """An adapter's short name in a participant's default name: its directory, and the step of
    its checkpoint (``solver@step-8``), so adapters of two steps on one base differ."""
    if in_checkpoint(path):
        return f"{path.name}@{_short(path.parent.parent)}"
    return path.name or str(path)


def adapter_order(path: str) -> tuple[str, int, str]:
    """Checkpoint adapters in step order (then by policy), other paths by name."""
    p = Path(path)
    if in_checkpoint(p):
        checkpoint = p.parent.parent
        folder, step = step_order(str(checkpoint))
        return (folder, step, p.name)
    return (str(p.parent), -1, p.name)


def match_names(paths: Sequence[str]) -> list[str]:
    """What tells each match of a glob apart: ``step-N`` (a checkpoint) or the directory's name,
    and, only where those repeat (a glob over several runs), the run's directory first, as
    few of its parts as make every name unique, counted from where the runs' paths part:
    ``learning-s0/step-12`` for ``runs/learning-s0/<time>/checkpoints/step-00000012``, or
    ``<time>/step-12`` for two runs of one config."""
    items = [Path(p) for p in paths]
    short = [_short(p) for p in items]
    if len(set(short)) == len(short):
        return short
    owners = [_owner(p).parts for p in items]
    common = 0
    while all(len(o) > common and o[common] == owners[0][common] for o in owners):
        common += 1
    longest = max(len(o) for o in owners) - common
    for depth in range(1, longest + 1):
        named = [
            "/".join(o[common : common + depth] + (s,)) for o, s in zip(owners, short, strict=True)
        ]
        if len(set(named)) == len(named):
            return named
    # one run, two directories of the same step (step-12 and step-00000012): their own names
    return ["/".join(o[common:] + (p.name,)) for o, p in zip(owners, items, strict=True)]


def _short(path: Path) -> str:
    step = _STEP.match(path.name)
    return f"step-{int(step.group(1))}" if step else path.name


def _owner(path: Path) -> Path:
    """The run directory of a checkpoint (``<run>/checkpoints/step-N``), else the parent."""
    return path.parent.parent if path.parent.name == "checkpoints" else path.parent


def step_order(path: str) -> tuple[str, int]:
    match = _STEP.match(Path(path).name)
    return (str(Path(path).parent), int(match.group(1)) if match else -1)


def default_name(spec: str) -> str:
    if run_and_policy(spec)[1] is not None:  # RUN:POLICY is named for its newest checkpoint
        spec = str(newest_checkpoint(spec))
    path = Path(spec)
    step = _STEP.match(path.name)
    if step:
        # <run>/checkpoints/step-N is the run's; <run>/checkpoints/policies/P/step-N is P's
        owner = path.parent.name if path.parent.parent.name == POLICIES else path.parent.parent.name
        return f"{owner}@step-{int(step.group(1))}"
    return path.name or spec
