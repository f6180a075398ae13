"""What Search Self-Play's seats write, how it reads as an action, and how answers compare.

The proposer and the solver may search before their final reply, so their output format is
:class:`SearchOr`: a search tool call, or the seat's final format. :func:`read_action` turns a
reply into the game's canonical action (a tool call's JSON, a proposal, or an answer alone), or
None when it is malformed. Answers are short (1 to ``ANSWER_MAX_WORDS`` words) and compare by
:func:`answer_key`: case, spacing, punctuation and a leading article aside.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from games.formats import BOXED, QUESTION_ANSWER, TOOL_CALL, OutputFormat, Reading
from games.tool_calls import parse_tool_call

ANSWER_MAX_WORDS = 5
ANSWER_MAX_CHARS = 80
QUESTION_MAX_CHARS = 300
ACTION_MAX_CHARS = 1000


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


def read_action(text: str, spell: Callable[[str], str], proposer: bool) -> str | None:
    """The canonical action ``text`` stands for: a tool call's JSON (sorted keys, the query
    spelled by ``spell``), a proposal as ``<question>q</question>\\n<answer>a</answer>`` (only
    for the ``proposer``), or an answer alone; texts are spelled by ``spell`` (the corpus's
    :meth:`~games.search.corpus.Corpus.spell`), so case and spacing never matter. None when the
    text is malformed."""
    if not isinstance(text, str) or len(text) > ACTION_MAX_CHARS:
        return None
    text = text.strip()
    if re.match(r"<tool_call>", text, flags=re.IGNORECASE):
        text = TOOL_CALL.extract(text) or ""
    if text.startswith("{"):
        return _read_call(text, spell)
    if proposer:
        return _read_proposal(text, spell)
    return _read_answer(text, spell)


def _read_call(text: str, spell: Callable[[str], str]) -> str | None:
    call, _ = parse_tool_call(text.casefold())
    if call is None:
        return None
    args = dict(call.arguments)
    if isinstance(args.get("query"), str):
        args["query"] = spell(args["query"])
    return json.dumps({"arguments": args, "name": call.name}, sort_keys=True, ensure_ascii=False)


def _read_proposal(text: str, spell: Callable[[str], str]) -> str | None:
    fields = QUESTION_ANSWER.fields(text)
    if fields is None:
        return None
    question = spell(fields["question"])
    answer = _read_answer(fields["answer"], spell)
    if (
        answer is None
        or len(question) > QUESTION_MAX_CHARS
        or not re.search("[a-z]", question, re.I)
    ):
        return None
    return QUESTION_ANSWER.wrap({"question": question, "answer": answer})


def _read_answer(text: str, spell: Callable[[str], str]) -> str | None:
    boxed = BOXED.extract(text) if text.startswith("\\boxed{") else None
    answer = spell(boxed or text)
    if (
        not answer_key(answer)
        or len(answer.split()) > ANSWER_MAX_WORDS
        or len(answer) > ANSWER_MAX_CHARS
        or re.search(r"[<>{}\\]", answer)
    ):
        return None
    return answer
