"""The verifier role: golden prompt, and reading ``<verdict>STOP|CONTINUE</verdict>``.

Run with ``.venv/bin/python -m pytest -q tests/roles/test_verifier.py``.
"""

from __future__ import annotations

import roles


def test_prompt_is_golden() -> None:
    verifier = roles.make("verifier-v0")
    assert verifier.messages("Rules.", "verifier", "Task: ...\nResult: 5", True) == [
        {
            "role": "system",
            "content": "Rules.\n\nYou are verifier, the verifier: say STOP if the task is "
            "solved, or CONTINUE if more steps are needed. Reply with your verdict: "
            "<verdict>STOP</verdict> or <verdict>CONTINUE</verdict>.",
        },
        {"role": "user", "content": "Task: ...\nResult: 5"},
    ]


def test_reads_verdicts_case_insensitively() -> None:
    verifier = roles.make("verifier-v0", prefill=True)
    assert verifier.name == "verifier" and verifier.stop_strings() == ("</verdict>",)
    assert verifier.read("stop</verdict>").action_text == "STOP"
    assert verifier.read("Continue</verdict>").action_text == "CONTINUE"
    wrong = verifier.read("done</verdict>")
    assert wrong.reason == "<verdict> must be one of STOP, CONTINUE, not 'done'"
    salvaged = verifier.read("stop", ended=True)
    assert (salvaged.action_text, salvaged.format_ok) == ("STOP", False)
    assert verifier.read("maybe", ended=True).action_text is None
