"""The proposer role: golden prompts, and reading ``<question>`` (and ``<answer>``) replies.

Run with ``.venv/bin/python -m pytest -q tests/roles/test_proposer.py``.
"""

from __future__ import annotations

import pytest

import roles
from games.formats import QUESTION, QUESTION_ANSWER

RULES = "Proposer/solver game. The proposer writes a question; solvers answer it."


def test_prompt_is_golden() -> None:
    proposer = roles.make("proposer-v0", what="an arithmetic question", example="What is 17 * 3?")
    messages = proposer.messages(RULES, "proposer_0", "Round 1 of 3.", first_turn=True)
    assert messages == [
        {
            "role": "system",
            "content": "Proposer/solver game. The proposer writes a question; solvers answer it."
            "\n\nYou are proposer_0, the proposer: write one new, self-contained question that "
            "has a single correct answer. Reply with an arithmetic question inside "
            "<question></question>, e.g. <question>...</question>. "
            "Example: <question>What is 17 * 3?</question>",
        },
        {"role": "user", "content": "Round 1 of 3."},
    ]


def test_prompt_with_answer_is_golden() -> None:
    proposer = roles.make(
        "proposer-v0",
        with_answer=True,
        show_rules=False,
        example=QUESTION_ANSWER.wrap({"question": "What is 17 * 3?", "answer": "51"}),
    )
    assert proposer.messages(RULES, "proposer_0", "Go.", first_turn=True) == [
        {
            "role": "system",
            "content": "You are proposer_0, the proposer: write one new, self-contained question "
            "that has a single correct answer. Reply with your question and its answer, written "
            "as <question>...</question> then <answer>...</answer>. "
            "Example: <question>What is 17 * 3?</question>\n<answer>51</answer>",
        },
        {"role": "user", "content": "Go."},
    ]


def test_reads_the_last_question() -> None:
    proposer = roles.make("proposer-v0", format_bonus=0.2)
    assert proposer.name == "proposer" and proposer.output == QUESTION
    reply = proposer.read("Draft: <question>1+1?</question> Final: <question> Ünï 2+3? </question>")
    assert (reply.action_text, reply.format_ok) == ("Ünï 2+3?", True)
    assert proposer.format_reward(reply) == pytest.approx(0.2)
    nested = proposer.read("<question><question>What is 9?</question></question>")
    assert nested.action_text == "What is 9?"
    bad = proposer.read("What is 2+3?")
    assert (bad.action_text, bad.reason) == (None, "no <question>...</question> in the reply")
    assert proposer.format_reward(bad) == 0.0
    assert proposer.stop_strings() == ("</question>",)


def test_with_answer_reads_both_tags_into_canonical_content() -> None:
    proposer = roles.make("proposer-v0", with_answer=True, prefill=True)
    assert proposer.output == QUESTION_ANSWER and proposer.stop_strings() == ("</answer>",)
    assert proposer.assistant_prefix() == "<question>"
    reply = proposer.read("What is 17 * 3?</question>\n<answer>51</answer>", ended=True)
    assert reply.action_text == "<question>What is 17 * 3?</question>\n<answer>51</answer>"
    assert reply.format_ok
    assert QUESTION_ANSWER.fields(reply.action_text) == {
        "question": "What is 17 * 3?",
        "answer": "51",
    }
    missing = proposer.read("What is 17 * 3?</question>", ended=True)
    assert missing.action_text is None and missing.reason == "no <answer>...</answer> in the reply"
    # An unclosed single line is never salvaged as a two-field reply.
    assert proposer.read("What is 17 * 3?", ended=True).action_text is None


def test_with_answer_and_an_explicit_output_conflict() -> None:
    with pytest.raises(ValueError, match="with_answer"):
        roles.make("proposer-v0", with_answer=True, output=QUESTION_ANSWER)
