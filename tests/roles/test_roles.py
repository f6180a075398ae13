"""Roles: the registry, the player role's prompts, reply parsing, and the history renderer.

Run with ``.venv/bin/python -m pytest -q tests/roles/test_roles.py``.
"""

from __future__ import annotations

import pytest

import roles
from arena.core.registry import RegistryError
from games.formats import ANSWER, BOXED, SCORE
from games.interaction import Post
from roles.base import render_posts


def test_answer_format_takes_last_well_formed_answer() -> None:
    assert ANSWER.extract("I think <answer>3</answer> no wait <answer> 5 </answer>") == "5"
    assert ANSWER.extract("<answer></answer>") is None
    assert ANSWER.extract("answer: 5") is None
    assert ANSWER.extract("<answer>5") is None


def test_boxed_and_score() -> None:
    assert BOXED.extract(r"so \boxed{\frac{1}{2}} done") == r"\frac{1}{2}"
    assert BOXED.extract(r"\boxed{unclosed") is None
    assert SCORE.extract("<score>7</score>") == "7"


def test_player_prompt_and_reading() -> None:
    player = roles.make("player-v0")
    messages = player.messages("Rules here.", "player_0", "Board: ...", first_turn=True)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("Rules here.")
    assert "<answer>" in messages[0]["content"] and "player_0" in messages[0]["content"]
    assert messages[1]["content"] == "Board: ..."
    reply = player.read("<answer>4</answer>")
    assert (reply.action_text, reply.format_ok) == ("4", True)
    bad = player.read("I move to the center")
    assert bad.action_text is None and not bad.format_ok and "<answer>" in bad.reason


def test_prefill_is_part_of_what_is_read() -> None:
    player = roles.make("player-v0", prefill=True, format_bonus=0.1)
    assert player.assistant_prefix() == "<answer>"
    reply = player.read("7</answer>")
    assert reply.action_text == "7"
    assert player.format_reward(reply) == pytest.approx(0.1)
    assert player.format_reward(player.read("seven")) == 0.0
    assert player.stop_strings() == ("</answer>",)


def test_conversation_memory_sends_only_new_turns() -> None:
    player = roles.make("player-v0", memory="conversation")
    assert [m["role"] for m in player.messages("R", "p", "obs2", first_turn=False)] == ["user"]


def test_unknown_role_names_nearest() -> None:
    with pytest.raises(RegistryError, match=r"; did you mean 'player-v0'"):
        roles.make("playr-v0")


def test_example_rules_and_suffix_shape_the_prompt() -> None:
    player = roles.make("player-v0", example="5", show_rules=False, turn_suffix="Your move?")
    system, user = player.messages("Long rules.", "player_1", "Board", first_turn=True)
    assert "Long rules." not in system["content"]
    assert system["content"].endswith("Example: <answer>5</answer>")
    assert user["content"] == "Board\nYour move?"


def test_unclosed_prefilled_reply_counts_only_when_the_turn_ended() -> None:
    player = roles.make("player-v0", prefill=True)
    ended = player.read(" 5 ", ended=True)
    assert (ended.action_text, ended.format_ok) == ("5", False)
    assert player.read("5", ended=False).action_text is None  # cut off by the token limit
    assert player.read("5\n\nIn the example", ended=True).action_text is None
    assert roles.make("player-v0").read("5", ended=True).action_text is None  # no prefill


def test_player_prompt_is_golden() -> None:
    player = roles.make("player-v0", example="b2")
    assert player.messages("Tic-tac-toe rules.", "player_0", "Board: ...", True) == [
        {
            "role": "system",
            "content": "Tic-tac-toe rules.\n\nYou play as player_0. Reply with exactly one of "
            "the legal actions inside <answer></answer>, e.g. <answer>...</answer>. "
            "Example: <answer>b2</answer>",
        },
        {"role": "user", "content": "Board: ..."},
    ]


@pytest.mark.parametrize(
    ("role_id", "name"),
    [
        ("player-v0", "player"),
        ("proposer-v0", "proposer"),
        ("solver-v0", "solver"),
        ("judge-v0", "judge"),
        ("simulated-user-v0", "simulated_user"),
        ("planner-v0", "planner"),
        ("executor-v0", "executor"),
        ("verifier-v0", "verifier"),
    ],
)
def test_every_role_is_registered_under_its_name(role_id: str, name: str) -> None:
    role = roles.make(role_id)
    assert isinstance(role, roles.Role) and role.name == name
    assert role.read("").format_ok is False  # an empty reply is never well formed


def test_history_renders_one_post_per_line() -> None:
    posts = [
        Post("proposer", "question", " What is 2+2? "),
        Post("solver_0", "answer", "4"),
        Post("tools", "tool_result", "Ünïcødé\nsecond line"),
    ]
    expected = (
        "proposer (question): What is 2+2?\n"
        "solver_0 (answer): 4\n"
        "tools (tool_result): Ünïcødé\nsecond line"
    )
    assert render_posts(posts) == expected
    assert roles.make("judge-v0").render_history(posts) == expected
    assert render_posts([]) == ""


def test_a_role_subclass_that_is_not_a_dataclass_is_refused_when_built() -> None:
    # its fields were plain class attributes, overwritten by Role's __init__: the plugin's
    # name, job and output were silently Role's own
    from dataclasses import dataclass

    from games.formats import OutputFormat, TagFormat
    from roles.base import Role
    from roles.proposer import Proposer

    class Forgot(Role):
        name: str = "forgot"
        output: OutputFormat = TagFormat("move")

    with pytest.raises(TypeError) as err:
        Forgot()
    assert str(err.value) == (
        "Forgot sets name, output but is not a @dataclass, so a Forgot() keeps Role's defaults: "
        "decorate it with @dataclasses.dataclass"
    )

    class ForgotToo(Proposer):  # a role with a __post_init__ of its own
        what: str = "a riddle"

    with pytest.raises(TypeError, match="ForgotToo sets what but is not a @dataclass"):
        ForgotToo()

    @dataclass
    class Remembered(Role):
        name: str = "remembered"

    class Methods(Remembered):  # a subclass adding methods only needs no decorator
        def stop_strings(self) -> tuple[str, ...]:
            return ()

    assert (Remembered().name, Methods().name) == ("remembered", "remembered")
