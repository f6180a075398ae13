"""The solver role: golden prompt, and reading ``\\boxed{}`` answers.

Run with ``.venv/bin/python -m pytest -q tests/roles/test_solver.py``.
"""

from __future__ import annotations

import roles


def test_prompt_is_golden() -> None:
    solver = roles.make("solver-v0", example="51", turn_suffix="Solve it.")
    messages = solver.messages("Answer exactly.", "solver_1", "Question: 17 * 3?", True)
    assert messages == [
        {
            "role": "system",
            "content": "Answer exactly.\n\nYou are solver_1, the solver: answer the question. "
            "Think step by step first. Put your final answer in \\boxed{} at the end. "
            "Example: \\boxed{51}",
        },
        {"role": "user", "content": "Question: 17 * 3?\nSolve it."},
    ]


def test_reads_the_last_closed_box() -> None:
    solver = roles.make("solver-v0")
    assert solver.name == "solver" and solver.stop_strings() == ()
    reply = solver.read(r"First \boxed{50}, no: 17 * 3 = 51, so \boxed{51}.")
    assert (reply.action_text, reply.format_ok) == ("51", True)
    assert solver.read(r"\boxed{\frac{1}{2}}").action_text == r"\frac{1}{2}"
    cut = solver.read(r"so \boxed{\frac{1}{2}")
    assert (cut.action_text, cut.reason) == (None, "\\boxed{ is not closed with }")
    assert solver.read("51").reason == "no \\boxed{...} in the reply"


def test_prefilled_box_closed_by_the_end_of_turn() -> None:
    solver = roles.make("solver-v0", prefill=True)
    assert solver.assistant_prefix() == "\\boxed{"
    assert solver.read("51}").action_text == "51"
    ended = solver.read("51", ended=True)
    assert (ended.action_text, ended.format_ok) == ("51", False)
