"""The planner role: golden prompt, and reading ``<subgoal>`` + ``<tool>`` replies.

Run with ``.venv/bin/python -m pytest -q tests/roles/test_planner.py``.
"""

from __future__ import annotations

import roles
from games.formats import SUBGOAL_TOOL


def test_prompt_is_golden() -> None:
    example = SUBGOAL_TOOL.wrap({"subgoal": "Find the population of Lyon", "tool": "search"})
    planner = roles.make("planner-v0", example=example)
    assert planner.messages("Tools: search, python.", "planner", "Task: ...", True) == [
        {
            "role": "system",
            "content": "Tools: search, python.\n\nYou are planner, the planner: choose the next "
            "subgoal toward solving the task, and the tool that should carry it out. Reply with "
            "the next subgoal and its tool, written as <subgoal>...</subgoal> then "
            "<tool>...</tool>. Example: <subgoal>Find the population of Lyon</subgoal>\n"
            "<tool>search</tool>",
        },
        {"role": "user", "content": "Task: ..."},
    ]


def test_reads_subgoal_and_tool() -> None:
    planner = roles.make("planner-v0")
    assert planner.name == "planner" and planner.stop_strings() == ("</tool>",)
    reply = planner.read("<tool>python</tool>\n<subgoal>Add 2 and 3</subgoal>")
    assert reply.action_text == "<subgoal>Add 2 and 3</subgoal>\n<tool>python</tool>"
    assert SUBGOAL_TOOL.fields(reply.action_text) == {"subgoal": "Add 2 and 3", "tool": "python"}
    assert planner.read("<subgoal>Add</subgoal>").reason == "no <tool>...</tool> in the reply"
    nested = planner.read("<subgoal>x <tool>python</tool></subgoal><tool>python</tool>")
    assert nested.reason == "<subgoal> must not contain <tool> tags"
