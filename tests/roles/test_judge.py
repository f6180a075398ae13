"""The judge role: golden prompt, and reading ``<score>`` replies.

Run with ``.venv/bin/python -m pytest -q tests/roles/test_judge.py``.
"""

from __future__ import annotations

import roles
from games.interaction import Post
from roles.base import render_posts


def test_prompt_with_rendered_history_is_golden() -> None:
    judge = roles.make("judge-v0", what="a score from 0 to 10", example="7", show_rules=False)
    history = render_posts(
        [Post("proposer", "question", "What is 17 * 3?"), Post("solver_0", "answer", "51")]
    )
    assert judge.messages("R", "judge", history, first_turn=True) == [
        {
            "role": "system",
            "content": "You are judge, the judge: score how well the answer solves the question. "
            "Reply with a score from 0 to 10 inside <score></score>, e.g. <score>...</score>. "
            "Example: <score>7</score>",
        },
        {
            "role": "user",
            "content": "proposer (question): What is 17 * 3?\nsolver_0 (answer): 51",
        },
    ]


def test_reads_the_score() -> None:
    judge = roles.make("judge-v0")
    assert judge.name == "judge" and judge.stop_strings() == ("</score>",)
    assert judge.read("Fine work. <Score> 8 </score>").action_text == "8"
    assert judge.read("<score>3</score> on reflection <score>9</score>").action_text == "9"
    assert judge.read("<score>8").reason == "<score> is not closed with </score>"
    assert judge.read("<score></score>").reason == "empty <score></score>"
