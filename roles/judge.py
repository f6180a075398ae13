"""The judge role: scores a solver's answer to a question, ``<score>...</score>``.

The game says what a score is (``what="a score from 0 to 10"``) and parses the number; the
role only makes sure there is exactly one thing to parse.
"""

from __future__ import annotations

from dataclasses import dataclass

from games.formats import SCORE, OutputFormat
from roles.base import Role


@dataclass
class Judge(Role):
    name: str = "judge"
    job: str = "You are {seat}, the judge: score how well the answer solves the question."
    output: OutputFormat = SCORE
    what: str = "your score"
