"""What Search Self-Play's seats write: the search-or-final output formats, and answers that
compare apart from case, punctuation and a leading article.

Run with ``.venv/bin/python -m pytest -q tests/games/search/test_answers.py``.
"""

from __future__ import annotations

import json

from games.search.answers import SEARCH_OR_BOXED, SEARCH_OR_QUESTION, answer_key, contains_answer


def test_the_output_formats_take_the_reply_that_ends_last() -> None:
    call = '<tool_call>{"name": "search", "arguments": {"query": "Kast"}}</tool_call>'
    proposal = "<question>Where is Kast?</question><answer>Vel</answer>"
    assert SEARCH_OR_QUESTION.read(call).content is not None
    canonical = "<question>Where is Kast?</question>\n<answer>Vel</answer>"
    assert SEARCH_OR_QUESTION.read(f"{call}\n{proposal}").content == canonical
    assert SEARCH_OR_QUESTION.read(f"{proposal}\n{call}").content.startswith("{")
    assert json.loads(SEARCH_OR_BOXED.read(f"\\boxed{{Vel}} {call}").content)["name"] == "search"
    assert SEARCH_OR_BOXED.read("\\boxed{Vel}").content == "Vel"
    assert SEARCH_OR_BOXED.read("no idea").content is None


def test_answers_compare_apart_from_case_punctuation_and_an_article() -> None:
    assert answer_key("The  Kast-Vel.") == answer_key("kast vel") == "kast vel"
    assert answer_key("the") == "the"
    assert contains_answer("Was Ann born in Kast?", "kast")
    assert not contains_answer("Was Ann born in Kastor?", "Kast")
