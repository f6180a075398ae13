"""Task families with verifiable ground truth, for the proposer/solver/judge game.

A family is a tiny language of problems. The proposer writes a problem in it; :meth:`Family.parse`
reads that text back, checks it is a valid problem (well-formed, in range, with exactly one
answer) and computes the true answer itself, so no seat is ever trusted for the truth. Parsing
is case-insensitive and whitespace-tolerant; a parsed problem is re-rendered in one canonical
spelling (``Task.text``), so the same problem always reads the same.

- ``arithmetic``: a counting story ("Ann has 12 apples. Ann buys 5 more. ... How many apples
  does Ann have?"); every count stays a whole number in 0..1000.
- ``ordering``: comparisons on one scale ("Ann is taller than Bob. ... Who is the tallest?");
  the facts must be consistent (an acyclic graph) and must pin down the person asked for.

Each family takes difficulty knobs (its class says which); the defaults are the full family,
and :data:`FAMILIES` holds the defaults. :func:`make_families` builds every family with knobs.

Answers are read by :meth:`Family.read_answer` (``" 12 "``, ``"12.0"`` and ``"12 apples"`` all
read ``"12"``; ``"ann."`` reads ``"Ann"``) and compared with the truth by :meth:`Family.check`.
"""

from __future__ import annotations

from typing import Any

from games.mae.arithmetic import Arithmetic
from games.mae.family import MAX_CHARS, NAMES, Family, Task
from games.mae.ordering import Ordering, unique_at

__all__ = [
    "FAMILIES",
    "KNOBS",
    "MAX_CHARS",
    "NAMES",
    "Arithmetic",
    "Family",
    "Ordering",
    "Task",
    "make_families",
    "unique_at",
]

FAMILIES: dict[str, Family] = {f.name: f for f in (Arithmetic(), Ordering())}
"""Every shipped family, by name, with the default knobs."""
KNOBS: dict[str, tuple[str, ...]] = {
    "arithmetic": ("max_steps", "ops", "max_start", "max_amount"),
    "ordering": ("max_people", "min_people", "max_rank", "ask_bottom"),
}
"""Each family's difficulty knobs (its constructor's keyword arguments)."""


def make_families(**knobs: Any) -> dict[str, Family]:
    """Every shipped family, by name, each built with the knobs of ``knobs`` that are its own
    (see :data:`KNOBS`); a knob no family has is a ``TypeError``."""
    unknown = set(knobs) - {k for names in KNOBS.values() for k in names}
    if unknown:
        raise TypeError(f"unknown family knob(s) {sorted(unknown)}; known: {KNOBS}")
    classes = {"arithmetic": Arithmetic, "ordering": Ordering}
    return {
        name: cls(**{k: v for k, v in knobs.items() if k in KNOBS[name]})
        for name, cls in classes.items()
    }
