"""The simulated user: golden prompt, plain-text replies, and the ``###STOP###`` marker.

Run with ``.venv/bin/python -m pytest -q tests/roles/test_simulated_user.py``.
"""

from __future__ import annotations

import roles


def test_prompt_is_golden() -> None:
    user = roles.make("simulated-user-v0", show_rules=False, memory="conversation")
    observation = "Your goal: return order A17.\nassistant (message): How can I help?"
    assert user.messages("R", "user", observation, first_turn=True) == [
        {
            "role": "system",
            "content": "You are user, a user talking to an assistant: pursue your goal one "
            "message at a time, and end the conversation once it is met. Reply with your next "
            "message to the assistant as plain text, without tags. To end the conversation, "
            "write ###STOP### at the end of your message.",
        },
        {"role": "user", "content": observation},
    ]
    later = user.messages("R", "user", "assistant (message): Done.", first_turn=False)
    assert later == [{"role": "user", "content": "assistant (message): Done."}]


def test_the_stop_marker_survives_into_the_action_text() -> None:
    user = roles.make("simulated-user-v0")
    assert user.name == "simulated_user" and user.stop_strings() == ("###STOP###",)
    assert user.assistant_prefix() == ""
    # The episode decodes the generated ids whole, so the stop string is in what is read.
    done = user.read("Great, thanks! ###STOP###", ended=True)
    assert (done.action_text, done.format_ok) == ("Great, thanks! ###STOP###", True)
    assert user.read("Thanks ###STOP###\n").action_text == "Thanks ###STOP###"
    talk = user.read("  I'd like to return order A17.  ")
    assert talk.action_text == "I'd like to return order A17."
    empty = user.read("   ")
    assert (empty.action_text, empty.format_ok, empty.reason) == (None, False, "empty reply")
