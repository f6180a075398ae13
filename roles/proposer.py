"""The proposer role: writes a new question for the solvers, ``<question>...</question>``.

With ``with_answer=True`` it also writes the reference answer, and its output is
``<question>...</question>`` then ``<answer>...</answer>`` (canonical content: both tags, one per
line, in that order), for games that check the solvers against the proposer's key.
"""

from __future__ import annotations

from dataclasses import dataclass

from games.formats import QUESTION, QUESTION_ANSWER, OutputFormat
from roles.base import Role


@dataclass
class Proposer(Role):
    name: str = "proposer"
    job: str = (
        "You are {seat}, the proposer: write one new, self-contained question that has a single "
        "correct answer."
    )
    output: OutputFormat = QUESTION  # QUESTION_ANSWER when with_answer is set
    what: str = "your question"
    with_answer: bool = False
    """Also write the question's answer, in ``<answer>`` after the ``<question>``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.with_answer:
            if self.output is not QUESTION:
                raise ValueError("with_answer sets the proposer's output; give one or the other")
            self.output = QUESTION_ANSWER
            if self.what == Proposer.what:  # reword only the default
                self.what = "your question and its answer"
