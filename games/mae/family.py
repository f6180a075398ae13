"""What every task family of the proposer/solver/judge game is: :class:`Family` (parse a
problem, compute its answer, sample a reference problem, read and check an answer) and the
:class:`Task` it yields. The shipped families are :mod:`games.mae.arithmetic` and
:mod:`games.mae.ordering`; :mod:`games.mae.families` gathers them.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

NAMES = ("Ann", "Bob", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kim", "Lu")
"""The people every family's problems may name (a closed list keeps parsing exact)."""
MAX_CHARS = 1000
"""Longer problem texts are not parsed at all."""
_NAME_INDEX = {n.casefold(): n for n in NAMES}


@dataclass(frozen=True)
class Task:
    """One problem: its family, its canonical text, and its true answer (canonical form)."""

    family: str
    text: str
    answer: str


def sentences(text: str) -> list[str] | None:
    """``text`` split after each ``.`` or ``?``, whitespace collapsed; None when it is empty,
    too long, or has words after its last full stop."""
    text = " ".join(text.split())
    if not text or len(text) > MAX_CHARS:
        return None
    parts = re.findall(r"[^.?]*[.?]", text)
    if "".join(parts) != text:
        return None
    return [p.strip() for p in parts]


def name_of(word: str) -> str | None:
    """The listed name ``word`` spells (any case), or None."""
    return _NAME_INDEX.get(word.casefold())


class Family(ABC):
    """A task family: its grammar for the proposer, reference problems, a parser that computes
    the truth, and an answer checker."""

    name: str
    answer_hint: str
    """What a solver's answer must be, e.g. "a whole number"."""

    @abstractmethod
    def describe(self) -> str:
        """The family's grammar with an example, for the proposer's prompt."""

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> Task:
        """A valid reference problem; its answer is worked out apart from :meth:`parse`."""

    @abstractmethod
    def parse(self, text: str) -> Task | None:
        """The problem ``text`` states, with its computed answer; None unless valid."""

    @abstractmethod
    def read_answer(self, text: str) -> str | None:
        """A solver's answer in canonical form, or None when it is not an answer at all."""

    @abstractmethod
    def candidates(self, task: Task) -> list[str]:
        """Well-formed answers taken from the problem's text only (never from its truth)."""

    def check(self, task: Task, answer_text: str) -> bool:
        """Whether ``answer_text`` is the task's true answer."""
        return self.read_answer(answer_text) == task.answer
