"""Planner, executor and verifier: each seat's reply read into its canonical action, case and
spacing aside, and malformed replies refused.

Run with ``.venv/bin/python -m pytest -q tests/games/planner/test_actions.py``.
"""

from __future__ import annotations

from games.planner.actions import read_action

PLAN_CALC = "<subgoal>Compute 4837 * 29 - 1120</subgoal>\n<tool>calculator</tool>"


def test_canonical_texts_and_case() -> None:
    assert read_action("planner", PLAN_CALC) == (
        "<subgoal>compute 4837 * 29 - 1120</subgoal>\n<tool>calculator</tool>"
    )
    assert read_action("planner", "<TOOL>Search</TOOL><Subgoal> Find  X </Subgoal>") == (
        "<subgoal>find x</subgoal>\n<tool>search</tool>"
    )
    assert read_action("executor", '{"NAME": "Search", "Arguments": {"Query": "Who  X"}}') == (
        '{"arguments": {"query": "who x"}, "name": "search"}'
    )
    assert read_action("executor", '{"name": "answer"}') == '{"arguments": {}, "name": "answer"}'
    assert read_action("verifier", " stop\n") == "STOP"
    assert read_action("verifier", "<verdict>Continue</verdict>") == "CONTINUE"
    for agent, junk in [
        ("planner", "<subgoal>only a subgoal</subgoal>"),
        ("executor", "calculator(2 + 2)"),
        ("executor", '["calculator"]'),
        ("executor", '{"arguments": {}}'),
        ("executor", '{"name": 3}'),
        ("verifier", "maybe"),
    ]:
        assert read_action(agent, junk) is None, (agent, junk)
