"""What Search Self-Play's seats write and how answers compare.

The proposer and the solver may search before their final reply, so their output format is
:class:`SearchOr`: a search tool call, or the seat's final format. Answers are short (1 to
``ANSWER_MAX_WORDS`` words) and compare by :func:`answer_key`: case, spacing, punctuation and a
leading article aside.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from games.formats import BOXED, QUESTION_ANSWER, TOOL_CALL, OutputFormat, Reading

ANSWER_MAX_WORDS = 5
ANSWER_MAX_CHARS = 80


@dataclass(frozen=True)
class SearchOr(OutputFormat):
    """A search tool call, or the seat's final output (``final``): the one that ends last wins.
    Canonical content: the call's JSON, or ``final``'s canonical content."""

    final: OutputFormat = BOXED

    @property
    def stops(self) -> tuple[str, ...]:
        return (*TOOL_CALL.stops, *self.final.stops)

    def instruction(self, what: str) -> str:
        call = '<tool_call>{"name": "search", "arguments": {"query": "..."}}</tool_call>'
        return f"To search, reply with a tool call: {call}. {self.final.instruction(what)}"

    def _final_at(self, text: str) -> int:
        opening = self.final.prefix or "<"
        return text.casefold().rfind(opening.casefold())

    def read(self, text: str) -> Reading:
        call, final = TOOL_CALL.read(text), self.final.read(text)
        if call.content is not None and final.content is not None:
            later = text.casefold().rfind("<tool_call>") > self._final_at(text)
            return call if later else final
        if call.content is not None or final.content is not None:
            return call if call.content is not None else final
        if "<tool_call>" in text.casefold():
            return call
        if self._final_at(text) >= 0:
            return final
        return Reading(None, f"no tool call and {final.reason.removeprefix('no ')}")

    def wrap(self, content: str) -> str:
        return TOOL_CALL.wrap(content) if content.startswith("{") else self.final.wrap(content)


SEARCH_OR_QUESTION = SearchOr(QUESTION_ANSWER)
"""The proposer's output: a search, or ``<question>`` then ``<answer>``."""
SEARCH_OR_BOXED = SearchOr(BOXED)
"""The solver's output: a search, or ``\\boxed{answer}``."""


def answer_key(text: str) -> str:
    """What answers are compared by: case, spacing, punctuation and a leading article aside."""
    words = re.sub(r"[^0-9a-z]+", " ", text.casefold()).split()
    if len(words) > 1 and words[0] in ("the", "a", "an"):
        words = words[1:]
    return " ".join(words)


def contains_answer(question: str, answer: str) -> bool:
    return f" {answer_key(answer)} " in f" {answer_key(question)} "
